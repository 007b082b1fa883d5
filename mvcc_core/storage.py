"""One object store over fsspec for local paths, ``memory://`` and ``s3://`` (docs/format.md, "Commits").

Everything above this module speaks in paths relative to the table root with "/" separators, so the same
table code runs on a local directory, in memory and on S3. The commit protocol needs exactly one atomic
primitive from the store, and this module is where each backend provides it:

* local: a fully written and fsynced temporary file is hard-linked to its final name (``os.link`` fails if
  the name is taken), so the name appears atomically and at most once;
* memory: a process-wide lock around check-and-set. ``memory://`` is one store per process, shared by every
  handle (a table written to ``memory://x`` is there for ``open_table("memory://x")``; pylance gives each
  handle a store of its own, see docs/pylance_compat.md);
* S3: ``PutObject`` with ``If-None-Match: *`` (a 412 or 409 answer means another writer won).

Other fsspec protocols have neither primitive: they can be read and written, but committing to them needs
an external manifest store. Listings are never cached, because other processes commit concurrently and a
stale listing would hide their versions from the commit loop.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import stat
import threading
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import fsspec

from mvcc_core.errors import CommitNotSupportedError, MvccError, ObjectNotFoundError, StorageError, UnsafePathError

if TYPE_CHECKING:
    import pyarrow.fs

__all__ = ["ObjectMeta", "ObjectStore", "open_store", "TEMP_PREFIX", "is_temporary"]

#: Prefix of the temporary files the local backend writes next to their final name. It starts with "_" so
#: that pyarrow's dataset discovery ignores such files and so that they sort after the all-digit manifest
#: names (``list_first`` of ``_versions/`` still finds the newest V2 manifest while a commit is in flight).
TEMP_PREFIX = "_tmp-"

# memory:// is process-local; one lock makes its check-and-set atomic for all threads of the process.
_MEMORY_LOCK = threading.RLock()

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


@dataclass(frozen=True)
class ObjectMeta:
    """What a listing or HEAD tells about one object; ``path`` is relative to the table root."""

    path: str
    size: int
    last_modified: datetime | None


def is_temporary(path: str) -> bool:
    """True for the in-flight temporary files of the local backend (retention may delete stale ones)."""
    return path.rsplit("/", 1)[-1].startswith(TEMP_PREFIX)


def _temp_name(final_name: str) -> str:
    return f"{TEMP_PREFIX}{uuid.uuid4().hex}-{final_name[:120]}"


def _to_datetime(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC)
    if isinstance(value, str):
        try:
            return _to_datetime(datetime.fromisoformat(value))
        except ValueError:
            return None
    return None


def _meta_from_info(rel: str, info: dict[str, Any]) -> ObjectMeta:
    modified = None
    for key in ("LastModified", "last_modified", "mtime", "modified", "updated", "created"):
        if info.get(key) is not None:
            modified = _to_datetime(info[key])
            if modified is not None:
                break
    return ObjectMeta(rel, int(info.get("size") or info.get("Size") or 0), modified)


@functools.cache
def _wrappable_errors() -> tuple[type[BaseException], ...]:
    """Errors of the fs layers that become StorageError (botocore only if it is installed)."""
    try:
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:  # pragma: no cover - s3fs depends on botocore
        return (OSError, ValueError)
    return (OSError, ValueError, BotoCoreError, ClientError)


def _client_error(exc: BaseException) -> tuple[str, int | None] | None:
    """(error code, HTTP status) of the botocore ClientError behind `exc` (s3fs wraps them in OSError)."""
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


def _is_false(value: Any) -> bool:
    if isinstance(value, bool):
        return not value
    return str(value).strip().lower() in _FALSE_STRINGS


def _translate_s3_options(options: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Lance/object_store style keys -> s3fs keyword arguments, plus whether conditional PUT is usable.

    The AWS_* environment variables fill in an endpoint and a region that the options do not give, because
    not every client layer (s3fs's own arguments, pyarrow) reads AWS_ENDPOINT_URL or AWS_REGION by itself.
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
            conditional_put = not _is_false(value)
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


class _Backend:
    """Raw operations on full paths; ObjectStore turns their exceptions into the mvcc error contract."""

    atomic = False

    def __init__(self, fs: fsspec.AbstractFileSystem, root: str) -> None:
        self.fs = fs
        self.root = root

    def full(self, rel: str) -> str:
        if not rel:
            return self.root
        return f"{self.root}/{rel}" if self.root else rel

    def rel_of(self, full: str) -> str:
        return full[len(self.root) + 1 :] if self.root else full.lstrip("/")

    def sync(self, rel: str) -> None:
        """Make a file written outside this backend (by pyarrow) durable; object stores are on ack."""

    # --- generic fsspec implementations -------------------------------------------------------------
    def get(self, rel: str) -> bytes:
        return self.fs.cat_file(self.full(rel))

    def get_range(self, rel: str, start: int, end: int) -> bytes:
        return self.fs.cat_file(self.full(rel), start=start, end=end)

    def head(self, rel: str) -> ObjectMeta:
        info = self.fs.info(self.full(rel))
        if info.get("type") != "file":
            raise FileNotFoundError(rel)
        return _meta_from_info(rel, info)

    def put(self, rel: str, data: bytes) -> None:
        self.fs.pipe_file(self.full(rel), data)

    def put_if_not_exists(self, rel: str, data: bytes) -> bool:
        raise NotImplementedError

    def put_new(self, rel: str, data: bytes) -> None:
        self.put(rel, data)

    def rename_if_not_exists(self, src: str, dst: str) -> bool:
        raise NotImplementedError

    def copy_if_not_exists(self, src: str, dst: str, data: bytes | None) -> bool:
        return self.put_if_not_exists(dst, self.get(src) if data is None else data)

    def copy(self, src: str, dst: str) -> None:
        if not self.fs.isfile(self.full(src)):
            raise FileNotFoundError(src)
        self.fs.cp_file(self.full(src), self.full(dst))

    def list(self, prefix: str) -> list[ObjectMeta]:
        base = self.full(prefix)
        try:
            found = self.fs.find(base, detail=True)
        except FileNotFoundError:
            return []
        out = []
        for path, info in found.items():
            if info.get("type", "file") != "file":
                continue
            full = self.fs._strip_protocol(path)
            if prefix and not full.startswith(base + "/"):
                continue  # `find` on a file path returns the file itself
            out.append(_meta_from_info(self.rel_of(full), info))
        out.sort(key=lambda m: m.path)
        return out

    def list_first(self, prefix: str) -> ObjectMeta | None:
        found = self.list(prefix)
        return found[0] if found else None

    def delete_many(self, rels: list[str]) -> None:
        for rel in rels:
            with contextlib.suppress(FileNotFoundError):
                self.fs.rm_file(self.full(rel))


class _MemoryBackend(_Backend):
    """fsspec's in-memory filesystem; its dict is process-wide, so is the lock that guards check-and-set.

    The filesystem keys every object by an absolute path ("/t/_versions/1.manifest"); a table at the root
    of the store (``memory://``, root "") has its objects at "/<rel>", so that listings find them.
    """

    atomic = True

    def full(self, rel: str) -> str:
        if self.root:
            return super().full(rel)
        return f"/{rel}"

    def put(self, rel: str, data: bytes) -> None:
        with _MEMORY_LOCK:
            self.fs.pipe_file(self.full(rel), bytes(data))

    def head(self, rel: str) -> ObjectMeta:
        full = self.full(rel)
        if not self.fs.isfile(full):
            raise FileNotFoundError(rel)
        # "created" (the time of the last put: every put replaces the file), as its listings report it
        return ObjectMeta(rel, self.fs.size(full), _to_datetime(self.fs.created(full)))

    def put_if_not_exists(self, rel: str, data: bytes) -> bool:
        full = self.full(rel)
        with _MEMORY_LOCK:
            if self.fs.exists(full):
                return False
            self.fs.pipe_file(full, bytes(data))
            return True

    def rename_if_not_exists(self, src: str, dst: str) -> bool:
        src_full, dst_full = self.full(src), self.full(dst)
        with _MEMORY_LOCK:
            if not self.fs.isfile(src_full):
                raise FileNotFoundError(src)
            if self.fs.exists(dst_full):
                return False
            self.fs.cp_file(src_full, dst_full)
            self.fs.rm_file(src_full)
            return True

    def copy(self, src: str, dst: str) -> None:
        with _MEMORY_LOCK:
            super().copy(src, dst)

    def delete_many(self, rels: list[str]) -> None:
        with _MEMORY_LOCK:
            super().delete_many(rels)


class _LocalBackend(_Backend):
    """A local directory, through ``os`` directly: the atomic primitives need link/replace semantics.

    `fsync`: make every write durable against power loss (file contents and directory entries), as
    object_store's `LocalFileSystem::with_fsync(true)`; off by default like it and delta-rs. Commits are
    atomic either way (a manifest appears by link, whole), and a killed process loses nothing it was
    told was committed; only an OS crash or power cut can lose recent versions without it.
    """

    atomic = True

    def __init__(self, fs: fsspec.AbstractFileSystem, root: str, fsync: bool = False) -> None:
        super().__init__(fs, root)
        self.fsync = fsync

    def sync(self, rel: str) -> None:
        if not self.fsync:
            return
        full = self.full(rel)
        fd = os.open(full, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        _fsync_dir(os.path.dirname(full))

    def full(self, rel: str) -> str:
        if not rel:
            return self.root
        return f"{self.root.rstrip('/')}/{rel}"

    def rel_of(self, full: str) -> str:
        return os.path.relpath(full, self.root).replace(os.sep, "/")

    def get(self, rel: str) -> bytes:
        try:
            with open(self.full(rel), "rb") as f:
                return f.read()
        except (IsADirectoryError, NotADirectoryError):
            raise FileNotFoundError(rel) from None

    def get_range(self, rel: str, start: int, end: int) -> bytes:
        try:
            with open(self.full(rel), "rb") as f:
                f.seek(start)
                return f.read(end - start)
        except (IsADirectoryError, NotADirectoryError):
            raise FileNotFoundError(rel) from None

    def head(self, rel: str) -> ObjectMeta:
        try:
            st = os.stat(self.full(rel))
        except NotADirectoryError:
            raise FileNotFoundError(rel) from None
        if not stat.S_ISREG(st.st_mode):
            raise FileNotFoundError(rel)
        return ObjectMeta(rel, st.st_size, datetime.fromtimestamp(st.st_mtime, UTC))

    def _write_temp(self, final: str, data: bytes, *, sync: bool) -> str:
        parent, name = os.path.split(final)
        os.makedirs(parent, exist_ok=True)
        tmp = os.path.join(parent, _temp_name(name))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                if sync:
                    f.flush()
                    os.fsync(f.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return tmp

    def put(self, rel: str, data: bytes) -> None:
        final = self.full(rel)
        tmp = self._write_temp(final, data, sync=self.fsync)
        try:
            os.replace(tmp, final)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        if self.fsync:
            _fsync_dir(os.path.dirname(final))

    def put_new(self, rel: str, data: bytes) -> None:
        # Written in place (open, write, close): a temporary name and a rename would only hide a partial
        # file from readers, and no reader looks at this name before the caller publishes it.
        final = self.full(rel)
        try:
            fd = os.open(final, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(final), exist_ok=True)
            fd = os.open(final, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            view = memoryview(data)
            while view:  # os.write may write less than asked; no file object needed around the descriptor
                view = view[os.write(fd, view) :]
            if self.fsync:
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(final)
            raise
        os.close(fd)
        if self.fsync:
            _fsync_dir(os.path.dirname(final))

    def _link(self, src: str, dst: str) -> bool:
        try:
            os.link(src, dst)
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EXDEV):
                raise CommitNotSupportedError(
                    f"cannot hard-link {src} to {dst} ({exc.strerror}): this filesystem offers no "
                    "rename-if-not-exists; committing to it needs an external manifest store"
                ) from exc
            raise
        if self.fsync:
            _fsync_dir(os.path.dirname(dst))
        return True

    def put_if_not_exists(self, rel: str, data: bytes) -> bool:
        final = self.full(rel)
        if os.path.lexists(final):  # lost already: skip the write and fsync a loser would waste
            return False
        tmp = self._write_temp(final, data, sync=self.fsync)
        try:
            return self._link(tmp, final)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def rename_if_not_exists(self, src: str, dst: str) -> bool:
        src_full, dst_full = self.full(src), self.full(dst)
        if not os.path.isfile(src_full):
            raise FileNotFoundError(src)
        os.makedirs(os.path.dirname(dst_full), exist_ok=True)
        if not self._link(src_full, dst_full):
            return False
        with contextlib.suppress(FileNotFoundError):
            os.unlink(src_full)
        return True

    def copy_if_not_exists(self, src: str, dst: str, data: bytes | None) -> bool:
        # One hard link: no file is created and no byte written (a file creation is the dearest step of a
        # local commit); `src` is complete and never rewritten, so the shared inode is the copy.
        src_full, dst_full = self.full(src), self.full(dst)
        if not os.path.isfile(src_full):
            raise FileNotFoundError(src)
        try:
            return self._link(src_full, dst_full)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(dst_full), exist_ok=True)
            return self._link(src_full, dst_full)

    def copy(self, src: str, dst: str) -> None:
        import shutil

        src_full, dst_full = self.full(src), self.full(dst)
        if not os.path.isfile(src_full):
            raise FileNotFoundError(src)
        parent, name = os.path.split(dst_full)
        os.makedirs(parent, exist_ok=True)
        tmp = os.path.join(parent, _temp_name(name))
        try:
            shutil.copyfile(src_full, tmp)
            if self.fsync:
                self.sync(self.rel_of(tmp))
            os.replace(tmp, dst_full)
            if self.fsync:
                _fsync_dir(parent)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _walk(self, prefix: str) -> Iterator[ObjectMeta]:
        stack = [(self.full(prefix), prefix.strip("/"))]
        while stack:
            directory, rel_dir = stack.pop()
            try:
                entries = list(os.scandir(directory))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for entry in entries:
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append((entry.path, rel))
                        continue
                    st = entry.stat()
                except FileNotFoundError:
                    continue  # removed while we listed (e.g. a temporary file)
                if stat.S_ISREG(st.st_mode):
                    yield ObjectMeta(rel, st.st_size, datetime.fromtimestamp(st.st_mtime, UTC))

    def list(self, prefix: str) -> list[ObjectMeta]:
        return sorted(self._walk(prefix), key=lambda m: m.path)

    def list_first(self, prefix: str) -> ObjectMeta | None:
        """The first object by name: names are sorted per directory, and only the winner is stat-ed."""

        def first(directory: str, rel_dir: str) -> ObjectMeta | None:
            try:
                names = sorted(os.listdir(directory))
            except (FileNotFoundError, NotADirectoryError):
                return None
            for name in names:
                full, rel = f"{directory}/{name}", (f"{rel_dir}/{name}" if rel_dir else name)
                try:
                    st = os.stat(full, follow_symlinks=False)
                except FileNotFoundError:
                    continue  # removed while we listed
                if stat.S_ISDIR(st.st_mode):
                    found = first(full, rel)
                    if found is not None:
                        return found
                elif stat.S_ISREG(st.st_mode):
                    return ObjectMeta(rel, st.st_size, datetime.fromtimestamp(st.st_mtime, UTC))
            return None

        return first(self.full(prefix).rstrip("/"), prefix.strip("/"))

    def delete_many(self, rels: list[str]) -> None:
        def unlink_all(chunk: list[str]) -> None:
            for rel in chunk:
                with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                    os.unlink(self.full(rel))

        rels = list(rels)
        if len(rels) < _PARALLEL_UNLINK_FROM:
            unlink_all(rels)
            return
        # unlink releases the GIL: retention's thousands of deletions overlap on a few threads
        from concurrent.futures import ThreadPoolExecutor

        chunks = [rels[i::_UNLINK_THREADS] for i in range(_UNLINK_THREADS)]
        with ThreadPoolExecutor(max_workers=_UNLINK_THREADS) as pool:
            list(pool.map(unlink_all, chunks))


_PARALLEL_UNLINK_FROM = 256
_UNLINK_THREADS = 4


def _fsync_dir(path: str) -> None:
    """Make a new directory entry durable; best effort (not every platform can open directories)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_S3_FILESYSTEMS: dict[tuple[int, str], Any] = {}
_ARROW_S3_FILESYSTEMS: dict[tuple[int, str], Any] = {}
_S3_FILESYSTEMS_LOCK = threading.Lock()


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


def _s3_cache_key(s3_options: dict[str, Any]) -> tuple[int, str]:
    """Process, options and the AWS_* environment they were resolved against."""
    env = {k: os.environ.get(k) for k in _AWS_ENV}
    return os.getpid(), json.dumps([s3_options, env], sort_keys=True, default=repr)


def _shared_s3_filesystem(s3_options: dict[str, Any]) -> Any:
    """One s3fs filesystem per process and set of options.

    Creating the botocore client costs ~100 ms, more than the LIST that finds the latest version, so
    stores opened with the same options share it. Listing caches stay off: only the client is shared.
    """
    import s3fs

    key = _s3_cache_key(s3_options)
    with _S3_FILESYSTEMS_LOCK:
        fs = _S3_FILESYSTEMS.get(key)
        if fs is None:
            fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False, **s3_options)
            _S3_FILESYSTEMS[key] = fs
        return fs


class _S3Backend(_Backend):
    """S3 through the s3fs client, calling the S3 API directly where one request must do (no caches)."""

    def __init__(self, fs: fsspec.AbstractFileSystem, bucket: str, prefix: str, conditional_put: bool) -> None:
        super().__init__(fs, f"{bucket}/{prefix}" if prefix else bucket)
        self.bucket = bucket
        self.prefix = prefix
        self.atomic = conditional_put

    def key(self, rel: str) -> str:
        if not rel:
            return self.prefix
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def rel_of_key(self, key: str) -> str:
        return key[len(self.prefix) + 1 :] if self.prefix else key

    def dir_prefix(self, prefix: str) -> str:
        key = self.key(prefix)
        return f"{key}/" if key else ""

    def call(self, method: str, **kwargs: Any) -> Any:
        from fsspec.asyn import sync

        return sync(self.fs.loop, self.fs._call_s3, method, **kwargs)

    def get(self, rel: str) -> bytes:
        # One GetObject. s3fs's default (`max_concurrency` > 1) first asks for the size (a HeadObject) to
        # split a large object into concurrent ranged reads; the objects read whole here are manifests,
        # transaction and deletion files (data files go through pyarrow), for which that doubles the
        # round trips and saves nothing.
        return self.fs.cat_file(self.full(rel), max_concurrency=1)

    def get_range(self, rel: str, start: int, end: int) -> bytes:
        try:
            return self.fs.cat_file(self.full(rel), start=start, end=end)
        except OSError as exc:
            found = _client_error(exc)
            if found and (found[0] == "InvalidRange" or found[1] == 416):
                self.head(rel)  # a range past the end is empty; a missing object still raises
                return b""
            raise

    def head(self, rel: str) -> ObjectMeta:
        if not rel:
            raise FileNotFoundError(rel)
        resp = self.call("head_object", Bucket=self.bucket, Key=self.key(rel))
        return ObjectMeta(rel, int(resp.get("ContentLength", 0)), _to_datetime(resp.get("LastModified")))

    def put(self, rel: str, data: bytes) -> None:
        # A single PutObject (or a completed multipart upload) becomes visible at once, never half-written.
        self.fs.pipe_file(self.full(rel), bytes(data))

    def put_if_not_exists(self, rel: str, data: bytes) -> bool:
        # Caveat shared by every S3 client: if a PUT succeeds but its answer is lost, the automatic retry
        # gets a 412 and we report False although the object is ours. A commit loop that sees False should
        # therefore check whether the winning manifest names its own transaction file before retrying.
        try:
            self.call("put_object", Bucket=self.bucket, Key=self.key(rel), Body=bytes(data), IfNoneMatch="*")
        except FileExistsError:
            return False  # s3fs's translation of 412 PreconditionFailed (If-None-Match)
        except OSError as exc:
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
        finally:
            self.fs.invalidate_cache(self.full(rel))
        return True

    def rename_if_not_exists(self, src: str, dst: str) -> bool:
        # S3 has no rename: copy the bytes with a conditional PUT, then drop the source if we won.
        if not self.put_if_not_exists(dst, self.get(src)):
            return False
        self.delete_many([src])
        return True

    def copy(self, src: str, dst: str) -> None:
        self.fs.cp_file(self.full(src), self.full(dst))  # CopyObject (multipart copy for > 5 GB)
        self.fs.invalidate_cache(self.full(dst))

    def _list_page(self, **kwargs: Any) -> dict[str, Any]:
        try:
            return self.call("list_objects_v2", Bucket=self.bucket, **kwargs)
        except FileNotFoundError as exc:
            where = f"s3://{self.bucket}/{kwargs.get('Prefix', '')}"
            raise StorageError(f"cannot list {where}: bucket {self.bucket!r} does not exist") from exc

    def _metas(self, contents: Iterable[dict[str, Any]]) -> Iterator[ObjectMeta]:
        for obj in contents:
            key = obj["Key"]
            if key.endswith("/"):
                continue  # "directory" marker objects written by some tools
            yield ObjectMeta(self.rel_of_key(key), int(obj.get("Size", 0)), _to_datetime(obj.get("LastModified")))

    def list(self, prefix: str) -> list[ObjectMeta]:
        out: list[ObjectMeta] = []
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
        # One ListObjectsV2 with MaxKeys=1: S3 lists in key order, so this is "latest" for V2 manifests.
        kwargs: dict[str, Any] = {"Prefix": self.dir_prefix(prefix), "MaxKeys": 1}
        while True:
            resp = self._list_page(**kwargs)
            contents = resp.get("Contents") or []
            if not contents:
                return None
            metas = list(self._metas(contents))
            if metas:
                return metas[0]
            kwargs["StartAfter"] = contents[-1]["Key"]  # skip a directory marker

    def delete_many(self, rels: list[str]) -> None:
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
        for key in keys:
            self.fs.invalidate_cache(f"{self.bucket}/{key}")


@functools.cache
def _local_arrow_filesystem() -> pyarrow.fs.FileSystem:
    """pyarrow's LocalFileSystem, except that opening an output stream creates the parent directories.

    Object stores have no directories, so writers (e.g. of data files) do not create them; on a local disk
    pyarrow would fail with FileNotFoundError instead.
    """
    import posixpath

    import pyarrow.fs as pafs

    class LocalArrowFileSystem(pafs.LocalFileSystem):
        def open_output_stream(
            self, path: str, compression: str | None = "detect", buffer_size: int | None = None, metadata=None
        ) -> Any:
            parent = posixpath.dirname(path)
            if parent:
                self.create_dir(parent, recursive=True)
            return super().open_output_stream(path, compression=compression, buffer_size=buffer_size, metadata=metadata)

        def __reduce__(self) -> tuple[Any, ...]:
            return (_local_arrow_filesystem, ())

    return LocalArrowFileSystem()


def _split_scheme(uri: str) -> tuple[str, str]:
    if "://" in uri:
        scheme, rest = uri.split("://", 1)
        return scheme.lower(), rest
    return "file", uri


class ObjectStore:
    """The table root on some storage, addressed by paths relative to it.

    Construct with a uri (plain path, ``file://``, ``memory://``, ``s3://`` or another fsspec protocol) and
    storage options (for S3 also Lance/object_store style keys such as ``aws_endpoint``).
    """

    uri: str
    scheme: str
    fs: fsspec.AbstractFileSystem

    def __init__(self, uri: str, storage_options: dict[str, Any] | None = None) -> None:
        self._init_args = (uri, dict(storage_options or {}))
        self._pid = os.getpid()
        self._arrow_fs: pyarrow.fs.FileSystem | None = None
        self._arrow_lock = threading.Lock()
        options = dict(storage_options or {})
        if not isinstance(uri, str) or not uri:
            raise StorageError(f"a table uri must be a non-empty string, got {uri!r}")
        scheme, rest = _split_scheme(uri)
        self._s3_options: dict[str, Any] = {}
        try:
            if scheme in ("file", "local"):
                self._init_local(uri, options)
            elif scheme == "memory":
                self._init_memory(rest)
            elif scheme in ("s3", "s3a"):
                self._init_s3(rest, options)
            else:
                self._init_other(uri, scheme, options)
        except MvccError:
            raise
        except (ImportError, TypeError, *_wrappable_errors()) as exc:
            raise StorageError(f"cannot open object store for {uri}: {type(exc).__name__}: {exc}") from exc

    # --- construction ---------------------------------------------------------------------------------
    def _init_local(self, uri: str, options: dict[str, Any]) -> None:
        from fsspec.implementations.local import LocalFileSystem

        root = LocalFileSystem._strip_protocol(uri)
        root = os.path.abspath(os.path.expanduser(root))
        self.scheme = "file"
        self.uri = root if "://" not in uri else f"file://{root}"
        self.fs = LocalFileSystem()
        fsync = options.get("fsync", False)
        self._backend: _Backend = _LocalBackend(self.fs, root, fsync=bool(fsync) and not _is_false(fsync))

    def _init_memory(self, rest: str) -> None:
        from fsspec.implementations.memory import MemoryFileSystem

        self.fs = MemoryFileSystem()
        root = MemoryFileSystem._strip_protocol(rest).rstrip("/")
        self.scheme = "memory"
        self.uri = f"memory://{root.lstrip('/')}"
        self._backend = _MemoryBackend(self.fs, root)

    def _init_s3(self, rest: str, options: dict[str, Any]) -> None:

        bucket, _, prefix = rest.partition("/")
        prefix = prefix.strip("/")
        if not bucket:
            raise StorageError(f"an s3 uri needs a bucket: s3://{rest}")
        s3_options, conditional_put = _translate_s3_options(options)
        self._s3_options = s3_options
        self.fs = _shared_s3_filesystem(s3_options)
        self.scheme = "s3"
        self.uri = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
        self._backend = _S3Backend(self.fs, bucket, prefix, conditional_put)

    def _init_other(self, uri: str, scheme: str, options: dict[str, Any]) -> None:
        self.fs = fsspec.filesystem(scheme, skip_instance_cache=True, **options)
        self.scheme = scheme
        self.uri = uri.rstrip("/")
        root = self.fs._strip_protocol(uri)
        self._backend = _Backend(self.fs, root.rstrip("/"))

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuild from uri and options in the receiving process (compaction tasks, Spark executors).
        return (self.__class__, self._init_args)

    @property
    def storage_options(self) -> dict[str, Any]:
        """The options this store was opened with (a copy)."""
        return dict(self._init_args[1])

    def sibling(self, uri: str) -> ObjectStore:
        """The store at another `uri` opened with this store's options (a base path, a clone's source);
        cached per uri on this store, so the clients and caches of one are shared by every caller."""
        siblings = self.__dict__.setdefault("_siblings", {})
        found = siblings.get(uri)
        if found is None:
            found = siblings[uri] = ObjectStore(uri, self._init_args[1])
        return found

    def __repr__(self) -> str:
        return f"ObjectStore({self.uri!r})"

    # --- paths ----------------------------------------------------------------------------------------
    @staticmethod
    def _clean(rel: str) -> str:
        if not isinstance(rel, str):
            raise TypeError(f"object paths are str, got {type(rel).__name__}")
        if "\\" in rel or (".." in rel and ".." in rel.split("/")):
            raise UnsafePathError(f"object path {rel!r} leaves the root it is relative to")
        return rel.strip("/")

    def full_path(self, rel: str) -> str:
        """The path of `rel` as ``self.fs`` understands it."""
        return self._backend.full(self._clean(rel))

    def arrow_path(self, rel: str) -> str:
        """The path of `rel` for the filesystem returned by :meth:`arrow_filesystem`."""
        return self.full_path(rel)

    def arrow_filesystem(self) -> pyarrow.fs.FileSystem:
        """A pyarrow filesystem on the same storage, for reading and writing Parquet natively."""
        with self._arrow_lock:
            if self._arrow_fs is None:
                if self.scheme == "s3":  # shared per process and options, like the s3fs client
                    key = _s3_cache_key(self._s3_options)
                    with _S3_FILESYSTEMS_LOCK:
                        fs = _ARROW_S3_FILESYSTEMS.get(key)
                    if fs is None:
                        fs = self._make_arrow_filesystem()
                        with _S3_FILESYSTEMS_LOCK:
                            _ARROW_S3_FILESYSTEMS[key] = fs
                    self._arrow_fs = fs
                else:
                    self._arrow_fs = self._make_arrow_filesystem()
            return self._arrow_fs

    def _make_arrow_filesystem(self) -> pyarrow.fs.FileSystem:
        import pyarrow.fs as pafs

        if self.scheme == "file":
            return _local_arrow_filesystem()
        if self.scheme == "s3":
            native = self._native_arrow_s3()
            if native is not None:
                return native
        return pafs.PyFileSystem(pafs.FSSpecHandler(self.fs))

    def _native_arrow_s3(self) -> pyarrow.fs.FileSystem | None:
        """pyarrow's own S3 client from the same options, or None if some option has no pyarrow equivalent."""
        import pyarrow.fs as pafs

        opts = self._s3_options
        client_kwargs = dict(opts.get("client_kwargs") or {})
        if set(opts) - {"key", "secret", "token", "anon", "client_kwargs"} or set(client_kwargs) - {
            "endpoint_url",
            "region_name",
        }:
            return None
        # allow_delayed_open: small files become one PutObject instead of a three-request multipart upload.
        kwargs: dict[str, Any] = {"allow_delayed_open": True}
        if opts.get("anon") and not _is_false(opts["anon"]):
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
                kwargs["region"] = pafs.resolve_s3_region(self._backend.bucket)  # type: ignore[attr-defined]
        try:
            return pafs.S3FileSystem(**kwargs)
        except Exception:  # any pyarrow refusal: fall back to the fsspec bridge
            return None

    # --- error contract -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _errors(self, op: str, rel: str) -> Iterator[None]:
        if self._pid != os.getpid():
            # Inherited through fork: s3fs's event loop and sessions belong to the parent; rebuild.
            self.__init__(*self._init_args)  # type: ignore[misc]
        try:
            yield
        except MvccError:
            raise
        except FileNotFoundError as exc:
            raise ObjectNotFoundError(f"{op}: object {rel!r} not found in {self.uri}") from exc
        except _wrappable_errors() as exc:
            raise StorageError(f"{op} of {rel!r} in {self.uri} failed: {type(exc).__name__}: {exc}") from exc

    # --- reads ----------------------------------------------------------------------------------------
    def get(self, rel: str) -> bytes:
        """The whole object; ObjectNotFoundError if there is none."""
        rel = self._clean(rel)
        with self._errors("get", rel):
            return self._backend.get(rel)

    def get_range(self, rel: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the object (shorter at the end of the object, like a slice)."""
        rel = self._clean(rel)
        if start < 0 or end < start:
            raise ValueError(f"bad byte range [{start}, {end}) for {rel!r}")
        with self._errors("get_range", rel):
            if end == start:
                self._backend.head(rel)
                return b""
            return self._backend.get_range(rel, start, end)

    def head(self, rel: str) -> ObjectMeta:
        """Size and modification time of one object; ObjectNotFoundError if there is none."""
        rel = self._clean(rel)
        with self._errors("head", rel):
            return self._backend.head(rel)

    def sync(self, rel: str) -> None:
        """After writing `rel` through `arrow_filesystem()`: durable with the local `fsync` option."""
        with self._errors("sync", rel):
            self._backend.sync(self._clean(rel))

    def exists(self, rel: str) -> bool:
        """Whether an object (not a "directory") of that name exists."""
        try:
            self.head(rel)
        except ObjectNotFoundError:
            return False
        return True

    def list(self, prefix_rel: str = "") -> list[ObjectMeta]:
        """Every object below the "directory" `prefix_rel` (recursively), sorted by path; [] if none."""
        prefix = self._clean(prefix_rel)
        with self._errors("list", prefix + "/"):
            return self._backend.list(prefix)

    def list_first(self, prefix_rel: str = "") -> ObjectMeta | None:
        """The lexicographically first object below `prefix_rel`; on S3 one ListObjectsV2 with MaxKeys=1."""
        prefix = self._clean(prefix_rel)
        with self._errors("list_first", prefix + "/"):
            return self._backend.list_first(prefix)

    # --- writes ---------------------------------------------------------------------------------------
    def put(self, rel: str, data: bytes) -> None:
        """Create or overwrite an object; readers see the old or the new bytes, never a partial object."""
        rel = self._clean(rel)
        with self._errors("put", rel):
            self._backend.put(rel, data)

    def put_new(self, rel: str, data: bytes) -> None:
        """Create an object under a fresh name (a random id) that nothing references until the caller
        publishes it, e.g. in a commit. Readers therefore never look at it while it is written, so a local
        store writes it in place, without the temporary file and rename of `put`; a crash may leave a partial
        file behind, unreferenced like any other orphan. Locally it fails if the name exists. Elsewhere: `put`."""
        rel = self._clean(rel)
        with self._errors("put_new", rel):
            self._backend.put_new(rel, data)

    def put_if_not_exists(self, rel: str, data: bytes) -> bool:
        """Create the object only if its name is free: True if we wrote it, False if the name was taken.

        This is the commit point of the commit protocol; raises CommitNotSupportedError on stores that
        cannot do it atomically.
        """
        rel = self._clean(rel)
        self.check_commit_supported()
        with self._errors("put_if_not_exists", rel):
            return self._backend.put_if_not_exists(rel, data)

    def rename_if_not_exists(self, src_rel: str, dst_rel: str) -> bool:
        """Move `src_rel` to `dst_rel` only if `dst_rel` is free; False (source kept) if it was taken."""
        src, dst = self._clean(src_rel), self._clean(dst_rel)
        self.check_commit_supported()
        with self._errors("rename_if_not_exists", f"{src} -> {dst}"):
            return self._backend.rename_if_not_exists(src, dst)

    def copy_if_not_exists(self, src_rel: str, dst_rel: str, data: bytes | None = None) -> bool:
        """Create `dst_rel` holding `src_rel`'s bytes only if `dst_rel` is free: True if we created it, False
        if the name was taken (`src_rel` is kept either way). `data`: `src_rel`'s bytes when the caller has
        them (spares a read).

        A local store makes one hard link (no file created, no byte copied); elsewhere it is a
        put-if-not-exists of the bytes. Either way `dst_rel` appears whole or not at all, so it can publish:
        the catalog finalizes a staged manifest with it.
        """
        src, dst = self._clean(src_rel), self._clean(dst_rel)
        self.check_commit_supported()
        with self._errors("copy_if_not_exists", f"{src} -> {dst}"):
            return self._backend.copy_if_not_exists(src, dst, data)

    def copy(self, src_rel: str, dst_rel: str) -> None:
        """Copy one object (server-side where the storage can, e.g. S3 CopyObject); overwrites `dst_rel`."""
        src, dst = self._clean(src_rel), self._clean(dst_rel)
        with self._errors("copy", f"{src} -> {dst}"):
            self._backend.copy(src, dst)

    def delete_many(self, rels: Iterable[str]) -> None:
        """Delete objects in batches (S3: DeleteObjects of up to 1000 keys); missing ones are ignored."""
        cleaned = [self._clean(r) for r in rels]
        if not cleaned:
            return
        label = cleaned[0] if len(cleaned) == 1 else f"{cleaned[0]} (+{len(cleaned) - 1} more)"
        with self._errors("delete_many", label):
            self._backend.delete_many(cleaned)

    # --- commit capability ----------------------------------------------------------------------------
    @property
    def supports_atomic_commit(self) -> bool:
        """Whether put_if_not_exists / rename_if_not_exists are atomic here (no external store needed)."""
        return self._backend.atomic

    def check_commit_supported(self) -> None:
        """Raise CommitNotSupportedError early, before a writer has done any work it cannot commit."""
        if self.supports_atomic_commit:
            return
        if self.scheme == "s3":
            why = "S3 with conditional_put disabled offers no conditional PUT (If-None-Match)"
        else:
            why = f"scheme {self.scheme!r} offers neither put-if-not-exists nor rename-if-not-exists"
        raise CommitNotSupportedError(
            f"cannot commit to {self.uri}: {why}; committing to it needs an external manifest store "
            "(pass external_store=...)"
        )


def open_store(uri: str | ObjectStore, storage_options: dict[str, Any] | None = None) -> ObjectStore:
    """The ObjectStore for a table uri (an ObjectStore passes through unchanged)."""
    if isinstance(uri, ObjectStore):
        return uri
    return ObjectStore(uri, storage_options)
