"""Compaction as pylance's `lance.optimize` shapes it, in three separable steps: `plan` (which commits the
ReserveFragments), `run_task` / `run_tasks` anywhere (threads, processes, Spark executors), then `commit` of one
Rewrite. `Table.optimize.compact_files` runs all three; `CompactionOptions` tunes them.

The steps are implemented in `mvcc_core.maintenance.compaction` (the module's docstring has the rules).
"""

from __future__ import annotations

from mvcc_core.maintenance.compaction import (
    CompactionMetrics,
    CompactionOptions,
    CompactionPlan,
    CompactionTask,
    RewriteResult,
    commit,
    compact_files,
    plan,
    plan_unreserved,
    rewrite_transaction,
    run_task,
    run_tasks,
    summarize,
)

__all__ = [
    "CompactionMetrics",
    "CompactionOptions",
    "CompactionPlan",
    "CompactionTask",
    "RewriteResult",
    "commit",
    "compact_files",
    "plan",
    "plan_unreserved",
    "rewrite_transaction",
    "run_task",
    "run_tasks",
    "summarize",
]
