"""Delete: mark the rows matching a predicate deleted with deletion vectors (one Delete transaction).

Matching rows are found with a row-address scan of the read version, merged into each fragment's
existing deletion vector and written as a new deletion file; a fragment whose rows are all deleted
leaves the manifest (`deleted_fragment_ids`). The transaction records the predicate and the affected
row addresses (a 64-bit roaring bitmap) so the conflict resolver can compare concurrent deletes.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.format import operations
from mvcc_core.format.deletion import (
    addresses_serialized,
    offsets_bitmap,
    read_deletion_vector,
    write_deletion_vectors,
)
from mvcc_core.io import ObjectStore
from mvcc_core.read.bound_filter import BoundFilter
from mvcc_core.read.scan import ROW_ADDRESS, Scan
from mvcc_core.read.system_filter import SystemFilteredScan, filter_system_columns


@dataclass
class DeletePlan:
    """The Delete operation to commit, and the deletion files written for it (removed if the commit fails)."""

    operation: operations.Delete | None
    written: list[str]
    rows_deleted: int


def find_rows(
    store: ObjectStore,
    manifest: pb.Manifest,
    predicate: str | pc.Expression | None,
    columns: list[str],
    with_row_id: bool = False,
) -> pa.Table:
    """The live rows matching `predicate` (all rows for None), with `columns` and their `_rowaddr`
    (and `_rowid` when asked).

    Args:
        store: the table's store
        manifest: the version the operation reads
        predicate: the rows wanted, SQL or an Arrow Expression (None: every live row)
        columns: the table columns to return besides the row addresses
        with_row_id: add the `_rowid` column
    """
    return _row_scan(store, manifest, predicate, columns, with_row_id).to_table()


def _row_scan(
    store: ObjectStore,
    manifest: pb.Manifest,
    predicate: str | pc.Expression | None,
    columns: list[str],
    with_row_id: bool = False,
) -> Scan | SystemFilteredScan:
    """The row-address scan `find_rows` reads (see there)."""
    names = [f.name for f in manifest.fields if f.parent_id == -1]
    system = filter_system_columns(predicate, names)  # `_rowid = 3`, as pylance
    scan = Scan(store, manifest, columns, None if system else predicate, with_row_address=True, with_row_id=with_row_id)
    return SystemFilteredScan(scan, predicate) if system else scan


# A predicate longer than this is recorded in the Delete as the range of its IN list when it is one (see
# `recorded_predicate`).
RECORDED_PREDICATE_CHARS = 4_096


def recorded_predicate(predicate: str, bound: BoundFilter | None) -> str:
    """The predicate a Delete records: `predicate` itself, or for a long one that is a single IN list over an
    integer or string column (a GDPR-style erasure of thousands of keys) the range of its values, a condition
    every deleted row satisfies. Nothing reads the text back to decide which rows the delete touched: conflicts
    are decided by the affected row addresses, and a branch's publish re-runs the predicate recorded whole in
    the replay property (docs/guide/row_level_changes.md, "What a Delete records").

    Args:
        predicate: the delete's predicate as text (SQL, or an Arrow Expression's text)
        bound: the predicate as the scan bound it (None: a filter naming system columns)

    Returns:
        The text for the transaction's `predicate` field.
    """
    if len(predicate) <= RECORDED_PREDICATE_CHARS or bound is None or len(bound.conjuncts) != 1:
        return predicate
    comparison = bound.conjuncts[0].comparison
    if comparison is None or comparison.op != "in" or not isinstance(comparison.value, pa.Array):
        return predicate
    values = comparison.value
    if not (pa.types.is_integer(values.type) or pa.types.is_string(values.type)) or not len(values.drop_null()):
        return predicate
    bounds = pc.min_max(values)
    low, high = (_sql_literal(bounds[end].as_py()) for end in ("min", "max"))
    column = '"' + comparison.column.replace('"', '""') + '"'
    return f"{column} >= {low} AND {column} <= {high}"


def _sql_literal(value: int | str) -> str:
    return str(value) if isinstance(value, int) else "'" + value.replace("'", "''") + "'"


@dataclass
class DeletedRows:
    """New deletion vectors for the rows at some addresses, ready to go into a Delete or Update."""

    updated_fragments: list[pb.DataFragment]
    removed_fragment_ids: list[int]
    affected_rows: bytes
    written: list[str]


def delete_addresses(store: ObjectStore, manifest: pb.Manifest, addresses: np.ndarray) -> DeletedRows:
    """Merge the row `addresses` into their fragments' deletion vectors and write the new files.

    A fragment left without live rows is listed in `removed_fragment_ids` instead.

    Args:
        store: the table's store
        manifest: the version the operation reads
        addresses: the row addresses to delete (fragment id << 32 | offset), sorted or not
    """
    addresses = np.asarray(addresses, dtype=np.uint64)
    if len(addresses) > 1 and not (addresses[1:] >= addresses[:-1]).all():  # a scan gives them in order
        addresses = np.sort(addresses)
    fragment_ids = addresses >> np.uint64(32)
    # each fragment's addresses are one run of the sorted array: its first position, without np.unique's sort
    starts = np.flatnonzero(np.diff(fragment_ids)) + 1
    starts = np.concatenate([np.zeros(min(len(addresses), 1), dtype=np.int64), starts])
    ids = fragment_ids[starts]
    by_id = {f.id: f for f in manifest.fragments}
    bounds = [*starts[1:].tolist(), len(addresses)]
    low = (addresses & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    groups = [
        (fid, offsets_bitmap(low[start:end]))
        for fid, start, end in zip(ids.tolist(), starts.tolist(), bounds, strict=True)
    ]
    affected = addresses_serialized(groups)

    def merged(group: tuple[int, BitMap]) -> BitMap:
        """The fragment's old deletion vector with the new offsets."""
        fragment = by_id[group[0]]
        if not fragment.HasField("deletion_file"):
            return group[1]
        return read_deletion_vector(store, fragment, manifest.base_paths) | group[1]

    # the old vectors: a packed file is read once (cached); on S3 per-fragment files are a round trip each
    if store.scheme in ("file", "memory") or len(groups) < 2:
        vectors = [merged(g) for g in groups]
    else:
        with ThreadPoolExecutor(max_workers=8) as pool:
            vectors = list(pool.map(merged, groups))
    # a fragment left without live rows leaves the manifest instead of getting a vector
    results: list[pb.DataFragment | None] = [None] * len(groups)
    kept = [i for i, ((fid, _), deleted) in enumerate(zip(groups, vectors, strict=True))
            if len(deleted) < by_id[fid].physical_rows]  # fmt: skip
    entries, written = write_deletion_vectors(store, manifest.version, [(groups[i][0], vectors[i]) for i in kept])
    for i, entry in zip(kept, entries, strict=True):
        new = pb.DataFragment()
        new.CopyFrom(by_id[groups[i][0]])
        new.deletion_file.CopyFrom(entry)
        results[i] = new
    updated = [r for r in results if r is not None]
    removed = [fid for (fid, _), r in zip(groups, results, strict=True) if r is None]
    return DeletedRows(updated, removed, affected, written)


def plan_delete(store: ObjectStore, manifest: pb.Manifest, predicate: str | pc.Expression) -> DeletePlan:
    """Find the live rows matching `predicate` in `manifest` and write the merged deletion vectors.

    Args:
        store: the table's store
        manifest: the version the operation reads
        predicate: the rows to delete, SQL or an Arrow Expression
    """
    scan = _row_scan(store, manifest, predicate, [])
    matched = scan.to_table()
    if matched.num_rows == 0:
        return DeletePlan(None, [], 0)
    rows = delete_addresses(store, manifest, matched.column(ROW_ADDRESS).to_numpy())
    bound = scan.bound if isinstance(scan, Scan) else None
    op = operations.Delete(
        updated_fragments=rows.updated_fragments,
        deleted_fragment_ids=rows.removed_fragment_ids,
        predicate=recorded_predicate(predicate if isinstance(predicate, str) else str(predicate), bound),
        affected_rows=rows.affected_rows,
    )
    return DeletePlan(op, rows.written, matched.num_rows)
