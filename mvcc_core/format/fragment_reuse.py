"""The fragment reuse index: compaction without remapping indices, as Lance's `defer_index_remap`.

Design notes: docs/operations/maintenance.md, "The fragment reuse index, as implemented".
"""

from __future__ import annotations

import uuid as uuid_mod
from collections.abc import Iterable
from typing import TypeGuard

import numpy as np
from pyroaring import BitMap

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.format import operations
from mvcc_core.format.naming import FRAG_REUSE_INDEX

FRAG_REUSE_TYPE = "FragmentReuse"


def carried_by(op: operations.Operation) -> TypeGuard[operations.Rewrite]:
    """A Rewrite that adds a version to the index (compaction with defer_index_remap).

    Args:
        op: a transaction's operation
    """
    return isinstance(op, operations.Rewrite) and op.frag_reuse_index is not None


def trimmed_by(op: operations.Operation) -> TypeGuard[operations.CreateIndex]:
    """A CreateIndex that replaces or removes the index (optimize_indices trimming it).

    Args:
        op: a transaction's operation
    """
    return isinstance(op, operations.CreateIndex) and any(
        i.name == FRAG_REUSE_INDEX for i in [*op.new_indices, *op.removed_indices]
    )


def details_of(index: pb.IndexMetadata | None) -> pb.FragReuseIndexDetails:
    """The versions the fragment reuse index holds (empty details when there is no index).

    Args:
        index: the fragment reuse index's metadata entry (None: the table has none)
    """
    details = pb.FragReuseIndexDetails()
    if index is not None and index.HasField("index_details"):
        index.index_details.Unpack(details)
    return details


def find(manifest: pb.Manifest) -> pb.IndexMetadata | None:
    """The fragment reuse index of a version, or None when it has none.

    Args:
        manifest: the version's manifest
    """
    return next((i for i in manifest.indices if i.name == FRAG_REUSE_INDEX), None)


def make_index(details: pb.FragReuseIndexDetails, dataset_version: int) -> pb.IndexMetadata:
    """A new IndexMetadata (fresh uuid) holding `details`.

    Args:
        details: the versions the index holds
        dataset_version: the table version the index is recorded at
    """
    index = pb.IndexMetadata(name=FRAG_REUSE_INDEX, index_type=FRAG_REUSE_TYPE, dataset_version=dataset_version)
    index.uuid.uuid = uuid_mod.uuid4().bytes
    index.index_details.Pack(details)
    index.created_at.GetCurrentTime()
    return index


def group_of(
    old: Iterable[pb.DataFragment], deleted: dict[int, BitMap], new: Iterable[pb.DataFragment]
) -> pb.FragReuseGroup:
    """How one rewrite group moved rows: `deleted` holds each old fragment's deleted offsets.

    Args:
        old: the fragments the group rewrote
        deleted: each old fragment's deleted offsets at the time of the rewrite, by fragment id
        new: the fragments the group wrote
    """
    group = pb.FragReuseGroup()
    for frag in old:
        group.old_fragment_ids.append(frag.id)
        group.old_physical_rows.append(frag.physical_rows)
        bitmap = deleted.get(frag.id)
        group.old_deletions.append(bitmap.serialize() if bitmap else b"")
    for frag in new:
        group.new_fragment_ids.append(frag.id)
        group.new_physical_rows.append(frag.physical_rows)
    return group


def with_version(
    current: pb.IndexMetadata | None, groups: list[pb.FragReuseGroup], dataset_version: int
) -> pb.IndexMetadata:
    """`current`'s versions plus one for a Rewrite (dataset_version 0 until its manifest is built).

    Args:
        current: the fragment reuse index's metadata entry (None: the table has none)
        groups: the rewrite groups of the Rewrite
        dataset_version: the version the Rewrite commits as (0 while not yet known)
    """
    details = details_of(current)
    version = details.versions.add(dataset_version=dataset_version)
    version.groups.extend(groups)
    return make_index(details, dataset_version)


def pending_version(index: pb.IndexMetadata) -> pb.FragReuseVersion:
    """The version a Rewrite adds: its last one.

    Args:
        index: the index a Rewrite carries
    """
    return details_of(index).versions[-1]


def stamp(index: pb.IndexMetadata, dataset_version: int) -> pb.IndexMetadata:
    """The Rewrite's index as committed at `dataset_version`: the pending version gets that number.

    Args:
        index: the index the Rewrite carries
        dataset_version: the version the Rewrite committed as
    """
    details = details_of(index)
    details.versions[-1].dataset_version = dataset_version
    out = pb.IndexMetadata()
    out.CopyFrom(index)
    out.dataset_version = dataset_version
    out.index_details.Pack(details)
    return out


def rebase_rewrite(ours: pb.IndexMetadata, latest: pb.IndexMetadata | None) -> pb.IndexMetadata:
    """Ours' pending version on top of the latest committed index (a concurrent trim or merge).

    Args:
        ours: the index our Rewrite carries
        latest: the index of the latest committed version (None: it has none)
    """
    return with_version(latest, list(pending_version(ours).groups), 0)


def trimmed(current: pb.IndexMetadata | None, oldest_index_version: int) -> pb.IndexMetadata | None:
    """Drop versions every other index is at least as new as; None when nothing is left.

    Args:
        current: the fragment reuse index's metadata entry (None: the table has none)
        oldest_index_version: the oldest version any other index of the table was built at
    """
    done = {v.dataset_version for v in details_of(current).versions if v.dataset_version <= oldest_index_version}
    return rebase_trim(done, current)


def removed_versions(before: pb.IndexMetadata | None, after: pb.IndexMetadata | None) -> set[int]:
    """Versions a trim dropped: what a rebased trim must drop from the latest index too.

    Args:
        before: the index before the trim
        after: the index after it (None: the trim removed the index)
    """
    kept = {v.dataset_version for v in details_of(after).versions}
    return {v.dataset_version for v in details_of(before).versions} - kept


def rebase_trim(removed: set[int], latest: pb.IndexMetadata | None) -> pb.IndexMetadata | None:
    """A trim re-applied to the latest index: concurrent Rewrites' versions survive it.

    Args:
        removed: the dataset versions the trim dropped
        latest: the index of the latest committed version (None: it has none)
    """
    details = details_of(latest)
    kept = [v for v in details.versions if v.dataset_version not in removed]
    if not kept:
        return None
    out = pb.FragReuseIndexDetails()
    out.versions.extend(kept)
    return make_index(out, latest.dataset_version if latest is not None else 0)


def _group_mapping(group: pb.FragReuseGroup) -> tuple[np.ndarray, np.ndarray]:
    """Sorted old live addresses and the new address each one moved to."""
    old_parts = []
    for frag_id, rows, deletions in zip(
        group.old_fragment_ids, group.old_physical_rows, group.old_deletions, strict=True
    ):
        offsets = np.arange(rows, dtype=np.uint64)
        if deletions:
            dead = np.fromiter(BitMap.deserialize(deletions), dtype=np.uint64)
            offsets = np.setdiff1d(offsets, dead, assume_unique=True)
        old_parts.append((np.uint64(frag_id) << np.uint64(32)) | offsets)
    new_parts = [
        (np.uint64(frag_id) << np.uint64(32)) | np.arange(rows, dtype=np.uint64)
        for frag_id, rows in zip(group.new_fragment_ids, group.new_physical_rows, strict=True)
    ]
    old = np.concatenate(old_parts) if old_parts else np.empty(0, np.uint64)
    new = np.concatenate(new_parts) if new_parts else np.empty(0, np.uint64)
    if len(old) != len(new):
        raise ValueError(f"fragment reuse group moves {len(old)} live rows into {len(new)} rows")
    order = np.argsort(old, kind="stable")  # old fragments are in table order, not always id order
    return old[order], new[order]


class AddressMap:
    """Translates row addresses through the versions of one fragment reuse index newer than an index.

    Args:
        index: the fragment reuse index's metadata entry (None: the table has none)
        since_version: the table version the index was built at
    """

    def __init__(self, index: pb.IndexMetadata | None, since_version: int) -> None:
        """The rewrite steps an index built at `since_version` has not seen yet, oldest first."""
        self.steps: list[tuple[set[int], np.ndarray, np.ndarray]] = []
        for version in details_of(index).versions:
            if version.dataset_version <= since_version:
                continue
            for group in version.groups:
                old, new = _group_mapping(group)
                self.steps.append((set(group.old_fragment_ids), old, new))

    def __bool__(self) -> bool:
        return bool(self.steps)

    def translate(self, addresses: np.ndarray) -> np.ndarray:
        """New addresses, in input order; addresses of rows deleted before a rewrite are dropped.

        Args:
            addresses: row addresses (fragment id << 32 | offset) as the index recorded them
        """
        return self.translate_kept(addresses)[0]

    def translate_kept(self, addresses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`translate`, and which of the input addresses it kept (to keep values that go with them aligned).

        Args:
            addresses: row addresses (fragment id << 32 | offset) as the index recorded them

        Returns:
            `(new addresses of the kept rows, in input order; a bool mask over the input, True where kept)`.
        """
        out = np.asarray(addresses, dtype=np.uint64)
        positions = np.arange(len(out))
        for frag_ids, old, new in self.steps:
            fragments = (out >> np.uint64(32)).astype(np.int64)
            moved = np.flatnonzero(np.isin(fragments, np.fromiter(frag_ids, dtype=np.int64)))
            if not len(moved):
                continue
            values = out[moved]
            found = np.zeros(len(values), dtype=bool)
            pos = np.zeros(len(values), dtype=np.int64)
            if len(old):
                pos = np.minimum(np.searchsorted(old, values), len(old) - 1)
                found = old[pos] == values
            out = out.copy()
            out[moved[found]] = new[pos[found]]
            keep = np.ones(len(out), dtype=bool)
            keep[moved[~found]] = False
            out, positions = out[keep], positions[keep]
        kept = np.zeros(len(addresses), dtype=bool)
        kept[positions] = True
        return out, kept


def remap_fragment_bitmap(bitmap: BitMap, group: pb.FragReuseGroup) -> BitMap:
    """An index's covered fragments after a rewrite group: new ids in for old ids out, when it
    covered all of the group's old fragments (otherwise the new fragments are simply not covered).

    Args:
        bitmap: the fragment ids an index covers
        group: one rewrite group of a Rewrite
    """
    old = set(group.old_fragment_ids)
    if old and old <= set(bitmap):
        return (bitmap - BitMap(old)) | BitMap(group.new_fragment_ids)
    return bitmap


_MAPS: dict[tuple[bytes, int], AddressMap] = {}
_MAPS_LIMIT = 16


def address_map(manifest: pb.Manifest, index: pb.IndexMetadata) -> AddressMap:
    """The translation an index built at `index.dataset_version` needs in `manifest` (cached: immutable).

    Args:
        manifest: the version being read
        index: the index whose row addresses need translating
    """
    fri = find(manifest)
    if fri is None:
        return AddressMap(None, index.dataset_version)
    key = (fri.uuid.uuid, index.dataset_version)
    found = _MAPS.get(key)
    if found is None:
        if len(_MAPS) >= _MAPS_LIMIT:
            _MAPS.pop(next(iter(_MAPS)))
        found = _MAPS[key] = AddressMap(fri, index.dataset_version)
    return found
