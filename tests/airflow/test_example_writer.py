"""The example writer DAG (`examples/airflow/dags/mvcc_on_new_version.py`) in real `airflow dags test` runs: its
asset event names the operation the version really is (the first run creates the table: an Overwrite), and its
commits carry a message and the run's id. Slow tier: each run starts Airflow."""

from __future__ import annotations

import json
import shutil
import sqlite3
from typing import Any

import pytest
from test_dags import EXAMPLES, output, succeeded

import mvcc_core as mvcc

pytestmark = pytest.mark.slow


def test_the_writer_dag_states_each_versions_own_operation_and_commits_with_its_run(
    airflow_home: Any, warehouse: str
) -> None:
    dag = airflow_home.dags / "mvcc_on_new_version.py"
    shutil.copy(EXAMPLES / "mvcc_on_new_version.py", dag)
    for _ in range(2):
        run = airflow_home.test_dag("mvcc_example_writer", dag, warehouse=warehouse)
        assert succeeded(run), output(run)[-4000:]
    uri = f"{warehouse}/events"
    versions = mvcc.open_table(uri).versions()
    assert [v.operation for v in versions] == ["Overwrite", "Append"]
    assert all(v.message == "mvcc_example_writer: 100 example rows" for v in versions)
    assert all(v.transaction_properties.get("airflow.run_id") for v in versions)
    with sqlite3.connect(airflow_home.home / "airflow.db") as db:
        events = db.execute(
            "SELECT asset.uri, asset_event.extra FROM asset_event JOIN asset ON asset.id = asset_event.asset_id"
        ).fetchall()
    extras = [json.loads(extra) for asset_uri, extra in events if asset_uri == f"mvcc://file{uri}"]
    stated = sorted((e["mvcc/version"], e["mvcc/operation"]) for e in extras)
    assert stated == [(1, "Overwrite"), (2, "Append")]
