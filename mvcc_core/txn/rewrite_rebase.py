"""Rebase a Rewrite (compaction) over concurrent deletions of the rows it moved.

A compaction reads its old fragments at its read version and writes their live rows to new fragments. When a
Delete or a REWRITE_ROWS Update commits first and deletes some of those rows, committing the Rewrite as it is
would bring them back. The specification makes the pair retryable, so on a table with a steady delete stream
compaction never lands. Instead (as the specification's deferred remapping does for index row addresses),
each row deleted since the Rewrite read its old fragments is deleted again where the Rewrite moved it:

- with stable row ids the mapping is exact: a deleted row's id, read from the old fragment's row id sequence
  at its offset, is found in the new fragments' sequences;
- with the Rewrite's explicit row map (`Rewrite.row_sources`, set by a clustering compaction, which permutes the
  rows): the old address of each new physical row, so a deleted old row is found where it went;
- without them, when the Rewrite declares it kept the row order (`conflicts.REWRITE_ROW_ORDER`, set by
  compaction): the live rows of a group's old fragments, in order, are the live rows of its new fragments,
  in order (the layout the fragment reuse index relies on).

The rebased group records the old fragments as they are in the latest version (their grown deletion vectors;
an old fragment a Delete removed whole is left out) and its new fragments carry the carried deletions. The
mapping rule above holds again for the rebased group (live rows to live rows), so a Rewrite rebased twice is
carried correctly again. Anything else, a shared fragment whose data files changed, a deletion vector that
shrank, a row the mapping cannot place, stays a retryable conflict (`RowConflict`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from pyroaring import BitMap

from mvcc_core._proto import table_pb2 as pb
from mvcc_core._proto import transaction_pb2 as tpb
from mvcc_core.format import operations, row_ids
from mvcc_core.format.deletion import deletion_path, read_deletion_vector, write_deletion_vector
from mvcc_core.io import ObjectStore


class MappingError(Exception):
    """The moved rows cannot be placed; `rebase` turns it into a RowConflict (retryable)."""


def _live_addresses(fragments: list[pb.DataFragment], deleted: dict[int, BitMap]) -> np.ndarray:
    """Row addresses of the live rows of `fragments`, in fragment and offset order."""
    parts = []
    for frag in fragments:
        offsets = np.arange(frag.physical_rows, dtype=np.uint64)
        dead = deleted.get(frag.id)
        if dead:
            offsets = np.setdiff1d(offsets, np.fromiter(dead, dtype=np.uint64), assume_unique=True)
        parts.append((np.uint64(frag.id) << np.uint64(32)) | offsets)
    return np.concatenate(parts) if parts else np.empty(0, np.uint64)


def _lookup(keys: np.ndarray, values: np.ndarray, wanted: np.ndarray, what: str) -> np.ndarray:
    """`values` at the positions of `wanted` in `keys` (MappingError naming the first one not there)."""
    order = np.argsort(keys, kind="stable")
    keys, values = keys[order], values[order]
    pos = np.minimum(np.searchsorted(keys, wanted), max(len(keys) - 1, 0))
    found = keys[pos] == wanted if len(keys) else np.zeros(len(wanted), dtype=bool)
    if not found.all():
        raise MappingError(f"{what} {int(wanted[~found][0])} is not among the rows the rewrite moved")
    return values[pos]


def moved_to(
    group: tpb.Transaction.Rewrite.RewriteGroup,
    deleted: dict[int, BitMap],
    new_deleted: dict[int, BitMap],
    addresses: np.ndarray,
    stable: bool,
    sources: np.ndarray | None = None,
) -> np.ndarray:
    """Where the rows at `addresses` (of the group's old fragments, live in the group's record) are now.

    Args:
        group: the Rewrite's group
        deleted: each old fragment's deletion vector as the group records it
        new_deleted: each new fragment's deletion vector as the group records it
        addresses: old row addresses (fragment id << 32 | offset)
        stable: the table has stable row ids (map by id; otherwise by the kept row order)
        sources: the group's explicit row map, the old address of each physical row of its new fragments (None:
            by row id or row order)
    """
    old = list(group.old_fragments)
    new = list(group.new_fragments)
    if sources is not None:
        new_addr = _live_addresses(new, {})
        if len(new_addr) != len(sources):
            raise MappingError(f"the row map holds {len(sources)} rows for {len(new_addr)} new rows")
        return _lookup(sources, new_addr, addresses, "row address")
    if stable:
        old_ids = {f.id: row_ids.decode(f) for f in old}
        ids = np.array(
            [old_ids[int(a >> np.uint64(32))][int(a & np.uint64(0xFFFFFFFF))] for a in addresses], dtype=np.uint64
        )
        new_addr = _live_addresses(new, {})
        new_ids = np.concatenate([row_ids.decode(f) for f in new]) if new else np.empty(0, np.uint64)
        return _lookup(new_ids, new_addr, ids, "row id")
    old_live = _live_addresses(old, deleted)
    new_live = _live_addresses(new, new_deleted)
    if len(old_live) != len(new_live):
        raise MappingError(f"the group moves {len(old_live)} live rows into {len(new_live)}")
    return _lookup(old_live, new_live, addresses, "row address")


def rebase_rewrite(
    store: ObjectStore, op: operations.Rewrite, latest: pb.Manifest, stable: bool
) -> tuple[operations.Rewrite, list[str], list[str]]:
    """`op` carried onto `latest`: (the rebased Rewrite, deletion files written, deletion files superseded).

    Raises MappingError when it cannot be (the caller turns it into a retryable conflict); files it wrote are
    removed then.

    Args:
        store: the table's store
        op: the Rewrite (its groups record the old fragments as it read them, or as a previous rebase left them)
        latest: the manifest it is carried onto
        stable: the table has stable row ids
    """
    by_id = {f.id: f for f in latest.fragments}
    written: list[str] = []
    superseded: list[str] = []
    groups = []
    maps = op.row_sources
    if maps is not None and len(maps) != len(op.groups):
        raise MappingError(f"the row map covers {len(maps)} groups of {len(op.groups)}")
    try:
        for number, group in enumerate(op.groups):
            if all(by_id.get(f.id) == f for f in group.old_fragments):
                groups.append(group)  # nothing changed under this group: no file read
                continue
            deleted = {f.id: read_deletion_vector(store, f, latest.base_paths) for f in group.old_fragments}
            gone: list[int] = []
            newly: list[np.ndarray] = []
            for frag in group.old_fragments:
                current = by_id.get(frag.id)
                if current is None:  # a Delete removed it whole: every row still live in our record goes
                    fresh = BitMap(range(frag.physical_rows)) - deleted[frag.id]
                    gone.append(frag.id)
                else:
                    if list(current.files) != list(frag.files) or current.physical_rows != frag.physical_rows:
                        raise MappingError(f"the data files of fragment {frag.id} changed")
                    now = read_deletion_vector(store, current, latest.base_paths)
                    if not deleted[frag.id] <= now:
                        raise MappingError(f"fragment {frag.id} has rows deleted at read and live now")
                    fresh = now - deleted[frag.id]
                if fresh:
                    offsets = np.fromiter(fresh, dtype=np.uint64)
                    newly.append((np.uint64(frag.id) << np.uint64(32)) | offsets)
            if not newly and not gone:
                groups.append(group)
                continue
            new_deleted = {f.id: read_deletion_vector(store, f, latest.base_paths) for f in group.new_fragments}
            targets = (
                moved_to(
                    group,
                    deleted,
                    new_deleted,
                    np.concatenate(newly),
                    stable,
                    None if maps is None else np.frombuffer(maps[number], dtype=np.uint64),
                )
                if newly
                else np.empty(0, dtype=np.uint64)
            )
            add: dict[int, BitMap] = {}
            for address in np.asarray(targets, dtype=np.uint64):
                add.setdefault(int(address >> np.uint64(32)), BitMap()).add(int(address & np.uint64(0xFFFFFFFF)))
            rebased = tpb.Transaction.Rewrite.RewriteGroup()
            for frag in group.old_fragments:
                if frag.id not in gone:
                    rebased.old_fragments.append(by_id[frag.id])
            if not rebased.old_fragments and op.frag_reuse_index is not None:
                raise MappingError("every old fragment of a group was deleted, and the rewrite carries index remaps")
            for frag in group.new_fragments:
                out = pb.DataFragment()
                out.CopyFrom(frag)
                if frag.id in add:
                    merged = new_deleted[frag.id] | add[frag.id]
                    deletion_file = write_deletion_vector(store, frag.id, latest.version, merged)
                    written.append(deletion_path(frag.id, deletion_file))
                    if frag.HasField("deletion_file"):
                        superseded.append(deletion_path(frag.id, frag.deletion_file))
                    out.deletion_file.CopyFrom(deletion_file)
                rebased.new_fragments.append(out)
            groups.append(rebased)
    except BaseException:
        store.delete_many(written)
        raise
    return replace(op, groups=groups), written, superseded
