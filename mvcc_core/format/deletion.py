"""Deletion vectors: roaring bitmaps (portable format) of deleted row offsets within a fragment."""

from __future__ import annotations

import array
import random
import struct
from collections.abc import Iterable, Sequence

import numpy as np
from pyroaring import BitMap

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import CorruptManifestError
from mvcc_core.format.bases import deletion_store
from mvcc_core.format.naming import deletion_file_path, packed_deletion_file_path
from mvcc_core.io import ObjectStore
from mvcc_core.io.parquet import MISSING, LruCache

# Packed deletion files read by this process, whole: (store uri, path) -> bytes. They are immutable under
# their random names, and a scan asks for every fragment's vector in turn.
_PACKED = LruCache(16)


def deletion_path(fragment_id: int, deletion_file: pb.DeletionFile) -> str:
    """The path (relative to its store's root) of the file holding `fragment_id`'s deletion vector.

    Args:
        fragment_id: the fragment the vector belongs to.
        deletion_file: the fragment's `deletion_file` entry.

    Returns:
        `_deletions/{fragment_id}-{read_version}-{id}.bin`, or for a packed file (several fragments' vectors
        in one, `content_size` set) `_deletions/{read_version}-{id}.bin`.
    """
    if deletion_file.HasField("content_size"):
        return packed_deletion_file_path(deletion_file.read_version, deletion_file.id)
    return deletion_file_path(fragment_id, deletion_file.read_version, deletion_file.id)


def _vector_bytes(store: ObjectStore, path: str, deletion_file: pb.DeletionFile) -> bytes:
    """The serialized vector of a deletion file entry: the whole file, or its slice of a packed file."""
    if not deletion_file.HasField("content_size"):
        return store.get(path)
    key = (store.uri, path)
    data = _PACKED.get(key)
    if data is MISSING:
        data = store.get(path)
        _PACKED.put(key, data)
    start, size = deletion_file.content_offset, deletion_file.content_size
    if start + size > len(data):
        raise CorruptManifestError(
            f"deletion file {store.uri}/{path} has {len(data)} bytes; the manifest places a vector at bytes "
            f"{start}..{start + size}"
        )
    return data[start : start + size]


def read_deletion_vector(
    store: ObjectStore, fragment: pb.DataFragment, base_paths: Iterable[pb.BasePath] = ()
) -> BitMap:
    """The deleted row offsets of `fragment` (empty when it has no deletion file).

    Args:
        store: the table's own store (its root)
        fragment: the fragment whose deleted offsets are read
        base_paths: the table's base paths, needed when the deletion file lives under a base (empty for a table without
            bases)

    Raises:
        CorruptManifestError: the deletion file cannot be decoded or names offsets past the fragment's rows
    """
    if not fragment.HasField("deletion_file"):
        return BitMap()
    store = deletion_store(store, base_paths, fragment.deletion_file)
    path = deletion_path(fragment.id, fragment.deletion_file)
    data = _vector_bytes(store, path, fragment.deletion_file)
    try:
        deleted = BitMap.deserialize(data)
    except Exception as exc:  # pyroaring raises plain ValueError/RuntimeError
        raise CorruptManifestError(f"deletion file {store.uri}/{path} is corrupt: {exc}") from exc
    if deleted and deleted.max() >= fragment.physical_rows:
        raise CorruptManifestError(
            f"deletion file {store.uri}/{path} deletes row offset {deleted.max()} of fragment {fragment.id}, "
            f"whose field physical_rows is {fragment.physical_rows}"
        )
    recorded = fragment.deletion_file.num_deleted_rows
    if recorded and len(deleted) != recorded:
        raise CorruptManifestError(
            f"deletion file {store.uri}/{path} deletes {len(deleted)} rows of fragment {fragment.id}, whose field "
            f"deletion_file.num_deleted_rows is {recorded}"
        )
    return deleted


def write_deletion_vector(store: ObjectStore, fragment_id: int, read_version: int, deleted: BitMap) -> pb.DeletionFile:
    """Write a new deletion file; its id is random so concurrent writers never collide, and nothing reads it
    before a commit names it (`ObjectStore.put_new`).

    Args:
        store: the store whose `_deletions/` receives the file
        fragment_id: the fragment the deleted offsets belong to
        read_version: the table version the writer read; it is part of the file's name
        deleted: every deleted row offset of the fragment (earlier deletions included)

    Returns:
        The deletion file entry to put on the fragment in the next manifest.
    """
    file_id = random.getrandbits(63)
    deletion_file = pb.DeletionFile(
        file_type=pb.DeletionFile.BITMAP, read_version=read_version, id=file_id, num_deleted_rows=len(deleted)
    )
    deleted.run_optimize()
    store.put_new(deletion_path(fragment_id, deletion_file), deleted.serialize())
    return deletion_file


def write_deletion_vectors(
    store: ObjectStore, read_version: int, vectors: Sequence[tuple[int, BitMap]]
) -> tuple[list[pb.DeletionFile], list[str]]:
    """Write the new deletion vectors of one commit: one packed file for two or more fragments (a file
    creation is most of the cost of a small vector; on S3 each is a request), the fragment's own file for one.

    Args:
        store: the table's store (deletion files go under its `_deletions/`).
        read_version: the version the commit read, part of the file name.
        vectors: (fragment id, its whole new deletion vector) pairs.

    Returns:
        The fragments' `deletion_file` entries, in the order of `vectors`, and the paths written.
    """
    if len(vectors) < 2:
        entries = [write_deletion_vector(store, fid, read_version, deleted) for fid, deleted in vectors]
        return entries, [deletion_path(fid, e) for (fid, _), e in zip(vectors, entries, strict=True)]
    file_id = random.getrandbits(63)
    parts, entries, offset = [], [], 0
    for _, deleted in vectors:
        deleted.run_optimize()
        data = deleted.serialize()
        entries.append(
            pb.DeletionFile(
                file_type=pb.DeletionFile.BITMAP,
                read_version=read_version,
                id=file_id,
                num_deleted_rows=len(deleted),
                content_offset=offset,
                content_size=len(data),
            )
        )
        parts.append(data)
        offset += len(data)
    path = packed_deletion_file_path(read_version, file_id)
    store.put_new(path, b"".join(parts))
    return entries, [path]


def live_rows(fragment: pb.DataFragment) -> int:
    """The rows of a fragment that are not deleted, from its manifest entry alone (no file is read).

    Args:
        fragment: the fragment's manifest entry
    """
    deleted = fragment.deletion_file.num_deleted_rows if fragment.HasField("deletion_file") else 0
    return fragment.physical_rows - deleted


def offsets_bitmap(offsets: np.ndarray) -> BitMap:
    """Row offsets as a 32-bit bitmap. pyroaring copies an `array.array('I')` in one call but walks a numpy
    array value by value (about ten times slower).

    Args:
        offsets: row offsets within one fragment (any integer dtype, each below 2**32)
    """
    return BitMap(array.array("I", np.ascontiguousarray(offsets, dtype=np.uint32).tobytes()))


def addresses_serialized(by_fragment: Sequence[tuple[int, BitMap]]) -> bytes:
    """The row addresses (fragment id << 32 | offset) of `by_fragment` (ascending fragment ids, each with its
    offsets) in the portable 64-bit roaring format: the bytes `BitMap64(addresses).serialize()` gives, built
    from the per-fragment bitmaps at hand instead of converting every address again.

    Args:
        by_fragment: (fragment id, bitmap of row offsets) pairs, in ascending fragment id order
    """
    parts = [struct.pack("<Q", len(by_fragment))]
    for fragment_id, offsets in by_fragment:
        parts.append(struct.pack("<I", fragment_id))
        parts.append(offsets.serialize())
    return b"".join(parts)
