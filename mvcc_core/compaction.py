"""Compaction as pylance's `lance.optimize` shapes it, in three separable steps: `plan` (which commits the
ReserveFragments), `run_task` / `run_tasks` anywhere (threads, processes, Spark executors), then `commit` of one
Rewrite (or, `partial=True`, of every group that does not conflict). `Table.optimize.compact_files` runs all
three; `CompactionOptions` tunes them (scope `where`, budget `max_bytes`); `Table.optimize.recommend` says what
maintenance would pay (`MaintenanceAdvice`); `plan_fleet` ranks many tables' advice on one budget and
`run_fleet` runs what it chose (`FleetPlan`, `FleetRun`, `QuietHours`).

The steps are implemented in `mvcc_core.maintenance` (`compaction`, `planner`, `commits`, `run`, `advice`,
`policy`, `fleet`; each module's docstring has its rules).
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
from mvcc_core.maintenance.fleet import (
    FleetEntry,
    FleetError,
    FleetPlan,
    FleetRun,
    FleetTableResult,
    QuietHours,
    plan_fleet,
    run_fleet,
)
from mvcc_core.maintenance.run import compact_files

__all__ = [
    "CompactionMetrics",
    "CompactionOptions",
    "CompactionPlan",
    "CompactionTask",
    "FleetEntry",
    "FleetError",
    "FleetPlan",
    "FleetRun",
    "FleetTableResult",
    "MaintenanceAdvice",
    "PartialCommit",
    "QuietHours",
    "RewriteResult",
    "commit",
    "compact_files",
    "plan",
    "plan_fleet",
    "plan_unreserved",
    "recommend",
    "rewrite_transaction",
    "run_fleet",
    "run_task",
    "run_tasks",
    "summarize",
]
