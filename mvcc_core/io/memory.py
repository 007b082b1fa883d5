"""The ``memory://`` backend: one process-wide store whose check-and-set is a lock."""

from __future__ import annotations

import builtins
import threading

from mvcc_core.io.backend import Backend, ObjectMeta, to_datetime

# memory:// is process-local; one lock makes its check-and-set atomic for all threads of the process.
_MEMORY_LOCK = threading.RLock()


class MemoryBackend(Backend):
    """fsspec's in-memory filesystem; its dict is process-wide, so is the lock that guards check-and-set.

    The filesystem keys every object by an absolute path ("/t/_versions/1.manifest"); a table at the root
    of the store (``memory://``, root "") has its objects at "/<rel>", so that listings find them.
    """

    atomic = True

    def full(self, rel: str) -> str:
        """The path of `rel` in fsspec's process-wide memory filesystem (below the root, or at `/` when there is none).

        Args:
            rel: the object's path relative to the backend's root
        """
        if self.root:
            return super().full(rel)
        return f"/{rel}"

    def put(self, rel: str, data: bytes) -> None:
        """Write `data` to `rel`, replacing what is there (under the memory backend's lock).

        Args:
            rel: the object's path relative to the store's root
            data: the object's bytes
        """
        with _MEMORY_LOCK:
            self.fs.pipe_file(self.full(rel), bytes(data))

    def head(self, rel: str) -> ObjectMeta:
        """The size and time of the last put of `rel`.

        Args:
            rel: the object's path relative to the store's root

        Raises:
            FileNotFoundError: there is no object at `rel`.
        """
        full = self.full(rel)
        with _MEMORY_LOCK:  # three lookups of one object: none may see another thread's delete between them
            if not self.fs.isfile(full):
                raise FileNotFoundError(rel)
            # "created" (the time of the last put: every put replaces the file), as its listings report it
            return ObjectMeta(rel, self.fs.size(full), to_datetime(self.fs.created(full)))

    def list(self, prefix: str) -> list[ObjectMeta]:
        """`Backend.list` under the memory backend's lock: fsspec's memory filesystem walks the dict of every
        object, which a put or delete in another thread would change under it ("dictionary changed size").

        Args:
            prefix: the directory to list, relative to the root ('' lists everything)
        """
        with _MEMORY_LOCK:
            return super().list(prefix)

    def put_if_not_exists(self, rel: str, data: bytes) -> bool:
        """Write `data` to `rel` unless it exists, checked and written under one lock.

        Args:
            rel: the object's path relative to the store's root
            data: the object's bytes

        Returns:
            True if this call created `rel`, False if it existed.
        """
        full = self.full(rel)
        with _MEMORY_LOCK:
            if self.fs.exists(full):
                return False
            self.fs.pipe_file(full, bytes(data))
            return True

    def rename_if_not_exists(self, src: str, dst: str) -> bool:
        """Move `src` to `dst` unless `dst` exists, under one lock.

        Args:
            src: the object to move, relative to the root
            dst: its new path, which must be free

        Returns:
            True if `dst` was created, False if it existed.

        Raises:
            FileNotFoundError: `src` is not an object.
        """
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
        """`Backend.copy` under the memory backend's lock.

        Args:
            src: the object to copy, relative to the root
            dst: the path written (an object there is replaced)
        """
        with _MEMORY_LOCK:
            super().copy(src, dst)

    def delete_many(self, rels: builtins.list[str]) -> None:
        """`Backend.delete_many` under the memory backend's lock.

        Args:
            rels: the paths of the objects to delete, relative to the root
        """
        with _MEMORY_LOCK:
            super().delete_many(rels)
