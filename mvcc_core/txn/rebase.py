"""Rebase: carry a transaction over a concurrent one that the rules say it can absorb.

Design notes: docs/guide/row_level_changes.md, "Rebasing a row-level change".
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TypeGuard

from pyroaring import BitMap64

from mvcc_core._proto import table_pb2 as pb
from mvcc_core._proto import transaction_pb2 as tpb
from mvcc_core.format import fragment_reuse as frag_reuse
from mvcc_core.format import operations, row_ids
from mvcc_core.format.deletion import deletion_path, read_deletion_vector, write_deletion_vector
from mvcc_core.format.fragments import field_subtree, tombstone
from mvcc_core.format.naming import FRAG_REUSE_INDEX, SINGLETON_INDICES
from mvcc_core.io import ObjectStore
from mvcc_core.txn.rewrite_rebase import MappingError, rebase_rewrite
from mvcc_core.txn.transaction import Transaction


class RowConflict(Exception):
    """Ours and theirs changed the same rows (or a shared fragment is gone): not rebasable.

    Args:
        reason: what the two transactions both changed, in words
        rows: up to five shared row addresses
    """

    def __init__(self, reason: str, rows: list[int] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.rows = rows or []


# the operations that record the rows they change (`affected_rows`) and can be rebased row by row
_ROW_CHANGES = operations.Delete | operations.Update


def _row_level(ours: operations.Operation, theirs: operations.Operation) -> bool:
    return isinstance(ours, _ROW_CHANGES) and isinstance(theirs, _ROW_CHANGES) and bool(ours.affected_rows)


def _rewrites_columns(op: operations.Operation) -> TypeGuard[operations.Update]:
    return isinstance(op, operations.Update) and op.update_mode == tpb.Transaction.REWRITE_COLUMNS


def _writes_fri(op: operations.Operation) -> TypeGuard[operations.Rewrite | operations.CreateIndex]:
    return frag_reuse.carried_by(op) or frag_reuse.trimmed_by(op)


def _rewrite_over_deletions(ours: operations.Operation, theirs: operations.Operation) -> bool:
    """Ours a Rewrite, theirs a Delete or Update: the deletions are carried onto our new fragments
    (`rewrite_rebase.py`; `conflicts` decided the mapping is known)."""
    return isinstance(ours, operations.Rewrite) and isinstance(theirs, operations.Delete | operations.Update)


def rebasable(ours: operations.Operation, theirs: operations.Operation) -> bool:
    """Whether ours can be rebased on theirs instead of being refused (row-level changes, two fragment reuse writers, a
    Rewrite over deletions).

    Args:
        ours: our transaction's operation
        theirs: the concurrent transaction's operation
    """
    return (
        _row_level(ours, theirs)
        or (_writes_fri(ours) and (_writes_fri(theirs) or isinstance(theirs, operations.CreateIndex)))
        or _rewrite_over_deletions(ours, theirs)
    )


def check_rows(ours: operations.Operation, theirs: operations.Operation) -> None:
    """RowConflict naming up to five shared row addresses, if any (row-level rebases only).

    Args:
        ours: our transaction's operation
        theirs: the concurrent transaction's operation

    Raises:
        RowConflict: both changed the same rows, or theirs did not record which rows it changed
    """
    if _rewrite_over_deletions(ours, theirs) and _rewrites_columns(theirs):
        raise RowConflict(f"the concurrent {theirs.name} rewrote column values of rows the Rewrite copied")
    if not (isinstance(ours, _ROW_CHANGES) and isinstance(theirs, _ROW_CHANGES) and ours.affected_rows):
        return  # not a row-level rebase (`_row_level`)
    if not theirs.affected_rows:
        raise RowConflict(f"the concurrent {theirs.name} did not record the rows it changed")
    shared = BitMap64.deserialize(ours.affected_rows) & BitMap64.deserialize(theirs.affected_rows)
    if shared:
        rows = [int(x) for x in list(shared)[:5]]
        raise RowConflict(f"both changed {len(shared)} of the same rows", rows)
    if _rewrites_columns(ours) and _rewrites_columns(theirs):
        same = sorted(set(ours.fields_modified) & set(theirs.fields_modified))
        if same and {f.id for f in ours.updated_fragments} & {f.id for f in theirs.updated_fragments}:
            # each column file holds the whole fragment: theirs has our rows' old values and ours theirs'
            raise RowConflict(f"both rewrote field(s) {same} of the same fragments")


@dataclass
class Rebased:
    txn: Transaction
    written: list[str]  # new deletion files (removed if the rebased commit fails)
    superseded: list[str]  # our old deletion files, no longer referenced once the rebased commit lands


def rebase(store: ObjectStore, txn: Transaction, latest: pb.Manifest) -> Rebased:
    """Ours on top of `latest` (every concurrent transaction was checked with `check_rows`).

    Args:
        store: the table's store
        txn: our transaction
        latest: the manifest of the latest committed version

    Raises:
        RowConflict: ours cannot be carried onto `latest`
    """
    op = txn.operation
    if isinstance(op, operations.Rewrite):
        try:
            op, written, superseded = rebase_rewrite(store, op, latest, row_ids.enabled(latest))
        except MappingError as exc:
            raise RowConflict(f"the Rewrite cannot carry the concurrent deletions: {exc}") from None
        if _writes_fri(op):
            op = _rebase_frag_reuse(op, latest)
        return Rebased(replace_txn(txn, op, latest.version), written, superseded)
    if _writes_fri(op):
        return Rebased(replace_txn(txn, _rebase_frag_reuse(op, latest), latest.version), [], [])
    if _rewrites_columns(op):
        return Rebased(replace_txn(txn, _rebase_column_rewrite(op, latest), latest.version), [], [])
    if not isinstance(op, _ROW_CHANGES):  # `rebasable` lets no other operation through
        raise TypeError(f"a {op.name} is not rebased row by row")
    updated = list(op.updated_fragments)
    removed = set(op.deleted_fragment_ids if isinstance(op, operations.Delete) else op.removed_fragment_ids)
    by_id = {f.id: f for f in latest.fragments}
    new_updated: list[pb.DataFragment] = []
    written = []
    superseded = []
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
    # a packed deletion file of ours stays while a fragment we did not rebase still names it
    kept = {deletion_path(f.id, f.deletion_file) for f in new_updated if f.HasField("deletion_file")}
    superseded = [p for p in superseded if p not in kept]
    if isinstance(op, operations.Delete):
        new_op: operations.Delete | operations.Update = replace(
            op, updated_fragments=new_updated, deleted_fragment_ids=sorted(removed)
        )
    else:
        new_op = replace(op, updated_fragments=new_updated, removed_fragment_ids=sorted(removed))
    return Rebased(replace_txn(txn, new_op, latest.version), written, superseded)


def _rebase_column_rewrite(op: operations.Update, latest: pb.Manifest) -> operations.Update:
    """A REWRITE_COLUMNS update on the latest fragments: their files and deletion vector, our column files.

    Our new files hold every physical row of a fragment (offsets never move), so they fit the latest
    fragment as long as theirs did not rewrite the same fields (checked in `check_rows`).
    """
    by_id = {f.id: f for f in latest.fragments}
    ours_ids = {f.id for f in field_subtree(list(latest.fields), set(op.fields_modified))}
    updated = []
    for frag in op.updated_fragments:
        current = by_id.get(frag.id)
        if current is None:
            raise RowConflict(f"fragment {frag.id} was removed by a concurrent commit")
        latest_paths = {f.path for f in current.files}
        ours_new = [f for f in frag.files if f.path not in latest_paths and {i for i in f.fields if i >= 0} & ours_ids]
        merged = pb.DataFragment()
        merged.CopyFrom(current)
        tombstone(merged, ours_ids)
        merged.files.extend(ours_new)
        updated.append(merged)
    return replace(op, updated_fragments=updated)


def replace_txn(txn: Transaction, op: operations.Operation, read_version: int) -> Transaction:
    """`txn` with another operation and read version (its message and properties kept).

    Args:
        txn: the transaction being rebased
        op: its rebased operation
        read_version: the version it is now built on
    """
    return Transaction(
        read_version=read_version, operation=op, message=txn.message, transaction_properties=txn.transaction_properties
    )


def _rebase_frag_reuse(
    op: operations.Rewrite | operations.CreateIndex, latest: pb.Manifest
) -> operations.Rewrite | operations.CreateIndex:
    """Re-apply our change of the fragment reuse index to the latest one.

    A trim drops only the versions no index of `latest` that survives it still reads through: an index
    committed meanwhile may have been built before a compaction the trim saw as done.
    """
    latest_fri = frag_reuse.find(latest)
    if isinstance(op, operations.Rewrite):
        if op.frag_reuse_index is None:  # carries no version (`frag_reuse.carried_by`): nothing to re-apply
            return op
        return replace(op, frag_reuse_index=frag_reuse.rebase_rewrite(op.frag_reuse_index, latest_fri))
    ours_new = next((i for i in op.new_indices if i.name == FRAG_REUSE_INDEX), None)
    ours_old = next((i for i in op.removed_indices if i.name == FRAG_REUSE_INDEX), None)
    dropped = frag_reuse.removed_versions(ours_old, ours_new) - _versions_still_read(op, latest)
    merged = frag_reuse.rebase_trim(dropped, latest_fri)
    new_indices = [i for i in op.new_indices if i.name != FRAG_REUSE_INDEX] + ([merged] if merged else [])
    removed = [i for i in op.removed_indices if i.name != FRAG_REUSE_INDEX] + ([latest_fri] if latest_fri else [])
    return replace(op, new_indices=new_indices, removed_indices=removed)


def _versions_still_read(op: operations.CreateIndex, latest: pb.Manifest) -> set[int]:
    """Reuse versions newer than an index of `latest` that our CreateIndex keeps (neither removes nor replaces
    by name): that index's row addresses predate those compactions, so lookups translate through them."""
    gone = {i.uuid.uuid for i in op.removed_indices}
    replaced = {i.name for i in op.new_indices}
    kept = [
        i
        for i in latest.indices
        if i.name not in SINGLETON_INDICES and i.uuid.uuid not in gone and i.name not in replaced
    ]
    if not kept:
        return set()
    oldest = min(i.dataset_version for i in kept)
    return {
        v.dataset_version for v in frag_reuse.details_of(frag_reuse.find(latest)).versions if v.dataset_version > oldest
    }
