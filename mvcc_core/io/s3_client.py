"""The S3 client: one synchronous botocore client per process and set of storage options.

botocore's own client, not s3fs's: s3fs runs aiobotocore on aiohttp in an event-loop thread, and importing it
(aiobotocore, aiohttp, and their own dependencies) costs a fresh process about a second before its first request.
The synchronous client is thread-safe, so the scan and compaction paths share one, with a connection pool sized
for their concurrent reads.
"""

from __future__ import annotations

import json
import os
import threading
from typing import TYPE_CHECKING, Any

from mvcc_core.errors import StorageError

if TYPE_CHECKING:
    from botocore.client import BaseClient

#: Connections kept per client (botocore keeps 10): scans read `OBJECT_STORE_READS` data files at a time and a
#: compaction reads ahead up to 32 small files at once.
POOL_CONNECTIONS = 32
#: Attempts per request in botocore's standard retry mode (the first one included): 5xx answers, throttling,
#: dropped connections and cut response streams are retried with jittered exponential backoff.
MAX_ATTEMPTS = 5

#: s3fs options that tune s3fs itself (caches, block sizes, its own concurrency): they keep their meaning for
#: `ObjectStore.fs`, the s3fs filesystem built for fsspec callers, and the botocore client has nothing to take
#: from them.
_S3FS_ONLY = frozenset(
    {
        "default_block_size",
        "default_fill_cache",
        "default_cache_type",
        "version_aware",
        "cache_regions",
        "max_concurrency",
        "fixed_upload_size",
        "local_expiry_check",
        "skip_instance_cache",
        "use_listings_cache",
        "listings_expiry_time",
        "max_paths",
        "asynchronous",
        "loop",
        "session",
    }
)
#: What the client takes from the options (`translate_s3_options`' names, which are s3fs's).
_CLIENT_KEYS = frozenset(
    {
        "key",
        "secret",
        "token",
        "username",
        "password",
        "anon",
        "profile",
        "endpoint_url",
        "use_ssl",
        "client_kwargs",
        "config_kwargs",
        "requester_pays",
        "s3_additional_kwargs",
    }
)

_AWS_ENV = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_PROFILE",
)

_CLIENTS: dict[tuple[int, str], S3Client] = {}
_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    """A child forked while another thread held the lock would wait on it forever; the parent's clients, keyed by
    its process id, are never handed out in the child."""
    global _LOCK
    _LOCK = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def s3_cache_key(s3_options: dict[str, Any]) -> tuple[int, str]:
    """Process, options and the AWS_* environment they were resolved against: what one shared client is for.

    Args:
        s3_options: the store's options (`translate_s3_options`)
    """
    env = {k: os.environ.get(k) for k in _AWS_ENV}
    return os.getpid(), json.dumps([s3_options, env], sort_keys=True, default=repr)


def _on(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() not in {"false", "0", "no", "off", "disabled", "none", ""}


class S3Client:
    """A botocore S3 client and the parameters every request of a store adds (requester pays, encryption...).

    Args:
        client: the botocore client
        extra: parameters added to every request that takes them (`s3_additional_kwargs`, `RequestPayer`)
    """

    def __init__(self, client: BaseClient, extra: dict[str, Any]) -> None:
        """A client and its per-request parameters."""
        self.client = client
        self.extra = extra

    def call(self, method: str, **kwargs: Any) -> Any:
        """`client.<method>(**kwargs)`, with the store's extra parameters where the operation accepts them.

        Args:
            method: the client method (`put_object`, `list_objects_v2`, ...)
            **kwargs: its arguments
        """
        if self.extra:
            accepted = _accepted_params(self.client, method)
            kwargs = {**{k: v for k, v in self.extra.items() if k in accepted}, **kwargs}
        return getattr(self.client, method)(**kwargs)


_ACCEPTED: dict[str, frozenset[str]] = {}


def _accepted_params(client: BaseClient, method: str) -> frozenset[str]:
    found = _ACCEPTED.get(method)
    if found is None:
        operation = client.meta.method_to_api_mapping[method]
        shape = client.meta.service_model.operation_model(operation).input_shape
        found = _ACCEPTED[method] = frozenset(shape.members if shape is not None else ())
    return found


def _build(s3_options: dict[str, Any]) -> S3Client:
    from botocore import UNSIGNED
    from botocore.config import Config

    unknown = sorted(set(s3_options) - _CLIENT_KEYS - _S3FS_ONLY)
    if unknown:
        raise StorageError(
            f"unknown S3 storage option(s) {', '.join(map(repr, unknown))}: the S3 options are credentials "
            "(aws_access_key_id, aws_secret_access_key, aws_session_token, profile, anon), aws_endpoint, aws_region, "
            "allow_http, conditional_put, requester_pays, client_kwargs, config_kwargs and s3_additional_kwargs"
        )
    opts = s3_options
    client_kwargs = dict(opts.get("client_kwargs") or {})
    config: dict[str, Any] = {
        "retries": {"mode": "standard", "total_max_attempts": MAX_ATTEMPTS},
        "max_pool_connections": POOL_CONNECTIONS,
    }
    config.update(dict(opts.get("config_kwargs") or {}))
    anon = opts.get("anon")
    if anon is not None and _on(anon):
        config["signature_version"] = UNSIGNED
    if opts.get("endpoint_url") and not client_kwargs.get("endpoint_url"):
        client_kwargs["endpoint_url"] = opts["endpoint_url"]
    if "use_ssl" in opts and "use_ssl" not in client_kwargs:
        client_kwargs["use_ssl"] = _on(opts["use_ssl"])
    key, secret = opts.get("key") or opts.get("username"), opts.get("secret") or opts.get("password")
    if key is not None:
        client_kwargs.setdefault("aws_access_key_id", key)
    if secret is not None:
        client_kwargs.setdefault("aws_secret_access_key", secret)
    if opts.get("token") is not None:
        client_kwargs.setdefault("aws_session_token", opts["token"])
    session = _session(opts.get("profile") or None)
    client = session.create_client("s3", config=Config(**config), **client_kwargs)
    extra = dict(opts.get("s3_additional_kwargs") or {})
    if opts.get("requester_pays") is not None and _on(opts["requester_pays"]):
        extra.setdefault("RequestPayer", "requester")
    return S3Client(client, extra)


_SESSION: Any = None


def _session(profile: str | None) -> Any:
    """A botocore session whose data loader looks for S3's model only (`_s3_loader`); the one without a profile is
    shared by every client (its loader caches what it read)."""
    import botocore.session

    global _SESSION
    if profile is None and _SESSION is not None and _SESSION[0] == os.getpid():
        return _SESSION[1]
    session = botocore.session.Session(profile=profile)
    session.register_component("data_loader", _s3_loader(session.get_config_variable("data_path")))
    if profile is None:
        _SESSION = (os.getpid(), session)
    return session


def _s3_loader(data_path: str | None) -> Any:
    """botocore's data loader (the same search path: botocore's data, ~/.aws/models, AWS_DATA_PATH), except that
    the list of services a model name is checked against holds S3 alone.

    botocore builds that list, before it loads a model, by looking into the directory of each of its ~400
    services (a listdir and a stat or more each, twice per client: the API model and the endpoint rules): about a
    fifth of a client's start-up, for a name that is always "s3" here.

    Args:
        data_path: the session's `data_path` setting (AWS_DATA_PATH)
    """
    from botocore.loaders import Loader, create_loader

    class S3Loader(Loader):
        def list_available_services(self, type_name: str) -> list[str]:
            for path in self.search_paths:
                service = os.path.join(path, "s3")
                if os.path.isdir(service) and any(
                    self.file_loader.exists(os.path.join(service, version, type_name))
                    for version in os.listdir(service)
                ):
                    return ["s3"]
            return []

    base = create_loader(data_path)
    return S3Loader(extra_search_paths=base.search_paths, include_default_search_paths=False)


def shared_s3_client(s3_options: dict[str, Any]) -> S3Client:
    """The process's client for `s3_options` (built on first use: credentials resolved then, once).

    Building a client reads botocore's service model and resolves the credentials and the endpoint (~100 ms, more
    than the LIST that finds a table's latest version), so stores opened with the same options share it; a
    forked child builds its own (the key holds the process id).

    Args:
        s3_options: the store's options (`translate_s3_options`)

    Raises:
        StorageError: an option is none the client or s3fs knows.
    """
    key = s3_cache_key(s3_options)
    with _LOCK:
        found = _CLIENTS.get(key)
        if found is None:
            found = _CLIENTS[key] = _build(s3_options)
        return found
