"""Restore the table ``events`` to an earlier version: trigger with one of the params ``version``, ``tag`` or
``timestamp`` (ISO-8601). The restore emits the table's asset event, so ``mvcc_on_events_asset`` runs after it."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Param

from mvcc_airflow import MvccRestoreOperator

with DAG(
    dag_id="mvcc_restore",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    render_template_as_native_obj=True,  # an unset param stays None, a version stays an int
    params={
        "version": Param(None, type=["null", "integer"], minimum=1, description="the version number to restore"),
        "tag": Param(None, type=["null", "string"], description="or: the tag whose version to restore"),
        "timestamp": Param(None, type=["null", "string"], description="or: the version current at this time"),
    },
    tags=["mvcc", "restore"],
    doc_md=__doc__,
):
    MvccRestoreOperator(
        task_id="restore",
        table="events",
        version="{{ params.version }}",
        tag="{{ params.tag }}",
        timestamp="{{ params.timestamp }}",
        retries=0,  # a restore is run by a person: report, do not try again
    )
