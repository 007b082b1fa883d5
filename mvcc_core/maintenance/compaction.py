"""Compaction in three separable steps: plan (and ReserveFragments), execute tasks anywhere, commit a Rewrite.

`plan` picks fragments smaller than `target_rows_per_fragment` and fragments whose deleted fraction is above
`materialize_deletions_threshold` (and fragments spread over several files), groups adjacent ones into
tasks (row order is kept within a group; fragments covered by different indices are never mixed), and
commits ReserveFragments so the new fragments' ids are fixed before any task runs. Tasks and results are
small and picklable: they run in threads, processes or Spark executors (anything with `map(fn, tasks)`).
`commit` lands one Rewrite with every group; a concurrent delete or update of a rewritten fragment makes it
a RetryableConflictError (the rewritten files are removed), concurrent appends never conflict.

With `sort_by` / `zorder_by` (clustering) every fragment in scope is one group and one task, whose rows are
written in that order (`clustering.py`); its result carries the row map (the old address of each row written) so
that concurrent deletions are carried onto the permuted rows too.

Indices are not remapped: a rewritten fragment leaves the coverage of the indices that covered it (scans
read it directly) until `optimize_indices` adds it back, unless `defer_index_remap=True`: then the Rewrite
carries a fragment reuse index and indices keep covering the moved rows (their addresses are translated
on read) until `optimize_indices` rebuilds them. With stable row ids the rows keep their ids.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa

from mvcc_core._proto import table_pb2 as pb
from mvcc_core._proto import transaction_pb2 as tpb
from mvcc_core.errors import CompactionError
from mvcc_core.executor import Executor, ThreadExecutor
from mvcc_core.format import fragment_reuse as frag_reuse
from mvcc_core.format import operations, row_ids
from mvcc_core.format import schema as schema_mod
from mvcc_core.format.bases import data_file_location, data_file_uris
from mvcc_core.format.deletion import read_deletion_vector
from mvcc_core.format.fragments import ROW_GROUP_ROWS, FragmentWriter
from mvcc_core.format.row_ids import ROW_ID
from mvcc_core.io.read_ahead import PHYSICAL_ROWS, READ_THREADS, file_reads, read_ahead, read_data_files, runs
from mvcc_core.maintenance import clustering, planner, policy
from mvcc_core.maintenance.handles import TableLike, state_of
from mvcc_core.maintenance.options import CompactionOptions
from mvcc_core.progress import Progress
from mvcc_core.read.missing_files import missing_files
from mvcc_core.read.scan import Scan
from mvcc_core.txn.conflicts import REWRITE_ROW_ORDER
from mvcc_core.txn.state import TableState
from mvcc_core.txn.task_state import task_state
from mvcc_core.txn.transaction import Transaction, check_properties

__all__ = [
    "CompactionMetrics",
    "CompactionOptions",
    "CompactionPlan",
    "CompactionTask",
    "RewriteResult",
    "plan",
    "plan_unreserved",
    "renumber_new_fragments",
    "rewrite_transaction",
    "run_task",
    "run_tasks",
    "summarize",
]

log = logging.getLogger("mvcc.maintenance")


@dataclass(frozen=True)
class CompactionTask:
    """Rewrite some adjacent fragments of version `read_version` into fragments with `new_fragment_ids`."""

    read_version: int
    fragments: tuple[bytes, ...]  # serialized DataFragment, as in read_version
    new_fragment_ids: tuple[int, ...]
    target_rows_per_fragment: int
    #: ("sort", columns) or ("zorder", columns): the rows are written in that order, not the order they are read
    clustering: tuple[str, tuple[str, ...]] | None = None

    def execute(self, state: TableState | str, storage_options: dict[str, Any] | None = None) -> RewriteResult:
        """Read the fragments (deletions applied) and write the new ones; nothing is committed.

        `state`: the plan's `CompactionPlan.state` (picklable: send it with the task to any executor), or
        the table's uri (with `storage_options`) to open it here.

        Args:
            state: the plan's `TableState` (picklable: sent with the task to any executor), or the table's uri
            storage_options: options to open the uri with (ignored with a state)
        """
        state = task_state(state, self.read_version, storage_options)
        old = [pb.DataFragment.FromString(f) for f in self.fragments]
        stable = row_ids.enabled(state.manifest)
        writer = FragmentWriter(state.store, state.fields, state.schema, self.target_rows_per_fragment)
        ids: list[np.ndarray] = []
        rows = 0
        encoder = ThreadPoolExecutor(1, thread_name_prefix="mvcc-encode")
        try:
            encoding: deque[Future[None]] = deque()
            read = _read(state, old, stable)
            sources: list[np.ndarray] = []  # the old address of each row written, when clustering
            if self.clustering is not None:
                read = _clustered(read, *self.clustering, _old_live_addresses(state, old), sources)
            for table, table_ids in read:
                if table_ids is not None:
                    ids.append(table_ids)
                encoding.append(encoder.submit(_write_row_group, writer, table))
                rows += table.num_rows
                while len(encoding) > _ENCODE_AHEAD:
                    encoding.popleft().result()
            while encoding:
                encoding.popleft().result()
            encoder.shutdown()
            new = writer.finish()
        except BaseException:
            encoder.shutdown(cancel_futures=True)  # the write under way ends first: then its file can go
            writer.abort()
            raise
        if len(new) > len(self.new_fragment_ids):
            writer.abort()
            raise CompactionError(
                f"compaction task wrote {len(new)} fragments for {len(self.new_fragment_ids)} reserved ids"
            )
        for frag, frag_id in zip(new, self.new_fragment_ids, strict=False):
            frag.id = frag_id
        if stable and new:
            row_ids.split(np.concatenate(ids), new)
        return RewriteResult(
            read_version=self.read_version,
            old_fragments=self.fragments,
            new_fragments=tuple(f.SerializeToString() for f in new),
            rows=rows,
            bytes_written=sum(df.file_size_bytes for f in new for df in f.files),
            bytes_read=sum(df.file_size_bytes for f in old for df in f.files),
            row_order="kept" if self.clustering is None else self.clustering[0],
            # a clustering task that read no live row moved none: an empty map
            row_sources=sources[0].tobytes() if sources else (b"" if self.clustering is not None else None),
        )


def _old_live_addresses(state: TableState, fragments: list[pb.DataFragment]) -> np.ndarray:
    """The row addresses (fragment id << 32 | offset) of the fragments' live rows, in the order they are read."""
    parts = []
    for frag in fragments:
        offsets = np.arange(frag.physical_rows, dtype=np.uint64)
        if frag.HasField("deletion_file"):
            dead = read_deletion_vector(state.store, frag, state.manifest.base_paths)
            if dead:
                offsets = np.setdiff1d(offsets, np.fromiter(dead, dtype=np.uint64), assume_unique=True)
        parts.append((np.uint64(frag.id) << np.uint64(32)) | offsets)
    return np.concatenate(parts) if parts else np.empty(0, np.uint64)


def _clustered(
    read: Iterator[tuple[pa.Table, np.ndarray | None]],
    how: str,
    columns: tuple[str, ...],
    addresses: np.ndarray,
    sources: list[np.ndarray],
) -> Iterator[tuple[pa.Table, np.ndarray | None]]:
    """Every row read, put in clustering order (`clustering.order`), handed on in row groups; the stable row ids
    (when the table has them) follow their rows. `addresses` are the old row addresses of the rows read, in
    order; their permutation (the old address of each row written) is appended to `sources`."""
    tables: list[pa.Table] = []
    ids: list[np.ndarray] = []
    for table, table_ids in read:
        tables.append(table)
        if table_ids is not None:
            ids.append(table_ids)
    if not tables:
        return
    rows = pa.concat_tables(tables)
    if rows.num_rows != len(addresses):
        raise CompactionError(f"clustering read {rows.num_rows} rows of {len(addresses)} live ones")
    permutation = clustering.order(rows, how, columns)
    sources.append(addresses[permutation])
    rows = rows.take(permutation)
    moved = np.concatenate(ids)[permutation] if ids else None
    for start in range(0, rows.num_rows, ROW_GROUP_ROWS):
        end = min(start + ROW_GROUP_ROWS, rows.num_rows)
        yield rows.slice(start, end - start).combine_chunks(), None if moved is None else moved[start:end]


# Reading a task's fragments. Most fragments compaction rewrites are small one-file fragments without deletions
# (appends): those are read file by file on the process's reader pool (`file_reads`), a window of files ahead
# of the writer (decoding releases the GIL, so it overlaps the writer's encoding), a run of files per hand-off,
# and handed to the writer in chunks of exactly a row group (one write call per small file costs more than
# writing it, and a chunk the writer must cut and join again costs a second copy). Other fragments (deletions,
# several files, a file whose columns differ from the version's schema) go through `Scan`, in order.
_READ_PART_ROWS = 16_384  # consecutive small files read by one thread in one go
_READ_AHEAD_ROWS = 4 * ROW_GROUP_ROWS  # rows read ahead of the writer (at least one part per thread)
# Two reader threads per core: on a busy machine the reads get a share of the cores per runnable thread, and a
# thread waiting on the GIL or the disk leaves its core to another (docs/operations/maintenance.md).
_READ_THREADS = 2 * READ_THREADS
_ROW_ID_FIELD = pa.field(ROW_ID, pa.uint64(), nullable=False)  # as `Scan` gives it
# The Parquet encode of the output runs on a thread of its own (one per task), so the task thread reads and cuts
# the next row group while earlier ones are encoded. After each hand-off the task thread waits until at most this
# many row groups are still queued or encoding (so at most this many plus the one being read are held). 0: it
# waits for each row group's encode before reading the next (no overlap; the encode still runs on that thread).
_ENCODE_AHEAD = 2


def _write_row_group(writer: FragmentWriter, table: pa.Table) -> None:
    """One row group into the task's writer (on the task's encoder thread)."""
    for batch in table.to_batches():
        writer.write(batch)


def _plain(frag: pb.DataFragment) -> bool:
    return len(frag.files) == 1 and not frag.HasField("deletion_file")


def _scan(state: TableState, fragments: list[pb.DataFragment], stable: bool, physical: pa.Schema) -> Iterator[pa.Table]:
    """Fragments read through `Scan` (deletions applied, streamed), named as `physical`."""
    for batch in Scan(state.store, state.manifest, fragments=fragments, with_row_id=stable).to_batches():
        yield schema_mod.relabel(pa.Table.from_batches([batch]), physical)


def _read_plain_run(
    state: TableState, fragments: list[pb.DataFragment], physical: pa.Schema, stable: bool
) -> list[pa.Table]:
    """One-file fragments without deletions, each named as `physical` (with `_rowid` last if `stable`). The files
    of one store are read in one call (`read_data_files`); a file whose columns differ from `physical` (or whose
    rows differ from its fragment's) is read through `Scan`, which fills and casts (or raises)."""
    columns = physical.remove(len(physical) - 1) if stable else physical
    base_paths = state.manifest.base_paths
    located = [data_file_location(state.store, base_paths, frag.files[0]) for frag in fragments]
    tables: list[pa.Table | None] = []
    start = 0
    while start < len(fragments):  # runs of files in one store (all of them, unless base paths are mixed)
        store, end = located[start][0], start + 1
        while end < len(fragments) and located[end][0] is store:
            end += 1
        rels = [rel for _, rel in located[start:end]]
        tables.extend(read_data_files(store, rels, [f.files[0] for f in fragments[start:end]], columns))
        start = end
    out = []
    for frag, table in zip(fragments, tables, strict=True):
        if table is None or table.num_rows != frag.physical_rows:  # the dataset fills and casts (or raises)
            scanned = list(_scan(state, [frag], stable, physical))
            table = pa.concat_tables(scanned) if scanned else physical.empty_table()
        elif stable:
            table = table.append_column(physical.field(ROW_ID), pa.array(row_ids.decode(frag), pa.uint64()))
        out.append(table)
    return out


def _tables(
    state: TableState, fragments: list[pb.DataFragment], stable: bool, physical: pa.Schema
) -> Iterator[pa.Table]:
    """Each fragment's live rows in order, named as `physical`."""
    with missing_files(state.store):
        index = 0
        while index < len(fragments):
            plain = _plain(fragments[index])
            end = index
            while end < len(fragments) and _plain(fragments[end]) == plain:
                end += 1
            run = fragments[index:end]
            if plain:
                io = file_reads(state.store.scheme, _READ_PART_ROWS, _READ_THREADS)
                parts = runs(run, PHYSICAL_ROWS, io.part_rows)
                reads = ((rows, partial(_read_plain_run, state, part, physical, stable)) for rows, part in parts)
                for tables in read_ahead(reads, _READ_AHEAD_ROWS, io.ahead_parts, io.threads):
                    yield from tables
            else:  # a run of other fragments, read by one scan
                yield from _scan(state, run, stable, physical)
            index = end


def _row_groups(tables: Iterator[pa.Table], size: int) -> Iterator[pa.Table]:
    """`tables` re-cut into tables of exactly `size` rows (the last one may be shorter), one chunk per column:
    the one copy the rows need before the Parquet writer (whose encoder handles many small chunks slowly)."""
    held: list[pa.Table] = []
    rows = 0
    for table in tables:
        held.append(table)
        rows += table.num_rows
        if rows < size:
            continue
        joined = pa.concat_tables(held)  # no copy: the chunks are kept
        start = 0
        while rows - start >= size:
            yield joined.slice(start, size).combine_chunks()
            start += size
        held = [joined.slice(start)] if start < rows else []
        rows -= start
    if rows:
        yield pa.concat_tables(held).combine_chunks()


def _read(
    state: TableState, fragments: list[pb.DataFragment], stable: bool
) -> Iterator[tuple[pa.Table, np.ndarray | None]]:
    """The fragments' live rows in row groups (the version's column names) and their stable row ids. Files
    are read under their physical column names, relabelled once per row group."""
    logical = state.schema
    physical = schema_mod.schema_from_fields(state.fields, logical.metadata, physical=True)
    if stable:
        logical, physical = logical.append(_ROW_ID_FIELD), physical.append(_ROW_ID_FIELD)
    for chunk in _row_groups(_tables(state, fragments, stable, physical), ROW_GROUP_ROWS):
        table = schema_mod.relabel(chunk, logical)
        if not stable:
            yield table, None
        else:
            yield table.drop_columns([ROW_ID]), table.column(ROW_ID).to_numpy()


@dataclass(frozen=True)
class RewriteResult:
    """What one task wrote: enough to commit it, and to remove its files if the commit fails."""

    read_version: int
    old_fragments: tuple[bytes, ...]
    new_fragments: tuple[bytes, ...]
    rows: int
    bytes_written: int
    bytes_read: int
    #: "kept": the new fragments hold the old ones' live rows in their order; "sort" / "zorder": permuted
    row_order: str = "kept"
    #: With a permuted order: the old row address of each row written, in order (uint64 bytes)
    row_sources: bytes | None = None


@dataclass
class CompactionPlan:
    """What `plan` chose: the tasks to run (anywhere) and the state they read.

    Attributes:
        read_version: The version the plan read; every task reads it.
        tasks: The tasks to run (picklable), in fragment order.
        options: The options the plan was made with.
        state: The state of `read_version` (picklable: send it with the tasks to any executor).
        reserved_version: The version of the ReserveFragments `plan` committed for the tasks' new fragment
            ids; None when nothing was reserved (no task, or `plan_unreserved`).
        deferred_groups: Groups worth rewriting that the budget (`max_bytes`) left for a later run.
        deferred_fragments: Their fragments.
        deferred_bytes: Their on-disk bytes.
    """

    read_version: int
    tasks: list[CompactionTask] = field(default_factory=list)
    options: CompactionOptions = field(default_factory=CompactionOptions)
    state: TableState | None = None
    reserved_version: int | None = None
    deferred_groups: int = 0
    deferred_fragments: int = 0
    deferred_bytes: int = 0

    @property
    def fragments(self) -> int:
        """Fragments the plan rewrites (every task's)."""
        return sum(len(task.fragments) for task in self.tasks)

    @property
    def new_fragment_ids(self) -> int:
        """Fragment ids reserved for the tasks' new fragments."""
        return sum(len(task.new_fragment_ids) for task in self.tasks)


@dataclass(frozen=True)
class CompactionMetrics:
    """What a compaction did: the sums over its tasks' results (`summarize`) and the Rewrite's version.

    Attributes:
        fragments_removed: Fragments the Rewrite replaced.
        fragments_added: Fragments it added.
        files_removed: Data files of the replaced fragments.
        files_added: Data files of the new fragments.
        rows: Rows rewritten (deletions applied).
        bytes_read: On-disk bytes of the replaced fragments' data files.
        bytes_written: Bytes of the new data files.
        seconds: Wall time of the compaction (0 when only results were summed).
        version: The Rewrite's version; None when there was nothing to do (or nothing committed yet).
        fragments_before: Fragments of the table at the plan's read version (None when not known).
        fragments_after: Fragments of the table at the Rewrite's version (None when not known).
        deferred_groups: Groups worth rewriting that the budget (`max_bytes`) left for the next run.
        deferred_fragments: Their fragments.
        deferred_bytes: Their on-disk bytes.
        commits: Rewrites committed (more than one with partial progress).
        versions: Their versions, in commit order.
        conflicted_groups: Groups that lost to a concurrent commit (after one re-plan, with partial progress)
            and were dropped: each as the ids of its fragments. Their files are removed.
        conflicts: Why each of those lost, in words.
    """

    fragments_removed: int = 0
    fragments_added: int = 0
    files_removed: int = 0
    files_added: int = 0
    rows: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    seconds: float = 0.0
    version: int | None = None
    fragments_before: int | None = None
    fragments_after: int | None = None
    deferred_groups: int = 0
    deferred_fragments: int = 0
    deferred_bytes: int = 0
    commits: int = 0
    versions: tuple[int, ...] = ()
    conflicted_groups: tuple[tuple[int, ...], ...] = ()
    conflicts: tuple[str, ...] = ()


def summarize(
    results: Sequence[RewriteResult],
    *,
    read_state: TableState | None = None,
    committed: TableState | None = None,
    seconds: float = 0.0,
) -> CompactionMetrics:
    """The one place task results are summed into metrics.

    Args:
        results: The results of the tasks (committed or not).
        read_state: The state the tasks read (the plan's `state`): gives `fragments_before`.
        committed: The state `commit` returned: gives `version` and `fragments_after`.
        seconds: The wall time to report.

    Returns:
        The metrics; counts read from the results' serialized fragments and the states' manifests only.
    """
    old = [pb.DataFragment.FromString(f) for r in results for f in r.old_fragments]
    new = [pb.DataFragment.FromString(f) for r in results for f in r.new_fragments]
    return CompactionMetrics(
        fragments_removed=len(old),
        fragments_added=len(new),
        files_removed=sum(len(f.files) for f in old),
        files_added=sum(len(f.files) for f in new),
        rows=sum(r.rows for r in results),
        bytes_read=sum(r.bytes_read for r in results),
        bytes_written=sum(r.bytes_written for r in results),
        seconds=seconds,
        version=committed.version if committed is not None else None,
        fragments_before=len(read_state.manifest.fragments) if read_state is not None else None,
        fragments_after=len(committed.manifest.fragments) if committed is not None else None,
        commits=1 if committed is not None else 0,
        versions=(committed.version,) if committed is not None else (),
    )


def _options(state: TableState, options: CompactionOptions | None, kwargs: Mapping[str, Any]) -> CompactionOptions:
    """`options` as given, else the keyword fields over the table's policy (`policy.compaction_options`)."""
    if options is not None:
        if kwargs:
            raise TypeError(f"give CompactionOptions or its fields as keywords, not both (got {sorted(kwargs)})")
        return options
    return policy.compaction_options(state.manifest.config, **kwargs)


def _chosen(
    state: TableState, options: CompactionOptions, fragment_ids: Collection[int] | None
) -> tuple[list[planner.Group], planner.Budgeted]:
    """The planner's groups (scoped by `where` and `fragment_ids`) and what the budget takes of them."""
    candidates = planner.candidate_ids(state, options.where)
    if fragment_ids is not None:
        wanted = set(fragment_ids)
        candidates = wanted if candidates is None else candidates & wanted
    if options.clustering is not None:
        how, columns = options.clustering
        clustering.check_columns(state.schema, f"{how}_by" if how == "zorder" else "sort_by", columns)
        found = planner.clustering_groups(state.manifest, options, candidates)
    else:
        found = planner.groups(state.manifest, options, candidates)
    return found, planner.within_budget(found, options.max_bytes)


def plan_unreserved(table: TableLike, options: CompactionOptions | None = None, **kwargs: Any) -> CompactionPlan:
    """`plan` without its ReserveFragments: the new fragments take the ids after the version's highest.

    For a caller that owns every commit to the table and commits the Rewrite with its own transaction
    (the catalog, where a table changes only through a catalog publish): it renumbers the new fragments
    if the table moved before the Rewrite lands (`renumber_new_fragments`). Nothing is committed.

    Args:
        table: a `Table` or a `TableState`
        options: what to rewrite and the task bounds (default: `CompactionOptions(**kwargs)` over the table's
            policy)
        **kwargs: `CompactionOptions` fields, when `options` is not given
    """
    state = state_of(table)
    options = _options(state, options, kwargs)
    manifest = state.manifest
    _, budgeted = _chosen(state, options, None)
    next_id = (manifest.max_fragment_id + 1) if manifest.HasField("max_fragment_id") else 0
    return _plan_of(state, options, budgeted, next_id)


def _plan_of(state: TableState, options: CompactionOptions, budgeted: planner.Budgeted, next_id: int) -> CompactionPlan:
    """One task per chosen group, the new fragment ids handed out from `next_id` in group order."""
    rows_target = planner.target_rows(state.manifest, options)
    result = CompactionPlan(
        read_version=state.version,
        options=options,
        state=state,
        deferred_groups=len(budgeted.deferred),
        deferred_fragments=sum(len(g.fragments) for g in budgeted.deferred),
        deferred_bytes=sum(g.bytes for g in budgeted.deferred),
    )
    for group in budgeted.chosen:
        count = group.new_fragments
        result.tasks.append(
            CompactionTask(
                read_version=state.version,
                fragments=tuple(f.SerializeToString() for f in group.fragments),
                new_fragment_ids=tuple(range(next_id, next_id + count)),
                target_rows_per_fragment=rows_target,
                clustering=options.clustering,
            )
        )
        next_id += count
    return result


def renumber_new_fragments(operation: operations.Rewrite, manifest: pb.Manifest) -> operations.Rewrite:
    """The Rewrite with its new fragments numbered after `manifest`'s highest fragment id (an unreserved
    plan's Rewrite landing on a version whose appends took the ids it had counted on). Data files are named
    by uuid and new fragments carry no deletion file, so the ids are metadata only.

    Args:
        operation: the unreserved plan's Rewrite
        manifest: the version it will land on
    """
    next_id = (manifest.max_fragment_id + 1) if manifest.HasField("max_fragment_id") else 0
    groups = []
    for group in operation.groups:
        new = []
        for frag in group.new_fragments:
            copy = pb.DataFragment()
            copy.CopyFrom(frag)
            copy.id = next_id
            next_id += 1
            new.append(copy)
        groups.append(tpb.Transaction.Rewrite.RewriteGroup(old_fragments=group.old_fragments, new_fragments=new))
    return operations.Rewrite(groups=groups, frag_reuse_index=operation.frag_reuse_index)


def plan(
    table: TableLike,
    options: CompactionOptions | None = None,
    *,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    fragment_ids: Collection[int] | None = None,
    **kwargs: Any,
) -> CompactionPlan:
    """Choose what to rewrite in the table's version and reserve the new fragments' ids.

    Not free of side effects: unless there is nothing to do, it commits a ReserveFragments (Lance's first
    step of a distributed compaction), so that the ids of the new fragments are fixed before any task runs.

    Args:
        table: A `Table` or a `TableState`; the handle itself does not move.
        options: What to rewrite, the task bounds, the scope (`where`) and the budget (`max_bytes`); default:
            `CompactionOptions(**kwargs)`, the fields not given taken from the table's policy
            (`mvcc.compaction.*` configuration keys).
        commit_message: The ReserveFragments' message.
        transaction_properties: Properties of the ReserveFragments (e.g. an orchestrator's run id, so a
            reader of the history can tell whose reservation it is), checked before anything is committed.
        fragment_ids: Consider only these fragments (None: every fragment; with `where`, both must hold).
        **kwargs: `CompactionOptions` fields, when `options` is not given.

    Returns:
        The plan: its tasks, the state they read, `reserved_version`, the version of the ReserveFragments
        (None when there is nothing to do and nothing was committed), and what the budget left
        (`deferred_groups`, `deferred_fragments`, `deferred_bytes`).

    Raises:
        PredicateError: `where` does not parse or names no column of the table (nothing is committed).
        ValueError: an option, or a policy key set on the table, is not valid.
    """
    state = state_of(table)
    properties = check_properties(transaction_properties)
    options = _options(state, options, kwargs)
    _, budgeted = _chosen(state, options, fragment_ids)
    if not budgeted.chosen:
        return _plan_of(state, options, budgeted, 0)
    count = sum(g.new_fragments for g in budgeted.chosen)
    reserve = Transaction(
        read_version=state.version,
        operation=operations.ReserveFragments(num_fragments=count),
        message=commit_message or "compaction: reserve fragment ids",
        transaction_properties=properties,
    )
    reserved = state.commit(reserve)
    log.info("%s: compaction of %d groups planned at version %d", state.uri, len(budgeted.chosen), state.version)
    result = _plan_of(state, options, budgeted, reserved.manifest.max_fragment_id - count + 1)
    result.reserved_version = reserved.version
    return result


def rewrite_transaction(
    table: TableLike,
    results: Sequence[RewriteResult],
    *,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    defer_index_remap: bool = False,
) -> Transaction:
    """The Rewrite of every group as an uncommitted transaction on the results' read version (what `commit`
    commits; a caller staging it elsewhere, such as a catalog transaction, commits it itself).

    Args:
        table: a `Table` or a `TableState` of the compacted table
        results: the results of the plan's tasks
        commit_message: the message stored with the transaction
        transaction_properties: properties stored with the transaction (a dict of str to str)
        defer_index_remap: keep indices covering the moved rows through a fragment reuse index
    """
    results = list(results)
    if not results:
        raise CompactionError("a compaction Rewrite needs at least one RewriteResult")
    read_versions = {r.read_version for r in results}
    if len(read_versions) != 1:
        raise CompactionError(f"rewrite results come from different versions {sorted(read_versions)}")
    state = state_of(table)
    read_version = read_versions.pop()
    groups = [
        tpb.Transaction.Rewrite.RewriteGroup(
            old_fragments=[pb.DataFragment.FromString(f) for f in r.old_fragments],
            new_fragments=[pb.DataFragment.FromString(f) for f in r.new_fragments],
        )
        for r in results
    ]
    new = [f for g in groups for f in g.new_fragments]
    base = state if state.version == read_version else state.checkout(read_version)
    kept = all(r.row_order == "kept" for r in results)
    if defer_index_remap and not kept:
        raise CompactionError("defer_index_remap needs the row order kept; a clustering rewrite permutes the rows")
    fri = None
    if defer_index_remap:
        reuse_groups = [
            frag_reuse.group_of(
                g.old_fragments,
                {f.id: read_deletion_vector(base.store, f, base.manifest.base_paths) for f in g.old_fragments},
                g.new_fragments,
            )
            for g in groups
        ]
        fri = frag_reuse.with_version(frag_reuse.find(base.manifest), reuse_groups, 0)
    maps = [r.row_sources for r in results]
    row_sources = None if kept or any(m is None for m in maps) else [m for m in maps if m is not None]
    return Transaction(
        read_version=read_version,
        operation=operations.Rewrite(groups=groups, frag_reuse_index=fri, row_sources=row_sources),
        message=commit_message or "compaction",
        # new fragments hold the old ones' live rows in order: concurrent deletions can be carried (rebase). A
        # clustering rewrite permutes them: deletions are carried by its row map (`row_sources`) or row id
        transaction_properties={
            **check_properties(transaction_properties),
            REWRITE_ROW_ORDER: "kept" if kept else "permuted",
        },
        files=data_file_uris(base.store, base.manifest.base_paths, new),
    )


def run_task(task: CompactionTask, state: TableState) -> RewriteResult:
    """Module-level, so that `partial(run_task, state=...)` pickles for process pools and Spark.

    Args:
        task: the task to run
        state: the plan's table state
    """
    return task.execute(state)


def run_tasks(
    tasks: Sequence[CompactionTask],
    state: TableState,
    *,
    executor: Executor | None = None,
    progress: Progress | None = None,
) -> list[RewriteResult]:
    """Execute `tasks` on `executor` (default: a thread pool in this process); nothing is committed.

    Args:
        tasks: Tasks of one plan.
        state: The plan's `state` (the version the tasks read).
        executor: Anything with `map(fn, tasks)`: a thread or process pool, the core's `SparkExecutor`.
        progress: Called as `progress(done, total)` after each task.

    Returns:
        The results, in the order of `tasks`.
    """
    run = partial(run_task, state=state)
    results: list[RewriteResult] = []
    for result in (executor or ThreadExecutor()).map(run, tasks):
        results.append(result)
        if progress is not None:
            progress(len(results), len(tasks))
    return results
