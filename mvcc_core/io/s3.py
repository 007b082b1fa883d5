"""The S3 backend: botocore's client with ``If-None-Match: *`` conditional puts, and Lance-style option names."""

from __future__ import annotations

import builtins
import contextlib
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mvcc_core.errors import CommitNotSupportedError, StorageError
from mvcc_core.io.backend import Backend, ObjectMeta, joined, to_datetime
from mvcc_core.io.s3_client import MAX_ATTEMPTS, POOL_CONNECTIONS, S3Client, s3_cache_key

if TYPE_CHECKING:
    import pyarrow.fs

_S3_DELETE_BATCH = 1000
_FALSE_STRINGS = {"false", "0", "no", "off", "disabled", "none", ""}

# Lance / object_store style option names -> s3fs.
_S3_TOP_LEVEL_ALIASES = {
    "aws_access_key_id": "key",
    "access_key_id": "key",
    "aws_secret_access_key": "secret",
    "secret_access_key": "secret",
    "aws_session_token": "token",
    "session_token": "token",
}
_S3_ENDPOINT_KEYS = ("aws_endpoint", "endpoint", "aws_endpoint_url", "endpoint_url")
_S3_REGION_KEYS = ("aws_region", "region", "aws_default_region", "region_name")
_S3_IGNORED_KEYS = ("allow_http",)
_S3_CONDITIONAL_PUT_KEYS = ("conditional_put", "aws_conditional_put")


def _client_error(exc: BaseException) -> tuple[str, int | None] | None:
    """(error code, HTTP status) of the botocore ClientError behind `exc` (it may be wrapped: s3fs's OSError)."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 5:
        response = getattr(current, "response", None)
        if isinstance(response, dict) and "Error" in response:
            code = str(response["Error"].get("Code", ""))
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return code, status
        current = current.__cause__ or current.__context__
        seen += 1
    return None


#: S3 error codes that mean the request's credentials were refused or are missing.
_CREDENTIAL_CODES = frozenset(
    {"InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "TokenRefreshRequired"}
)
_CREDENTIALS_HINT = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), "
    "or give the storage options aws_access_key_id and aws_secret_access_key"
)


def credentials_problem(exc: BaseException) -> str | None:
    """Why S3 refused a request for its credentials, in the user's words; None for any other failure.

    Missing credentials (botocore finds none), credentials S3 does not know or whose signature does not match,
    an expired session token, and access denied are told apart, each with what to set.

    Args:
        exc: the exception a request raised (botocore's own, or an OSError around it)
    """
    current: BaseException | None = exc
    for _ in range(5):
        if current is None:
            break
        name = type(current).__name__
        if name == "NoCredentialsError":
            return f"no AWS credentials were found: {_CREDENTIALS_HINT}"
        if name == "PartialCredentialsError":
            return f"the AWS credentials are incomplete ({current}): {_CREDENTIALS_HINT}"
        current = current.__cause__ or current.__context__
    error = _client_error(exc)
    if error is None:
        return None
    code, status = error
    if code in _CREDENTIAL_CODES:
        return f"S3 refused the credentials ({code}): {_CREDENTIALS_HINT}"
    if code == "AccessDenied" or status == 403:
        return f"access denied ({code or status}): the credentials lack permission for this bucket or prefix"
    return None


def is_false(value: Any) -> bool:
    """Whether an option's value means off (`False`, "false", "0", "no", "off", ...).

    Args:
        value: the option's value
    """
    if isinstance(value, bool):
        return not value
    return str(value).strip().lower() in _FALSE_STRINGS


def translate_s3_options(options: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Lance/object_store style keys -> s3fs keyword arguments, plus whether conditional PUT is usable.

    The AWS_* environment variables fill in an endpoint and a region that the options do not give, because
    not every client layer (s3fs's own arguments, pyarrow) reads AWS_ENDPOINT_URL or AWS_REGION by itself.

    Args:
        options: the store options as the user gave them
    """
    out: dict[str, Any] = {}
    client_kwargs: dict[str, Any] = {}
    conditional_put = True
    for key, value in options.items():
        lowered = key.lower()
        if lowered in _S3_TOP_LEVEL_ALIASES:
            out[_S3_TOP_LEVEL_ALIASES[lowered]] = value
        elif lowered in _S3_ENDPOINT_KEYS:
            client_kwargs["endpoint_url"] = value
        elif lowered in _S3_REGION_KEYS:
            client_kwargs["region_name"] = value
        elif lowered in _S3_IGNORED_KEYS:
            continue
        elif lowered in _S3_CONDITIONAL_PUT_KEYS:
            conditional_put = not is_false(value)
        elif key == "client_kwargs":
            client_kwargs = {**dict(value), **client_kwargs}
        else:
            out[key] = value
    if not client_kwargs.get("endpoint_url"):
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint:
            client_kwargs["endpoint_url"] = endpoint
    if not client_kwargs.get("region_name"):
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if region:
            client_kwargs["region_name"] = region
    if client_kwargs:
        out["client_kwargs"] = client_kwargs
    return out, conditional_put


_S3_FILESYSTEMS: dict[tuple[int, str], Any] = {}
_ARROW_S3_FILESYSTEMS: dict[tuple[int, str], Any] = {}
_S3_FILESYSTEMS_LOCK = threading.Lock()


def shared_s3_filesystem(s3_options: dict[str, Any]) -> Any:
    """One s3fs filesystem per process and set of options, for the callers that need an fsspec filesystem
    (`ObjectStore.fs`: the fsspec bridge of `arrow_filesystem` when pyarrow's client cannot take the options, and
    code outside the store's own operations). The store's reads, writes and commits do not import s3fs: they go
    through botocore's client (`mvcc_core.io.s3_client`). Listing caches stay off.

    Args:
        s3_options: s3fs options (`translate_s3_options`)
    """
    import s3fs

    key = s3_cache_key(s3_options)
    with _S3_FILESYSTEMS_LOCK:
        fs = _S3_FILESYSTEMS.get(key)
        if fs is None:
            config = {"max_pool_connections": POOL_CONNECTIONS, **dict(s3_options.get("config_kwargs") or {})}
            options = {**s3_options, "config_kwargs": config}
            fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False, **options)
            _S3_FILESYSTEMS[key] = fs
        return fs


#: Objects up to this size are one PutObject; larger ones a multipart upload (one PutObject takes at most 5 GiB).
_MULTIPART_THRESHOLD = 256 * 2**20
#: The part size of a multipart upload or copy (grown for objects that would need more than 10,000 parts).
_PART_SIZE = 64 * 2**20
_MAX_PARTS = 10_000
#: CopyObject copies at most 5 GiB; larger objects are copied part by part (UploadPartCopy).
_COPY_LIMIT = 5 * 2**30
#: The chunks a response body is read in: what arrived before a stream is cut is kept, the rest asked again.
_READ_CHUNK = 1 << 20
_MISSING_CODES = frozenset({"NoSuchKey", "NoSuchBucket", "404", "NotFound"})


def _missing(exc: BaseException) -> bool:
    found = _client_error(exc)
    return found is not None and (found[0] in _MISSING_CODES or found[1] == 404)


def _stream_errors() -> tuple[type[BaseException], ...]:
    from botocore.exceptions import IncompleteReadError, ReadTimeoutError, ResponseStreamingError

    return (IncompleteReadError, ReadTimeoutError, ResponseStreamingError, ConnectionError)


def _part_size(size: int) -> int:
    return max(_PART_SIZE, -(-size // _MAX_PARTS))


class S3Backend(Backend):
    """S3 through botocore's synchronous client (`mvcc_core.io.s3_client`): one request per operation where one
    does, no caches.

    Args:
        client: the process's client for the store's options (`shared_s3_client`)
        bucket: the bucket
        prefix: the store's root inside it ('' for the bucket's root)
        conditional_put: the endpoint honours `If-None-Match: *`, so commits are atomic
    """

    def __init__(self, client: S3Client, bucket: str, prefix: str, conditional_put: bool) -> None:
        """A backend on `s3://bucket/prefix`."""
        self.root = f"{bucket}/{prefix}" if prefix else bucket
        self.s3 = client
        self.bucket = bucket
        self.prefix = prefix
        self.atomic = conditional_put

    def key(self, rel: str) -> str:
        """The S3 key of `rel`.

        Args:
            rel: the object's path relative to the backend's root
        """
        return joined(self.prefix, rel)

    def rel_of_key(self, key: str) -> str:
        """The path relative to the root of an S3 key.

        Args:
            key: a key below the store's prefix
        """
        return key[len(self.prefix) + 1 :] if self.prefix else key

    def dir_prefix(self, prefix: str) -> str:
        """The key prefix that lists everything below `prefix` ('' for the bucket's root).

        Args:
            prefix: a directory relative to the root
        """
        key = self.key(prefix)
        return f"{key}/" if key else ""

    def call(self, method: str, **kwargs: Any) -> Any:
        """One S3 API call (botocore retries it in standard mode); a missing key or bucket is FileNotFoundError.

        Args:
            method: the client method (`put_object`, `list_objects_v2`, ...)
            **kwargs: its arguments
        """
        from botocore.exceptions import ClientError

        try:
            return self.s3.call(method, **kwargs)
        except ClientError as exc:
            if _missing(exc):
                raise FileNotFoundError(f"s3://{self.bucket}/{kwargs.get('Key', kwargs.get('Prefix', ''))}") from exc
            raise

    def _read(self, rel: str, start: int | None = None, end: int | None = None) -> bytes:
        """The object's bytes (`start` to `end` if given) in one GetObject; a stream cut before its end is asked
        again from where it stopped (the same version of the object: If-Match its ETag), up to `MAX_ATTEMPTS`."""
        key = self.key(rel)
        got: list[bytes] = []
        have, etag = 0, None
        for attempt in range(MAX_ATTEMPTS):
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
            first = (start or 0) + have
            if first or end is not None:
                kwargs["Range"] = f"bytes={first}-{'' if end is None else end - 1}"
            if etag is not None:
                kwargs["IfMatch"] = etag
            resp = self.call("get_object", **kwargs)
            etag = resp.get("ETag", etag)
            body = resp["Body"]
            try:
                while chunk := body.read(_READ_CHUNK):
                    got.append(chunk)
                    have += len(chunk)
                return b"".join(got)
            except _stream_errors():
                if attempt == MAX_ATTEMPTS - 1:
                    raise
            finally:
                body.close()
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def get(self, rel: str) -> bytes:
        """The whole object in one GetObject (no HeadObject first: the objects read whole are small).

        Args:
            rel: the object's path relative to the store's root
        """
        return self._read(rel)

    def get_range(self, rel: str, start: int, end: int) -> bytes:
        """Bytes `start` up to `end` of the object (a ranged GetObject); a range past its end is empty.

        Args:
            rel: the object's path relative to the store's root
            start: the first byte wanted
            end: the byte after the last one wanted

        Raises:
            FileNotFoundError: there is no object at `rel`.
        """
        from botocore.exceptions import ClientError

        try:
            return self._read(rel, start, end)
        except ClientError as exc:
            found = _client_error(exc)
            if found and (found[0] == "InvalidRange" or found[1] == 416):
                self.head(rel)  # a range past the end is empty; a missing object still raises
                return b""
            raise

    def head(self, rel: str) -> ObjectMeta:
        """The size and LastModified of the object (one HeadObject).

        Args:
            rel: the object's path relative to the store's root

        Raises:
            FileNotFoundError: `rel` is empty or there is no object at it.
        """
        if not rel:
            raise FileNotFoundError(rel)
        resp = self.call("head_object", Bucket=self.bucket, Key=self.key(rel))
        return ObjectMeta(rel, int(resp.get("ContentLength", 0)), to_datetime(resp.get("LastModified")))

    def put(self, rel: str, data: bytes) -> None:
        """One PutObject of `data`, or a multipart upload above `_MULTIPART_THRESHOLD`: either becomes visible
        at once, never half-written.

        Args:
            rel: the object's path relative to the store's root
            data: the object's bytes
        """
        if len(data) > _MULTIPART_THRESHOLD:
            self._multipart(self.key(rel), memoryview(data))
        else:
            self.call("put_object", Bucket=self.bucket, Key=self.key(rel), Body=bytes(data))

    def _multipart(self, key: str, data: memoryview) -> None:
        upload = self.call("create_multipart_upload", Bucket=self.bucket, Key=key)["UploadId"]
        try:
            step, parts = _part_size(len(data)), []
            for number, at in enumerate(range(0, len(data), step), start=1):
                resp = self.call(
                    "upload_part", Bucket=self.bucket, Key=key, UploadId=upload, PartNumber=number,
                    Body=bytes(data[at : at + step]),
                )  # fmt: skip
                parts.append({"PartNumber": number, "ETag": resp["ETag"]})
            self._complete(key, upload, parts)
        except BaseException:
            self._abort(key, upload)
            raise

    def _complete(self, key: str, upload: str, parts: builtins.list[dict[str, Any]]) -> None:
        self.call(
            "complete_multipart_upload", Bucket=self.bucket, Key=key, UploadId=upload,
            MultipartUpload={"Parts": parts},
        )  # fmt: skip

    def _abort(self, key: str, upload: str) -> None:
        with contextlib.suppress(Exception):  # the upload's parts expire with the bucket's lifecycle rules
            self.call("abort_multipart_upload", Bucket=self.bucket, Key=key, UploadId=upload)

    def put_if_not_exists(self, rel: str, data: bytes) -> bool:
        """One conditional PutObject (`If-None-Match: *`); a 412 or 409 answer means the key was taken. If a PUT
        succeeds but its answer is lost, the retry sees 412 and this reports False although the object is ours: a
        commit loop checks the winning manifest for its own transaction.

        Args:
            rel: the object's path relative to the store's root
            data: the object's bytes

        Returns:
            True if this call created the object, False if the key existed.

        Raises:
            CommitNotSupportedError: the endpoint does not implement conditional PUT (use `conditional_put='false'` and
                an external manifest store).
        """
        from botocore.exceptions import ClientError

        try:
            self.call("put_object", Bucket=self.bucket, Key=self.key(rel), Body=bytes(data), IfNoneMatch="*")
        except ClientError as exc:
            found = _client_error(exc)
            if found is None:
                raise
            code, status = found
            if code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412):
                return False
            if code == "NotImplemented" or status == 501:
                raise CommitNotSupportedError(
                    f"the S3 endpoint of {self.bucket} does not implement conditional PUT (If-None-Match); "
                    "pass storage option conditional_put='false' and an external manifest store"
                ) from exc
            raise
        return True

    def rename_if_not_exists(self, src: str, dst: str) -> bool:
        """S3 has no rename: a conditional put of `src`'s bytes to `dst`, then `src` is deleted if it won.

        Args:
            src: the object to move, relative to the root
            dst: its new path, which must be free

        Returns:
            True if `dst` was created, False if it existed.
        """
        if not self.put_if_not_exists(dst, self.get(src)):
            return False
        self.delete_many([src])
        return True

    def copy(self, src: str, dst: str) -> None:
        """One CopyObject, replacing `dst` (part by part above CopyObject's 5 GiB).

        Args:
            src: the object to copy, relative to the root
            dst: the path written (an object there is replaced)
        """
        self.copy_key(self.bucket, self.key(src), self.key(dst))

    def copy_key(self, src_bucket: str, src_key: str, key: str) -> None:
        """Server-side copy of `s3://src_bucket/src_key` to `key` in this backend's bucket (one client: clones).

        Args:
            src_bucket: the source's bucket
            src_key: the source's key
            key: the key written in this bucket (replaced if it exists)
        """
        from botocore.exceptions import ClientError

        source = {"Bucket": src_bucket, "Key": src_key}
        try:
            self.call("copy_object", Bucket=self.bucket, Key=key, CopySource=source)
        except ClientError as exc:
            found = _client_error(exc)
            if not found or found[0] != "InvalidRequest":
                raise
            size = int(self.call("head_object", **source).get("ContentLength", 0))
            if size <= _COPY_LIMIT:
                raise
            self._multipart_copy(source, key, size)

    def _multipart_copy(self, source: dict[str, str], key: str, size: int) -> None:
        upload = self.call("create_multipart_upload", Bucket=self.bucket, Key=key)["UploadId"]
        try:
            step, parts = _part_size(size), []
            for number, at in enumerate(range(0, size, step), start=1):
                resp = self.call(
                    "upload_part_copy", Bucket=self.bucket, Key=key, UploadId=upload, PartNumber=number,
                    CopySource=source, CopySourceRange=f"bytes={at}-{min(at + step, size) - 1}",
                )  # fmt: skip
                parts.append({"PartNumber": number, "ETag": resp["CopyPartResult"]["ETag"]})
            self._complete(key, upload, parts)
        except BaseException:
            self._abort(key, upload)
            raise

    def _list_page(self, **kwargs: Any) -> dict[str, Any]:
        try:
            page: dict[str, Any] = self.call("list_objects_v2", Bucket=self.bucket, **kwargs)
        except FileNotFoundError as exc:
            where = f"s3://{self.bucket}/{kwargs.get('Prefix', '')}"
            raise StorageError(f"cannot list {where}: bucket {self.bucket!r} does not exist") from exc
        return page

    def _metas(self, contents: Iterable[dict[str, Any]]) -> Iterator[ObjectMeta]:
        for obj in contents:
            key = obj["Key"]
            if key.endswith("/"):
                continue  # "directory" marker objects written by some tools
            yield ObjectMeta(self.rel_of_key(key), int(obj.get("Size", 0)), to_datetime(obj.get("LastModified")))

    def list(self, prefix: str) -> builtins.list[ObjectMeta]:
        """Every object below `prefix` (ListObjectsV2, following continuation tokens), sorted by path.

        Args:
            prefix: the directory to list, relative to the root ('' lists everything)
        """
        out: builtins.list[ObjectMeta] = []
        kwargs: dict[str, Any] = {"Prefix": self.dir_prefix(prefix)}
        while True:
            resp = self._list_page(**kwargs)
            out.extend(self._metas(resp.get("Contents", ())))
            token = resp.get("NextContinuationToken")
            if not resp.get("IsTruncated") or not token:
                break
            kwargs["ContinuationToken"] = token
        out.sort(key=lambda m: m.path)
        return out

    def list_first(self, prefix: str) -> ObjectMeta | None:
        """The first object below `prefix` in key order (ListObjectsV2 with MaxKeys=1, skipping directory markers).

        Args:
            prefix: the directory searched, relative to the root ('' searches everything)
        """
        # One ListObjectsV2 with MaxKeys=1: S3 lists in key order, so this is "latest" for V2 manifests.
        kwargs: dict[str, Any] = {"Prefix": self.dir_prefix(prefix), "MaxKeys": 1}
        while True:
            resp = self._list_page(**kwargs)
            contents = resp.get("Contents") or []
            if not contents:
                return None
            metas = builtins.list(self._metas(contents))
            if metas:
                return metas[0]
            kwargs["StartAfter"] = contents[-1]["Key"]  # skip a directory marker

    def delete_many(self, rels: builtins.list[str]) -> None:
        """Delete the objects in DeleteObjects batches; a key already gone is not an error.

        Args:
            rels: the paths of the objects to delete, relative to the root

        Raises:
            StorageError: S3 refused to delete some object (the first is named).
        """
        keys = [self.key(rel) for rel in rels if rel]
        for i in range(0, len(keys), _S3_DELETE_BATCH):
            batch = keys[i : i + _S3_DELETE_BATCH]
            resp = self.call(
                "delete_objects",
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
            )
            errors = [e for e in resp.get("Errors", ()) if e.get("Code") != "NoSuchKey"]
            if errors:
                first = errors[0]
                raise StorageError(
                    f"deleting {len(errors)} object(s) from s3://{self.bucket} failed, e.g. "
                    f"{first.get('Key')!r}: {first.get('Code')} {first.get('Message', '')}"
                )


def native_arrow_s3(s3_options: dict[str, Any], bucket: str) -> pyarrow.fs.FileSystem | None:
    """pyarrow's own S3 client from the same options, or None if some option has no pyarrow equivalent.

    Args:
        s3_options: the store's s3fs options (`translate_s3_options`)
        bucket: the store's bucket (its region is looked up when no option names one)
    """
    import pyarrow.fs as pafs

    opts = s3_options
    client_kwargs = dict(opts.get("client_kwargs") or {})
    if set(opts) - {"key", "secret", "token", "anon", "client_kwargs"} or set(client_kwargs) - {
        "endpoint_url",
        "region_name",
    }:
        return None
    # allow_delayed_open: small files become one PutObject instead of a three-request multipart upload.
    kwargs: dict[str, Any] = {"allow_delayed_open": True}
    if opts.get("anon") and not is_false(opts["anon"]):
        kwargs["anonymous"] = True
    if opts.get("key") and opts.get("secret"):
        kwargs["access_key"] = opts["key"]
        kwargs["secret_key"] = opts["secret"]
        if opts.get("token"):
            kwargs["session_token"] = opts["token"]
    elif opts.get("key") or opts.get("secret"):
        return None
    if client_kwargs.get("region_name"):
        kwargs["region"] = client_kwargs["region_name"]
    endpoint = client_kwargs.get("endpoint_url")
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        kwargs["scheme"] = parts.scheme or "https"
        kwargs["endpoint_override"] = parts.netloc + parts.path.rstrip("/")
        kwargs.setdefault("region", "us-east-1")
    elif "region" not in kwargs:
        # Real AWS without a configured region: ask for the bucket's (s3fs follows redirects itself).
        with contextlib.suppress(Exception):
            kwargs["region"] = pafs.resolve_s3_region(bucket)
    try:
        return pafs.S3FileSystem(**kwargs)
    except Exception:  # any pyarrow refusal: fall back to the fsspec bridge
        return None


def shared_arrow_s3_filesystem(s3_options: dict[str, Any], fs: Callable[[], Any], bucket: str) -> pyarrow.fs.FileSystem:
    """One pyarrow filesystem per process and set of options, like the S3 client (`shared_s3_client`):
    pyarrow's own S3 client where the options allow it (`native_arrow_s3`), else a bridge to the s3fs filesystem.

    Args:
        s3_options: the store's s3fs options (`translate_s3_options`)
        fs: gives the store's s3fs filesystem, bridged to when pyarrow's client cannot take the options (called
            only then: s3fs is imported only for such options)
        bucket: the store's bucket (its region is looked up when no option names one)
    """
    import pyarrow.fs as pafs

    key = s3_cache_key(s3_options)
    with _S3_FILESYSTEMS_LOCK:
        found = _ARROW_S3_FILESYSTEMS.get(key)
    if found is None:
        found = native_arrow_s3(s3_options, bucket)
        if found is None:
            found = pafs.PyFileSystem(pafs.FSSpecHandler(fs()))
        with _S3_FILESYSTEMS_LOCK:
            _ARROW_S3_FILESYSTEMS[key] = found
    return found
