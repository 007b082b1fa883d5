"""The version sensor through `build_sensor_context` with a real instance: outside commits become runless
materializations / observations with the right data versions, Dagster's own commits are skipped, the cursor
makes a second evaluation record and request nothing, and a long history is caught up in bounded ticks."""

import json

import dagster as dg
import pyarrow as pa

import mvcc_core as mvcc
from mvcc_dagster import MvccIOManager, MvccResource, build_version_sensor


def evaluate(sensor: dg.SensorDefinition, instance: dg.DagsterInstance, warehouse: str, cursor: str | None):
    context = dg.build_sensor_context(
        instance=instance, cursor=cursor, resources={"mvcc": MvccResource(root_uri=warehouse)}
    )
    return sensor(context)


def test_outside_commits_become_events(instance: dg.DagsterInstance, warehouse: str) -> None:
    @dg.asset(name="orders")
    def orders() -> pa.Table:
        return pa.table({"id": [1, 2], "v": [0, 0]})

    dg.materialize([orders], instance=instance, resources={"io_manager": MvccIOManager(root_uri=warehouse)})
    uri = f"{warehouse}/orders"

    @dg.op
    def noop() -> None: ...

    @dg.job
    def downstream() -> None:
        noop()

    sensor = build_version_sensor(["orders"], jobs=[downstream])
    first = evaluate(sensor, instance, warehouse, None)
    assert isinstance(first, dg.SensorResult) and not first.asset_events and not first.run_requests
    assert json.loads(first.cursor) == {uri: 1}  # starts after the materialized version: nothing to record

    t = mvcc.open_table(uri)
    t.append(pa.table({"id": [3], "v": [0]}))  # 2: data-changing
    t.optimize.compact_files()  # 3: ReserveFragments, 4: Rewrite (both maintenance, made outside Dagster)
    t.update({"v": "1"}, where="id = 1")  # 5: data-changing
    t.append(pa.table({"id": [4], "v": [0]}), transaction_properties={"dagster/run_id": "some-run"})  # 6: Dagster's

    second = evaluate(sensor, instance, warehouse, first.cursor)
    kinds = [(type(e).__name__, e.metadata["mvcc/version"].value) for e in second.asset_events]
    assert kinds == [
        ("AssetMaterialization", 2),
        ("AssetObservation", 3),
        ("AssetObservation", 4),
        ("AssetMaterialization", 5),
    ]
    mat2, obs3, obs4, mat5 = second.asset_events
    assert obs3.metadata["mvcc/operation"].value == "ReserveFragments"
    assert mat2.tags["dagster/data_version"] == "2" and mat2.metadata["dagster/row_count"].value == 3
    assert obs4.metadata["mvcc/operation"].value == "Rewrite" and obs4.metadata["mvcc/data_version"].value == 2
    assert mat5.tags["dagster/data_version"] == "5" and mat5.metadata["mvcc/operation"].value == "Update"
    assert all(e.asset_key == dg.AssetKey("orders") for e in second.asset_events)
    assert [r.run_key for r in second.run_requests] == [f"{uri}@2", f"{uri}@5"]
    assert {r.job_name for r in second.run_requests} == {"downstream"}
    assert json.loads(second.cursor) == {uri: 6}

    third = evaluate(sensor, instance, warehouse, second.cursor)
    assert not third.asset_events and not third.run_requests and third.cursor == second.cursor


def test_bounded_catch_up_and_missing_table(instance: dg.DagsterInstance, warehouse: str) -> None:
    t = mvcc.write_table(pa.table({"n": [0]}), f"{warehouse}/log")
    for i in range(1, 7):
        t.append(pa.table({"n": [i]}))
    sensor = build_version_sensor(["log", "missing"], max_versions_per_tick=3)
    cursor, seen = None, []
    for _ in range(3):
        result = evaluate(sensor, instance, warehouse, cursor)
        seen.append([e.metadata["mvcc/version"].value for e in result.asset_events or []])
        cursor = result.cursor
    assert seen == [[1, 2, 3], [4, 5, 6], [7]]
    assert json.loads(cursor) == {f"{warehouse}/log": 7}


def test_sensor_loads_in_definitions(warehouse: str) -> None:
    sensor = build_version_sensor(["a/b", f"{warehouse}/raw"], asset_keys=[None, "raw"], minimum_interval_seconds=60)
    defs = dg.Definitions(sensors=[sensor], resources={"mvcc": MvccResource(root_uri=warehouse)})
    dg.Definitions.validate_loadable(defs)
    assert sensor.minimum_interval_seconds == 60 and sensor.default_status == dg.DefaultSensorStatus.STOPPED


def test_dagster_compaction_is_skipped_by_run_id(instance: dg.DagsterInstance, warehouse: str) -> None:
    """The compaction job's ReserveFragments carries the run's `dagster/run_id` (`compaction.plan` takes
    transaction properties), so the sensor skips both of its commits by run id, while an outside
    compaction's ReserveFragments is recorded as an observation."""
    from mvcc_dagster import build_compaction_job

    uri = f"{warehouse}/frag"
    t = mvcc.write_table(pa.table({"n": [0]}), uri)
    for i in range(1, 4):
        t.append(pa.table({"n": [i]}))
    sensor = build_version_sensor(["frag"])
    cursor = evaluate(sensor, instance, warehouse, None).cursor  # versions 1-4 recorded
    job = build_compaction_job("frag", executor="in_process")
    run = job.execute_in_process(instance=instance, resources={"mvcc": MvccResource(root_uri=warehouse)})
    assert run.success
    history = mvcc.open_table(uri).versions()[4:]
    assert [(v.operation, v.transaction_properties["dagster/run_id"]) for v in history] == [
        ("ReserveFragments", run.run_id),
        ("Rewrite", run.run_id),
    ]
    after_job = evaluate(sensor, instance, warehouse, cursor)
    assert not after_job.asset_events and json.loads(after_job.cursor) == {uri: 6}

    mvcc.open_table(uri).delete("n = 0")  # 7, then an outside compaction: 8 ReserveFragments, 9 Rewrite
    mvcc.open_table(uri).optimize.compact_files(materialize_deletions_threshold=0.0)
    outside = evaluate(sensor, instance, warehouse, after_job.cursor)
    assert [(type(e).__name__, e.metadata["mvcc/operation"].value) for e in outside.asset_events] == [
        ("AssetMaterialization", "Delete"),
        ("AssetObservation", "ReserveFragments"),
        ("AssetObservation", "Rewrite"),
    ]
