"""The example deployment (definitions.py, workspace.yaml): it loads, the webserver serves its asset graph,
and its assets materialize in process (Spark included) with materializations that are table versions."""

import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import dagster as dg
import pytest

import mvcc_core as mvcc
from mvcc_dagster import MvccResource
from mvcc_dagster.maintenance import MaintenanceTarget
from mvcc_dagster.metadata import RESTORE_TAG

ROOT = Path(__file__).resolve().parents[2]
WORKSPACE = ROOT / "workspace.yaml"


@pytest.mark.slow
def test_definitions_validate_cli(tmp_path: Path) -> None:
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "MVCC_WAREHOUSE": str(tmp_path / "wh")}
    out = subprocess.run(
        [sys.executable, "-m", "dagster", "definitions", "validate", "-w", str(WORKSPACE)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "All code locations passed validation" in out.stdout + out.stderr


@pytest.mark.slow
def test_webserver_lists_assets_and_edges(instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch) -> None:
    """The webserver app, in process against workspace.yaml, answers GraphQL with the asset graph."""
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget
    from dagster_webserver.app import create_app_from_workspace_process_context
    from starlette.testclient import TestClient

    monkeypatch.chdir(ROOT)
    query = "{ assetNodes { assetKey { path } dependencyKeys { path } } }"
    with WorkspaceProcessContext(instance, WorkspaceFileTarget(paths=[str(WORKSPACE)])) as ctx:
        client = TestClient(create_app_from_workspace_process_context(ctx))
        response = client.post("/graphql", json={"query": query})
    assert response.status_code == 200, response.text
    nodes = response.json()["data"]["assetNodes"]
    edges = {
        ("/".join(n["assetKey"]["path"]), tuple(sorted("/".join(d["path"]) for d in n["dependencyKeys"])))
        for n in nodes
    }
    assert edges == {
        ("raw_events", ()),
        ("user_latest", ("raw_events",)),
        ("daily_revenue", ("raw_events",)),
        ("sales/orders", ()),
        ("sales/customers", ()),
        ("sales/revenue_by_segment", ("sales/customers", "sales/orders")),
        ("partner_feed", ()),
        ("payments", ()),
    }


@pytest.mark.timeout(240)
@pytest.mark.slow
def test_example_materializes_in_process(instance: dg.DagsterInstance, warehouse: str, example: ModuleType) -> None:
    """Spark ingest + both pyarrow assets, one day, then the same day again: one commit per asset per run,
    every materialization's mvcc/version is the table's version and the day's rows appear once."""
    from dagster_pyspark import PySparkResource
    from pyspark.sql import DataFrame

    resources = example.resources(warehouse)
    day = "2026-11-02"
    seen: list[int] = []

    @dg.asset(partitions_def=example.daily)
    def spark_reader(raw_events: DataFrame, pyspark: PySparkResource) -> None:
        """An input annotated as a Spark DataFrame is read by Spark's own Parquet reader, pinned and filtered."""
        assert pyspark.spark_session is raw_events.sparkSession
        assert "FileScan parquet" in raw_events._jdf.queryExecution().executedPlan().toString()
        seen.append(raw_events.count())

    for attempt in range(2):
        assets = [*example.ASSETS, spark_reader]
        result = dg.materialize(assets, instance=instance, resources=resources, partition_key=day)
        assert result.success
        for name in ("raw_events", "user_latest", "daily_revenue"):
            table = mvcc.open_table(f"{warehouse}/{name}")
            event = instance.get_latest_materialization_event(dg.AssetKey(name))
            assert event is not None and event.asset_materialization is not None
            meta = event.asset_materialization.metadata
            assert meta["mvcc/version"].value == table.version
            assert meta["dagster/uri"].value == table.uri
            props = table.versions()[-1].transaction_properties
            assert props["dagster/run_id"] == result.run_id
            assert props["dagster/asset_key"] == name
            assert props["dagster/partition_key"] == day
            assert event.asset_materialization.tags["dagster/data_version"] == str(table.version)
        events = mvcc.open_table(f"{warehouse}/raw_events").to_table()
        assert events.num_rows == example.EVENTS_PER_DAY, attempt
        assert len(set(events.column("event_id").to_pylist())) == example.EVENTS_PER_DAY
        users = mvcc.open_table(f"{warehouse}/user_latest").to_table()
        assert users.num_rows == example.USERS
        revenue = mvcc.open_table(f"{warehouse}/daily_revenue").to_table().to_pylist()
        assert len(revenue) == 1 and revenue[0]["events"] == example.EVENTS_PER_DAY
        assert seen[-1] == example.EVENTS_PER_DAY

    # The restore-backfill path: a second day, then that day again with the job's restore tag (a run outside a
    # backfill restores for its own day): one Restore per table, then the day recomputed, rows unchanged.
    other = "2026-11-03"
    job_tags = example.defs.resolve_job_def("daily_events_restore_backfill").tags
    assert job_tags[RESTORE_TAG] == "true"
    assert dg.materialize(example.ASSETS, instance=instance, resources=resources, partition_key=other).success
    before = {n: mvcc.open_table(f"{warehouse}/{n}").version for n in ("raw_events", "user_latest", "daily_revenue")}
    result = dg.materialize(
        example.ASSETS, instance=instance, resources=resources, partition_key=other, tags={RESTORE_TAG: "true"}
    )
    assert result.success
    for name, version in before.items():
        table = mvcc.open_table(f"{warehouse}/{name}")
        ops = [v.operation for v in table.versions()]
        assert table.version == version + 2 and ops[-2] == "Restore", (name, ops)
        restore = table.versions()[-2]
        assert restore.transaction_properties["dagster/backfill"] == result.run_id
    assert mvcc.open_table(f"{warehouse}/raw_events").count_rows() == 2 * example.EVENTS_PER_DAY
    revenue = mvcc.open_table(f"{warehouse}/daily_revenue").to_table().to_pylist()
    assert sorted(r["events"] for r in revenue) == [example.EVENTS_PER_DAY] * 2


def test_example_has_maintenance(example: ModuleType) -> None:
    """The example deployment has its maintenance: stopped maintenance schedules (one per path table, one for the
    catalog), the version and health sensors (stopped) and the restore backfill job. Checks and jobs of every
    table: test_first_contact.py."""
    defs = example.defs
    expected = {f"mvcc_maintenance_schedule__{MaintenanceTarget(t).suffix}" for t in example.PATH_TABLES}
    assert {s.name for s in defs.schedules} == expected | {"mvcc_catalog_maintenance_schedule"}
    assert all(s.default_status == dg.DefaultScheduleStatus.STOPPED for s in defs.schedules)
    assert {s.name for s in defs.sensors} == {"mvcc_version_sensor", "mvcc_health_sensor"}
    assert all(s.default_status == dg.DefaultSensorStatus.STOPPED for s in defs.sensors)
    assert defs.resolve_job_def("daily_events_restore_backfill").tags[RESTORE_TAG] == "true"


def test_outside_writer_is_recorded_by_the_version_sensor(
    instance: dg.DagsterInstance, warehouse: str, example: ModuleType
) -> None:
    """examples/outside_writer.py (plain Python, no Dagster) writes partner_feed; the example's version sensor
    records each of its commits as a runless materialization of the asset partner_feed."""
    env = {**os.environ, "MVCC_WAREHOUSE": warehouse, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "outside_writer.py"), "--rows", "5", "--batches", "2"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    table = mvcc.open_table(f"{warehouse}/partner_feed")
    assert table.version == 2 and table.count_rows() == 10
    assert all("dagster/run_id" not in v.transaction_properties for v in table.versions())

    sensor = next(s for s in example.defs.sensors if s.name == "mvcc_version_sensor")
    context = dg.build_sensor_context(instance=instance, resources={"mvcc": MvccResource(root_uri=warehouse)})
    result = sensor(context)
    mats = [e for e in result.asset_events if e.asset_key == dg.AssetKey("partner_feed")]
    assert all(isinstance(m, dg.AssetMaterialization) for m in mats)
    assert [m.metadata["mvcc/version"].value for m in mats] == [1, 2]
    assert [m.metadata["dagster/row_count"].value for m in mats] == [5, 10]
    assert [m.tags["dagster/data_version"] for m in mats] == ["1", "2"]
    again = sensor(
        dg.build_sensor_context(
            instance=instance, cursor=result.cursor, resources={"mvcc": MvccResource(root_uri=warehouse)}
        )
    )
    assert not again.asset_events  # the cursor: nothing recorded twice
