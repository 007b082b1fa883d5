"""The target rows a merge_insert joins, read from a BTREE on its key instead of the data files when one covers it.

Design notes: docs/guide/row_level_changes.md, "merge_insert, as implemented".
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.format import fragment_reuse as frag_reuse
from mvcc_core.io import ObjectStore
from mvcc_core.read.deleted_rows import live_mask
from mvcc_core.read.index_lookup import BTREE, covered, lookup_keys
from mvcc_core.read.scan import ROW_ADDRESS, Scan


def key_rows_from_index(
    store: ObjectStore,
    manifest: pb.Manifest,
    key: str,
    source_keys: pa.ChunkedArray,
    rest_filter: str | pc.Expression | None = None,
) -> pa.Table | None:
    """The live rows whose `key` is one of `source_keys`, as `(key, _rowaddr)`, answered by a BTREE on `key`.

    A BTREE holds every (value, row address) pair of the fragments it covers, and an Update rewriting the key
    column in place takes its fragments out of the cover (`_unindex`), so for covered fragments the index alone
    says which rows hold a key: no data file is opened. Rows deleted since the build are dropped with the
    fragments' deletion vectors; fragments the index does not cover are scanned with `rest_filter`.

    Args:
        store: the table's store
        manifest: the version the merge reads
        key: the (top-level, integer or string) key column
        source_keys: the source's key column (nulls match nothing)
        rest_filter: what the scan of fragments the index does not cover keeps (None: the source keys' IN list);
            the rows it returns are joined with the source like the index's

    Returns:
        The rows, or None when no BTREE on an integer or string key covers it: the caller scans instead.
    """
    index = _btree(manifest, key)
    if index is None:
        return None
    found = lookup_keys(store, index, pc.unique(source_keys.drop_null()))
    if found is None:
        return None
    values, addresses = found
    moved = frag_reuse.address_map(manifest, index)
    if moved:  # built before compactions that deferred remapping: where those rows are now
        addresses, kept = moved.translate_kept(addresses)
        values = values.filter(pa.array(kept))
    cover = covered(index)
    fragments = {f.id: f for f in manifest.fragments}
    indexed = [fid for fid in cover if fid in fragments]
    fragment_of = (addresses >> np.uint64(32)).astype(np.int64)
    keep = np.isin(fragment_of, np.array(indexed, dtype=np.int64))
    # the hits grouped by fragment (the index orders them by key), then each fragment's deletion vector
    hits = np.flatnonzero(keep)
    hits = hits[np.argsort(fragment_of[hits], kind="stable")]
    ids, starts = np.unique(fragment_of[hits], return_index=True)
    ends = [*starts[1:].tolist(), len(hits)] if len(hits) else []
    for fid, start, end in zip(ids.tolist(), starts.tolist(), ends, strict=True):
        mask = live_mask(store, fragments[fid], manifest.base_paths)
        if mask is not None:
            rows = hits[start:end]
            offsets = (addresses[rows] & np.uint64(0xFFFFFFFF)).astype(np.int64)
            keep[rows] &= mask[np.minimum(offsets, len(mask) - 1)] & (offsets < len(mask))
    parts = [pa.table({key: values.filter(pa.array(keep)), ROW_ADDRESS: pa.array(addresses[keep], pa.uint64())})]
    rest = [f for f in manifest.fragments if f.id not in cover]
    if rest:
        keep_rows = pc.field(key).isin(source_keys.drop_null()) if rest_filter is None else rest_filter
        scan = Scan(store, manifest, [key], keep_rows, with_row_address=True, fragments=rest)
        parts.append(scan.to_table().select([key, ROW_ADDRESS]))
    return pa.concat_tables(parts)


def _btree(manifest: pb.Manifest, key: str) -> pb.IndexMetadata | None:
    """The BTREE index on the top-level column `key` with files, if the table has one."""
    ids = [f.id for f in manifest.fields if f.parent_id == -1 and f.name == key]
    for index in manifest.indices:
        if ids and list(index.fields) == ids and index.index_type == BTREE and index.files:
            return index
    return None
