"""A transaction's chain of changes to one table, moved onto a newer table version: the fragments the chain
itself created take new ids there, and the later changes that name them are translated to those ids.

Design notes: docs/catalog.md, "Rebase through the core's resolver".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pyroaring import BitMap64

from mvcc_core._proto import table_pb2 as pb
from mvcc_core._proto import transaction_pb2 as tpb
from mvcc_core.format import operations as ops
from mvcc_core.format.deletion import deletion_path, read_deletion_vector, write_deletion_vector
from mvcc_core.io import ObjectStore
from mvcc_core.txn.transaction import BuildContext, Transaction, build_manifest

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
    it is a row-level change (a Delete, or an Update rewriting rows) whose references are rewritten here."""
    op = txn.operation
    if isinstance(op, ops.Append | ops.Delete):
        return True
    return isinstance(op, ops.Update) and op.update_mode == tpb.Transaction.REWRITE_ROWS


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
    if not mapping or isinstance(op, ops.Append):
        return Translated(txn)
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
                out.superseded.append(deletion_path(frag.id, frag.deletion_file))
                moved.deletion_file.CopyFrom(deletion_file)
            updated.append(moved)
    except BaseException:
        store.delete_many(out.written)
        raise
    affected = _affected(op.affected_rows, mapping)
    if isinstance(op, ops.Delete):
        ids = sorted(mapping.get(i, i) for i in op.deleted_fragment_ids)
        new_op: ops.Operation = replace(op, updated_fragments=updated, deleted_fragment_ids=ids, affected_rows=affected)
    else:
        ids = sorted(mapping.get(i, i) for i in op.removed_fragment_ids)
        new_op = replace(op, updated_fragments=updated, removed_fragment_ids=ids, affected_rows=affected)
    out.txn = replace(txn, operation=new_op)
    return out
