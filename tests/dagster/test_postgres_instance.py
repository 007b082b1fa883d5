"""The plugin on Dagster's PostgreSQL instance storage (dagster-postgres): the production instance of
docs/operations/running.md, "The production instance".

A fresh database per test session (``CREATE DATABASE mvcc_test_<random>`` on the server's ``postgres`` database,
dropped at the end) and, per test, a ``DAGSTER_HOME`` whose ``dagster.yaml`` has ``storage: postgres:`` with
that database and the run queue settings the plugin wants (one maintenance run per ``mvcc/table`` value, pools
of one slot, run retries). The server is ``MVCC_TEST_POSTGRES`` (default
``postgresql://postgres@127.0.0.1:5432/postgres``, trust auth as in CI); without one the tests skip saying so.

1. The compaction and retention jobs run on real tables: the runs succeed, the table is compacted with its rows
   kept, and the runs and the observations are rows of the Postgres database (read back with SQL, not only
   through the instance).
2. The version and health sensors ticked with ``build_sensor_context(instance=...)``: outside commits become
   runless materializations stored in Postgres; the health sensor requests a compaction, holds back while a
   maintenance run of the table is queued in Postgres' run storage, and asks for nothing once the run repaired
   the table.
3. The run queue: two compaction runs of each of two tables submitted together to the instance's queued run
   coordinator (the daemon's iteration called by the test, runs launched by a code server as in production):
   never two runs of one table in progress at once, the two tables' runs in progress together.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dagster as dg
import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core import failpoints
from mvcc_dagster import (
    HealthThresholds,
    MvccResource,
    build_compaction_job,
    build_health_sensor,
    build_retention_job,
    build_version_sensor,
)
from mvcc_dagster.health import Level

pytestmark = pytest.mark.slow
psycopg2 = pytest.importorskip("psycopg2", reason="dagster-postgres is not installed (extra 'dagster')")
pytest.importorskip("dagster_postgres", reason="dagster-postgres is not installed (extra 'dagster')")

HERE = Path(__file__).resolve().parent
SERVER = os.environ.get("MVCC_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
RUN_QUEUE = """\
storage:
  postgres:
    postgres_db:
      username: {username}
      password: "{password}"
      hostname: {hostname}
      port: {port}
      db_name: {db_name}
      # SQLAlchemy 2.1 maps a bare postgresql:// to psycopg 3; dagster-postgres brings psycopg2
      scheme: postgresql+psycopg2
concurrency:
  runs:
    tag_concurrency_limits:
      - key: mvcc/table
        value: {{applyLimitPerUniqueValue: true}}
        limit: 1
  pools:
    default_limit: 1
    granularity: run
run_retries:
  enabled: true
telemetry:
  enabled: false
code_servers:
  wait_for_local_processes_on_shutdown: true
"""
IN_PROGRESS = (dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED)
FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


def _connect(dbname: str | None = None) -> Any:
    parts = urlsplit(SERVER)
    return psycopg2.connect(
        host=parts.hostname,
        port=parts.port or 5432,
        user=parts.username or "postgres",
        password=parts.password or "",
        dbname=dbname or parts.path.lstrip("/") or "postgres",
        connect_timeout=5,
    )


@pytest.fixture(scope="session")
def postgres_db() -> Iterator[str]:
    """A fresh database on the server for this test session, dropped at its end."""
    try:
        admin = _connect()
    except psycopg2.OperationalError as exc:
        pytest.skip(f"no PostgreSQL server at {SERVER} (set MVCC_TEST_POSTGRES): {str(exc).strip()}")
    admin.autocommit = True  # CREATE / DROP DATABASE cannot run in a transaction
    name = f"mvcc_test_{uuid.uuid4().hex[:12]}"
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
    try:
        yield name
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")  # run workers may still hold connections
        admin.close()


@pytest.fixture
def home(tmp_path: Path, postgres_db: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A DAGSTER_HOME whose dagster.yaml stores everything in the session's database."""
    parts = urlsplit(SERVER)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(
        RUN_QUEUE.format(
            username=parts.username or "postgres",
            password=parts.password or "",
            hostname=parts.hostname,
            port=parts.port or 5432,
            db_name=postgres_db,
        )
    )
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


@pytest.fixture
def pg_instance(home: Path) -> Iterator[dg.DagsterInstance]:
    """The instance of `home` (``DagsterInstance.get()``, as the webserver and the daemon load it)."""
    from dagster._core.test_utils import cleanup_test_instance

    instance = dg.DagsterInstance.get()
    try:
        yield instance
    finally:
        cleanup_test_instance(instance)  # the run workers it launched have exited: none holds a connection
        instance.dispose()


def sql(db: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    """Rows of `query` on the session's database (what is stored, read without Dagster)."""
    with _connect(db) as conn, conn.cursor() as cur:
        cur.execute(query, args)
        return list(cur.fetchall())


def fragmented(uri: str, fragments: int, rows: int = 10) -> mvcc.Table:
    """A table of `fragments` small fragments (one append each), column `n` numbering the rows."""
    t = mvcc.write_table(pa.table({"n": list(range(rows))}), uri)
    for i in range(1, fragments):
        t.append(pa.table({"n": list(range(i * rows, (i + 1) * rows))}))
    return t


def observations(instance: dg.DagsterInstance, key: str) -> list[dict[str, Any]]:
    records = instance.fetch_observations(dg.AssetKey(key), limit=100).records
    return [
        {k: v.value for k, v in r.asset_observation.metadata.items()}
        for r in reversed(records)
        if r.asset_observation is not None
    ]


def run_record(instance: dg.DagsterInstance, run_id: str) -> Any:
    """The run's record in the instance's run storage (it exists: the test created the run)."""
    record = instance.get_run_record_by_id(run_id)
    assert record is not None, run_id
    return record


@pytest.mark.timeout(180)
def test_compaction_and_retention_runs_are_stored_in_postgres(
    pg_instance: dg.DagsterInstance, postgres_db: str, tmp_path: Path
) -> None:
    """Compaction then retention of a 12-fragment table: two runs succeed; 2 fragments, the same rows, one
    version kept; the runs and the three observations are rows of Postgres' ``runs`` and ``event_logs``."""
    assert type(pg_instance.run_storage).__name__ == "PostgresRunStorage"
    assert type(pg_instance.event_log_storage).__name__ == "PostgresEventLogStorage"
    warehouse = str(tmp_path / "warehouse")
    t = fragmented(f"{warehouse}/pg_orders", 12)
    rows = sorted(t.to_table()["n"].to_pylist())
    resources = {"mvcc": MvccResource(root_uri=warehouse)}
    options = mvcc.compaction.CompactionOptions(target_rows_per_fragment=60)
    compaction = build_compaction_job("pg_orders", options=options, executor="in_process")
    compacted = compaction.execute_in_process(instance=pg_instance, resources=resources)
    assert compacted.success
    after = mvcc.open_table(t.uri)
    assert [v.operation for v in after.versions()[t.version :]] == ["ReserveFragments", "Rewrite"]
    assert len(after.get_fragments()) == 2 and sorted(after.to_table()["n"].to_pylist()) == rows

    retention = build_retention_job("pg_orders", older_than=timedelta(0))
    cleaned = retention.execute_in_process(instance=pg_instance, resources=resources)
    assert cleaned.success
    kept = mvcc.open_table(t.uri)
    assert [v.version for v in kept.versions()] == [after.version]
    assert sorted(kept.to_table()["n"].to_pylist()) == rows

    obs = observations(pg_instance, "pg_orders")
    assert [o["mvcc/operation"] for o in obs[:2]] == ["ReserveFragments", "Rewrite"]
    assert obs[1]["fragments_before"] == 12 and obs[1]["fragments_after"] == 2
    assert obs[2]["versions_removed"] == after.version - 1
    # what the instance said, stored in Postgres
    for run_id in (compacted.run_id, cleaned.run_id):
        assert sql(postgres_db, "SELECT status FROM runs WHERE run_id = %s", run_id) == [("SUCCESS",)]
    stored = sql(
        postgres_db,
        "SELECT run_id, count(*) FROM event_logs WHERE dagster_event_type = 'ASSET_OBSERVATION' "
        "AND asset_key = %s GROUP BY run_id",
        dg.AssetKey("pg_orders").to_string(),
    )
    assert dict(stored) == {compacted.run_id: 2, cleaned.run_id: 1}


@pytest.mark.timeout(180)
def test_sensors_record_and_repair_through_postgres(
    pg_instance: dg.DagsterInstance, postgres_db: str, tmp_path: Path
) -> None:
    """The version sensor's events land in Postgres; the health sensor requests a compaction, waits while a
    maintenance run of the table is queued in Postgres' run storage, then the compaction repairs the table."""
    warehouse = str(tmp_path / "warehouse")
    resources = {"mvcc": MvccResource(root_uri=warehouse)}
    feed = fragmented(f"{warehouse}/pg_feed", 3)  # three commits outside Dagster
    version_sensor = build_version_sensor(["pg_feed"])
    data = version_sensor.evaluate_tick(dg.build_sensor_context(instance=pg_instance, resources=resources))
    for event in data.asset_events:
        pg_instance.report_runless_asset_event(event)
    assert len(data.asset_events) == 3
    again = version_sensor.evaluate_tick(
        dg.build_sensor_context(instance=pg_instance, cursor=data.cursor, resources=resources)
    )
    assert not again.asset_events  # the cursor holds: nothing recorded twice
    stored = sql(
        postgres_db,
        "SELECT run_id FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION' AND asset_key = %s",
        dg.AssetKey("pg_feed").to_string(),
    )
    assert stored == [("",)] * 3  # runless: no run id
    latest = pg_instance.get_latest_materialization_event(dg.AssetKey("pg_feed"))
    assert latest is not None and latest.asset_materialization is not None
    assert latest.asset_materialization.metadata["mvcc/version"].value == feed.version

    small = fragmented(f"{warehouse}/pg_small", 12)
    options = mvcc.compaction.CompactionOptions(target_rows_per_fragment=60)
    job = build_compaction_job("pg_small", options=options, executor="in_process")
    thresholds = HealthThresholds(small_fragment_rows=60, small_fragments=Level(4, 32))

    def health_tick() -> Any:
        # a fresh sensor each time: no handle or settled state carried over, the run storage asked afresh
        sensor = build_health_sensor(["pg_small"], compaction_job={"pg_small": job}, thresholds=thresholds)
        return sensor.evaluate_tick(dg.build_sensor_context(instance=pg_instance, resources=resources))

    (request,) = health_tick().run_requests
    assert request.job_name == job.name and request.tags["mvcc/table"] == "pg_small"
    bound = dg.Definitions(jobs=[job], resources=resources).resolve_job_def(job.name)
    # a run created and not yet launched (a queued run's first state; QUEUED needs a code location's origin)
    waiting = dg.DagsterRunStatus.NOT_STARTED
    queued = pg_instance.create_run_for_job(bound, tags={"mvcc/table": "pg_small"}, status=waiting)
    assert sql(postgres_db, "SELECT status FROM runs WHERE run_id = %s", queued.run_id) == [("NOT_STARTED",)]
    assert not health_tick().run_requests  # a maintenance run of the table is queued: it may repair it
    pg_instance.delete_run(queued.run_id)
    result = job.execute_in_process(instance=pg_instance, resources=resources, tags=request.tags)
    assert result.success
    assert len(mvcc.open_table(small.uri).get_fragments()) == 2
    assert not health_tick().run_requests  # repaired


def _submit(context: Any, location_name: str, job_name: str) -> str:
    """Create a run of `job_name` from the code location as the sensor daemon does and submit it to the
    instance's run coordinator (queued: the daemon launches it)."""
    from dagster._core.definitions.selector import JobSubsetSelector

    instance = context.instance
    workspace = context.create_request_context()
    location = workspace.get_code_location(location_name)
    (repo,) = location.get_repositories().values()
    remote_job = location.get_job(
        JobSubsetSelector(location_name=location_name, repository_name=repo.name, job_name=job_name, op_selection=None)
    )
    plan = location.get_execution_plan(remote_job, {}, step_keys_to_execute=None, known_state=None, instance=instance)
    run = instance.create_run(
        job_name=job_name,
        run_id=None,
        run_config={},
        resolved_op_selection=None,
        step_keys_to_execute=None,
        status=dg.DagsterRunStatus.NOT_STARTED,
        op_selection=None,
        root_run_id=None,
        parent_run_id=None,
        tags=dict(remote_job.run_tags or {}),
        job_snapshot=remote_job.job_snapshot,
        execution_plan_snapshot=plan.execution_plan_snapshot,
        parent_job_snapshot=remote_job.parent_job_snapshot,
        remote_job_origin=remote_job.get_remote_origin(),
        job_code_origin=remote_job.get_python_origin(),
        asset_selection=None,
        asset_check_selection=None,
        asset_graph=repo.asset_graph,
    )
    instance.submit_run(run.run_id, workspace)
    return run.run_id


@pytest.mark.timeout(360)
def test_run_queue_holds_one_run_per_table_on_postgres(
    pg_instance: dg.DagsterInstance, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two compaction runs of each of two tables, submitted together: the queued run coordinator (its
    daemon's iteration) never has two runs of one table in progress, while the two tables' runs are in
    progress together (one limit per value); every run succeeds and each table is compacted once."""
    import postgres_defs
    from dagster._core.test_utils import create_test_daemon_workspace_context
    from dagster._core.workspace.load_target import ModuleTarget
    from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon
    from dagster._utils.error import SerializableErrorInfo

    warehouse = tmp_path / "warehouse"
    tables = {name: fragmented(f"{warehouse}/{name}", 12) for name in postgres_defs.TABLES}
    rows = {name: sorted(t.to_table()["n"].to_pylist()) for name, t in tables.items()}
    monkeypatch.setenv(postgres_defs.WAREHOUSE_ENV, str(warehouse))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(HERE), str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")])
    )
    # every commit of a run waits 1.5 s: a run lasts seconds, long enough to be seen in progress
    monkeypatch.setenv(failpoints.ENV_VAR, "commit.after_transaction_file=sleep(1.5)")
    location = "postgres_queue"
    target = ModuleTarget(
        module_name="postgres_defs", attribute="defs", working_directory=str(HERE), location_name=location
    )
    with ExitStack() as stack:
        context = stack.enter_context(create_test_daemon_workspace_context(target, pg_instance))
        runs = {
            run_id: table
            for table in postgres_defs.TABLES
            for run_id in (_submit(context, location, postgres_defs.JOBS[table]) for _ in range(2))
        }
        assert {run_record(pg_instance, r).dagster_run.status for r in runs} == {dg.DagsterRunStatus.QUEUED}
        together = 0  # polls that saw both tables' runs in progress
        deadline = time.monotonic() + 300
        with QueuedRunCoordinatorDaemon(interval_seconds=1) as queue:
            while True:
                for item in queue.run_iteration(context):
                    assert not isinstance(item, SerializableErrorInfo), item.to_string()
                statuses = {r: run_record(pg_instance, r).dagster_run.status for r in runs}
                busy = [runs[r] for r, s in statuses.items() if s in IN_PROGRESS]
                assert len(busy) == len(set(busy)), statuses  # never two runs of one table
                together += len(set(busy)) == 2
                if all(s in FINISHED for s in statuses.values()):
                    break
                assert time.monotonic() < deadline, statuses
                time.sleep(0.25)
    records = {r: run_record(pg_instance, r) for r in runs}
    assert {rec.dagster_run.status for rec in records.values()} == {dg.DagsterRunStatus.SUCCESS}
    for table in postgres_defs.TABLES:
        first, second = sorted((rec for r, rec in records.items() if runs[r] == table), key=lambda x: x.start_time)
        assert second.start_time >= first.end_time  # from Postgres' run storage: one after the other
    assert together >= 1
    for name, t in tables.items():
        after = mvcc.open_table(t.uri)
        assert [v.operation for v in after.versions()[t.version :]] == ["ReserveFragments", "Rewrite"]
        assert sorted(after.to_table()["n"].to_pylist()) == rows[name] and len(after.get_fragments()) == 2
