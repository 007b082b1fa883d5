"""`MvccPublishBranchOperator`: its argument checks (fast, in process) and write-audit-publish in a real DAG run
(slow: `airflow dags test` in a subprocess): a failed audit task leaves the publish unrun and main untouched,
a passing one publishes the branch to main in one version and emits the table's asset event."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_airflow import MvccPublishBranchOperator

AirflowHome = Any  # the `airflow_home` fixture's type (tests/airflow/conftest.py)
EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "airflow" / "dags"
LOGICAL_DATE = "2026-01-01"  # what the airflow_home fixture's `dags test` runs


def test_the_operator_refuses_bad_arguments_by_their_names() -> None:
    with pytest.raises(ValueError, match="branch must be a branch name"):
        MvccPublishBranchOperator(task_id="p", table="memory://wh/t", branch=" ")
    with pytest.raises(ValueError, match="delete_branch must be True or False"):
        MvccPublishBranchOperator(task_id="p", table="memory://wh/t", branch="b", delete_branch="yes")
    with pytest.raises(ValueError, match="transaction_properties must map strings to strings"):
        MvccPublishBranchOperator(task_id="p", table="memory://wh/t", branch="b", transaction_properties={"n": 1})
    op = MvccPublishBranchOperator(task_id="p", table="memory://wh/t", branch="audit-{{ ds_nodash }}")
    assert set(op.template_fields) >= {"table", "branch", "commit_message"}
    assert [o.uri for o in op.outlets] and op.retries == 4


def _output(run: subprocess.CompletedProcess[str]) -> str:
    return run.stdout + run.stderr


def _state(log: str) -> str | None:
    for line in log.splitlines():
        if "DagRun Finished:" in line:
            return line.split(", state=")[1].split(",")[0]
    return None


@pytest.mark.slow
def test_the_example_write_audit_publish_dag(airflow_home: AirflowHome, warehouse: str) -> None:
    uri = f"{warehouse}/orders"
    mvcc.write_table(pa.table({"id": [1, 2], "amount": [1.0, 2.0]}), uri)
    dag = airflow_home.dags / "mvcc_write_audit_publish.py"
    shutil.copy(EXAMPLES / "mvcc_write_audit_publish.py", dag)
    branch = "audit-" + LOGICAL_DATE.replace("-", "") + "T000000"

    bad = airflow_home.test_dag("mvcc_write_audit_publish", dag, warehouse=warehouse, conf={"bad_rows": True})
    log = _output(bad)
    assert _state(log) == "failed", log[-4000:]
    assert "negative amount(s) on branch" in log and "up_for_retry" not in log
    main = mvcc.open_table(uri)
    assert main.version == 1 and main.count_rows() == 2  # the publish never ran
    assert main.checkout_branch(branch).count_rows("amount < 0") == 1  # kept for inspection

    good = airflow_home.test_dag("mvcc_write_audit_publish", dag, warehouse=warehouse)
    log = _output(good)
    assert _state(log) == "success", log[-4000:]
    main = mvcc.open_table(uri)
    assert main.version == 2 and sorted(main.to_table().column("id").to_pylist()) == [1, 2, 3]
    assert main.to_table().column("amount").to_pylist().count(3.0) == 1
    published = main.versions()[-1]
    assert published.message == "airflow: audited orders"
    assert published.transaction_properties["airflow/task_id"] == "publish"
    assert published.transaction_properties["airflow/maintenance"] == "publish_branch"
    assert branch not in main.branches.list()
    with sqlite3.connect(airflow_home.home / "airflow.db") as db:
        events = db.execute(
            "SELECT asset.uri, asset_event.extra FROM asset_event JOIN asset ON asset.id = asset_event.asset_id"
        ).fetchall()
        (returned,) = db.execute(
            "SELECT value FROM xcom WHERE dag_id = 'mvcc_write_audit_publish' AND task_id = 'publish' "
            "AND key = 'return_value'"
        ).fetchall()
    extras = [json.loads(extra) for asset_uri, extra in events if asset_uri == f"mvcc://file{uri}"]
    assert {"mvcc/version": 2, "mvcc/operation": "publish_branch"} in extras
    result = json.loads(returned[0])
    assert (result["table"], result["version"], result["operation"]) == (uri, 2, "publish_branch")
    assert result["metrics"] == {"branch": branch, "branch_version": 2, "deleted_branch": True}
