"""Rebase: carry a Delete or Update over concurrent Deletes/Updates of the same fragments.

The specification's "Rebase Mechanism" for row-level changes: when ours and theirs touched the same
fragments but not the same rows (their affected row addresses do not intersect), ours is rewritten on top
of the latest version: each shared fragment takes the latest version's files and gets a new deletion
vector, the union of theirs and ours. Same rows, or a shared fragment that is gone from the latest version,
stay a retryable conflict. Ours must be a Delete or a REWRITE_ROWS Update (its new rows were computed from
rows the other writer did not touch, so they stay right); theirs may be either update mode.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pyroaring import BitMap64

from . import operations as ops
from ._proto import table_pb2 as pb
from ._proto import transaction_pb2 as tpb
from .deletion import deletion_path, read_deletion_vector, write_deletion_vector
from .storage import ObjectStore
from .transaction import Transaction


class RowConflict(Exception):
    """Ours and theirs changed the same rows (or a shared fragment is gone): not rebasable."""

    def __init__(self, reason: str, rows: list[int] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.rows = rows or []


def rebasable(ours: ops.Operation, theirs: ops.Operation) -> bool:
    row_level = isinstance(ours, ops.Delete) or (
        isinstance(ours, ops.Update) and ours.update_mode == tpb.Transaction.REWRITE_ROWS
    )
    return row_level and isinstance(theirs, ops.Delete | ops.Update) and bool(ours.affected_rows)


def check_rows(ours: ops.Operation, theirs: ops.Operation) -> None:
    """RowConflict naming up to five shared row addresses, if any."""
    if not theirs.affected_rows:
        raise RowConflict(f"the concurrent {theirs.name} did not record the rows it changed")
    shared = BitMap64.deserialize(ours.affected_rows) & BitMap64.deserialize(theirs.affected_rows)
    if shared:
        rows = [int(x) for x in list(shared)[:5]]
        raise RowConflict(f"both changed {len(shared)} of the same rows", rows)


@dataclass
class Rebased:
    txn: Transaction
    written: list[str]  # new deletion files (removed if the rebased commit fails)
    superseded: list[str]  # our old deletion files, no longer referenced once the rebased commit lands


def rebase(store: ObjectStore, txn: Transaction, latest: pb.Manifest) -> Rebased:
    """Ours on top of `latest` (every concurrent transaction was checked with `check_rows`)."""
    op = txn.operation
    updated = list(op.updated_fragments)
    removed = set(op.deleted_fragment_ids if isinstance(op, ops.Delete) else op.removed_fragment_ids)
    by_id = {f.id: f for f in latest.fragments}
    new_updated: list[pb.DataFragment] = []
    written: list[str] = []
    superseded: list[str] = []
    try:
        for frag in updated:
            current = by_id.get(frag.id)
            if current is None:
                raise RowConflict(f"fragment {frag.id} was removed by a concurrent commit")
            ours_deleted = read_deletion_vector(store, frag, latest.base_paths)
            merged = read_deletion_vector(store, current, latest.base_paths) | ours_deleted
            if merged == ours_deleted and list(current.files) == list(frag.files):
                new_updated.append(frag)  # not touched by them: ours as it is
                continue
            superseded.append(deletion_path(frag.id, frag.deletion_file))
            if len(merged) >= current.physical_rows:
                removed.add(frag.id)
                continue
            deletion_file = write_deletion_vector(store, frag.id, latest.version, merged)
            written.append(deletion_path(frag.id, deletion_file))
            new = pb.DataFragment()
            new.CopyFrom(current)
            new.deletion_file.CopyFrom(deletion_file)
            new_updated.append(new)
    except BaseException:
        store.delete_many(written)
        raise
    for fid in removed:
        if fid not in by_id:
            raise RowConflict(f"fragment {fid} was removed by a concurrent commit")
    if isinstance(op, ops.Delete):
        new_op: ops.Operation = replace(op, updated_fragments=new_updated, deleted_fragment_ids=sorted(removed))
    else:
        new_op = replace(op, updated_fragments=new_updated, removed_fragment_ids=sorted(removed))
    rebased = Transaction(read_version=latest.version, operation=new_op, message=txn.message, properties=txn.properties)
    return Rebased(rebased, written, superseded)
