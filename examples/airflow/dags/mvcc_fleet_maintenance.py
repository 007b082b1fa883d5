"""Maintenance of a fleet of tables on one nightly byte budget (connection ``mvcc_default``).

``plan_fleet`` reads every table's advice (manifests only), ranks the tables by benefit per byte and fills the
budget (``params.max_bytes``) greedily; its log and XCom say what was chosen and why the rest was left. The
compaction is then mapped over the chosen tables (dynamic task mapping, ``.expand_kwargs``), in rank order and
one at a time (``max_active_tis_per_dagrun=1``: the scheduler starts mapped instances by map index), each with
its byte share of the budget as ``max_bytes``; index optimization runs on the tables compacted or advised for it,
retention under each table's policy on the tables advised for it. A step with nothing to do has no mapped
instance and is skipped.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Param, task

from mvcc_airflow import (
    MvccCleanupOperator,
    MvccCompactOperator,
    MvccOptimizeIndicesOperator,
    MvccPlanFleetOperator,
)

TABLES = ["events", "clicks", "orders", "partner_feed"]

with DAG(
    dag_id="mvcc_fleet_maintenance",
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["mvcc", "maintenance"],
    doc_md=__doc__,
    params={"max_bytes": Param("1GiB", type="string", description="the night's byte budget, e.g. 512MiB")},
):
    plan = MvccPlanFleetOperator(task_id="plan_fleet", tables=TABLES, max_bytes="{{ params.max_bytes }}")

    @task
    def due(plan: dict[str, Any], step: str) -> list[dict[str, Any]]:
        """The mapped tasks' keyword arguments of one step, in rank order."""
        return list(plan["steps"][step])

    compact = MvccCompactOperator.partial(
        task_id="compact", partial_progress=True, max_active_tis_per_dagrun=1
    ).expand_kwargs(due.override(task_id="due_compaction")(plan.output, "compact"))
    optimize = MvccOptimizeIndicesOperator.partial(
        task_id="optimize_indices", when_advised=True, trigger_rule="none_failed"
    ).expand_kwargs(due.override(task_id="due_indices")(plan.output, "optimize_indices"))
    retention = MvccCleanupOperator.partial(
        task_id="retention", dry_run=False, when_advised=True, trigger_rule="none_failed"
    ).expand_kwargs(due.override(task_id="due_retention")(plan.output, "retention"))

    compact >> optimize >> retention
