"""Which fragments a compaction rewrites, how they are grouped, what each group is worth, and the budget.

Everything here reads the manifest only, except a `where` scope, whose candidates are the fragments that the
files' row-group statistics (and a scalar index, when one answers the filter) do not rule out: the scan's own
pruning (`Scan.candidate_fragments`). The rules are in docs/operations/maintenance.md, "How the planner decides".
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from pyroaring import BitMap

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.maintenance.options import CompactionOptions
from mvcc_core.read.scan import Scan
from mvcc_core.txn.state import TableState


@dataclass(frozen=True)
class Group:
    """Adjacent fragments rewritten by one task, and what rewriting them is worth.

    Attributes:
        fragments: The fragments, in manifest order.
        new_fragments: Fragments the group becomes (its live rows in fragments of the row target).
        bytes: On-disk bytes of its data files (what the task reads).
        files_removed: Data files the rewrite removes (its files less the new fragments'; negative when a lone
            fragment with deletions is split at the row target).
        deleted_rows: Deleted rows the rewrite drops from disk.
        benefit: `files_removed` (at least 0) plus `deleted_rows` in units of the row target (a target-sized
            fragment's worth of deleted rows counts as one file).
    """

    fragments: tuple[pb.DataFragment, ...]
    new_fragments: int
    bytes: int
    files_removed: int
    deleted_rows: int
    benefit: float

    @property
    def score(self) -> float:
        """Benefit per MiB read: the order in which a budget takes groups."""
        return self.benefit / max(self.bytes / 2**20, 1e-6)

    @property
    def fragments_removed(self) -> int:
        """Fragments fewer after the rewrite."""
        return len(self.fragments) - self.new_fragments


def target_rows(manifest: pb.Manifest, options: CompactionOptions) -> int:
    """The row target: `target_rows_per_fragment`, or fewer when `target_bytes_per_fragment` holds fewer rows
    at the table's on-disk bytes per physical row (manifest figures).

    Args:
        manifest: the version planned
        options: the compaction's options
    """
    rows = options.target_rows_per_fragment
    if options.target_bytes_per_fragment is None:
        return rows
    size = sum(df.file_size_bytes for f in manifest.fragments for df in f.files)
    physical = sum(f.physical_rows for f in manifest.fragments)
    if size <= 0 or physical <= 0:
        return rows
    return max(1, min(rows, int(options.target_bytes_per_fragment * physical / size)))


def candidate_ids(state: TableState, where: str | None) -> set[int] | None:
    """Ids of the fragments that may hold a row matching `where` (None: no scope, every fragment).

    Args:
        state: the version planned
        where: the SQL filter of the scope

    Raises:
        PredicateError: the filter does not parse or names no column of the table
    """
    if where is None:
        return None
    return {f.id for f in Scan(state.store, state.manifest, filter=where).candidate_fragments()}


def _too_many_deletions(frag: pb.DataFragment, options: CompactionOptions) -> bool:
    return (
        options.materialize_deletions
        and frag.HasField("deletion_file")
        and frag.deletion_file.num_deleted_rows / max(frag.physical_rows, 1) > options.materialize_deletions_threshold
    )


def _index_keys(manifest: pb.Manifest) -> dict[int, int]:
    """Fragment id -> a bit per index covering it (each bitmap decoded once); fragments no index covers are absent."""
    covering: dict[int, int] = {}
    for bit, index in enumerate(manifest.indices):
        if index.fragment_bitmap:
            mask = 1 << bit
            for frag_id in BitMap.deserialize(index.fragment_bitmap):
                covering[frag_id] = covering.get(frag_id, 0) | mask
    return covering


def groups(manifest: pb.Manifest, options: CompactionOptions, candidates: Collection[int] | None = None) -> list[Group]:
    """Runs of adjacent fragments worth rewriting, each within the task bounds, in manifest order.

    A fragment outside `candidates` (when given), or not needing a rewrite, ends a run and keeps its id and
    files. Fragments covered by different indices are never in one group. A lone fragment is a group only when
    it has deletions to drop or files to fold.

    Args:
        manifest: the version planned
        options: the compaction's options
        candidates: ids of the fragments that may be rewritten (None: every fragment)
    """
    rows_target = target_rows(manifest, options)
    max_rows = options.max_rows_per_task or rows_target
    keys = _index_keys(manifest)
    runs: list[list[pb.DataFragment]] = []
    current: list[pb.DataFragment] = []
    rows = size = 0
    key: int | None = None
    for frag in manifest.fragments:
        files = frag.files
        deletions = frag.HasField("deletion_file")
        frag_rows = frag.physical_rows - (frag.deletion_file.num_deleted_rows if deletions else 0)
        wanted = len(files) > 1 or frag_rows < rows_target or (deletions and _too_many_deletions(frag, options))
        if not wanted or (candidates is not None and frag.id not in candidates):
            if current:
                runs.append(current)
            current, rows, size, key = [], 0, 0, None
            continue
        frag_key = keys.get(frag.id, 0)
        frag_size = files[0].file_size_bytes if len(files) == 1 else sum(df.file_size_bytes for df in files)
        too_big = current and (
            rows + frag_rows > max_rows
            or (options.max_bytes_per_task is not None and size + frag_size > options.max_bytes_per_task)
        )
        if current and (frag_key != key or too_big):
            runs.append(current)
            current, rows, size = [], 0, 0
        current.append(frag)
        rows += frag_rows
        size += frag_size
        key = frag_key
    if current:
        runs.append(current)
    out = []
    for run in runs:
        lone = run[0]
        if len(run) == 1 and len(lone.files) == 1 and not _too_many_deletions(lone, options):
            continue  # nothing to gain from rewriting one fragment alone
        out.append(_group(run, rows_target))
    return out


def clustering_groups(
    manifest: pb.Manifest, options: CompactionOptions, candidates: Collection[int] | None = None
) -> list[Group]:
    """A clustering compaction's one group: every fragment in scope (`candidates`, else all), whatever its size,
    rewritten in one task so the order it writes is global over them (Iceberg's sort strategy rewrites every file
    in scope). None when the scope holds no fragment.

    Args:
        manifest: the version planned
        options: the compaction's options (`sort_by` or `zorder_by` set)
        candidates: ids of the fragments that may be rewritten (None: every fragment)
    """
    run = [f for f in manifest.fragments if candidates is None or f.id in candidates]
    if not run:
        return []
    return [_group(run, target_rows(manifest, options))]


def _group(run: list[pb.DataFragment], rows_target: int) -> Group:
    physical = files = size = deleted = 0
    for frag in run:
        physical += frag.physical_rows
        files += len(frag.files)
        for df in frag.files:
            size += df.file_size_bytes
        if frag.HasField("deletion_file"):
            deleted += frag.deletion_file.num_deleted_rows
    new = max(1, math.ceil((physical - deleted) / rows_target))
    return Group(
        fragments=tuple(run),
        new_fragments=new,
        bytes=size,
        files_removed=files - new,
        deleted_rows=deleted,
        benefit=max(files - new, 0) + deleted / rows_target,
    )


@dataclass(frozen=True)
class Budgeted:
    """The groups a budget takes (in manifest order) and the ones it leaves for a later run.

    Attributes:
        chosen: The groups to rewrite now, in manifest order.
        deferred: The groups left, in the order a later run with the same budget would take them.
    """

    chosen: list[Group]
    deferred: list[Group]


def within_budget(found: Sequence[Group], max_bytes: int | None) -> Budgeted:
    """The groups with the most benefit per byte first, as long as their bytes add up to at most `max_bytes`
    (a group too big for what is left is skipped, a smaller one after it may still fit); the best group is
    always taken, whatever its size. None: every group.

    Args:
        found: the planner's groups, in manifest order
        max_bytes: the budget in on-disk bytes of input (None: no budget)
    """
    if max_bytes is None:
        return Budgeted(list(found), [])
    order = sorted(range(len(found)), key=lambda i: (-found[i].score, i))
    taken: set[int] = set()
    spent = 0
    for i in order:
        if not taken or spent + found[i].bytes <= max_bytes:
            taken.add(i)
            spent += found[i].bytes
    return Budgeted([g for i, g in enumerate(found) if i in taken], [found[i] for i in order if i not in taken])
