"""Nightly maintenance of the table ``events`` (connection ``mvcc_default``), decided by the core's advice and
the table's own policy (its ``mvcc.compaction.*`` and ``mvcc.retention.*`` configuration keys).

``advise`` asks the core what maintenance would pay now (manifests only, no data read); when nothing would, it
skips every task after it, so a healthy table costs one short task a night. Otherwise each step runs only when
it has something to do (``when_advised=True``) and skips itself when not, the next step still running
(``trigger_rule="none_failed"``): compaction as the specification's three steps (reserve, mapped rewrites, a
partial commit: a conflict costs only the groups it touched), index optimization (asked after the compaction,
which leaves the rewritten fragments out of the indices), then retention under the table's policy, as a dry
run followed by the real one. None of these changes the table's data, so none emits an asset event.

Set the policy on the table, not here: ``t.update_config({"mvcc.retention.older_than": "7d",
"mvcc.retention.retain_versions": "10", "mvcc.compaction.max_bytes": "1GiB"})``.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from mvcc_airflow import (
    MvccAdviseOperator,
    MvccCleanupOperator,
    MvccOptimizeIndicesOperator,
    mvcc_compaction_group,
)

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
    advise = MvccAdviseOperator(task_id="advise", table=TABLE, short_circuit=True)
    compaction = mvcc_compaction_group(TABLE, partial_progress=True, when_advised=True)
    optimize = MvccOptimizeIndicesOperator(
        task_id="optimize_indices", table=TABLE, when_advised=True, trigger_rule="none_failed"
    )
    cleanup_dry_run = MvccCleanupOperator(
        task_id="cleanup_dry_run", table=TABLE, when_advised=True, trigger_rule="none_failed"
    )
    cleanup = MvccCleanupOperator(
        task_id="cleanup", table=TABLE, dry_run=False, when_advised=True, trigger_rule="none_failed"
    )

    advise >> compaction >> optimize >> cleanup_dry_run >> cleanup
