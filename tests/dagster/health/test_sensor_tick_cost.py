"""What a sensor tick costs (docs/integrations/dagster/sensors_and_health.md, "What a sensor tick costs"): the ticks
evaluated as the daemon's
code server evaluates them (`SensorDefinition.evaluate_tick` on a context with the instance's reference and
the repository's resources) reuse the ``mvcc`` resource of an earlier tick until its binding or environment
changes, and an idle tick neither builds the tick's `DagsterInstance` nor reads more than it must."""

import json
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from dagster._core.instance.ref import InstanceRef

import mvcc_core as mvcc
import mvcc_core.txn.commit as commit_module
from mvcc_dagster import MvccResource, build_version_sensor
from mvcc_dagster.health import HealthThresholds, build_health_sensor


def code_server_tick(
    sensor: dg.SensorDefinition, instance_ref: InstanceRef | None, resources: dict[str, Any], cursor: str | None
) -> tuple[Any, dg.SensorEvaluationContext]:
    """One tick as `dagster._grpc.impl.get_external_sensor_execution` makes it: the instance by reference
    (the tests give cursors that know every table, so a tick needs no instance and none is built)."""
    with dg.SensorEvaluationContext(
        instance_ref,
        last_tick_completion_time=None,
        last_run_key=None,
        cursor=cursor,
        log_key=["test", sensor.name, "tick"],
        repository_name="test",
        sensor_name=sensor.name,
        resources=resources,
    ) as context:
        return sensor.evaluate_tick(context), context


@pytest.fixture
def instance_ref(tmp_path: Any) -> InstanceRef:
    """A reference to an instance that no tick here should need (building it costs ≈ 45 ms)."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    return InstanceRef.from_dir(str(home))


def test_ticks_reuse_the_resource_until_its_binding_or_environment_changes(
    instance_ref: InstanceRef, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    mvcc.write_table(pa.table({"n": [0]}), f"{a}/t")
    mvcc.write_table(pa.table({"n": [0]}), f"{b}/t").append(pa.table({"n": [1]}))
    monkeypatch.setenv("MVCC_TICK_ROOT", a)
    bound = MvccResource(root_uri=dg.EnvVar("MVCC_TICK_ROOT")).get_resource_definition()
    sensor = build_version_sensor(["t"])
    instance = instance_ref
    start = json.dumps({f"{a}/t": 0, f"{b}/t": 0})
    first, c1 = code_server_tick(sensor, instance, {"mvcc": bound}, start)
    second, c2 = code_server_tick(sensor, instance, {"mvcc": bound}, first.cursor)
    assert c2.resources.mvcc is c1.resources.mvcc and c1.resources.mvcc.root_uri == a
    assert json.loads(second.cursor) == {f"{a}/t": 1, f"{b}/t": 0} and not second.asset_events

    monkeypatch.setenv("MVCC_TICK_ROOT", b)  # the environment variable the binding reads changed: built again
    third, c3 = code_server_tick(sensor, instance, {"mvcc": bound}, second.cursor)
    assert c3.resources.mvcc is not c1.resources.mvcc and c3.resources.mvcc.root_uri == b
    assert [e.metadata["mvcc/version"].value for e in third.asset_events] == [1, 2]

    rebound = MvccResource(root_uri=a).get_resource_definition()  # another binding: its own resource
    fourth, c4 = code_server_tick(sensor, instance, {"mvcc": rebound}, third.cursor)
    assert c4.resources.mvcc is not c3.resources.mvcc and c4.resources.mvcc.root_uri == a
    assert json.loads(fourth.cursor) == {f"{a}/t": 1, f"{b}/t": 2}


def test_a_resource_with_teardown_is_built_for_every_tick(warehouse: str) -> None:
    torn_down: list[str] = []

    class ClosingResource(MvccResource):
        def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
            torn_down.append(self.root_uri)

    mvcc.write_table(pa.table({"n": [0]}), f"{warehouse}/t")
    bound = ClosingResource(root_uri=warehouse).get_resource_definition()
    sensor = build_version_sensor(["t"])
    cursor = json.dumps({f"{warehouse}/t": 0})  # a table the cursor knows: no instance asked
    first, c1 = code_server_tick(sensor, None, {"mvcc": bound}, cursor)
    _, c2 = code_server_tick(sensor, None, {"mvcc": bound}, first.cursor)
    assert c2.resources.mvcc is not c1.resources.mvcc and torn_down == [warehouse, warehouse]


def test_idle_ticks_build_no_instance_and_read_only_what_they_must(
    instance_ref: InstanceRef, warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a first tick, an idle tick of the version sensor reads no manifest (the latest-version hint of
    each table) and one of the health sensor reads each table's latest manifest once; neither builds the
    tick's instance from its reference (≈ 45 ms in the code server; the sensor's log would build it too). A
    commit is still seen, and told by the skip reason, not the log."""
    for name in ("a", "b"):
        t = mvcc.write_table(pa.table({"n": [0]}), f"{warehouse}/{name}")
        t.append(pa.table({"n": [1]}))
    built, reads = [], []
    from_ref = dg.DagsterInstance.from_ref
    monkeypatch.setattr(dg.DagsterInstance, "from_ref", lambda ref: built.append(ref) or from_ref(ref))
    read_manifest = commit_module.read_manifest
    monkeypatch.setattr(commit_module, "read_manifest", lambda *a, **k: reads.append(a[1]) or read_manifest(*a, **k))
    resources = {"mvcc": MvccResource(root_uri=warehouse).get_resource_definition()}
    version_sensor = build_version_sensor(["a", "b"])
    health_sensor = build_health_sensor(["a", "b"], thresholds=HealthThresholds())
    instance = instance_ref
    cursors = {version_sensor.name: json.dumps({f"{warehouse}/{n}": 0 for n in "ab"}), health_sensor.name: None}
    for sensor in (version_sensor, health_sensor):  # the first ticks read the tables and record the versions
        cursors[sensor.name] = code_server_tick(sensor, instance, resources, cursors[sensor.name])[0].cursor
    assert not built
    for sensor, manifests in ((version_sensor, 0), (health_sensor, 2)):
        reads.clear()
        data, _ = code_server_tick(sensor, instance, resources, cursors[sensor.name])
        assert not built and len(reads) == manifests and data.cursor == cursors[sensor.name]
    mvcc.open_table(f"{warehouse}/b").append(pa.table({"n": [2]}))
    reads.clear()
    data, _ = code_server_tick(version_sensor, instance, resources, cursors[version_sensor.name])
    assert [e.metadata["mvcc/version"].value for e in data.asset_events] == [3] and len(reads) == 1
    assert data.skip_message == "recorded 1 materialization (b@3)" and not built  # told by the skip reason
