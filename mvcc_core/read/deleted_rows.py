"""A file's deleted rows in a scan: the live mask of a fragment (cached per deletion file) and dropping the
deleted rows of decoded files (the scan's whole-file and streamed reads)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.format.bases import deletion_store
from mvcc_core.format.deletion import read_deletion_vector
from mvcc_core.io import ObjectStore
from mvcc_core.io.parquet import MISSING, LruCache

# Live masks of fragments of at most `_CACHED_MASK_ROWS` rows, by deletion file (immutable under its random
# name): a scan of small fragments otherwise reads, decodes and checks every vector again (at most ~32 MB).
_CACHED_MASK_ROWS = 65_536
_MASKS = LruCache(512)


def live_mask(store: ObjectStore, fragment: pb.DataFragment, base_paths: Iterable[pb.BasePath]) -> np.ndarray | None:
    """False at the fragment's deleted offsets, True elsewhere; None when it has no deletion file.

    The array is read-only: small fragments' masks are shared by the scans of this process.

    Args:
        store: the table's own store (its root)
        fragment: the fragment whose deleted offsets are read
        base_paths: the table's base paths (where a deletion file kept outside the table's root lives)

    Returns:
        One bool per physical row of the fragment, or None.

    Raises:
        CorruptManifestError: the deletion file cannot be decoded or disagrees with the fragment's entry
    """
    if not fragment.HasField("deletion_file"):
        return None
    key = None
    if fragment.physical_rows <= _CACHED_MASK_ROWS:
        owner = deletion_store(store, base_paths, fragment.deletion_file)
        key = (owner.uri, fragment.id, fragment.physical_rows, fragment.deletion_file.SerializeToString())
        found = _MASKS.get(key)
        if found is not MISSING:
            return found
    deleted = read_deletion_vector(store, fragment, base_paths)
    mask = None
    if deleted:
        mask = np.ones(fragment.physical_rows, dtype=bool)
        offsets = deleted.to_array()  # an array.array of C unsigned ints: viewed, not copied
        mask[np.frombuffer(offsets, dtype=np.dtype(offsets.typecode))] = False
        mask.flags.writeable = False
    if key is not None:
        _MASKS.put(key, mask)
    return mask


def selection(live: np.ndarray) -> pa.BooleanArray:
    """`live` as an Arrow boolean array, packed by numpy (`pa.array` of a bool array costs ~15x more: 55 us
    against 4 us for 23,000 rows).

    Args:
        live: one bool per row

    Returns:
        The same values as an Arrow array without nulls.
    """
    bits = np.packbits(live, bitorder="little")
    return pa.BooleanArray.from_buffers(pa.bool_(), len(live), [None, pa.py_buffer(bits)])


def drop_deleted(table: pa.Table, live: np.ndarray) -> pa.Table:
    """The rows of `table` where `live` is True, in order.

    A table of one chunk per column (one decoded file) is filtered whole by `Table.filter`: Arrow turns the mask
    into row indices of the narrowest type once and takes them from every column, ~15 % less CPU than filtering
    each column apart (7 files of the week's events, 120,000 rows each, read as the scan reads them; 1 % deleted:
    9.8 against 11.7 ms, 5 %: 11.2 against 13.2 ms; docs/guide/row_level_changes.md, "Full scans over deletion
    vectors", fifth round). Over several chunks (a run of small files concatenated) Arrow takes chunk by chunk,
    slower than filtering each column with the whole mask (12 files of 500 rows: 250 against 140 us), so those
    keep the column-by-column filter, or take row indices above `TAKE_DELETED_SHARE` deleted.

    Args:
        table: the rows of one file (or a slice of them, or consecutive files), in offset order
        live: one bool per row of `table`, False at a deleted row

    Returns:
        The live rows, in the same order and schema.
    """
    kept = int(np.count_nonzero(live))
    if kept == len(live):
        return table
    if all(column.num_chunks == 1 for column in table.columns):
        return table.filter(selection(live))
    if len(live) - kept >= TAKE_DELETED_SHARE * len(live):
        return table.take(np.flatnonzero(live))
    mask = selection(live)
    return pa.Table.from_arrays([pc.filter(column, mask) for column in table.columns], schema=table.schema)


def drop_deleted_runs(files: Sequence[tuple[pa.Table, np.ndarray | None]]) -> list[pa.Table]:
    """The live rows of consecutive decoded files, `(rows, live mask or None)` each, in order.

    Consecutive files with deletions (and one schema) are dropped from together, one filter per column for the
    run instead of one per column and file (a few KB files: most of the cost is the kernels' calls); a file
    without deletions is passed on as it is, uncopied.

    Args:
        files: each file's decoded rows and its live mask (None: no row deleted), in scan order

    Returns:
        Tables of live rows whose concatenation is the files' live rows in order.
    """
    out: list[pa.Table] = []
    run: list[tuple[pa.Table, np.ndarray]] = []

    def flush() -> None:
        if len(run) == 1:
            out.append(drop_deleted(*run[0]))
        elif run:
            tables = pa.concat_tables([table for table, _ in run])
            out.append(drop_deleted(tables, np.concatenate([live for _, live in run])))
        run.clear()

    for table, live in files:
        if live is None or (run and not table.schema.equals(run[0][0].schema)):
            flush()
        if live is None:
            out.append(table)
        else:
            run.append((table, live))
    flush()
    return out


# The share of deleted rows above which `drop_deleted` takes row indices rather than filtering each column.
TAKE_DELETED_SHARE = 0.025
