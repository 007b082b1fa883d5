"""The local-disk backend: fsynced temporary files hard-linked to their final names."""

from __future__ import annotations

import builtins
import contextlib
import errno
import functools
import os
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from mvcc_core.errors import CommitNotSupportedError
from mvcc_core.failpoints import failpoint
from mvcc_core.io.backend import Backend, ObjectMeta, temp_name

if TYPE_CHECKING:
    import fsspec
    import pyarrow.fs


class LocalBackend(Backend):
    """A local directory, through ``os`` directly: the atomic primitives need link/replace semantics.

    `fsync`: make every write durable against power loss (file contents and directory entries), as
    object_store's `LocalFileSystem::with_fsync(true)`; off by default like it and delta-rs. Commits are
    atomic either way (a manifest appears by link, whole), and a killed process loses nothing it was
    told was committed; only an OS crash or power cut can lose recent versions without it.

    Args:
        fs: the local fsspec filesystem
        root: the directory
        fsync: make every write durable (fsync the file and its directory) before it returns
    """

    atomic = True

    def __init__(self, fs: fsspec.AbstractFileSystem, root: str, fsync: bool = False) -> None:
        """A backend on a local directory."""
        super().__init__(fs, root)
        self.fsync = fsync

    def sync(self, rel: str) -> None:
        """fsync the file and its directory (nothing when the backend was opened without fsync).

        Args:
            rel: the object's path relative to the store's root
        """
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
        """The absolute local path of `rel` (the root itself for '').

        Args:
            rel: the object's path relative to the backend's root
        """
        if not rel:
            return self.root
        return f"{self.root.rstrip('/')}/{rel}"

    def rel_of(self, full: str) -> str:
        """The path of the local file `full` relative to the root, with '/' separators.

        Args:
            full: a path as `fs` names it
        """
        return os.path.relpath(full, self.root).replace(os.sep, "/")

    def get(self, rel: str) -> bytes:
        """The whole file; a directory in the way reads as a missing file (FileNotFoundError).

        Args:
            rel: the object's path relative to the store's root
        """
        try:
            with open(self.full(rel), "rb") as f:
                return f.read()
        except (IsADirectoryError, NotADirectoryError):
            raise FileNotFoundError(rel) from None

    def get_range(self, rel: str, start: int, end: int) -> bytes:
        """Bytes `start` up to `end` of the file (fewer when the file ends first).

        Args:
            rel: the object's path relative to the store's root
            start: the first byte wanted
            end: the byte after the last one wanted
        """
        try:
            with open(self.full(rel), "rb") as f:
                f.seek(start)
                return f.read(end - start)
        except (IsADirectoryError, NotADirectoryError):
            raise FileNotFoundError(rel) from None

    def head(self, rel: str) -> ObjectMeta:
        """The size and modification time of the file; anything but a regular file is a missing file
        (FileNotFoundError).

        Args:
            rel: the object's path relative to the store's root
        """
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
        tmp = os.path.join(parent, temp_name(name))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                if sync:
                    f.flush()
                    os.fsync(f.fileno())
            failpoint("store.local.after_temp")
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return tmp

    def put(self, rel: str, data: bytes) -> None:
        """Write `data` to a temporary file beside `rel` and rename it over `rel`: readers see the old bytes or the new,
        never part.

        Args:
            rel: the object's path relative to the store's root
            data: the object's bytes
        """
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
        """Create `rel` with `data` in place (exclusive create, no temporary name: nothing reads the fresh name before
        the caller publishes it).

        Args:
            rel: the new object's path (a fresh, random name) relative to the root
            data: the object's bytes
        """
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
        """Write a temporary file and hard-link it to `rel`: the link fails when `rel` exists, so exactly one writer
        wins.

        Args:
            rel: the object's path relative to the store's root
            data: the object's bytes

        Returns:
            True if this call created `rel`, False if it existed.
        """
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
        """Hard-link `src` to `dst` (failing when `dst` exists), then unlink `src`.

        Args:
            src: the object to move, relative to the root
            dst: its new path, which must be free

        Returns:
            True if `dst` was created, False if it existed (`src` is then left as it was).

        Raises:
            FileNotFoundError: `src` is not a file.
        """
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
        """One hard link from `src` to `dst` (no bytes written; `src` is complete and never rewritten); `data` is not
        needed.

        Args:
            src: the object to copy, relative to the root
            dst: the path to create, which must be free
            data: `src`'s bytes when the caller has them (spares a read)

        Returns:
            True if `dst` was created, False if it existed.

        Raises:
            FileNotFoundError: `src` is not a file.
        """
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
        """Copy `src` to a temporary file beside `dst` and rename it over `dst` (fsynced when the backend fsyncs).

        Args:
            src: the object to copy, relative to the root
            dst: the path written (an object there is replaced)

        Raises:
            FileNotFoundError: `src` is not a file.
        """
        import shutil

        src_full, dst_full = self.full(src), self.full(dst)
        if not os.path.isfile(src_full):
            raise FileNotFoundError(src)
        parent, name = os.path.split(dst_full)
        os.makedirs(parent, exist_ok=True)
        tmp = os.path.join(parent, temp_name(name))
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
        """Every regular file below `prefix`, recursively, sorted by path.

        Args:
            prefix: the directory to list, relative to the root ('' lists everything)
        """
        return sorted(self._walk(prefix), key=lambda m: m.path)

    def list_first(self, prefix: str) -> ObjectMeta | None:
        """The first object by name: names are sorted per directory, and only the winner is stat-ed.

        Args:
            prefix: the directory searched, relative to the root ('' searches everything)
        """

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

    def delete_many(self, rels: builtins.list[str]) -> None:
        """Unlink each path (a missing one is skipped); many paths are unlinked on a few threads.

        Args:
            rels: the paths of the objects to delete, relative to the root
        """

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


@functools.cache
def local_arrow_filesystem() -> pyarrow.fs.FileSystem:
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
            return (local_arrow_filesystem, ())

    return LocalArrowFileSystem()
