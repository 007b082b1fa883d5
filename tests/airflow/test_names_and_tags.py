"""The hook's table names stay under the connection's root (full uris are not names and stay allowed), and
`MvccCleanupOperator` keeps a tagged old version and goes on, saying what it kept (log, return value); failing
on one is `error_if_tagged_old_versions=True`. The cleanup runs in a real `airflow dags test`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest
from airflow.sdk.exceptions import AirflowFailException
from conftest import AirflowHome

import mvcc_core as mvcc
from mvcc_airflow import MvccCleanupOperator, MvccHook


@pytest.fixture
def root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An `mvcc_default` connection rooted at tmp_path/nested/warehouse."""
    warehouse = tmp_path / "nested" / "warehouse"
    warehouse.mkdir(parents=True)
    monkeypatch.setenv("AIRFLOW_CONN_MVCC_DEFAULT", json.dumps({"conn_type": "mvcc", "host": str(warehouse)}))
    return warehouse


HOSTILE = [
    "../outside",
    "../../outside",
    "a/../../outside",
    "./events",
    "events/",
    "sales//orders",
    "sales\\orders",
    "events\n",
    "ev\x00ents",
    "\uff45vents",  # a fullwidth look-alike
    "sales/_versions",
    "sales/data",
    "_refs",
]


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.mark.parametrize("name", HOSTILE)
def test_a_table_name_leaving_the_root_is_refused(root: Path, name: str) -> None:
    before = tree(root.parents[1])
    hook = MvccHook()
    with pytest.raises(AirflowFailException, match="a table name must stay under the connection's root uri") as caught:
        hook.table_uri(name)
    assert str(caught.value).startswith(f"table={name!r}: ")
    with pytest.raises(AirflowFailException, match="must stay under"):
        hook.open_table(name)
    op = MvccCleanupOperator(task_id="cleanup", table=name, older_than="0s", dry_run=False)
    with pytest.raises(AirflowFailException, match="must stay under"):
        op.execute({})
    assert tree(root.parents[1]) == before


def test_good_names_and_full_uris(root: Path, tmp_path: Path) -> None:
    hook = MvccHook()
    assert hook.table_uri("events") == f"{root}/events"
    assert hook.table_uri("sales/orders") == f"{root}/sales/orders"
    assert hook.table_uri("v1.2/raw-events") == f"{root}/v1.2/raw-events"
    elsewhere = str(tmp_path / "elsewhere")
    assert hook.table_uri(elsewhere) == elsewhere  # a full uri names the table itself, by design
    assert hook.table_uri("memory://wh/t") == "memory://wh/t"
    mvcc.write_table(pa.table({"x": [1]}), f"{root}/sales/orders")
    assert hook.open_table("sales/orders").count_rows() == 1


def tagged_table(uri: str) -> mvcc.Table:
    """Versions 1..5; version 2 is tagged ``release-1``."""
    t = mvcc.write_table(pa.table({"n": [0]}), uri)
    for i in range(4):
        t.append(pa.table({"n": [i + 1]}))
    t.tags.create("release-1", 2)
    return t


def test_cleanup_keeps_tagged_versions_and_goes_on(root: Path) -> None:
    t = tagged_table(f"{root}/events")
    op = MvccCleanupOperator(task_id="cleanup", table="events", older_than="0s", dry_run=False)
    result = op.execute({})
    assert result["metrics"]["kept_tagged_versions"] == {"release-1": 2}
    assert result["metrics"]["removed_versions"] == [1, 3, 4]
    assert [v.version for v in mvcc.open_table(t.uri).versions()] == [2, 5]
    mvcc.open_table(t.uri).append(pa.table({"n": [9]}))
    again = op.execute({})  # the next night: not wedged
    assert again["metrics"]["kept_tagged_versions"] == {"release-1": 2}
    assert [v.version for v in mvcc.open_table(t.uri).versions()] == [2, 6]


def test_error_if_tagged_old_versions_fails_and_removes_nothing(root: Path) -> None:
    t = tagged_table(f"{root}/events")
    op = MvccCleanupOperator(
        task_id="cleanup", table="events", older_than="0s", dry_run=False, error_if_tagged_old_versions=True
    )
    with pytest.raises(AirflowFailException, match=r"release-1 \(version 2\).*error_if_tagged_old_versions=True"):
        op.execute({})
    assert [v.version for v in mvcc.open_table(t.uri).versions()] == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="error_if_tagged_old_versions must be True or False"):
        MvccCleanupOperator(task_id="c", table="events", older_than="0s", error_if_tagged_old_versions="yes")


def _run_state(run: subprocess.CompletedProcess[str]) -> str | None:
    for line in (run.stdout + run.stderr).splitlines():
        if "DagRun Finished:" in line:
            return line.split(", state=")[1].split(",")[0]
    return None


@pytest.mark.slow
def test_a_dag_cleaning_a_tagged_table_succeeds(airflow_home: AirflowHome, warehouse: str, tmp_path: Path) -> None:
    uri = f"{warehouse}/events"
    tagged_table(uri)
    recorded = tmp_path / "cleanup.json"
    dag = airflow_home.write_dag(
        "cleanup_tagged_dag",
        f"""
        import json
        from datetime import datetime
        from airflow.sdk import DAG, task
        from mvcc_airflow import MvccCleanupOperator

        with DAG("cleanup_tagged_dag", schedule=None, start_date=datetime(2026, 1, 1)):
            cleanup = MvccCleanupOperator(task_id="cleanup", table="events", older_than="0s", dry_run=False)

            @task
            def record(result):
                open({str(recorded)!r}, "w").write(json.dumps(result))

            record(cleanup.output)
        """,
    )
    run = airflow_home.test_dag("cleanup_tagged_dag", dag, warehouse=warehouse)
    log = run.stdout + run.stderr
    assert _run_state(run) == "success", log[-4000:]
    assert "kept tagged versions older than 0:00:00: release-1 (version 2)" in log
    result = json.loads(recorded.read_text())
    assert result["metrics"]["kept_tagged_versions"] == {"release-1": 2}
    assert [v.version for v in mvcc.open_table(uri).versions()] == [2, 5]
