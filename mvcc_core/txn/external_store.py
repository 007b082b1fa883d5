"""External manifest stores: commits on object stores that cannot put-if-not-exists (spec "External Manifest Store").

Design notes: docs/operations/external_store.md, "How the module works".
"""

from __future__ import annotations

import contextlib
import re
import time
import uuid
import warnings
from typing import Any
from urllib.parse import parse_qsl

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import (
    ExternalStoreError,
    ExternalStoreMismatchError,
    ExternalStoreSyncError,
    ExternalStoreUnavailableError,
    ObjectNotFoundError,
    StorageError,
)
from mvcc_core.failpoints import failpoint
from mvcc_core.format.manifest import (
    PUT_IF_NOT_EXISTS,
    CommitHandler,
    ManifestLocation,
    encode_manifest,
    write_latest_hint,
)
from mvcc_core.format.naming import VERSIONS_DIR, ManifestNaming, manifest_path, parse_manifest_name
from mvcc_core.io import ObjectStore
from mvcc_core.txn.manifest_stores import DynamoDBManifestStore, ExternalManifestStore, SQLiteManifestStore

__all__ = [
    "STORAGE_OPTION",
    "DynamoDBManifestStore",
    "ExternalManifestStore",
    "ExternalStoreHandler",
    "SQLiteManifestStore",
    "commit_handler",
    "finalize",
    "is_staged",
    "open_external_store",
    "split_storage_options",
    "staged_manifest_path",
    "synchronize",
    "unreferenced_staged_manifests",
]

#: The storage_options key that names an external store (a URI or an ExternalManifestStore).
STORAGE_OPTION = "external_store"


# ---- staged names --------------------------------------------------------------------------------------

_STAGED = re.compile(r"^(?P<final>.+\.manifest)-(?P<uuid>[0-9a-fA-F-]{32,36})$")


def staged_manifest_path(version: int, naming: ManifestNaming, uuid_hex: str) -> str:
    """``_versions/{final name}-{uuid}``: unique per attempt, ignored by listings (it does not end in .manifest).

    Args:
        version: the version being committed
        naming: the table's manifest naming scheme
        uuid_hex: a fresh uuid of this attempt
    """
    return f"{manifest_path(version, naming)}-{uuid_hex}"


def is_staged(path: str) -> bool:
    """Whether `path` names a staged manifest (ends with ``.manifest-{uuid}``).

    Args:
        path: a path under `_versions/`
    """
    return _STAGED.match(path.rsplit("/", 1)[-1]) is not None


def final_of(path: str) -> str:
    """The final manifest path a staged path is copied to (a final path is returned unchanged).

    Args:
        path: a staged (or final) manifest path
    """
    directory, _, name = path.rpartition("/")
    match = _STAGED.match(name)
    if match is None:
        return path
    return f"{directory}/{match.group('final')}" if directory else match.group("final")


# ---- configuration -------------------------------------------------------------------------------------

_DYNAMODB_QUERY_KEYS = {
    "region": "region",
    "endpoint": "endpoint_url",
    "endpoint_url": "endpoint_url",
    "access_key_id": "aws_access_key_id",
    "aws_access_key_id": "aws_access_key_id",
    "secret_access_key": "aws_secret_access_key",
    "aws_secret_access_key": "aws_secret_access_key",
    "session_token": "aws_session_token",
    "aws_session_token": "aws_session_token",
    "connect_timeout": "connect_timeout",
    "read_timeout": "read_timeout",
    "max_attempts": "max_attempts",
}
# Credentials and region may come from the table's storage options when the store URI does not give them.
_FROM_STORAGE_OPTIONS = {
    "aws_access_key_id": "aws_access_key_id",
    "aws_secret_access_key": "aws_secret_access_key",
    "aws_session_token": "aws_session_token",
    "aws_region": "region",
    "region": "region",
}


def open_external_store(
    spec: str | ExternalManifestStore | None, storage_options: dict[str, Any] | None = None
) -> ExternalManifestStore | None:
    """An ExternalManifestStore from an instance (returned as is), None, or a URI.

    ``sqlite:///abs/path.db`` (``?timeout=S``), ``dynamodb://table?region=R&endpoint=URL&connect_timeout=S
    &read_timeout=S&max_attempts=N`` (credentials from the URI, the storage options' aws_* keys, or the
    usual AWS environment).

    Args:
        spec: a store, None, or a URI (`sqlite:///...`, `dynamodb://...`)
        storage_options: the table's storage options, whose aws_* keys a DynamoDB store uses for credentials

    Raises:
        ExternalStoreError: the URI's scheme or options are not supported
    """
    if spec is None or isinstance(spec, ExternalManifestStore):
        return spec
    if not isinstance(spec, str):
        raise ExternalStoreError(f"external_store must be a URI or an ExternalManifestStore, got {type(spec).__name__}")
    scheme, sep, rest = spec.partition("://")
    if not sep:
        raise ExternalStoreError(f"external_store URI {spec!r} has no scheme (sqlite:// or dynamodb://)")
    rest, _, query_string = rest.partition("?")
    query = dict(parse_qsl(query_string, keep_blank_values=True))
    scheme = scheme.lower()
    if scheme == "sqlite":
        unknown = set(query) - {"timeout"}
        if unknown:
            raise ExternalStoreError(f"external_store URI {spec!r}: unknown option(s) {sorted(unknown)}")
        return SQLiteManifestStore(rest, timeout=float(query.get("timeout", 60.0)))
    if scheme == "dynamodb":
        kwargs: dict[str, Any] = {}
        for key, value in (storage_options or {}).items():
            if key.lower() in _FROM_STORAGE_OPTIONS and isinstance(value, str):
                kwargs[_FROM_STORAGE_OPTIONS[key.lower()]] = value
        for key, value in query.items():
            name = _DYNAMODB_QUERY_KEYS.get(key.lower())
            if name is None:
                raise ExternalStoreError(f"external_store URI {spec!r}: unknown option {key!r}")
            kwargs[name] = value
        for name, cast in (("connect_timeout", float), ("read_timeout", float), ("max_attempts", int)):
            if name in kwargs:
                kwargs[name] = cast(kwargs[name])
        return DynamoDBManifestStore(rest.strip("/"), **kwargs)
    raise ExternalStoreError(f"external_store URI {spec!r}: unknown scheme {scheme!r} (sqlite:// or dynamodb://)")


def split_storage_options(
    storage_options: dict[str, Any] | None,
    external_store: str | ExternalManifestStore | None = None,
) -> tuple[ExternalManifestStore | None, dict[str, Any] | None]:
    """The external store (argument first, else storage option ``external_store``) and the options without it.

    Args:
        storage_options: the table's storage options, maybe holding `external_store`
        external_store: the store the caller passed explicitly; it wins over the storage option
    """
    options = dict(storage_options) if storage_options else None
    from_options = options.pop(STORAGE_OPTION, None) if options else None
    spec = external_store if external_store is not None else from_options
    return open_external_store(spec, storage_options), options


# ---- the reader's synchronization protocol -------------------------------------------------------------


def full_path(store: ObjectStore, rel: str) -> str:
    """The path recorded in the store: the table URI plus the relative path (what Lance records too).

    Args:
        store: the table's store
        rel: a path relative to the table root
    """
    return f"{store.uri}/{rel}"


def relative_path(store: ObjectStore, version: int, path: str) -> tuple[str, ManifestNaming]:
    """Check that a store entry belongs to this table and version; its path relative to the table root.

    Args:
        store: the table's store
        version: the version the entry is for
        path: the full path the entry records

    Raises:
        ExternalStoreMismatchError: the path is outside this table's `_versions/`
    """
    prefix = f"{store.uri}/{VERSIONS_DIR}/"
    if not path.startswith(prefix) or "/" in path[len(prefix) :]:
        raise ExternalStoreMismatchError(
            f"external store entry for {store.uri} version {version} points to {path!r}, outside this table's "
            f"{VERSIONS_DIR}/: the store belongs to another table (or the table was moved)"
        )
    rel = path[len(store.uri) + 1 :]
    parsed = parse_manifest_name(final_of(rel))
    if parsed is None or parsed[0] != version:
        raise ExternalStoreMismatchError(
            f"external store entry for {store.uri} version {version} points to {path!r}, which is not a manifest "
            f"of version {version}"
        )
    return rel, parsed[1]


def finalize(store: ObjectStore, external: ExternalManifestStore, version: int, staged: str) -> str:
    """Steps 3 and 4: copy the staged manifest to its final name, point the store at it; the final path.

    Writers run it after winning step 2 and readers run it on a staged entry (the synchronization). Both
    steps are idempotent, so a reader racing the writer or another reader is harmless. The staged file is
    removed afterwards; whoever still holds its name finds the final manifest instead.

    Args:
        store: the table's store
        external: the table's external manifest store
        version: the committed version
        staged: the staged manifest's path relative to the table root
    """
    final = final_of(staged)
    try:
        store.copy(staged, final)
    except ObjectNotFoundError:
        # Someone else finished and removed the staged file, or it never existed.
        if not store.exists(final):
            raise ExternalStoreSyncError(
                f"cannot synchronize {store.uri} version {version}: the external store names the staged "
                f"manifest {full_path(store, staged)}, which does not exist, and neither does {final}"
            ) from None
    failpoint("commit.after_copy")
    failpoint("commit.before_external_update")
    external.put(store.uri, version, full_path(store, final))
    with contextlib.suppress(StorageError):
        store.delete_many([staged])
    return final


def synchronize(store: ObjectStore, external: ExternalManifestStore, version: int, path: str) -> str:
    """The reader's protocol for one store entry: its final path relative to the table root.

    A staged entry is finalized first. Any failure raises ExternalStoreSyncError (or
    ExternalStoreUnavailableError): returning a version that exists only as a staged file would make the
    table depend on the store, and a copy of its directory would lose that version.

    Args:
        store: the table's store
        external: the table's external manifest store
        version: the version of the entry
        path: the full path the entry records
    """
    rel, _ = relative_path(store, version, path)
    if not is_staged(rel):
        return rel
    try:
        return finalize(store, external, version, rel)
    except (ExternalStoreSyncError, ExternalStoreUnavailableError):
        raise
    except (StorageError, ExternalStoreError) as exc:
        raise ExternalStoreSyncError(
            f"cannot synchronize {store.uri} version {version} (staged {path}): {type(exc).__name__}: {exc}"
        ) from exc


# ---- garbage --------------------------------------------------------------------------------------------


def unreferenced_staged_manifests(
    store: ObjectStore, external: ExternalManifestStore | None = None, min_age_seconds: float = 3600.0
) -> list[str]:
    """Staged manifests that nothing needs any more (for retention): paths relative to the table root.

    A staged file is needed while the store entry of its version names it (committed, not yet synchronized)
    and while its writer is still between steps 1 and 2 -- which looks exactly like a dead writer's orphan,
    hence `min_age_seconds` (files younger than that, or of unknown age, are kept). Of the older ones: with
    the store, every staged file its version's entry does not name is garbage; without the store, only those
    whose final manifest exists (the others might be committed versions awaiting synchronization).

    Args:
        store: the table's store
        external: the table's external manifest store (None: judged from the object store alone)
        min_age_seconds: staged files younger than this are kept (their writer may still be committing)
    """
    now = time.time()
    out = []
    for meta in store.list(VERSIONS_DIR):
        if not is_staged(meta.path):
            continue
        if meta.last_modified is None or now - meta.last_modified.timestamp() < min_age_seconds:
            continue
        parsed = parse_manifest_name(final_of(meta.path))
        if parsed is None:
            continue
        if external is not None:
            if external.get(store.uri, parsed[0]) != full_path(store, meta.path):
                out.append(meta.path)
        elif store.exists(final_of(meta.path)):
            out.append(meta.path)
    return out


# ---- the commit handler ---------------------------------------------------------------------------------


class ExternalStoreHandler(CommitHandler):
    """Commits through an external manifest store: the specification's stage / commit / finalize / update.

    Readers take the latest version from the store and synchronize an entry that still names a staged
    manifest; the object store needs no conditional write at all.

    Args:
        external: the table's external manifest store
    """

    lists_latest = False

    def __init__(self, external: ExternalManifestStore) -> None:
        """Commits through `external`."""
        self.external = external

    def __reduce__(self) -> tuple[Any, ...]:
        return (ExternalStoreHandler, (self.external,))

    def __repr__(self) -> str:
        return f"ExternalStoreHandler({self.external!r})"

    def check_supported(self, store: ObjectStore) -> None:
        """Any store will do: the external store's put-if-not-exists is the commit point.

        Args:
            store: the table's store (its root)
        """

    def latest_location(self, store: ObjectStore) -> ManifestLocation | None:
        """Reader protocol: the store's latest version, synchronized; None if the store knows no version
        (a table created before the store was used: the object store is listed instead).

        Args:
            store: the table's store (its root)
        """
        entry = self.external.get_latest_version(store.uri)
        if entry is None:
            return None
        version, path = entry
        _, naming = relative_path(store, version, path)
        rel = synchronize(store, self.external, version, path)
        return ManifestLocation(version, naming, rel)

    def read_unpublished(self, store: ObjectStore, location: ManifestLocation) -> bytes | None:
        """The manifest of a version the external store committed, synchronized first.

        Args:
            store: the table's store (its root)
            location: the version's expected manifest location
        """
        path = self.external.get(store.uri, location.version)
        if path is None:
            return None
        rel = synchronize(store, self.external, location.version, path)
        try:
            return store.get(rel)
        except ObjectNotFoundError:
            raise ExternalStoreSyncError(
                f"table {store.uri}: the external store names {path} for version {location.version}, "
                "and that manifest does not exist"
            ) from None

    def publish(self, store: ObjectStore, manifest: pb.Manifest, naming: ManifestNaming) -> bool:
        """Steps 1-4; False if another writer committed this version first.

        Args:
            store: the table's store (its root)
            manifest: the new version's manifest
            naming: the table's manifest naming scheme
        """
        version, uri = manifest.version, store.uri
        staged = staged_manifest_path(version, naming, uuid.uuid4().hex)
        store.put(staged, encode_manifest(manifest))  # 1. stage: a plain PUT, invisible to readers
        failpoint("commit.after_stage")
        staged_full = full_path(store, staged)
        won = self.external.put_if_not_exists(uri, version, staged_full)  # 2. the commit point
        # A retried request whose first attempt succeeded also "loses": then the entry is ours.
        if not won and self.external.get(uri, version) != staged_full:
            with contextlib.suppress(StorageError):
                store.delete_many([staged])
            return False
        failpoint("commit.after_external_commit")
        try:
            finalize(store, self.external, version, staged)  # 3. copy to the final name, 4. update the store
        except (StorageError, ExternalStoreError) as exc:
            # The commit stands (step 2 made it); the next reader synchronizes, so do not report a failure.
            warnings.warn(
                f"{uri} version {version} is committed but not finalized ({type(exc).__name__}: {exc}); "
                "the next reader through the external store will finalize it",
                RuntimeWarning,
                stacklevel=4,
            )
            return True
        write_latest_hint(store, version, naming)
        return True


def commit_handler(external: ExternalManifestStore | None) -> CommitHandler:
    """The handler for a table: through `external` when given, else the object store's put-if-not-exists.

    Args:
        external: the table's external manifest store, or None
    """
    return PUT_IF_NOT_EXISTS if external is None else ExternalStoreHandler(external)
