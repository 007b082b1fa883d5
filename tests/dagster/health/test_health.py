"""Health checks on real runs: a fragmented table fails `small_fragments` (ERROR), the health sensor requests
the compaction job once, and after the job the checks pass; a missing data file fails `files_exist`."""

import json
import os
import random
from datetime import timedelta
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_dagster import (
    HealthThresholds,
    MvccResource,
    build_compaction_job,
    build_health_sensor,
    build_retention_job,
    build_table_health_checks,
)
from mvcc_dagster.health import CHECKS, Level, evaluate_health
from mvcc_dagster.health.checks import REPAIRABLE
from mvcc_dagster.maintenance import MaintenanceTarget

# KB-sized tables: no floor on the bytes a storage repair must free (the default 8 MiB would hold it back)
THRESHOLDS = HealthThresholds(
    small_fragment_rows=100,
    small_fragments=Level(4, 16),
    versions_kept=Level(50, 100),
    retention_min_removable_bytes=0,
)


def fragmented(uri: str, fragments: int, rows: int = 10) -> mvcc.Table:
    t = mvcc.write_table(pa.table({"n": list(range(rows))}), uri)
    for i in range(1, fragments):
        t.append(pa.table({"n": list(range(i * rows, (i + 1) * rows))}))
    return t


def run_checks(instance: dg.DagsterInstance, warehouse: str, key: str) -> dict[str, dg.AssetCheckEvaluation]:
    defs = dg.Definitions(
        assets=[dg.AssetSpec(key)],
        asset_checks=build_table_health_checks([key], thresholds=THRESHOLDS),
        jobs=[dg.define_asset_job("health", selection=dg.AssetSelection.all_asset_checks())],
        resources={"mvcc": MvccResource(root_uri=warehouse)},
    )
    result = defs.resolve_job_def("health").execute_in_process(instance=instance)
    assert result.success
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_fragmented_table_fails_then_compaction_repairs_it(instance: dg.DagsterInstance, warehouse: str) -> None:
    fragmented(f"{warehouse}/frag", 20)
    before = run_checks(instance, warehouse, "frag")
    assert set(before) == set(CHECKS)
    small = before["small_fragments"]
    assert not small.passed and small.severity == dg.AssetCheckSeverity.ERROR
    assert small.metadata["value"].value == 20 and small.metadata["fragments"].value == 20
    assert all(before[name].passed for name in CHECKS if name not in ("small_fragments", "maintenance_advice"))
    advice = before["maintenance_advice"]  # the core's advice: merge the 20 fragments (score 19/20)
    assert not advice.passed and advice.severity == dg.AssetCheckSeverity.WARN
    assert advice.metadata["top_advice_kind"].value == "compact" and advice.metadata["fragments"].value == 20
    assert before["files_exist"].metadata["sampled"].value == 20

    resources = {"mvcc": MvccResource(root_uri=warehouse)}
    compaction = build_compaction_job(
        "frag", options=mvcc.compaction.CompactionOptions(target_rows_per_fragment=1000), executor="in_process"
    )
    retention = build_retention_job("frag", older_than=timedelta(0))
    sensor = build_health_sensor(["frag"], compaction_job=compaction, retention_job=retention, thresholds=THRESHOLDS)
    context = dg.build_sensor_context(instance=instance, resources=resources)
    first = sensor(context)
    # the advice: compact (19 of 20 fragments fewer) and, with the retention job's window of 0, retention
    # (19 of 20 versions removable); the run tags name the advice that made each due
    by_job = {r.job_name: r for r in first.run_requests}
    assert set(by_job) == {compaction.name, retention.name}
    request = by_job[compaction.name]
    assert request.run_key == f"{warehouse}/frag@20:{compaction.name}" and request.tags["mvcc/advice"] == "compact"
    assert "20 of 20 fragments" in request.tags["mvcc/advice_reason"]
    again = sensor(dg.build_sensor_context(instance=instance, cursor=first.cursor, resources=resources))
    assert not again.run_requests  # the same failing version does not request a second run

    assert compaction.execute_in_process(instance=instance, resources=resources, tags=request.tags).success
    after = run_checks(instance, warehouse, "frag")
    assert after["small_fragments"].passed
    # 20 files of 10 rows weigh ~15x the one compacted file: the old versions now amplify storage (ERROR)
    amplification = after["storage_amplification"]
    assert not amplification.passed and amplification.metadata["value"].value > 10
    second = sensor(dg.build_sensor_context(instance=instance, cursor=again.cursor, resources=resources))
    (request,) = second.run_requests
    # the retention job's window (0) leaves every version but the latest removable: the advice's score 21/22
    assert request.job_name == retention.name and request.tags["mvcc/advice"] == "retention"
    assert float(request.tags["mvcc/advice_score"]) > 0.9

    assert retention.execute_in_process(instance=instance, resources=resources).success
    repaired = run_checks(instance, warehouse, "frag")
    assert all(e.passed for e in repaired.values()), {k: e.metadata["value"].value for k, e in repaired.items()}
    assert repaired["versions_kept"].metadata["value"].value == 1
    done = sensor(dg.build_sensor_context(instance=instance, cursor=second.cursor, resources=resources))
    assert not done.run_requests and json.loads(done.cursor) == {f"{warehouse}/frag": []}


def test_missing_file_and_warn_level(instance: dg.DagsterInstance, warehouse: str) -> None:
    t = fragmented(f"{warehouse}/broken", 6)
    data_files = sorted(p for p in Path(t.uri, "data").rglob("*") if p.is_file())
    os.remove(data_files[0])
    evaluations = run_checks(instance, warehouse, "broken")
    missing = evaluations["files_exist"]
    assert not missing.passed and missing.severity == dg.AssetCheckSeverity.ERROR
    assert len(missing.metadata["missing"].value) == 1
    small = evaluations["small_fragments"]  # 6 small fragments: at WARN (4), below ERROR (16)
    assert not small.passed and small.severity == dg.AssetCheckSeverity.WARN


def test_the_sensors_checks_agree_with_every_check_and_skip_the_file_heads(warehouse: str) -> None:
    """The health sensor evaluates only the checks it can repair, on one version listing per tick: the same
    results as the full evaluation for those checks, and no `files_exist` (a HEAD per sampled file)."""
    rng = random.Random(28)
    t = fragmented(f"{warehouse}/subset", 3)
    target = MaintenanceTarget("subset")
    for step in range(12):
        if rng.random() < 0.6:
            t.append(pa.table({"n": list(range(rng.randint(1, 30)))}))
        else:
            t.delete(f"n < {rng.randint(0, 20)}")
        if step == 6:
            t.optimize.compact_files(target_rows_per_fragment=1000)
        t = mvcc.open_table(t.uri)
        thresholds = HealthThresholds(
            small_fragment_rows=rng.choice([5, 20, 100]),
            small_fragments=Level(2, 8),
            deleted_ratio=Level(0.05, 0.5),
            versions_kept=Level(rng.randint(2, 10), 50),
            storage_amplification=Level(1.5, 20),
        )
        every = {r.check_name: r for r in evaluate_health(t, target, thresholds)}
        subset = list(evaluate_health(t, target, thresholds, checks=REPAIRABLE, versions=t.versions()))
        assert [r.check_name for r in subset] == [c for c in CHECKS if c not in ("maintenance_advice", "files_exist")]
        for r in subset:
            full = every[r.check_name]
            assert (r.passed, r.metadata["value"]) == (full.passed, full.metadata["value"])
    os.remove(Path(t.uri, "data", t.get_fragments()[0].data_files()[0].path))
    assert not {r.check_name: r for r in evaluate_health(t, target, THRESHOLDS)}["files_exist"].passed
    assert "files_exist" not in {r.check_name for r in evaluate_health(t, target, THRESHOLDS, checks=REPAIRABLE)}
    with pytest.raises(ValueError, match="unknown health checks \\['file_exists'\\]"):
        list(evaluate_health(t, target, THRESHOLDS, checks=["file_exists"]))


def test_thresholds_are_checked() -> None:
    with pytest.raises(ValueError, match="ERROR threshold"):
        Level(10, 5)


def test_sensor_waits_for_a_maintenance_run_of_the_table(instance: dg.DagsterInstance, warehouse: str) -> None:
    """While a maintenance run of the table (here the nightly schedule's job, created and not started yet) is
    on the instance, the health sensor requests nothing for it: that run may repair the same version
    (benchmarks/week/simulation.py saw the schedule and the sensor compact one version twice at 03:00). Once no such run
    is waiting or running, the failing check requests its repair as before."""
    from mvcc_dagster import build_maintenance_schedule

    fragmented(f"{warehouse}/busy", 20)
    resources = {"mvcc": MvccResource(root_uri=warehouse)}
    compaction = build_compaction_job("busy", executor="in_process")
    sensor = build_health_sensor(["busy"], compaction_job=compaction, thresholds=THRESHOLDS)
    nightly = build_maintenance_schedule("busy").job
    queued = instance.create_run_for_job(nightly, status=dg.DagsterRunStatus.NOT_STARTED, tags=nightly.tags)
    waiting = sensor(dg.build_sensor_context(instance=instance, resources=resources))
    assert not waiting.run_requests
    instance.delete_run(queued.run_id)
    (request,) = sensor(
        dg.build_sensor_context(instance=instance, cursor=waiting.cursor, resources=resources)
    ).run_requests
    assert request.job_name == compaction.name
