"""`compact_files`: plan, run the tasks, commit, in one call; with partial progress, commit groups as they finish.

With `partial_progress=True` the finished groups are committed in up to `max_commits` Rewrites, each as soon as
its share of the tasks is done, every one a partial commit (`commits.commit(..., partial=True)`): a group that
loses to a concurrent commit is set aside, the others land. The groups set aside are planned again once on the
latest version (those of their fragments that are still there and still worth rewriting), run and committed;
what loses again is dropped and reported in the metrics.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.executor import Executor, ThreadExecutor
from mvcc_core.maintenance.commits import commit
from mvcc_core.maintenance.compaction import (
    CompactionMetrics,
    CompactionOptions,
    CompactionPlan,
    RewriteResult,
    plan,
    run_task,
    run_tasks,
    summarize,
)
from mvcc_core.maintenance.handles import TableLike
from mvcc_core.progress import Progress
from mvcc_core.txn.state import TableState

__all__ = ["DEFAULT_MAX_COMMITS", "compact_files"]

log = logging.getLogger("mvcc.maintenance")

#: Rewrites a partial-progress compaction commits at most (Iceberg's `partial-progress.max-commits` default).
DEFAULT_MAX_COMMITS = 10


def compact_files(
    table: TableLike,
    options: CompactionOptions | None = None,
    *,
    executor: Executor | None = None,
    progress: Progress | None = None,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    partial_progress: bool = False,
    max_commits: int | None = None,
    **kwargs: Any,
) -> tuple[CompactionMetrics, TableState]:
    """Plan, execute every task on `executor`, commit: `plan`, `run_tasks` and `commit` in one call.

    Args:
        table: A `Table` or a `TableState` (neither moves; the caller adopts the returned state).
        options: What to rewrite (default: `CompactionOptions(**kwargs)` over the table's policy).
        executor: Where the tasks run (default: a thread pool in this process).
        progress: Called as `progress(done, total)` after each task.
        commit_message: The Rewrite's message.
        transaction_properties: Properties of the Rewrite.
        partial_progress: Commit finished groups in up to `max_commits` Rewrites as they complete; a group that
            loses to a concurrent commit is planned again once, then dropped and reported, never the whole run.
        max_commits: With `partial_progress`: the most Rewrites (default 10).
        **kwargs: `CompactionOptions` fields, when `options` is not given.

    Returns:
        The metrics (`summarize`, with what the budget left and, with partial progress, the commits and the
        groups dropped) and the state of the last Rewrite's version (the input state when nothing was done).

    Raises:
        RetryableConflictError: Without `partial_progress`: a concurrent commit won (the new files are removed).
        ValueError: `max_commits` without `partial_progress`, or not a positive int.
    """
    if max_commits is not None:
        if not partial_progress:
            raise ValueError("max_commits bounds the Rewrites of partial progress: give partial_progress=True too")
        if isinstance(max_commits, bool) or not isinstance(max_commits, int) or max_commits < 1:
            raise ValueError(f"max_commits must be a positive int, got {max_commits!r}")
    start = time.perf_counter()
    compaction_plan = plan(table, options, **kwargs)
    state = compaction_plan.state
    assert state is not None
    deferred = CompactionMetrics(
        deferred_groups=compaction_plan.deferred_groups,
        deferred_fragments=compaction_plan.deferred_fragments,
        deferred_bytes=compaction_plan.deferred_bytes,
    )
    if not compaction_plan.tasks:
        return replace(deferred, seconds=time.perf_counter() - start), state
    common: dict[str, Any] = dict(
        commit_message=commit_message,
        transaction_properties=transaction_properties,
        defer_index_remap=compaction_plan.options.defer_index_remap,
    )
    if partial_progress:
        metrics, committed = _partial(compaction_plan, executor, progress, max_commits or DEFAULT_MAX_COMMITS, common)
    else:
        results = run_tasks(compaction_plan.tasks, state, executor=executor, progress=progress)
        committed = commit(state, results, **common)
        metrics = summarize(results, read_state=state, committed=committed)
    metrics = replace(
        metrics,
        seconds=time.perf_counter() - start,
        deferred_groups=deferred.deferred_groups,
        deferred_fragments=deferred.deferred_fragments,
        deferred_bytes=deferred.deferred_bytes,
    )
    log.info(
        "%s: compacted %d fragments into %d (%d commits, last version %s, %.2f s)",
        state.uri,
        metrics.fragments_removed,
        metrics.fragments_added,
        metrics.commits,
        metrics.version,
        metrics.seconds,
    )
    return metrics, committed


def _partial(
    compaction_plan: CompactionPlan,
    executor: Executor | None,
    progress: Progress | None,
    max_commits: int,
    common: Mapping[str, Any],
) -> tuple[CompactionMetrics, TableState]:
    """Run the plan's tasks, committing them in up to `max_commits` partial Rewrites; re-plan the losers once."""
    state = compaction_plan.state
    assert state is not None
    tasks = compaction_plan.tasks
    batch = math.ceil(len(tasks) / max_commits)
    landed: list[RewriteResult] = []
    lost: list[tuple[RewriteResult, str]] = []
    versions: list[int] = []
    latest = state

    def land(pending: list[RewriteResult]) -> None:
        nonlocal latest
        outcome = commit(state, pending, partial=True, **common)
        landed.extend(outcome.committed)
        lost.extend(zip(outcome.conflicted, outcome.reasons, strict=True))
        versions.extend(outcome.versions)
        if outcome.versions:
            latest = outcome.state

    pending: list[RewriteResult] = []
    run = partial(run_task, state=state)
    for done, result in enumerate((executor or ThreadExecutor()).map(run, tasks), start=1):
        pending.append(result)
        if progress is not None:
            progress(done, len(tasks))
        if len(pending) >= batch:
            land(pending)
            pending = []
    if pending:
        land(pending)
    dropped: list[tuple[RewriteResult, str]] = []
    if lost:  # once more on the latest version, with the fragments of the lost groups that are still there
        again = latest.latest()
        ids = {pb.DataFragment.FromString(f).id for r, _ in lost for f in r.old_fragments}
        options = replace(compaction_plan.options, max_bytes=None, where=None)
        retry = plan(again, options, fragment_ids=ids, commit_message="compaction: reserve fragment ids (re-plan)")
        log.info("%s: %d groups lost to concurrent commits, %d re-planned", state.uri, len(lost), len(retry.tasks))
        if retry.tasks:
            assert retry.state is not None
            results = run_tasks(retry.tasks, retry.state, executor=executor)
            outcome = commit(retry.state, results, partial=True, **common)
            landed.extend(outcome.committed)
            versions.extend(outcome.versions)
            dropped.extend(zip(outcome.conflicted, outcome.reasons, strict=True))
            if outcome.versions:
                latest = outcome.state
        covered = {pb.DataFragment.FromString(f).id for t in retry.tasks for f in t.fragments}
        # a lost group none of whose fragments was re-planned: gone or no longer worth it (reported as lost)
        dropped.extend(
            (r, why) for r, why in lost if not {pb.DataFragment.FromString(f).id for f in r.old_fragments} & covered
        )
    metrics = summarize(landed, read_state=state, committed=latest if versions else None)
    return (
        replace(
            metrics,
            commits=len(versions),
            versions=tuple(versions),
            conflicted_groups=tuple(
                tuple(pb.DataFragment.FromString(f).id for f in r.old_fragments) for r, _ in dropped
            ),
            conflicts=tuple(why for _, why in dropped),
        ),
        latest,
    )
