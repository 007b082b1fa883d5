"""Health and "is it due" from the core's advice (`Table.optimize.recommend()`) on real tables and a real
instance: a fragmented table's `maintenance_advice` check is WARN with the advice's reason, call and figures
(numeric metadata); an idle healthy table is not due and its sensor requests nothing while a fragmented one
beside it is; a retention job without a window of its own follows the table's retention policy; the checks'
automation condition asks for them after a new materialization (a runless one too) and on a cron."""

from datetime import UTC, datetime, timedelta

import dagster as dg
import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_dagster import MvccResource, build_compaction_job, build_retention_job
from mvcc_dagster.health import (
    CHECKS,
    HealthThresholds,
    build_health_sensor,
    build_table_health_checks,
    health_automation_condition,
)
from mvcc_dagster.maintenance.due import due_advice, maintenance_work


def fragmented(uri: str, fragments: int, rows: int = 10) -> mvcc.Table:
    t = mvcc.write_table(pa.table({"n": list(range(rows))}), uri)
    for i in range(1, fragments):
        t.append(pa.table({"n": list(range(i * rows, (i + 1) * rows))}))
    return t


def evaluations(instance: dg.DagsterInstance, warehouse: str, key: str) -> dict[str, dg.AssetCheckEvaluation]:
    defs = dg.Definitions(
        assets=[dg.AssetSpec(key)],
        asset_checks=build_table_health_checks([key]),
        jobs=[dg.define_asset_job("health", selection=dg.AssetSelection.all_asset_checks())],
        resources={"mvcc": MvccResource(root_uri=warehouse)},
    )
    result = defs.resolve_job_def("health").execute_in_process(instance=instance)
    assert result.success
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_many_small_fragments_warn_with_the_advice_and_its_figures(
    instance: dg.DagsterInstance, warehouse: str
) -> None:
    t = fragmented(f"{warehouse}/frag", 20)
    t.delete("n < 5")  # 5 of 200 rows deleted
    (best, *_) = mvcc.open_table(t.uri).optimize.recommend()
    assert best.kind == "compact"

    check = evaluations(instance, warehouse, "frag")["maintenance_advice"]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert best.reason in check.description and best.call in check.description
    meta = check.metadata
    numeric = {k: v.value for k, v in meta.items() if isinstance(v, dg.IntMetadataValue | dg.FloatMetadataValue)}
    assert numeric["fragments"] == 20 and numeric["small_fragments"] == 20
    assert numeric["deleted_share"] == pytest.approx(5 / 200)
    assert numeric["versions_kept"] == 21
    assert numeric["stored_bytes"] >= numeric["live_bytes"] > 0
    assert numeric["top_advice_score"] == pytest.approx(best.score) and best.score > 0.5
    assert numeric["score_compact"] == pytest.approx(best.score) and numeric["score_retention"] == 0
    assert meta["top_advice_kind"].value == "compact"

    # the figures are stored with the evaluation: the UI plots them from the instance
    key = dg.AssetCheckKey(dg.AssetKey("frag"), "maintenance_advice")
    record = instance.event_log_storage.get_latest_asset_check_execution_by_key([key])[key]
    stored = record.event.dagster_event.event_specific_data.metadata  # type: ignore[union-attr]
    assert stored["fragments"].value == 20 and stored["top_advice_kind"].value == "compact"


def test_an_idle_healthy_table_is_not_due(instance: dg.DagsterInstance, warehouse: str) -> None:
    """One fragment, no deletion, no index, versions inside the retention policy's window: no advice, the
    check passes, nothing is due, and the sensor requests no run for it, while it does for a fragmented table
    it watches too (so the sensor is not just quiet)."""
    idle = mvcc.write_table(pa.table({"n": list(range(100))}), f"{warehouse}/idle")
    fragmented(f"{warehouse}/busy", 8)
    assert idle.optimize.recommend() == []
    assert evaluations(instance, warehouse, "idle")["maintenance_advice"].passed
    assert due_advice(idle, min_score=0.0) == []
    work = maintenance_work(idle, None, optimize_indices=True)
    assert not work and work.tags() == {}

    compaction = {t: build_compaction_job(t, name=f"compact_{t}") for t in ("idle", "busy")}
    retention = {t: build_retention_job(t, name=f"retain_{t}") for t in ("idle", "busy")}  # the tables' policy
    sensor = build_health_sensor(["idle", "busy"], compaction_job=compaction, retention_job=retention)
    resources = {"mvcc": MvccResource(root_uri=warehouse)}
    result = sensor(dg.build_sensor_context(instance=instance, resources=resources))
    assert [(r.job_name, r.tags["mvcc/table"], r.tags["mvcc/advice"]) for r in result.run_requests] == [
        ("compact_busy", "busy", "compact")
    ]
    again = sensor(dg.build_sensor_context(instance=instance, cursor=result.cursor, resources=resources))
    assert not again.run_requests and again.skip_reason is not None


def test_retention_follows_the_table_policy(instance: dg.DagsterInstance, warehouse: str) -> None:
    """A retention job built without older_than: the sensor measures with the table's
    `mvcc.retention.older_than` (14 days by default: nothing is removable), and once the table sets a short
    window it requests the job, which removes what that policy allows (keeping `retain_versions`)."""
    t = fragmented(f"{warehouse}/hist", 1)
    for i in range(5):
        t.overwrite(pa.table({"n": list(range(i, i + 10))}))
    retention = build_retention_job("hist")
    assert "mvcc/older_than_seconds" not in retention.tags  # no window of its own
    resources = {"mvcc": MvccResource(root_uri=warehouse)}
    thresholds = HealthThresholds(retention_min_removable_bytes=0)
    sensor = build_health_sensor(["hist"], retention_job=retention, thresholds=thresholds)
    assert not sensor(dg.build_sensor_context(instance=instance, resources=resources)).run_requests

    t.update_config({"mvcc.retention.older_than": "0s", "mvcc.retention.retain_versions": "2"})  # version 7
    later = datetime.now(UTC) + timedelta(seconds=1)
    sensor = build_health_sensor(["hist"], retention_job=retention, thresholds=thresholds, clock=lambda: later)
    (request,) = sensor(dg.build_sensor_context(instance=instance, resources=resources)).run_requests
    assert request.tags["mvcc/advice"] == "retention" and "the table policy" in request.tags["mvcc/advice_reason"]
    assert request.run_key.endswith("<=5")  # versions 1-5 go, the newest 2 (6, 7) stay
    result = retention.execute_in_process(instance=instance, resources=resources, run_config=request.run_config)
    assert result.success and result.output_for_node("cleanup_old_versions") == [1, 2, 3, 4, 5]
    assert [v.version for v in mvcc.open_table(t.uri).versions()] == [6, 7]


# Dagster's own tester selects with a Beta parameter (AssetSelection.all(include_sources=True))
@pytest.mark.filterwarnings("ignore:Parameter `include_sources`:dagster.BetaWarning")
def test_health_checks_run_by_declarative_automation(instance: dg.DagsterInstance, warehouse: str) -> None:
    """The checks' automation condition: nothing on the first evaluation, every check after a runless
    materialization of the asset (what the version sensor records for an outside commit), nothing after an
    observation (a maintenance commit: Dagster counts only materializations as an update of this asset),
    and every check at a cron tick."""
    key = dg.AssetKey("orders")
    condition = health_automation_condition(on_update=True, cron="0 * * * *")
    defs = dg.Definitions(
        assets=[dg.AssetSpec(key)],
        asset_checks=build_table_health_checks(["orders"], automation_condition=condition),
        resources={"mvcc": MvccResource(root_uri=warehouse)},
    )
    spec_conditions = {s.automation_condition for c in defs.asset_checks or [] for s in c.check_specs}
    assert spec_conditions == {condition}
    start = datetime(2026, 12, 7, 10, 5, tzinfo=UTC)
    first = dg.evaluate_automation_conditions(defs=defs, instance=instance, evaluation_time=start)
    assert first.total_requested == 0

    instance.report_runless_asset_event(dg.AssetMaterialization(key, metadata={"mvcc/version": 2}))
    updated = dg.evaluate_automation_conditions(
        defs=defs, instance=instance, cursor=first.cursor, evaluation_time=start + timedelta(minutes=1)
    )
    assert updated.total_requested == len(CHECKS)

    instance.report_runless_asset_event(dg.AssetObservation(key, metadata={"mvcc/version": 3}))
    observed = dg.evaluate_automation_conditions(
        defs=defs, instance=instance, cursor=updated.cursor, evaluation_time=start + timedelta(minutes=2)
    )
    assert observed.total_requested == 0

    ticked = dg.evaluate_automation_conditions(
        defs=defs, instance=instance, cursor=observed.cursor, evaluation_time=start + timedelta(hours=1)
    )
    assert ticked.total_requested == len(CHECKS)
    with pytest.raises(ValueError, match="on_update or a cron"):
        health_automation_condition(on_update=False)
