"""Delete: mark the rows matching a predicate deleted with deletion vectors (one Delete transaction).

Matching rows are found with a row-address scan of the read version, merged into each fragment's
existing deletion vector and written as a new deletion file; a fragment whose rows are all deleted
leaves the manifest (`deleted_fragment_ids`). The transaction records the predicate and the affected
row addresses (a 64-bit roaring bitmap) so the conflict resolver can compare concurrent deletes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc
from pyroaring import BitMap, BitMap64

from . import operations as ops
from ._proto import table_pb2 as pb
from .deletion import deletion_path, read_deletion_vector, write_deletion_vector
from .scan import ROW_ADDRESS, Scan
from .storage import ObjectStore


@dataclass
class DeletePlan:
    """The Delete operation to commit, and the deletion files written for it (removed if the commit fails)."""

    operation: ops.Delete | None
    written: list[str]
    rows_deleted: int


def plan_delete(store: ObjectStore, manifest: pb.Manifest, predicate: str | pc.Expression) -> DeletePlan:
    """Find the live rows matching `predicate` in `manifest` and write the merged deletion vectors."""
    scan = Scan(store, manifest, columns=[], filter=predicate, with_row_address=True)
    matched: dict[int, list[np.ndarray]] = {}
    for batch in scan.to_batches():
        addresses = batch.column(ROW_ADDRESS).to_numpy(zero_copy_only=False).astype(np.uint64)
        fragment_ids = addresses >> np.uint64(32)
        for fid in np.unique(fragment_ids):
            matched.setdefault(int(fid), []).append(addresses[fragment_ids == fid] & np.uint64(0xFFFFFFFF))
    text = predicate if isinstance(predicate, str) else str(predicate)
    if not matched:
        return DeletePlan(None, [], 0)
    by_id = {f.id: f for f in manifest.fragments}
    updated: list[pb.DataFragment] = []
    removed: list[int] = []
    written: list[str] = []
    affected = BitMap64()
    total = 0
    try:
        for fid, chunks in sorted(matched.items()):
            offsets = np.concatenate(chunks)
            total += len(offsets)
            affected.update((np.uint64(fid) << np.uint64(32)) | offsets)
            frag = by_id[fid]
            deleted = read_deletion_vector(store, frag) | BitMap(offsets.astype(np.uint32))
            if len(deleted) >= frag.physical_rows:
                removed.append(fid)
                continue
            deletion_file = write_deletion_vector(store, fid, manifest.version, deleted)
            written.append(deletion_path(fid, deletion_file))
            new = pb.DataFragment()
            new.CopyFrom(frag)
            new.deletion_file.CopyFrom(deletion_file)
            updated.append(new)
    except BaseException:
        store.delete_many(written)
        raise
    op = ops.Delete(
        updated_fragments=updated,
        deleted_fragment_ids=removed,
        predicate=text,
        affected_rows=affected.serialize(),
    )
    return DeletePlan(op, written, total)
