"""The provider in real DAG runs: DAG files in a temporary DAGs folder, `airflow dags test` in a subprocess
(a temporary AIRFLOW_HOME with sqlite, tests/airflow/conftest.py). Slow tier: each run starts Airflow."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import mvcc_core as mvcc

AirflowHome = Any  # the `airflow_home` fixture's type (tests/airflow/conftest.py)

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "airflow" / "dags"


def output(run: subprocess.CompletedProcess[str]) -> str:
    return run.stdout + run.stderr


def run_state(log: str) -> str | None:
    """The state `airflow dags test` reported for the DAG run (its "DagRun Finished: ..., state=X," line)."""
    for line in log.splitlines():
        if "DagRun Finished:" in line:
            return line.split(", state=")[1].split(",")[0]
    return None


def succeeded(run: subprocess.CompletedProcess[str]) -> bool:
    """Whether `airflow dags test` reported the DAG run successful."""
    return run_state(output(run)) == "success"


def fragmented(uri: str, batches: int = 20, rows: int = 10) -> mvcc.Table:
    """A table of `batches` appends of `rows` rows each (one small fragment per append)."""
    t = None
    for i in range(batches):
        data = pa.table({"id": list(range(i * rows, (i + 1) * rows)), "v": [f"r{j}" for j in range(rows)]})
        t = mvcc.write_table(data, uri) if t is None else t.append(data)
    assert t is not None
    return t


def operations(t: mvcc.Table, after: int) -> list[str]:
    latest = t.checkout_latest()
    return [latest.transaction(v).operation.name for v in range(after + 1, latest.version + 1)]


def sorted_rows(t: mvcc.Table) -> pa.Table:
    return t.checkout_latest().to_table().sort_by("id")


def unreferenced_data_files(uri: str) -> set[str]:
    """Data files under the table that no version references (what a lost Rewrite would leave behind)."""
    t = mvcc.open_table(uri)
    referenced = {
        Path(f.path).name
        for info in t.versions()
        for frag in t.checkout(info.version).get_fragments()
        for f in frag.data_files()
    }
    return {p.name for p in (Path(uri) / "data").glob("*.parquet")} - referenced


def task_states(run: subprocess.CompletedProcess[str]) -> list[str]:
    return [line.split("new_state=")[1].split()[0] for line in output(run).splitlines() if "new_state=" in line]


def test_compaction_group_reserves_once_rewrites_mapped_and_commits_one_rewrite(
    airflow_home: AirflowHome, warehouse: str
) -> None:
    t = fragmented(f"{warehouse}/events")
    before, rows = t.version, sorted_rows(t)
    dag = airflow_home.write_dag(
        "group_dag",
        """
        from datetime import datetime
        from airflow.sdk import DAG
        from mvcc_airflow import mvcc_compaction_group

        with DAG("group_dag", schedule=None, start_date=datetime(2026, 1, 1)):
            mvcc_compaction_group("events", group_id="compact", options={"target_rows_per_fragment": 50})
        """,
    )
    run = airflow_home.test_dag("group_dag", dag, warehouse=warehouse)
    assert succeeded(run), output(run)[-4000:]
    assert operations(t, before) == ["ReserveFragments", "Rewrite"]
    assert sorted_rows(t).equals(rows)
    assert len(t.checkout_latest().get_fragments()) == 4
    assert output(run).count("compact.rewrite_fragments map_index=") >= 4  # four mapped task instances
    assert not unreferenced_data_files(f"{warehouse}/events")


def test_a_lost_rewrite_of_the_group_removes_its_files_and_is_not_retried(
    airflow_home: AirflowHome, warehouse: str
) -> None:
    uri = f"{warehouse}/events"
    t = fragmented(uri)
    before = t.version
    dag = airflow_home.write_dag(
        "group_lost_dag",
        f"""
        from datetime import datetime
        from airflow.sdk import DAG, task
        import mvcc_core as mvcc
        from mvcc_airflow import mvcc_compaction_group

        with DAG("group_lost_dag", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
            mvcc_compaction_group("events", group_id="compact", options={{"target_rows_per_fragment": 50}})

            @task
            def outside_update():  # another writer rewrites a column of a fragment the rewrite read
                mvcc.open_table({uri!r}).update({{"v": "'x'"}}, where="id < 5", mode="rewrite_columns")

            dag.get_task("compact.rewrite_fragments") >> outside_update() >> dag.get_task("compact.commit_rewrite")
        """,
    )
    run = airflow_home.test_dag("group_lost_dag", dag, warehouse=warehouse)
    log = output(run)
    assert run_state(log) == "failed" and "lost to a concurrent commit" in log, log[-4000:]
    assert "up_for_retry" not in log  # committing the same results again would lose again
    assert operations(t, before) == ["ReserveFragments", "Update"]
    assert not unreferenced_data_files(uri)  # the files the mapped tasks wrote were removed
    assert t.checkout_latest().count_rows() == 200


def test_a_compaction_losing_to_a_concurrent_column_rewrite_is_retried_by_the_tasks_retries(
    airflow_home: AirflowHome, warehouse: str
) -> None:
    uri = f"{warehouse}/events"
    t = fragmented(uri)
    before = t.version
    dag = airflow_home.write_dag(
        "compact_retry_dag",
        """
        from datetime import datetime, timedelta
        from airflow.sdk import DAG
        from mvcc_airflow import MvccCompactOperator

        with DAG("compact_retry_dag", schedule=None, start_date=datetime(2026, 1, 1)):
            MvccCompactOperator(
                task_id="compact",
                table="events",
                options={"target_rows_per_fragment": 50},
                retries=2,
                retry_delay=timedelta(seconds=1),
            )
        """,
    )
    # Every commit of the DAG run pauses 2 s after writing its transaction file (a failpoint in the Airflow
    # process only): the test rewrites a column of a fragment the rewrite read while the first Rewrite pauses (a
    # delete would be carried onto the new fragments, docs/reference/conflicts.md; a REWRITE_COLUMNS update cannot be).
    env = airflow_home.environment({"MVCC_FAILPOINTS": "commit.after_transaction_file=sleep(2)"}, warehouse)
    txns = Path(uri) / "_transactions"
    existing = set(os.listdir(txns))
    proc = subprocess.Popen(
        airflow_home.command("compact_retry_dag", dag),
        env=env,
        cwd=airflow_home.home,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while len(set(os.listdir(txns)) - existing) < 2:  # the ReserveFragments' and the Rewrite's
            assert proc.poll() is None and time.monotonic() < deadline, "the compaction did not reach its Rewrite"
            time.sleep(0.05)
        t.checkout_latest().update({"v": "'x'"}, where="id < 5", mode="rewrite_columns")
        out, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert run_state(out) == "success", out[-4000:]
    assert "RetryableConflictError" in out and "up_for_retry" in out
    assert operations(t, before) == ["ReserveFragments", "Update", "ReserveFragments", "Rewrite"]
    assert t.checkout_latest().count_rows() == 200
    assert not unreferenced_data_files(uri)


def test_cleanup_dry_run_then_real(airflow_home: AirflowHome, warehouse: str, tmp_path: Path) -> None:
    uri = f"{warehouse}/events"
    fragmented(uri, batches=5)
    result = tmp_path / "cleanup.json"
    dag = airflow_home.write_dag(
        "cleanup_dag",
        f"""
        import json
        from datetime import datetime, timedelta
        from airflow.sdk import DAG, task
        from mvcc_airflow import MvccCleanupOperator

        with DAG("cleanup_dag", schedule=None, start_date=datetime(2026, 1, 1)):
            dry = MvccCleanupOperator(task_id="dry_run", table="events", older_than="0s")
            real = MvccCleanupOperator(task_id="cleanup", table="events", older_than=timedelta(0), dry_run=False)

            @task
            def record(dry, real):
                open({str(result)!r}, "w").write(json.dumps({{"dry": dry, "real": real}}))

            dry >> real
            record(dry.output, real.output)
        """,
    )
    run = airflow_home.test_dag("cleanup_dag", dag, warehouse=warehouse)
    assert succeeded(run), output(run)[-4000:]
    recorded = json.loads(result.read_text())
    dry, real = recorded["dry"], recorded["real"]
    assert dry["operation"] == "cleanup (dry run)" and real["operation"] == "cleanup"
    assert dry["metrics"]["dry_run"] is True and real["metrics"]["dry_run"] is False
    assert dry["metrics"]["removed_versions"] == real["metrics"]["removed_versions"] == [1, 2, 3, 4]
    assert dry["version"] == real["version"] == 5
    assert [v.version for v in mvcc.open_table(uri).versions()] == [5]


def test_restore_by_tag_from_params_emits_the_asset_event(airflow_home: AirflowHome, warehouse: str) -> None:
    uri = f"{warehouse}/events"
    t = mvcc.write_table(pa.table({"id": [1, 2, 3]}), uri)
    t.tags.create("good", t.version)
    t.append(pa.table({"id": [4]}))
    dag = airflow_home.dags / "mvcc_restore.py"
    shutil.copy(EXAMPLES / "mvcc_restore.py", dag)
    run = airflow_home.test_dag("mvcc_restore", dag, warehouse=warehouse, conf={"tag": "good"})
    assert succeeded(run), output(run)[-4000:]
    latest = mvcc.open_table(uri)
    assert latest.version == 3 and latest.transaction().operation.name == "Restore"
    assert sorted(latest.to_table().column("id").to_pylist()) == [1, 2, 3]
    with sqlite3.connect(airflow_home.home / "airflow.db") as db:
        events = db.execute(
            "SELECT asset.uri, asset_event.extra FROM asset_event JOIN asset ON asset.id = asset_event.asset_id"
        ).fetchall()
    extras = [json.loads(extra) for asset_uri, extra in events if asset_uri == f"mvcc://file{uri}"]
    assert {"mvcc/version": 3, "mvcc/operation": "Restore"} in [
        {k: e.get(k) for k in ("mvcc/version", "mvcc/operation")} for e in extras
    ]
    (restored,) = [e for e in extras if e.get("mvcc/operation") == "Restore"]
    # the health figures of the restored version: one fragment, nothing deleted, three versions kept
    assert (restored["mvcc/small_fragments"], restored["mvcc/deleted_share"], restored["mvcc/versions_kept"]) == (
        0,
        0.0,
        3,
    )
    assert restored["mvcc/stored_bytes"] > restored["mvcc/live_bytes"] > 0  # version 2's appended file is kept
    assert restored["mvcc/top_advice"] is None and restored["mvcc/top_advice_score"] == 0.0


def test_a_bad_configuration_fails_without_retry(airflow_home: AirflowHome, warehouse: str) -> None:
    fragmented(f"{warehouse}/events", batches=2)
    dag = airflow_home.write_dag(
        "bad_config_dag",
        """
        from datetime import datetime
        from airflow.sdk import DAG
        from mvcc_airflow import MvccCompactOperator

        with DAG("bad_config_dag", schedule=None, start_date=datetime(2026, 1, 1)):
            MvccCompactOperator(task_id="compact", table="events", mvcc_conn_id="mvcc_broken")  # 4 retries
        """,
    )
    broken = {"conn_type": "mvcc", "host": warehouse, "extra": {"storage_options": "{endpoint: nowhere"}}
    run = airflow_home.test_dag(
        "bad_config_dag", dag, extra_env={"AIRFLOW_CONN_MVCC_BROKEN": json.dumps(broken)}, timeout=120
    )
    log = output(run)
    assert run_state(log) == "failed", log[-4000:]
    assert "connection 'mvcc_broken': storage_options is not JSON" in log
    assert "up_for_retry" not in log and task_states(run).count("failed") == 1


@pytest.mark.parametrize("deferrable", [False, True], ids=["poke", "deferrable, no table yet"])
def test_the_version_sensor_sees_an_outside_commit(
    airflow_home: AirflowHome, warehouse: str, tmp_path: Path, deferrable: bool
) -> None:
    """Poking: the table is there (version 1), the outside commit is version 2. Deferrable: there is no table
    when the sensor starts; the outside commit creating it (version 1) is the new version."""
    uri = f"{warehouse}/events"
    if not deferrable:
        mvcc.write_table(pa.table({"id": [1]}), uri)
    baseline_line = "no table there yet" if deferrable else "waiting for a version after 1"
    result = tmp_path / "version.json"
    dag_id = f"sensor_dag_{'deferrable' if deferrable else 'poke'}"
    dag = airflow_home.write_dag(
        dag_id,
        f"""
        from datetime import datetime
        from airflow.sdk import DAG, task
        from mvcc_airflow import MvccVersionSensor

        with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1)):
            seen = MvccVersionSensor(
                task_id="new_version", table="events", poke_interval=0.5, timeout=120, deferrable={deferrable}
            )

            @task
            def record(version):
                open({str(result)!r}, "w").write(str(version))

            record(seen.output)
        """,
    )
    proc = subprocess.Popen(
        airflow_home.command(dag_id, dag),
        env=airflow_home.environment(warehouse=warehouse),
        cwd=airflow_home.home,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # until the sensor has taken its baseline
            lines.append(line)
            if baseline_line in line:
                break
        time.sleep(1.0)  # at least one poke sees nothing new
        if deferrable:
            mvcc.write_table(pa.table({"id": [1]}), uri)  # an outside commit: version 1, creating the table
        else:
            mvcc.open_table(uri).append(pa.table({"id": [2]}))  # an outside commit: version 2
        rest, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = "".join(lines) + rest
    assert run_state(out) == "success", out[-4000:]
    assert result.read_text() == ("1" if deferrable else "2")
    if deferrable:
        assert "deferred" in out.lower()


def test_the_example_dags_import_and_the_nightly_maintenance_runs(airflow_home: AirflowHome, warehouse: str) -> None:
    t = fragmented(f"{warehouse}/events", batches=30)
    t.create_index("id")
    before = t.version
    env = {**airflow_home.environment(warehouse=warehouse), "AIRFLOW__CORE__DAGS_FOLDER": str(EXAMPLES)}
    listed = subprocess.run(
        [airflow_home.command("x", EXAMPLES)[0], "dags", "list-import-errors", "-o", "json"],
        env=env,
        cwd=airflow_home.home,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert listed.returncode == 0 and "Error" not in listed.stdout, listed.stdout + listed.stderr
    dag = airflow_home.dags / "mvcc_nightly_maintenance.py"
    shutil.copy(EXAMPLES / "mvcc_nightly_maintenance.py", dag)
    run = airflow_home.test_dag("mvcc_nightly_maintenance", dag, warehouse=warehouse)
    assert succeeded(run), output(run)[-4000:]
    t = mvcc.open_table(f"{warehouse}/events")
    assert len(t.get_fragments()) == 1 and t.count_rows() == 300
    assert operations(t, before) == ["ReserveFragments", "Rewrite", "CreateIndex"]  # the index covers it again


def test_the_nightly_maintenance_skips_a_table_not_written_yet(airflow_home: AirflowHome, warehouse: str) -> None:
    # Unpaused before the first write, the example's @daily DAG runs its latest interval at once.
    dag = airflow_home.dags / "mvcc_nightly_maintenance.py"
    shutil.copy(EXAMPLES / "mvcc_nightly_maintenance.py", dag)
    run = airflow_home.test_dag("mvcc_nightly_maintenance", dag, warehouse=warehouse)
    log = output(run)
    assert succeeded(run), log[-4000:]
    assert "nothing to maintain" in log, log[-4000:]
    states = task_states(run)
    assert states and set(states) == {"skipped"}, states
    assert not (Path(warehouse) / "events").exists()  # nothing written for the missing table


def test_index_and_tag_operators(airflow_home: AirflowHome, warehouse: str, tmp_path: Path) -> None:
    uri = f"{warehouse}/events"
    t = fragmented(uri, batches=3)
    result = tmp_path / "index_tag.json"
    dag = airflow_home.write_dag(
        "index_tag_dag",
        f"""
        import json
        from datetime import datetime
        from airflow.sdk import DAG, task
        from mvcc_airflow import MvccCreateIndexOperator, MvccTagOperator

        with DAG("index_tag_dag", schedule=None, start_date=datetime(2026, 1, 1)):
            index = MvccCreateIndexOperator(task_id="index", table="events", column="id", index_type="BITMAP")
            tag = MvccTagOperator(task_id="tag", table="events", tag="indexed")
            again = MvccCreateIndexOperator(task_id="again", table="events", column="id", trigger_rule="all_done")

            @task(trigger_rule="all_done")
            def record(index, tag):
                open({str(result)!r}, "w").write(json.dumps({{"index": index, "tag": tag}}))

            index >> tag >> again
            record(index.output, tag.output)
        """,
    )
    run = airflow_home.test_dag("index_tag_dag", dag, warehouse=warehouse)
    log = output(run)
    assert run_state(log) == "failed", log[-4000:]  # `again`: the index exists and replace=False
    assert "IndexExistsError" in log and "up_for_retry" not in log
    recorded = json.loads(result.read_text())
    assert recorded["index"] == {
        "table": uri,
        "version": t.version + 1,
        "operation": "CreateIndex",
        "metrics": {"index": "id_idx", "column": "id", "index_type": "BITMAP"},
    }
    assert recorded["tag"]["metrics"] == {"tag": "indexed", "tagged_version": t.version + 1}
    latest = mvcc.open_table(uri)
    assert latest.tags.get_version("indexed") == latest.version == t.version + 1
    assert [i["name"] for i in latest.list_indices()] == ["id_idx"]
