"""Nightly maintenance of the table ``events`` (connection ``mvcc_default``): compaction as the specification's
three steps (reserve, mapped rewrites, one Rewrite), index optimization, then cleanup as a dry run followed
by the real one. None of these changes the table's data, so none emits an asset event."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from mvcc_airflow import MvccCleanupOperator, MvccOptimizeIndicesOperator, mvcc_compaction_group

TABLE = "events"

with DAG(
    dag_id="mvcc_nightly_maintenance",
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,  # maintenance of one table never runs twice at once
    tags=["mvcc", "maintenance"],
    doc_md=__doc__,
):
    compaction = mvcc_compaction_group(TABLE, options={"target_rows_per_fragment": 1_000_000})
    optimize = MvccOptimizeIndicesOperator(task_id="optimize_indices", table=TABLE)
    cleanup_dry_run = MvccCleanupOperator(task_id="cleanup_dry_run", table=TABLE, older_than="7d")
    cleanup = MvccCleanupOperator(task_id="cleanup", table=TABLE, older_than="7d", retain_versions=10, dry_run=False)

    compaction >> optimize >> cleanup_dry_run >> cleanup
