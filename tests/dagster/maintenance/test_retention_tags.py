"""Orchestrated retention and tags: a tag on a version older than the window is kept and retention goes on,
saying what it kept (output and observation metadata, the step's log), run after run; failing on such a tag is
the opt-in `error_if_tagged_old_versions` (factory argument or op config)."""

from __future__ import annotations

from datetime import timedelta

import dagster as dg
import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_dagster import MvccResource, MvccTableComponent, build_maintenance_schedule, build_retention_job


def versions(uri: str) -> list[int]:
    return [v.version for v in mvcc.open_table(uri).versions()]


def tagged_table(uri: str, appends: int = 4, tagged: int = 2) -> mvcc.Table:
    """Versions 1..appends+1; version `tagged` (the release) is tagged ``release-1``."""
    t = mvcc.write_table(pa.table({"n": [0]}), uri)
    for i in range(appends):
        t.append(pa.table({"n": [i + 1]}))
    t.tags.create("release-1", tagged)
    return t


def observations(instance: dg.DagsterInstance, key: str) -> list[dict]:
    records = instance.fetch_observations(dg.AssetKey(key), limit=100).records
    return [{k: v.value for k, v in r.asset_observation.metadata.items()} for r in reversed(records)]


def log_messages(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [r.user_message for r in instance.all_logs(run_id)]


def test_retention_keeps_a_tagged_old_version_and_goes_on(instance: dg.DagsterInstance, warehouse: str) -> None:
    t = tagged_table(f"{warehouse}/events")
    resources = {"mvcc": MvccResource(root_uri=warehouse)}
    job = build_retention_job("events", older_than=timedelta(0))

    result = job.execute_in_process(instance=instance, resources=resources)
    assert result.success
    assert versions(t.uri) == [2, 5]  # the tagged release and the latest; 1, 3 and 4 removed
    (out,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_OUTPUT]
    meta = {k: v.value for k, v in out.step_output_data.metadata.items()}
    assert meta["kept_tagged_versions"] == {"release-1": 2}
    assert meta["removed_versions"] == [1, 3, 4]
    (obs,) = observations(instance, "events")
    assert obs["kept_tagged_versions"] == {"release-1": 2} and obs["versions_removed"] == 3
    assert any(
        "kept tagged versions older than the window: release-1 (version 2)" in m
        for m in log_messages(instance, result.run_id)
    )
    assert mvcc.open_table(t.uri, "release-1").to_table()["n"].to_pylist() == [0, 1]

    # the next night: still not wedged, the tag still kept
    mvcc.open_table(t.uri).append(pa.table({"n": [9]}))
    again = job.execute_in_process(instance=instance, resources=resources)
    assert again.success and versions(t.uri) == [2, 6]
    assert observations(instance, "events")[-1]["kept_tagged_versions"] == {"release-1": 2}


def test_without_an_old_tag_nothing_is_reported_kept(instance: dg.DagsterInstance, warehouse: str) -> None:
    t = mvcc.write_table(pa.table({"n": [0]}), f"{warehouse}/plain")
    t.append(pa.table({"n": [1]}))
    t.tags.create("latest", 2)  # the latest is kept anyway: not a tag retention passes over
    result = build_retention_job("plain", older_than=timedelta(0)).execute_in_process(
        instance=instance, resources={"mvcc": MvccResource(root_uri=warehouse)}
    )
    assert result.success and versions(t.uri) == [2]
    assert observations(instance, "plain")[-1]["kept_tagged_versions"] == {}


def test_the_nightly_schedule_keeps_tagged_versions(instance: dg.DagsterInstance, warehouse: str) -> None:
    t = tagged_table(f"{warehouse}/nightly")
    schedule = build_maintenance_schedule("nightly", older_than=timedelta(0), optimize_indices=False)
    result = schedule.job.execute_in_process(instance=instance, resources={"mvcc": MvccResource(root_uri=warehouse)})
    assert result.success
    remaining = versions(t.uri)
    assert remaining[0] == 2 and len(remaining) == 2  # the tag's and the compaction's latest
    (cleanup,) = [o for o in observations(instance, "nightly") if o["mvcc/operation"] == "Cleanup"]
    assert cleanup["kept_tagged_versions"] == {"release-1": 2}


@pytest.mark.parametrize("how", ["factory", "op config"])
def test_error_if_tagged_old_versions_fails_and_removes_nothing(
    instance: dg.DagsterInstance, warehouse: str, how: str
) -> None:
    t = tagged_table(f"{warehouse}/strict")
    if how == "factory":
        job = build_retention_job("strict", older_than=timedelta(0), error_if_tagged_old_versions=True)
        run_config = None
    else:
        job = build_retention_job("strict", older_than=timedelta(0))
        run_config = {"ops": {"cleanup_old_versions": {"config": {"error_if_tagged_old_versions": True}}}}
    result = job.execute_in_process(
        instance=instance,
        resources={"mvcc": MvccResource(root_uri=warehouse)},
        run_config=run_config,
        raise_on_error=False,
    )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    message = failure.step_failure_data.user_failure_data.description
    assert "retention of strict: tagged versions older than the window: release-1 (version 2)" in message
    assert "error_if_tagged_old_versions is true" in message
    assert not [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    assert versions(t.uri) == [1, 2, 3, 4, 5]


def test_the_setting_is_checked_and_reaches_the_component(warehouse: str) -> None:
    with pytest.raises(TypeError, match="error_if_tagged_old_versions must be a bool"):
        build_retention_job("x", error_if_tagged_old_versions="yes")  # type: ignore[arg-type]
    component = MvccTableComponent(key="x", retention={"error_if_tagged_old_versions": True})
    assert component.retention.error_if_tagged_old_versions is True
    assert MvccTableComponent(key="x").retention.error_if_tagged_old_versions is False


def test_a_tag_on_the_hinted_version_leaves_the_latest_findable(instance: dg.DagsterInstance, warehouse: str) -> None:
    t = tagged_table(f"{warehouse}/first", tagged=1)
    result = build_retention_job("first", older_than=timedelta(0)).execute_in_process(
        instance=instance, resources={"mvcc": MvccResource(root_uri=warehouse)}, raise_on_error=False
    )
    assert versions(t.uri) == [1, 5]
    assert mvcc.open_table(t.uri).version == 5
    assert result.success


def test_retention_never_leaves_a_stale_latest_unsaid(instance: dg.DagsterInstance, warehouse: str) -> None:
    """Whatever the core's lookup does after a tag-keeping cleanup, the run either leaves the latest findable
    and succeeds, or fails saying which version a commit would build on."""
    t = tagged_table(f"{warehouse}/first", tagged=1)
    result = build_retention_job("first", older_than=timedelta(0)).execute_in_process(
        instance=instance, resources={"mvcc": MvccResource(root_uri=warehouse)}, raise_on_error=False
    )
    assert versions(t.uri) == [1, 5]
    if mvcc.open_table(t.uri).version == 5:
        assert result.success
    else:
        assert not result.success
        (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
        message = failure.step_failure_data.user_failure_data.description
        assert "finds version 1 as its latest, not 5" in message and "release-1 (version 1)" in message
