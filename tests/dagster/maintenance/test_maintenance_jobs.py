"""Maintenance jobs on real runs: compaction in its three steps under the multiprocess executor, retention
(dry run and real), index creation, restore (run config, bad config), the schedule's validation."""

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet
import pytest

import mvcc_core as mvcc
from mvcc_dagster import (
    MvccResource,
    build_compaction_job,
    build_index_job,
    build_maintenance_schedule,
    build_restore_job,
    build_retention_job,
)
from mvcc_dagster.metadata import RESTORED_FROM

HERE = Path(__file__).resolve().parent


def fragmented(uri: str, fragments: int, rows: int = 10) -> mvcc.Table:
    """A table of `fragments` small fragments (one append each), column `n` numbering the rows."""
    t = mvcc.write_table(pa.table({"n": list(range(rows)), "k": ["a"] * rows}), uri)
    for i in range(1, fragments):
        t.append(pa.table({"n": list(range(i * rows, (i + 1) * rows)), "k": ["a"] * rows}))
    return t


def observations(instance: dg.DagsterInstance, key: str) -> list[dict]:
    records = instance.fetch_observations(dg.AssetKey(key), limit=100).records
    return [{k: v.value for k, v in r.asset_observation.metadata.items()} for r in reversed(records)]


@pytest.mark.timeout(120)
@pytest.mark.slow
def test_compaction_job_multiprocess(
    instance: dg.DagsterInstance, warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """120 fragments of 10 rows: one ReserveFragments and one Rewrite, each task its own step, rows equal,
    both commits reported as observations (not materializations)."""
    import maintenance_defs

    uri = f"{warehouse}/{maintenance_defs.TABLE}"
    t = fragmented(uri, 120)
    before_version, before_rows = t.version, sorted(t.to_table()["n"].to_pylist())
    monkeypatch.setenv(maintenance_defs.WAREHOUSE_ENV, warehouse)
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(HERE), str(HERE.parents[2]), os.environ.get("PYTHONPATH", "")])
    )
    monkeypatch.chdir(HERE)
    with dg.execute_job(dg.reconstructable(maintenance_defs.compaction_job), instance=instance) as result:
        assert result.success
        steps = {e.step_key for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_SUCCESS}
        run = instance.get_run_by_id(result.run_id)
    assert run.tags["mvcc/table"] == maintenance_defs.TABLE
    tasks = sorted(s for s in steps if s.startswith("rewrite_fragments["))
    assert len(tasks) == 4  # 1200 rows, 300 per task
    assert {"reserve_fragments", "commit_rewrite"} <= steps
    after = mvcc.open_table(uri)
    ops = [v.operation for v in after.versions()[before_version:]]
    assert ops == ["ReserveFragments", "Rewrite"]
    assert after.versions()[-1].transaction_properties["dagster/run_id"] == result.run_id
    assert sorted(after.to_table()["n"].to_pylist()) == before_rows
    assert len(after.get_fragments()) == 4
    obs = observations(instance, maintenance_defs.TABLE)
    assert [o["mvcc/operation"] for o in obs] == ["ReserveFragments", "Rewrite"]
    assert obs[1]["fragments_before"] == 120 and obs[1]["fragments_after"] == 4
    assert obs[1]["rows_rewritten"] == 1200 and obs[1]["mvcc/version"] == after.version
    assert obs[0]["tasks"] == 4 and obs[0]["mvcc/version"] == before_version + 1
    assert instance.fetch_materializations(dg.AssetKey(maintenance_defs.TABLE), limit=1).records == []


def test_compaction_nothing_to_do(instance: dg.DagsterInstance, warehouse: str) -> None:
    """A table with one fragment: no task, no commit, the run succeeds."""
    t = fragmented(f"{warehouse}/one", 1)
    job = build_compaction_job("one", executor="in_process")
    assert job.execute_in_process(instance=instance, resources={"mvcc": MvccResource(root_uri=warehouse)}).success
    assert mvcc.open_table(t.uri).version == t.version


def test_retention_dry_run_then_real(instance: dg.DagsterInstance, warehouse: str) -> None:
    """The dry run removes nothing and says what it would remove in the step's metadata; the real run
    removes exactly that and reports it on the asset."""
    t = fragmented(f"{warehouse}/ret", 5)
    files = sorted(p for p in Path(t.uri).rglob("*") if p.is_file())
    resources = {"mvcc": MvccResource(root_uri=warehouse)}
    job = build_retention_job("ret", older_than=timedelta(0), retain_versions=2, dry_run=True)
    dry = job.execute_in_process(instance=instance, resources=resources)
    (out,) = [e for e in dry.all_events if e.event_type == dg.DagsterEventType.STEP_OUTPUT]
    meta = {k: v.value for k, v in out.step_output_data.metadata.items()}
    assert meta["dry_run"] is True and meta["removed_versions"] == [1, 2, 3] and meta["versions_removed"] == 3
    assert sorted(p for p in Path(t.uri).rglob("*") if p.is_file()) == files
    assert [v.version for v in t.versions()] == [1, 2, 3, 4, 5]
    assert observations(instance, "ret") == []  # a dry run claims nothing on the asset

    real = job.execute_in_process(
        instance=instance,
        resources=resources,
        run_config={"ops": {"cleanup_old_versions": {"config": {"dry_run": False}}}},
    )
    assert dry.output_for_node("cleanup_old_versions") == real.output_for_node("cleanup_old_versions") == [1, 2, 3]
    assert [v.version for v in mvcc.open_table(t.uri).versions()] == [4, 5]
    (obs,) = observations(instance, "ret")
    assert obs["versions_removed"] == 3 and obs["dry_run"] is False
    assert sorted(mvcc.open_table(t.uri).to_table()["n"].to_pylist()) == list(range(50))


def test_retention_delete_unverified(instance: dg.DagsterInstance, warehouse: str) -> None:
    """A data file a killed writer left (written, never committed) is younger than the unverified window: the
    retention job keeps it by default and removes it with `delete_unverified`, given to the factory or as op
    config; every committed row stays."""
    t = fragmented(f"{warehouse}/orphans", 2)
    orphan = Path(t.uri) / "data" / "killed-writer.parquet"
    pa.parquet.write_table(pa.table({"n": [99], "k": ["z"]}), orphan)
    resources = {"mvcc": MvccResource(root_uri=warehouse)}
    kept = build_retention_job("orphans").execute_in_process(instance=instance, resources=resources)
    meta = observations(instance, "orphans")[-1]
    assert kept.success and orphan.exists() and meta["unverified_files_removed"] == 0

    by_config = build_retention_job("orphans").execute_in_process(
        instance=instance,
        resources=resources,
        run_config={"ops": {"cleanup_old_versions": {"config": {"delete_unverified": True, "dry_run": True}}}},
    )
    (out,) = [e for e in by_config.all_events if e.event_type == dg.DagsterEventType.STEP_OUTPUT]
    assert out.step_output_data.metadata["unverified_files_removed"].value == 1 and orphan.exists()

    removed = build_retention_job("orphans", delete_unverified=True).execute_in_process(
        instance=instance, resources=resources
    )
    assert removed.success and not orphan.exists()
    assert observations(instance, "orphans")[-1]["unverified_files_removed"] == 1
    assert sorted(mvcc.open_table(t.uri).to_table()["n"].to_pylist()) == list(range(20))
    with pytest.raises(TypeError, match="delete_unverified"):
        build_retention_job("orphans", delete_unverified="yes")


def test_retention_refuses_tagged_version_when_told_to(instance: dg.DagsterInstance, warehouse: str) -> None:
    t = fragmented(f"{warehouse}/tagged", 3)
    t.tags.create("keep", 1)
    job = build_retention_job("tagged", older_than=timedelta(0), error_if_tagged_old_versions=True)
    result = job.execute_in_process(
        instance=instance, resources={"mvcc": MvccResource(root_uri=warehouse)}, raise_on_error=False
    )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    description = failure.step_failure_data.user_failure_data.description
    assert "tagged" in description and "keep (version 1)" in description
    assert "error_if_tagged_old_versions" in description
    assert [v.version for v in mvcc.open_table(t.uri).versions()] == [1, 2, 3]


def test_index_job(instance: dg.DagsterInstance, warehouse: str) -> None:
    t = fragmented(f"{warehouse}/idx", 3)
    job = build_index_job("idx", "n", "BTREE")
    assert job.execute_in_process(instance=instance, resources={"mvcc": MvccResource(root_uri=warehouse)}).success
    t = mvcc.open_table(t.uri)
    assert [i["name"] for i in t.list_indices()] == ["n_idx"]
    assert t.versions()[-1].operation == "CreateIndex"
    (obs,) = observations(instance, "idx")
    assert obs["unindexed_fragments_before"] == 3 and obs["unindexed_fragments_after"] == 0
    assert obs["mvcc/data_version"] == 3  # an index does not change the data


def test_restore_job(instance: dg.DagsterInstance, warehouse: str) -> None:
    """A restore by version, tag and timestamp is a materialization with `mvcc/restored_from`; bad run
    config fails before anything is committed."""
    t = fragmented(f"{warehouse}/res", 4)
    t.tags.create("good", 2)
    resources = {"mvcc": MvccResource(root_uri=warehouse)}
    job = build_restore_job("res")

    def run(config: dict) -> dg.ExecuteInProcessResult:
        return job.execute_in_process(
            instance=instance,
            resources=resources,
            run_config={"ops": {"restore": {"config": config}}},
            raise_on_error=False,
        )

    bad = run({"version": 1, "tag": "good"})
    assert not bad.success and mvcc.open_table(t.uri).version == 4
    assert not run({"timestamp": "2026-01-01T00:00:00"}).success  # no offset
    assert not run({"version": 99}).success
    assert mvcc.open_table(t.uri).version == 4

    assert run({"tag": "good"}).success
    restored = mvcc.open_table(t.uri)
    assert restored.version == 5 and restored.count_rows() == 20
    mat = instance.get_latest_materialization_event(dg.AssetKey("res")).asset_materialization
    assert mat.metadata[RESTORED_FROM].value == 2 and mat.metadata["mvcc/data_version"].value == 5
    assert mat.tags["dagster/data_version"] == "5"

    assert run({"timestamp": datetime.now(UTC).isoformat()}).success  # the version current now: 5
    mat = instance.get_latest_materialization_event(dg.AssetKey("res")).asset_materialization
    assert mat.metadata[RESTORED_FROM].value == 5 and mvcc.open_table(t.uri).version == 6


def test_schedule_and_jobs_load_together(warehouse: str) -> None:
    """Every factory for one table in one code location (op names do not collide); a bad cron is refused."""
    with pytest.raises(ValueError, match="cron 'every day'"):
        build_maintenance_schedule("t", cron="every day")
    schedule = build_maintenance_schedule("t", cron="0 3 * * *", retain_versions=3)
    defs = dg.Definitions(
        jobs=[build_compaction_job("t"), build_retention_job("t"), build_index_job("t", "n"), build_restore_job("t")],
        schedules=[schedule],
        resources={"mvcc": MvccResource(root_uri=warehouse)},
    )
    dg.Definitions.validate_loadable(defs)
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    job = defs.resolve_job_def("mvcc_maintenance__t")
    assert {n.name for n in job.graph.nodes} == {
        "reserve_fragments",
        "rewrite_fragments",
        "commit_rewrite",
        "optimize_indices",
        "cleanup_old_versions",
    }


def test_maintenance_schedule_job_runs(instance: dg.DagsterInstance, warehouse: str) -> None:
    """The scheduled job compacts, brings the index up to date and removes old versions, in that order."""
    t = fragmented(f"{warehouse}/m", 6)
    t.create_index("n", "BTREE")
    schedule = build_maintenance_schedule(
        "m", older_than=timedelta(0), options=mvcc.compaction.CompactionOptions(target_rows_per_fragment=100)
    )
    result = schedule.job.execute_in_process(instance=instance, resources={"mvcc": MvccResource(root_uri=warehouse)})
    assert result.success
    t = mvcc.open_table(t.uri)
    assert [v.operation for v in t.versions()] == ["CreateIndex"]  # the latest only; older ones removed
    assert len(t.get_fragments()) == 1 and t.list_indices()[0]["num_unindexed_fragments"] == 0
    assert [o["mvcc/operation"] for o in observations(instance, "m")] == [
        "ReserveFragments",
        "Rewrite",
        "CreateIndex",
        "Cleanup",
    ]


@pytest.mark.slow  # two Dagster runs: about 0.8 s
def test_maintenance_schedule_job_stores_no_output_nothing_reads(warehouse: str) -> None:
    """The nightly job's commit and (real) retention steps store no output: their observations carry the
    numbers. A dry run's retention still reports the versions it would remove as its output."""
    t = fragmented(f"{warehouse}/quiet", 6)
    schedule = build_maintenance_schedule(
        "quiet", older_than=timedelta(0), options=mvcc.compaction.CompactionOptions(target_rows_per_fragment=100)
    )
    resources = {"mvcc": MvccResource(root_uri=warehouse)}
    result = schedule.job.execute_in_process(resources=resources)
    assert result.success and len(mvcc.open_table(t.uri).get_fragments()) == 1
    stored = {e.step_key for e in result.all_events if e.event_type == dg.DagsterEventType.HANDLED_OUTPUT}
    assert stored == {"reserve_fragments", "rewrite_fragments[batch_0]"}  # the tasks and the results only
    [cleanup] = [e for e in result.all_events if e.is_asset_observation and e.step_key == "cleanup_old_versions"]
    assert cleanup.asset_observation_data.asset_observation.metadata["versions_removed"].value == 7
    mvcc.open_table(t.uri).append(pa.table({"n": [60], "k": ["a"]}))
    dry = {"ops": {"cleanup_old_versions": {"config": {"dry_run": True}}}}
    result = schedule.job.execute_in_process(run_config=dry, resources=resources)
    kept = [v.version for v in mvcc.open_table(t.uri).versions()]
    assert result.success and kept[:2] == [8, 9] and result.output_for_node("cleanup_old_versions") == kept[:-1]


@pytest.mark.slow  # a Dagster run: about 2 s
def test_maintenance_schedule_job_skips_the_index_step_of_a_table_without_one(
    instance: dg.DagsterInstance, warehouse: str
) -> None:
    """No index: ``optimize_indices`` is skipped (one event, not a step), compaction and retention still run."""
    t = fragmented(f"{warehouse}/plain", 6)
    schedule = build_maintenance_schedule(
        "plain", older_than=timedelta(0), options=mvcc.compaction.CompactionOptions(target_rows_per_fragment=100)
    )
    result = schedule.job.execute_in_process(instance=instance, resources={"mvcc": MvccResource(root_uri=warehouse)})
    assert result.success
    skipped = [e.step_key for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_SKIPPED]
    assert skipped == ["optimize_indices"]
    assert [o["mvcc/operation"] for o in observations(instance, "plain")] == ["ReserveFragments", "Rewrite", "Cleanup"]
    t = mvcc.open_table(t.uri)
    assert len(t.get_fragments()) == 1 and [v.operation for v in t.versions()] == ["Rewrite"]


def test_pools_on_the_committing_steps() -> None:
    """The steps that commit share the table's pool; the mapped rewrite steps have none (they run in parallel)."""
    job = build_compaction_job("sales/orders")
    pools = {n.name: n.definition.pool for n in job.graph.nodes}
    assert pools == {
        "reserve_fragments": "mvcc/sales/orders",
        "rewrite_fragments": None,
        "commit_rewrite": "mvcc/sales/orders",
    }
    for build in (lambda: build_retention_job("sales/orders"), lambda: build_restore_job("sales/orders")):
        (node,) = build().graph.nodes
        assert node.definition.pool == "mvcc/sales/orders"
    assert job.tags["mvcc/table"] == "sales/orders"
    assert build_compaction_job("/data/t").graph.node_named("commit_rewrite").definition.pool == "mvcc//data/t"


def test_compaction_racing_a_delete_lands(instance: dg.DagsterInstance, warehouse: str) -> None:
    """A delete of a rewritten fragment lands between the rewrite and the commit: `commit_rewrite` carries the
    deletion onto the new fragments (docs/reference/conflicts.md) and the run succeeds; the deleted row stays
    deleted."""
    from mvcc_dagster.maintenance.compaction import MaintenanceTarget, _compaction_ops

    uri = f"{warehouse}/busy"
    fragmented(uri, 12)
    data_before = {p.name for p in Path(uri, "data").iterdir()}
    options = mvcc.compaction.CompactionOptions(target_rows_per_fragment=60)
    reserve, rewrite, commit = _compaction_ops(MaintenanceTarget("busy"), options, "")

    @dg.op
    def concurrent_delete(results: list) -> list:
        assert {p.name for p in Path(uri, "data").iterdir()} > data_before  # the tasks wrote their files
        mvcc.open_table(uri).delete("n = 3")
        return results

    resources = {"mvcc": MvccResource(root_uri=warehouse)}

    @dg.job(executor_def=dg.in_process_executor, resource_defs={"mvcc_maintenance_io": dg.mem_io_manager, **resources})
    def racing() -> None:
        results = reserve.alias("reserve_fragments")().map(rewrite.alias("rewrite_fragments")).collect()
        commit.alias("commit_rewrite")(concurrent_delete(results))

    result = racing.execute_in_process(instance=instance, raise_on_error=False)
    assert result.success
    after = mvcc.open_table(uri)
    assert [v.operation for v in after.versions()][-3:] == ["ReserveFragments", "Delete", "Rewrite"]
    assert sorted(after.to_table()["n"].to_pylist()) == [n for n in range(120) if n != 3]
    assert len(after.get_fragments()) == 2


def test_missing_table_fails_naming_it(instance: dg.DagsterInstance, warehouse: str) -> None:
    for job in (
        build_compaction_job("nope", executor="in_process"),
        build_retention_job("nope"),
        build_index_job("nope", "n"),
    ):
        result = job.execute_in_process(
            instance=instance, resources={"mvcc": MvccResource(root_uri=warehouse)}, raise_on_error=False
        )
        assert not result.success
        (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
        description = failure.step_failure_data.user_failure_data.description
        assert "nope" in description and "TableNotFoundError" in description
    assert not Path(warehouse, "nope").exists()


def test_tag_job_guards_retention(instance: dg.DagsterInstance, warehouse: str) -> None:
    """Tag version 2, then a retention told to refuse tagged versions refuses to pass over it; move the tag,
    delete it; a bad action fails."""
    from mvcc_dagster import build_tag_job

    t = fragmented(f"{warehouse}/tg", 4)
    resources = {"mvcc": MvccResource(root_uri=warehouse)}
    job = build_tag_job("tg")

    def run(config: dict) -> dg.ExecuteInProcessResult:
        return job.execute_in_process(
            instance=instance,
            resources=resources,
            run_config={"ops": {"tag": {"config": config}}},
            raise_on_error=False,
        )

    assert run({"tag": "before", "version": 2}).success
    assert t.tags.get_version("before") == 2
    retention = build_retention_job("tg", older_than=timedelta(0), error_if_tagged_old_versions=True)
    assert not retention.execute_in_process(instance=instance, resources=resources, raise_on_error=False).success
    assert run({"action": "update", "tag": "before"}).success and t.tags.get_version("before") == 4
    assert run({"action": "delete", "tag": "before"}).success and t.tags.list() == {}
    assert not run({"action": "rename", "tag": "x"}).success
    (Path(t.uri) / "_refs" / "tags" / "broken.json").write_text("{not json")  # a tag file that does not read
    assert run({"action": "delete", "tag": "broken"}).success and t.tags.read_all().problems == {}
    actions = ["create", "update", "delete", "delete"]
    assert [o["mvcc/tag_action"] for o in observations(instance, "tg")] == actions


def test_schedule_skips_a_table_not_written_yet(warehouse: str) -> None:
    """The nightly schedule's tick before the table's first write requests nothing (a skip naming the table),
    instead of a run failing on TableNotFoundError; once the table exists the tick requests the run."""
    schedule = build_maintenance_schedule("later", cron="0 3 * * *")
    resources = {"mvcc": MvccResource(root_uri=warehouse)}
    at = datetime(2026, 11, 2, 3, tzinfo=UTC)
    data = schedule.evaluate_tick(dg.build_schedule_context(resources=resources, scheduled_execution_time=at))
    assert not data.run_requests and "no table later yet" in (data.skip_message or "")
    fragmented(f"{warehouse}/later", 2)
    data = schedule.evaluate_tick(dg.build_schedule_context(resources=resources, scheduled_execution_time=at))
    assert len(data.run_requests) == 1 and data.run_requests[0].job_name in (None, "mvcc_maintenance__later")


def test_scheduled_maintenance_is_retried_like_the_compaction_job() -> None:
    """The nightly job compacts too, so a Rewrite it loses to a concurrent delete must be re-planned by a run
    retry, as the compaction job's is (found reading the week benchmark's runs: the schedule's job had no
    retry tags, so with the instance's max_retries 0 a lost nightly compaction stayed failed)."""
    nightly = build_maintenance_schedule("t").job
    compaction = build_compaction_job("t")
    for job in (nightly, compaction):
        assert job.tags["dagster/max_retries"] == "2" and job.tags["dagster/retry_strategy"] == "ALL_STEPS"


@pytest.mark.slow
def test_restore_job_commits_past_a_corrupt_latest_manifest(instance: dg.DagsterInstance, warehouse: str) -> None:
    """With the latest manifest corrupt, a restore to a version or tag commits past it (as `Table.restore`);
    a restore to a timestamp, which needs the latest manifest, fails naming the table."""
    from mvcc_core.format.manifest import list_manifests

    t = fragmented(f"{warehouse}/hurt", 3)
    t.tags.create("good", 2)
    latest = {loc.version: loc for loc in list_manifests(t.state.store, t.state.committer.handler)}[3]
    t.state.store.put(latest.path, b"this is not a manifest")
    job = build_restore_job("hurt")
    resources = {"mvcc": MvccResource(root_uri=warehouse)}

    def run(config: dict) -> dg.ExecuteInProcessResult:
        return job.execute_in_process(
            instance=instance,
            resources=resources,
            run_config={"ops": {"restore": {"config": config}}},
            raise_on_error=False,
        )

    at_time = run({"timestamp": datetime.now(UTC).isoformat()})
    assert not at_time.success
    failure = at_time.get_step_failure_events()[0].step_failure_data.error
    assert "hurt" in failure.message and "CorruptManifestError" in failure.message
    assert run({"tag": "good"}).success
    restored = mvcc.open_table(t.uri)
    assert restored.version == 4 and restored.count_rows() == 20
