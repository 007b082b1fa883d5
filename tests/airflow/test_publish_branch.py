"""`MvccPublishBranchOperator`: its argument checks (fast, in process) and write-audit-publish in a real DAG run
(slow: `airflow dags test` in a subprocess): a failed audit task leaves the publish unrun and main untouched,
a passing one publishes the branch to main in one version and emits the table's asset event."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_airflow import MvccPublishBranchOperator

AirflowHome = Any  # the `airflow_home` fixture's type (tests/airflow/conftest.py)


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
def test_write_audit_publish_in_a_dag(airflow_home: AirflowHome, warehouse: str, tmp_path: Path) -> None:
    uri = f"{warehouse}/orders"
    mvcc.write_table(pa.table({"id": [1, 2], "amount": [1.0, 2.0]}), uri)
    result = tmp_path / "publish.json"
    dag = airflow_home.write_dag(
        "wap_dag",
        f"""
        import json
        from datetime import datetime

        import pyarrow as pa
        from airflow.sdk import DAG, task
        from mvcc_airflow import MvccHook, MvccPublishBranchOperator

        with DAG("wap_dag", schedule=None, start_date=datetime(2026, 1, 1), params={{"amount": 3.0}}):

            @task
            def write(params=None):
                main = MvccHook().open_table("orders")
                if "audit" in main.branches.list():
                    main.branches.delete("audit")
                branch = main.create_branch("audit")
                branch.append(pa.table({{"id": [3], "amount": [float(params["amount"])]}}))

            @task
            def audit():
                branch = MvccHook().open_table("orders").checkout_branch("audit")
                bad = branch.count_rows("amount < 0")
                if bad:
                    raise ValueError(f"{{bad}} negative amount(s) on branch audit")

            publish = MvccPublishBranchOperator(
                task_id="publish", table="orders", branch="audit", delete_branch=True, commit_message="audited"
            )

            @task
            def record(published):
                open({str(result)!r}, "w").write(json.dumps(published))

            write() >> audit() >> publish
            record(publish.output)
        """,
    )
    bad = airflow_home.test_dag("wap_dag", dag, warehouse=warehouse, conf={"amount": -3.0})
    assert _state(_output(bad)) == "failed", _output(bad)[-4000:]
    main = mvcc.open_table(uri)
    assert main.version == 1 and main.count_rows() == 2  # the publish never ran
    assert not result.exists()
    assert main.checkout_branch("audit").count_rows("amount < 0") == 1  # kept for inspection

    good = airflow_home.test_dag("wap_dag", dag, warehouse=warehouse)
    assert _state(_output(good)) == "success", _output(good)[-4000:]
    main = mvcc.open_table(uri)
    assert main.version == 2 and sorted(main.to_table().column("id").to_pylist()) == [1, 2, 3]
    assert main.versions()[-1].message == "audited"
    assert main.versions()[-1].transaction_properties["airflow/task_id"] == "publish"
    assert "audit" not in main.branches.list()
    recorded = json.loads(result.read_text())
    assert recorded["table"] == uri and recorded["version"] == 2 and recorded["operation"] == "publish_branch"
    assert recorded["metrics"]["branch"] == "audit" and recorded["metrics"]["deleted_branch"] is True
