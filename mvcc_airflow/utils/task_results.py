"""What a task writes into a commit (its transaction properties) and returns through XCom."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import Context

import mvcc_core as mvcc


def airflow_properties(context: Context, kind: str) -> dict[str, str]:
    """The transaction properties of a commit made by a task: its DAG, run, task and maintenance kind.

    Args:
        context: the Airflow task context
        kind: the maintenance kind (`compact`, `cleanup`, ...)
    """
    ti = context["ti"]
    return {
        "airflow/dag_id": str(ti.dag_id),
        "airflow/run_id": str(ti.run_id),
        "airflow/task_id": str(ti.task_id),
        "airflow/maintenance": kind,
    }


def task_result(table: mvcc.Table, operation: str | None, metrics: Mapping[str, Any]) -> dict[str, Any]:
    """What an operator returns through XCom (JSON-serializable: tuples become lists).

    Args:
        table: the table after the operator's commit
        operation: the committed operation's name (None: nothing was committed)
        metrics: the operation's metrics
    """
    return {
        "table": table.uri,
        "version": table.version,
        "operation": operation,
        "metrics": {k: list(v) if isinstance(v, tuple) else v for k, v in metrics.items()},
    }
