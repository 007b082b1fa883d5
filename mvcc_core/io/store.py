"""One object store for local paths, ``memory://``, ``s3://`` (botocore) and other fsspec protocols
(docs/reference/format.md, "Commits").

Design notes: docs/reference/format.md, "Object stores and their atomic primitive".
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from mvcc_core.errors import CommitNotSupportedError, MvccError, ObjectNotFoundError, StorageError, UnsafePathError
from mvcc_core.io.backend import Backend, ObjectMeta, wrappable_errors
from mvcc_core.io.local import LocalBackend, local_arrow_filesystem
from mvcc_core.io.memory import MemoryBackend
from mvcc_core.io.s3 import (
    S3Backend,
    credentials_problem,
    is_false,
    shared_arrow_s3_filesystem,
    shared_s3_filesystem,
    translate_s3_options,
)
from mvcc_core.io.s3_client import shared_s3_client

if TYPE_CHECKING:
    import fsspec
    import pyarrow.fs


#: Each store operation in the words of an error message ("cannot list ...", "write of ... failed").
_OPERATION_WORDS = {
    "get": "read",
    "get_range": "read",
    "head": "read",
    "exists": "read",
    "sync": "sync",
    "list": "list",
    "list_first": "list",
    "put": "write",
    "put_new": "write",
    "put_if_not_exists": "write",
    "rename_if_not_exists": "rename",
    "copy_if_not_exists": "copy",
    "copy": "copy",
    "delete_many": "delete",
}


def _split_scheme(uri: str) -> tuple[str, str]:
    if "://" in uri:
        scheme, rest = uri.split("://", 1)
        return scheme.lower(), rest
    return "file", uri


class ObjectStore:
    """The table root on some storage, addressed by paths relative to it.

    Construct with a uri (plain path, ``file://``, ``memory://``, ``s3://`` or another fsspec protocol) and
    storage options (for S3 also Lance/object_store style keys such as ``aws_endpoint``).

    Args:
        uri: the root (`s3://bucket/path`, `file:///path` or a local path, `memory://name`)
        storage_options: backend options such as credentials, endpoint or `fsync`

    Raises:
        StorageError: the uri is empty or its scheme or options are not supported
    """

    uri: str
    scheme: str

    def __init__(self, uri: str, storage_options: dict[str, Any] | None = None) -> None:
        """A store rooted at `uri`."""
        self._init_args = (uri, dict(storage_options or {}))
        self._pid = os.getpid()
        self._arrow_fs: pyarrow.fs.FileSystem | None = None
        self._arrow_lock = threading.Lock()
        self._siblings: dict[str, ObjectStore] = {}  # `sibling`'s stores, by uri
        self._fs: fsspec.AbstractFileSystem | None = None
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
        except Exception as exc:
            if not isinstance(exc, (ImportError, TypeError, *wrappable_errors())):
                raise
            raise StorageError(f"cannot open object store for {uri}: {type(exc).__name__}: {exc}") from exc

    # --- construction ---------------------------------------------------------------------------------
    def _init_local(self, uri: str, options: dict[str, Any]) -> None:
        from fsspec.implementations.local import LocalFileSystem

        root = LocalFileSystem._strip_protocol(uri)
        root = os.path.abspath(os.path.expanduser(root))
        self.scheme = "file"
        self.uri = root if "://" not in uri else f"file://{root}"
        self._fs = LocalFileSystem()
        fsync = options.get("fsync", False)
        self._backend: Backend = LocalBackend(self._fs, root, fsync=bool(fsync) and not is_false(fsync))

    def _init_memory(self, rest: str) -> None:
        from fsspec.implementations.memory import MemoryFileSystem

        self._fs = MemoryFileSystem()
        root = MemoryFileSystem._strip_protocol(rest).rstrip("/")
        self.scheme = "memory"
        self.uri = f"memory://{root.lstrip('/')}"
        self._backend = MemoryBackend(self._fs, root)

    def _init_s3(self, rest: str, options: dict[str, Any]) -> None:
        bucket, _, prefix = rest.partition("/")
        prefix = prefix.strip("/")
        if not bucket:
            raise StorageError(f"an s3 uri needs a bucket: s3://{rest}")
        s3_options, conditional_put = translate_s3_options(options)
        self._s3_options = s3_options
        self.scheme = "s3"
        self.uri = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
        self._backend = S3Backend(shared_s3_client(s3_options), bucket, prefix, conditional_put)

    def _init_other(self, uri: str, scheme: str, options: dict[str, Any]) -> None:
        import fsspec

        fs = self._fs = fsspec.filesystem(scheme, skip_instance_cache=True, **options)
        self.scheme = scheme
        self.uri = uri.rstrip("/")
        root = fs._strip_protocol(uri)
        self._backend = Backend(fs, root.rstrip("/"))

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """An fsspec filesystem on the same storage, for callers that need one (`full_path` names objects in it).

        On S3 it is s3fs's, shared per process and options and built (s3fs imported) on first use: the store's own
        reads, writes and commits go through botocore's client and never need it.
        """
        if self._fs is None:
            self._fs = shared_s3_filesystem(self._s3_options)
        return self._fs

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuild from uri and options in the receiving process (compaction tasks, Spark executors).
        return (self.__class__, self._init_args)

    @property
    def storage_options(self) -> dict[str, Any]:
        """The options this store was opened with (a copy)."""
        return dict(self._init_args[1])

    def sibling(self, uri: str) -> ObjectStore:
        """The store at another `uri` opened with this store's options (a base path, a clone's source);
        cached per uri on this store, so the clients and caches of one are shared by every caller.

        Args:
            uri: the other store's root
        """
        found = self._siblings.get(uri)
        if found is None:
            found = self._siblings[uri] = ObjectStore(uri, self._init_args[1])
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
        """The path of `rel` as ``self.fs`` understands it.

        Args:
            rel: the object's path relative to the store's root
        """
        return self._backend.full(self._clean(rel))

    def arrow_path(self, rel: str) -> str:
        """The path of `rel` for the filesystem returned by :meth:`arrow_filesystem`.

        Args:
            rel: the object's path relative to the store's root
        """
        return self.full_path(rel)

    def arrow_filesystem(self) -> pyarrow.fs.FileSystem:
        """A pyarrow filesystem on the same storage, for reading and writing Parquet natively."""
        with self._arrow_lock:
            if self._arrow_fs is None:
                backend = self._backend
                if self.scheme == "s3" and isinstance(backend, S3Backend):  # shared per process and options
                    self._arrow_fs = shared_arrow_s3_filesystem(self._s3_options, lambda: self.fs, backend.bucket)
                else:
                    self._arrow_fs = self._make_arrow_filesystem()
            return self._arrow_fs

    def _make_arrow_filesystem(self) -> pyarrow.fs.FileSystem:
        import pyarrow.fs as pafs

        if self.scheme == "file":
            return local_arrow_filesystem()
        return pafs.PyFileSystem(pafs.FSSpecHandler(self.fs))

    # --- error contract -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _errors(self, op: str, rel: str) -> Iterator[None]:
        if self._pid != os.getpid():
            # Inherited through fork: the client's connections (and s3fs's event loop) belong to the parent; rebuild.
            self.__init__(*self._init_args)  # type: ignore[misc]
        try:
            yield
        except MvccError:
            raise
        except FileNotFoundError as exc:
            raise ObjectNotFoundError(f"{op}: object {rel!r} not found in {self.uri}") from exc
        except wrappable_errors() as exc:
            raise self._storage_error(op, rel, exc) from exc

    def _storage_error(self, op: str, rel: str, exc: BaseException) -> StorageError:
        """`exc` of store operation `op` on `rel` as a StorageError in the user's words.

        A refused or missing credential says so and what to set; any other failure names the operation
        ("list", "write", ...), the path and the underlying error.
        """
        words = _OPERATION_WORDS.get(op, op)
        where = f"{self.uri.rstrip('/')}/{rel}" if rel else self.uri
        problem = credentials_problem(exc) if self.scheme == "s3" else None
        if problem is not None:
            return StorageError(f"cannot {words} {where}: {problem}")
        return StorageError(f"{words} of {rel!r} in {self.uri} failed: {type(exc).__name__}: {exc}")

    def translate_errors(self, op: str, rel: str) -> contextlib.AbstractContextManager[None]:
        """The store's error contract around I/O done outside it, through `arrow_filesystem()` (pyarrow's own
        S3 client raises a bare OSError): a missing object becomes ObjectNotFoundError, any other failure of
        the store a StorageError naming `op` and `rel`.

        Only OSError (pyarrow's ArrowIOError is one) is translated: a ValueError there is the data's, not the
        store's.

        Args:
            op: the operation, for the message ("write")
            rel: the object's path relative to the root, for the message
        """
        return self._os_errors(op, rel)

    @contextlib.contextmanager
    def _os_errors(self, op: str, rel: str) -> Iterator[None]:
        try:
            yield
        except MvccError:
            raise
        except FileNotFoundError as exc:
            raise ObjectNotFoundError(f"{op}: object {rel!r} not found in {self.uri}") from exc
        except OSError as exc:
            raise self._storage_error(op, rel, exc) from exc

    def _on_backend(self, op: str, rel: str, *args: Any) -> Any:
        """The backend's method `op` on the cleaned `rel` (and `args`), under the error contract."""
        rel = self._clean(rel)
        with self._errors(op, rel):
            return getattr(self._backend, op)(rel, *args)

    # --- reads ----------------------------------------------------------------------------------------
    def get(self, rel: str) -> bytes:
        """The whole object; ObjectNotFoundError if there is none.

        Args:
            rel: the object's path relative to the store's root
        """
        return self._on_backend("get", rel)

    def get_range(self, rel: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the object (shorter at the end of the object, like a slice).

        Args:
            rel: the object's path relative to the store's root
            start: the first byte wanted
            end: the byte after the last one wanted

        Raises:
            ValueError: the range is negative or reversed
            ObjectNotFoundError: there is no such object
        """
        rel = self._clean(rel)
        if start < 0 or end < start:
            raise ValueError(f"bad byte range [{start}, {end}) for {rel!r}")
        with self._errors("get_range", rel):
            if end == start:
                self._backend.head(rel)
                return b""
            return self._backend.get_range(rel, start, end)

    def head(self, rel: str) -> ObjectMeta:
        """Size and modification time of one object; ObjectNotFoundError if there is none.

        Args:
            rel: the object's path relative to the store's root
        """
        return self._on_backend("head", rel)

    def sync(self, rel: str) -> None:
        """After writing `rel` through `arrow_filesystem()`: durable with the local `fsync` option.

        Args:
            rel: the object's path relative to the store's root
        """
        with self._errors("sync", rel):
            self._backend.sync(self._clean(rel))

    def exists(self, rel: str) -> bool:
        """Whether an object (not a "directory") of that name exists.

        Args:
            rel: the object's path relative to the store's root
        """
        try:
            self.head(rel)
        except ObjectNotFoundError:
            return False
        return True

    def list(self, prefix_rel: str = "") -> list[ObjectMeta]:
        """Every object below the "directory" `prefix_rel` (recursively), sorted by path; [] if none.

        Args:
            prefix_rel: the directory to list, relative to the root ('' lists everything)
        """
        prefix = self._clean(prefix_rel)
        with self._errors("list", prefix + "/"):
            return self._backend.list(prefix)

    def list_first(self, prefix_rel: str = "") -> ObjectMeta | None:
        """The lexicographically first object below `prefix_rel`; on S3 one ListObjectsV2 with MaxKeys=1.

        Args:
            prefix_rel: the directory to look in, relative to the root
        """
        prefix = self._clean(prefix_rel)
        with self._errors("list_first", prefix + "/"):
            return self._backend.list_first(prefix)

    # --- writes ---------------------------------------------------------------------------------------
    def put(self, rel: str, data: bytes) -> None:
        """Create or overwrite an object; readers see the old or the new bytes, never a partial object.

        Args:
            rel: the object's path relative to the store's root
            data: the object's bytes
        """
        self._on_backend("put", rel, data)

    def put_new(self, rel: str, data: bytes) -> None:
        """Create an object under a fresh name (a random id) that nothing references until the caller
        publishes it, e.g. in a commit. Readers therefore never look at it while it is written, so a local
        store writes it in place, without the temporary file and rename of `put`; a crash may leave a partial
        file behind, unreferenced like any other orphan. Locally it fails if the name exists. Elsewhere: `put`.

        Args:
            rel: the new object's path (a fresh, random name) relative to the root
            data: the object's bytes
        """
        self._on_backend("put_new", rel, data)

    def put_if_not_exists(self, rel: str, data: bytes) -> bool:
        """Create the object only if its name is free: True if we wrote it, False if the name was taken.

        This is the commit point of the commit protocol; raises CommitNotSupportedError on stores that
        cannot do it atomically.

        Args:
            rel: the object's path relative to the store's root
            data: the object's bytes
        """
        rel = self._clean(rel)
        self.check_commit_supported()
        with self._errors("put_if_not_exists", rel):
            return self._backend.put_if_not_exists(rel, data)

    def rename_if_not_exists(self, src_rel: str, dst_rel: str) -> bool:
        """Move `src_rel` to `dst_rel` only if `dst_rel` is free; False (source kept) if it was taken.

        Args:
            src_rel: the object to move
            dst_rel: its new path, which must be free
        """
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

        Args:
            src_rel: the object to copy
            dst_rel: the path to create, which must be free
            data: `src_rel`'s bytes when the caller has them (spares a read)
        """
        src, dst = self._clean(src_rel), self._clean(dst_rel)
        self.check_commit_supported()
        with self._errors("copy_if_not_exists", f"{src} -> {dst}"):
            return self._backend.copy_if_not_exists(src, dst, data)

    def copy(self, src_rel: str, dst_rel: str) -> None:
        """Copy one object (server-side where the storage can, e.g. S3 CopyObject); overwrites `dst_rel`.

        Args:
            src_rel: the object to copy
            dst_rel: the path to write (overwritten if it exists)
        """
        src, dst = self._clean(src_rel), self._clean(dst_rel)
        with self._errors("copy", f"{src} -> {dst}"):
            self._backend.copy(src, dst)

    def shares_client(self, other: ObjectStore) -> bool:
        """Whether `other` reaches its storage through this store's client (one S3 client, one filesystem), so
        that equal `full_path`s name one object and `copy_from` copies on the server.

        Args:
            other: another store
        """
        mine, theirs = self._backend, other._backend
        if isinstance(mine, S3Backend) and isinstance(theirs, S3Backend):
            return mine.s3 is theirs.s3
        return self.scheme == other.scheme and self._fs is not None and self._fs is other._fs

    def copy_from(self, src: ObjectStore, src_rel: str, dst_rel: str) -> None:
        """Copy `src_rel` of the store `src` to `dst_rel` here (overwritten if it exists): one server-side
        CopyObject when both are S3 stores on one client (`shares_client`), else a read and a put.

        Args:
            src: the store the object is in
            src_rel: its path there
            dst_rel: the path to write here
        """
        mine, theirs = self._backend, src._backend
        if not (isinstance(mine, S3Backend) and isinstance(theirs, S3Backend) and self.shares_client(src)):
            self.put(dst_rel, src.get(src_rel))
            return
        source, dst = src._clean(src_rel), self._clean(dst_rel)
        with self._errors("copy", f"{src.uri}/{source} -> {dst}"):
            mine.copy_key(theirs.bucket, theirs.key(source), mine.key(dst))

    def delete_many(self, rels: Iterable[str]) -> None:
        """Delete objects in batches (S3: DeleteObjects of up to 1000 keys); missing ones are ignored.

        Args:
            rels: the paths of the objects to delete, relative to the root
        """
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
    """The ObjectStore for a table uri (an ObjectStore passes through unchanged).

    Args:
        uri: a table uri (`s3://bucket/path`, `file:///path` or a local path, `memory://name`), or a store already open
        storage_options: backend options such as credentials, endpoint or `fsync` (ignored when `uri` is a store)

    Raises:
        StorageError: the uri is empty or its scheme or options are not supported
    """
    if isinstance(uri, ObjectStore):
        return uri
    return ObjectStore(uri, storage_options)
