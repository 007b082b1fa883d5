"""A transaction's chain of changes to one table, moved onto a newer table version: the fragments the chain
itself created take new ids there, and the later changes that name them are translated to those ids.

Design notes: docs/guide/catalog.md, "Rebase through the core's resolver".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING

from pyroaring import BitMap64

from mvcc_core._proto import table_pb2 as pb
from mvcc_core._proto import transaction_pb2 as tpb
from mvcc_core.format import operations
from mvcc_core.format.deletion import deletion_path, read_deletion_vector, write_deletion_vector
from mvcc_core.format.features import FLAG_STABLE_ROW_IDS
from mvcc_core.io import ObjectStore
from mvcc_core.maintenance import compaction
from mvcc_core.ops.replace_where import rows_match
from mvcc_core.txn import rebase as rebase_mod
from mvcc_core.txn.conflicts import ConflictContext, Outcome, resolve
from mvcc_core.txn.transaction import BuildContext, Transaction, build_manifest

if TYPE_CHECKING:
    from mvcc_core.catalog.table_changes import TableWrite
    from mvcc_core.table import Table

_LOW_BITS = (1 << 32) - 1


def _highest_id(manifest: pb.Manifest) -> int:
    return manifest.max_fragment_id if manifest.HasField("max_fragment_id") else -1


def build_step(
    manifest: pb.Manifest, txn: Transaction, load: Callable[[int], pb.Manifest]
) -> tuple[pb.Manifest, list[int]]:
    """`txn` applied to `manifest` in memory, and the ids of the fragments it created there (in order).

    Args:
        manifest: The table version the step lands on.
        txn: The step.
        load: Loads an older version of the table (what `build_manifest` may need).

    Returns:
        The next manifest and the new fragments' ids.
    """
    before = _highest_id(manifest)
    built = build_manifest(
        manifest, txn, version=manifest.version + 1, transaction_file="", ctx=BuildContext(load_version=load)
    )
    return built, sorted(f.id for f in built.fragments if f.id > before)


def created_ids(manifest: pb.Manifest, chain: list[Transaction], load: Callable[[int], pb.Manifest]) -> list[list[int]]:
    """The ids each step of `chain` gave its new fragments when the chain was built on `manifest`.

    Args:
        manifest: The table version the chain was staged on.
        chain: The steps, in order.
        load: Loads an older version of the table.

    Returns:
        One list of ids per step.
    """
    out = []
    for txn in chain:
        manifest, ids = build_step(manifest, txn, load)
        out.append(ids)
    return out


def translatable(txn: Transaction) -> bool:
    """Whether a later step of a chain can be moved onto new fragment ids: it appends (names no fragment), or
    it is a row-level change (a Delete, or an Update rewriting rows) whose references are rewritten here.

    Args:
        txn: a staged step of a branch's chain, after its first
    """
    op = txn.operation
    if isinstance(op, operations.Append | operations.Delete):
        return True
    return isinstance(op, operations.Update) and op.update_mode == tpb.Transaction.REWRITE_ROWS


@dataclass
class Translated:
    """A step naming the chain's own fragments by their new ids, and the deletion files that took."""

    txn: Transaction
    written: list[str] = field(default_factory=list)  # deletion files under the new ids
    superseded: list[str] = field(default_factory=list)  # the same vectors under the old ids


def _affected(data: bytes, mapping: dict[int, int]) -> bytes:
    """Row addresses (fragment id << 32 | offset) with the chain's own fragments renumbered."""
    if not data:
        return data
    rows = BitMap64.deserialize(data)
    moved = BitMap64((mapping.get(a >> 32, a >> 32) << 32) | (a & _LOW_BITS) for a in rows)
    return moved.serialize()


def translate(store: ObjectStore, txn: Transaction, mapping: dict[int, int], manifest: pb.Manifest) -> Translated:
    """`txn` with every fragment the chain created renamed by `mapping` (old id -> new id).

    An updated fragment of the chain's own is taken from `manifest` (the chain rebuilt so far on the new
    version: its files and row ids), with our deletion vector written again under the new id (a deletion
    file's name carries its fragment's id); nothing else is touched. Only `translatable` steps are given.

    Args:
        store: The table's store.
        txn: The step, as staged on the old version.
        mapping: Old id -> new id of every fragment the earlier steps created.
        manifest: The chain as rebuilt on the new version up to this step.

    Returns:
        The translated step and the files written and superseded.
    """
    op = txn.operation
    if not mapping or isinstance(op, operations.Append):
        return Translated(txn)
    if not isinstance(op, operations.Delete | operations.Update):  # `translatable` lets no other operation through
        raise TypeError(f"a {op.name} step is not moved onto new fragment ids")
    out = Translated(txn)
    current = {f.id: f for f in manifest.fragments}
    updated = []
    try:
        for frag in op.updated_fragments:
            new_id = mapping.get(frag.id)
            if new_id is None:
                updated.append(frag)
                continue
            moved = pb.DataFragment()
            moved.CopyFrom(current[new_id])
            if frag.HasField("deletion_file"):
                deleted = read_deletion_vector(store, frag, manifest.base_paths)
                deletion_file = write_deletion_vector(store, new_id, manifest.version, deleted)
                out.written.append(deletion_path(new_id, deletion_file))
                if not frag.deletion_file.HasField("content_size"):  # a packed file: other fragments name it too
                    out.superseded.append(deletion_path(frag.id, frag.deletion_file))
                moved.deletion_file.CopyFrom(deletion_file)
            updated.append(moved)
    except BaseException:
        store.delete_many(out.written)
        raise
    affected = _affected(op.affected_rows, mapping)
    if isinstance(op, operations.Delete):
        ids = sorted(mapping.get(i, i) for i in op.deleted_fragment_ids)
        new_op: operations.Delete | operations.Update = replace(
            op, updated_fragments=updated, deleted_fragment_ids=ids, affected_rows=affected
        )
    else:
        ids = sorted(mapping.get(i, i) for i in op.removed_fragment_ids)
        new_op = replace(op, updated_fragments=updated, removed_fragment_ids=ids, affected_rows=affected)
    out.txn = replace(txn, operation=new_op)
    return out


def rebase_chain(
    w: TableWrite,
    base: Table,
    chain: list[Transaction],
    *,
    conflict: Callable[[int, Transaction | None, str], Exception],
    rows_conflict: Callable[[str], Exception],
) -> list[Transaction]:
    """`chain` moved onto `base` (the table moved since the snapshot), step by step.

    The fragments the chain created take new ids on `base`, and each later step that names them is
    translated to those ids (`translate`); each step is then checked with the core's resolver
    against every concurrent table version: compatible goes on, a row-level pair on other rows of a shared
    fragment is rebased onto the chain rebuilt so far (the union of both deletion vectors; no data file is
    rewritten), anything else is a retryable conflict.

    Args:
        w: the transaction's write of the table (its base version; the files written are recorded on it)
        base: the table's version the chain now lands on
        chain: the chain's transactions, oldest first
        conflict: builds the retryable error for a step that conflicts with table version `version`
            (`theirs`: that version's transaction, None when unreadable) for `reason`
        rows_conflict: builds the retryable error, from its message, for a row-level rebase that fails

    Returns:
        The chain's transactions as they land on `base`.
    """
    store = base.state.store
    concurrent = []
    for v in range(w.base.version + 1, base.version + 1):
        theirs = base.transaction(v)
        if theirs is None:
            raise conflict(v, None, "its transaction file is unreadable")
        theirs_manifest = base.state.load(v)
        ctx = ConflictContext(
            stable_row_ids=bool(theirs_manifest.writer_feature_flags & FLAG_STABLE_ROW_IDS),
            rows_match=partial(rows_match, store, theirs_manifest),
        )
        concurrent.append((v, theirs, ctx))
    old_ids = created_ids(w.base.manifest, chain, w.base.load)
    mapping: dict[int, int] = {}
    manifest = base.manifest
    out = []
    for i, staged in enumerate(chain):
        if i and not translatable(staged):
            v = concurrent[0][0]
            reason = f"a later {staged.operation.name} of this transaction's chain names fragments by their old ids"
            raise conflict(v, concurrent[0][1], reason)
        moved = translate(store, staged, mapping, manifest)
        w.written.extend(moved.written)
        w.superseded.extend(moved.superseded)
        txn, needs_rebase = moved.txn, False
        for v, theirs, ctx in concurrent:
            outcome, rule = resolve(txn, theirs, ctx)
            if outcome is Outcome.COMPATIBLE:
                continue
            reason = rule.when
            if outcome is Outcome.REBASE and rebase_mod.rebasable(txn.operation, theirs.operation):
                try:
                    rebase_mod.check_rows(txn.operation, theirs.operation)
                    needs_rebase = True
                    continue
                except rebase_mod.RowConflict as exc:
                    reason = exc.reason
            raise conflict(v, theirs, reason)
        if needs_rebase:
            try:
                rebased = rebase_mod.rebase(store, txn, manifest)
            except rebase_mod.RowConflict as exc:
                raise rows_conflict(
                    f"{txn.operation.name} on {w.origin!r} cannot be rebased onto table version {base.version}: "
                    f"{exc.reason}",
                ) from None
            w.written.extend(rebased.written)
            w.superseded.extend(rebased.superseded)
            txn = replace(staged, operation=rebased.txn.operation)
        out.append(txn)
        step = txn
        if isinstance(txn.operation, operations.Rewrite):  # as `_stage_chain` builds it: ids after the newest
            step = replace(txn, operation=compaction.renumber_new_fragments(txn.operation, manifest))
        manifest, new_ids = build_step(manifest, step, base.state.load)
        if len(new_ids) != len(old_ids[i]):
            reason = f"its {txn.operation.name} creates {len(new_ids)} fragments here, {len(old_ids[i])} before"
            raise conflict(base.version, None, reason)
        mapping.update(zip(old_ids[i], new_ids, strict=True))
    return out
