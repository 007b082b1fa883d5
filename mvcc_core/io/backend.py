"""What every storage backend provides to `ObjectStore`, and the object metadata and temporary names they share."""

from __future__ import annotations

import builtins
import contextlib
import functools
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import fsspec

#: Prefix of the temporary files the local backend writes next to their final name. It starts with "_" so
#: that pyarrow's dataset discovery ignores such files and so that they sort after the all-digit manifest
#: names (``list_first`` of ``_versions/`` still finds the newest V2 manifest while a commit is in flight).
TEMP_PREFIX = "_tmp-"
#: The suffix of those temporary files: never a final name's suffix (`.json`, `.manifest`, ...).
TEMP_SUFFIX = ".tmp"


@dataclass(frozen=True)
class ObjectMeta:
    """What a listing or HEAD tells about one object; ``path`` is relative to the table root."""

    path: str
    size: int
    last_modified: datetime | None


def is_temporary(path: str) -> bool:
    """True for the in-flight temporary files of the local backend (retention may delete stale ones).

    Args:
        path: a path listed in a store
    """
    name = path.rsplit("/", 1)[-1]
    return name.startswith(TEMP_PREFIX)


def joined(root: str, rel: str) -> str:
    """`rel` under `root`, either of them possibly empty.

    Args:
        root: a root path or key prefix ('' for none)
        rel: a path relative to it ('' for the root itself)
    """
    if not rel:
        return root
    return f"{root}/{rel}" if root else rel


def temp_name(final_name: str) -> str:
    """A fresh temporary name for a file to be renamed to `final_name` (retention recognizes it: `is_temporary`).

    It starts with `TEMP_PREFIX` and ends with `TEMP_SUFFIX`, never with the final name's suffix, so that no
    listing of `.json` refs or tags, or of manifests, can take a temporary file for one.

    Args:
        final_name: the name the file will have
    """
    return f"{TEMP_PREFIX}{uuid.uuid4().hex}-{final_name[:120]}{TEMP_SUFFIX}"


def to_datetime(value: Any) -> datetime | None:
    """A modification time as an aware UTC datetime (None when it reads as none).

    Args:
        value: a datetime, an epoch number or an ISO-8601 string, as a filesystem reports it
    """
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC)
    if isinstance(value, str):
        try:
            return to_datetime(datetime.fromisoformat(value))
        except ValueError:
            return None
    return None


def _meta_from_info(rel: str, info: dict[str, Any]) -> ObjectMeta:
    modified = None
    for key in ("LastModified", "last_modified", "mtime", "modified", "updated", "created"):
        if info.get(key) is not None:
            modified = to_datetime(info[key])
            if modified is not None:
                break
    return ObjectMeta(rel, int(info.get("size") or info.get("Size") or 0), modified)


@functools.cache
def wrappable_errors() -> tuple[type[BaseException], ...]:
    """Errors of the fs layers that become StorageError (botocore only if it is installed)."""
    try:
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:  # pragma: no cover - s3fs depends on botocore
        return (OSError, ValueError)
    return (OSError, ValueError, BotoCoreError, ClientError)


class Backend:
    """Raw operations on full paths; ObjectStore turns their exceptions into the mvcc error contract.

    Args:
        fs: the fsspec filesystem
        root: the store's root as `fs` names it
    """

    atomic = False

    def __init__(self, fs: fsspec.AbstractFileSystem, root: str) -> None:
        """A backend on `fs` below `root`."""
        self.fs = fs
        self.root = root

    def full(self, rel: str) -> str:
        """The path of `rel` as `fs` names it.

        Args:
            rel: the object's path relative to the backend's root
        """
        return joined(self.root, rel)

    def rel_of(self, full: str) -> str:
        """The path relative to the root of a path `fs` listed.

        Args:
            full: a path as `fs` names it
        """
        return full[len(self.root) + 1 :] if self.root else full.lstrip("/")

    def sync(self, rel: str) -> None:
        """Make a file written outside this backend (by pyarrow) durable; object stores are on ack.

        Args:
            rel: the object's path relative to the store's root
        """

    # --- generic fsspec implementations -------------------------------------------------------------
    def get(self, rel: str) -> bytes:
        """`ObjectStore.get` on a checked path; the filesystem's own errors propagate.

        Args:
            rel: the object's path relative to the store's root
        """
        return self.fs.cat_file(self.full(rel))

    def get_range(self, rel: str, start: int, end: int) -> bytes:
        """`ObjectStore.get_range` on a checked path; the filesystem's own errors propagate.

        Args:
            rel: the object's path relative to the store's root
            start: the first byte wanted
            end: the byte after the last one wanted
        """
        return self.fs.cat_file(self.full(rel), start=start, end=end)

    def head(self, rel: str) -> ObjectMeta:
        """`ObjectStore.head` on a checked path; the filesystem's own errors propagate.

        Args:
            rel: the object's path relative to the store's root
        """
        info = self.fs.info(self.full(rel))
        if info.get("type") != "file":
            raise FileNotFoundError(rel)
        return _meta_from_info(rel, info)

    def put(self, rel: str, data: bytes) -> None:
        """`ObjectStore.put` on a checked path; the filesystem's own errors propagate.

        Args:
            rel: the object's path relative to the store's root
            data: the object's bytes
        """
        self.fs.pipe_file(self.full(rel), data)

    def put_if_not_exists(self, rel: str, data: bytes) -> bool:
        """`ObjectStore.put_if_not_exists` on a checked path; the filesystem's own errors propagate.

        Args:
            rel: the object's path relative to the store's root
            data: the object's bytes
        """
        raise NotImplementedError

    def put_new(self, rel: str, data: bytes) -> None:
        """`ObjectStore.put_new` on a checked path; the filesystem's own errors propagate.

        Args:
            rel: the new object's path (a fresh, random name) relative to the root
            data: the object's bytes
        """
        self.put(rel, data)

    def rename_if_not_exists(self, src: str, dst: str) -> bool:
        """`ObjectStore.rename_if_not_exists` on a checked path; the filesystem's own errors propagate.

        Args:
            src: the object to move, relative to the root
            dst: its new path, which must be free
        """
        raise NotImplementedError

    def copy_if_not_exists(self, src: str, dst: str, data: bytes | None) -> bool:
        """`ObjectStore.copy_if_not_exists` on a checked path; the filesystem's own errors propagate.

        Args:
            src: the object to copy, relative to the root
            dst: the path to create, which must be free
            data: `src`'s bytes when the caller has them (spares a read)
        """
        return self.put_if_not_exists(dst, self.get(src) if data is None else data)

    def copy(self, src: str, dst: str) -> None:
        """`ObjectStore.copy` on a checked path; the filesystem's own errors propagate.

        Args:
            src: the object to copy, relative to the root
            dst: the path written (an object there is replaced)
        """
        if not self.fs.isfile(self.full(src)):
            raise FileNotFoundError(src)
        self.fs.cp_file(self.full(src), self.full(dst))

    def list(self, prefix: str) -> list[ObjectMeta]:
        """`ObjectStore.list` on a checked path; the filesystem's own errors propagate.

        Args:
            prefix: the directory to list, relative to the root ('' lists everything)
        """
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
        """`ObjectStore.list_first` on a checked path; the filesystem's own errors propagate.

        Args:
            prefix: the directory searched, relative to the root ('' searches everything)
        """
        found = self.list(prefix)
        return found[0] if found else None

    def delete_many(self, rels: builtins.list[str]) -> None:
        """`ObjectStore.delete_many` on a checked path; the filesystem's own errors propagate.

        Args:
            rels: the paths of the objects to delete, relative to the root
        """
        for rel in rels:
            with contextlib.suppress(FileNotFoundError):
                self.fs.rm_file(self.full(rel))
