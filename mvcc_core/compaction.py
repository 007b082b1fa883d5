"""Compaction as pylance's `lance.optimize` shapes it, in three separable steps: `plan` (which commits the
ReserveFragments), `run_task` / `run_tasks` anywhere (threads, processes, Spark executors), then `commit` of one
Rewrite (or, `partial=True`, of every group that does not conflict). `Table.optimize.compact_files` runs all
three; `CompactionOptions` tunes them (scope `where`, budget `max_bytes`); `Table.optimize.recommend` says what
maintenance would pay (`MaintenanceAdvice`).

The steps are implemented in `mvcc_core.maintenance` (`compaction`, `planner`, `commits`, `run`, `advice`,
`policy`; each module's docstring has its rules).
"""

from __future__ import annotations

from mvcc_core.maintenance.advice import MaintenanceAdvice, recommend
from mvcc_core.maintenance.commits import PartialCommit, commit
from mvcc_core.maintenance.compaction import (
    CompactionMetrics,
    CompactionOptions,
    CompactionPlan,
    CompactionTask,
    RewriteResult,
    plan,
    plan_unreserved,
    rewrite_transaction,
    run_task,
    run_tasks,
    summarize,
)
from mvcc_core.maintenance.run import compact_files

__all__ = [
    "CompactionMetrics",
    "CompactionOptions",
    "CompactionPlan",
    "CompactionTask",
    "MaintenanceAdvice",
    "PartialCommit",
    "RewriteResult",
    "commit",
    "compact_files",
    "plan",
    "plan_unreserved",
    "recommend",
    "rewrite_transaction",
    "run_task",
    "run_tasks",
    "summarize",
]
