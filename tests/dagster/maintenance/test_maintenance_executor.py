"""Maintenance that costs what it does: the compaction job's default runs in the run's own process with its
tasks in a few batched steps (the plan decides how many), whatever the code location's default executor; the
mapped multiprocess form is an explicit choice; one-step maintenance jobs never start a step process; the
retention setting `delete_unverified` reaches the schedule's and the component's retention."""

import os
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_dagster import (
    MvccResource,
    build_compaction_job,
    build_index_job,
    build_maintenance_schedule,
    build_restore_job,
    build_retention_job,
    build_tag_job,
)
from mvcc_dagster.maintenance.compaction import batches

HERE = Path(__file__).resolve().parent


def fragmented(uri: str, fragments: int, rows: int = 10) -> mvcc.Table:
    t = mvcc.write_table(pa.table({"n": list(range(rows))}), uri)
    for i in range(1, fragments):
        t.append(pa.table({"n": list(range(i * rows, (i + 1) * rows))}))
    return t


def step_keys(events: list) -> set[str]:
    return {e.step_key for e in events if e.event_type == dg.DagsterEventType.STEP_SUCCESS}


def test_batches_follow_the_plan() -> None:
    tasks = list(range(40))
    assert batches(tasks, 4, 16) == [tasks[:20], tasks[20:]]  # 40 tasks: 3 steps of >= 16 are too many
    assert batches(tasks[:5], 4, 16) == [tasks[:5]]  # a small plan: one step
    assert batches(tasks, 4, 1) == [tasks[:10], tasks[10:20], tasks[20:30], tasks[30:]]
    assert batches(tasks[:3], 8, 1) == [[0], [1], [2]]
    assert batches([], 4, 16) == []
    assert [len(b) for b in batches(list(range(100)), 4, 16)] == [25, 25, 25, 25]


def test_default_compaction_runs_in_the_run_process(instance: dg.DagsterInstance, warehouse: str) -> None:
    """Under a code location whose executor is multiprocess, the default job keeps Dagster's in-process
    executor; 30 fragments -> 3 tasks in one batched rewrite step; the same commits and reports as before."""
    import executor_defs

    job = executor_defs.defs.resolve_job_def(f"mvcc_compaction__{executor_defs.AUTO_TABLE}")
    assert job.executor_def is dg.in_process_executor
    big = executor_defs.defs.resolve_job_def(f"mvcc_compaction__{executor_defs.BIG_TABLE}")
    assert big.executor_def is not dg.in_process_executor  # the explicit form takes the code location's

    uri = f"{warehouse}/{executor_defs.AUTO_TABLE}"
    t = fragmented(uri, 30)
    result = job.execute_in_process(instance=instance, resources={"mvcc": MvccResource(root_uri=warehouse)})
    assert result.success
    assert step_keys(result.all_events) == {"reserve_fragments", "rewrite_fragments[batch_0]", "commit_rewrite"}
    (rewrite,) = [
        e
        for e in result.all_events
        if e.event_type == dg.DagsterEventType.STEP_OUTPUT and e.step_key == "rewrite_fragments[batch_0]"
    ]
    assert rewrite.step_output_data.metadata["tasks"].value == 3
    after = mvcc.open_table(uri)
    assert [v.operation for v in after.versions()[t.version :]] == ["ReserveFragments", "Rewrite"]
    assert sorted(after.to_table()["n"].to_pylist()) == list(range(300)) and len(after.get_fragments()) == 3
    records = instance.fetch_observations(dg.AssetKey(executor_defs.AUTO_TABLE), limit=10).records
    obs = [{k: v.value for k, v in r.asset_observation.metadata.items()} for r in reversed(records)]
    assert obs[0]["rewrite_steps"] == 1 and obs[0]["tasks"] == 3 and obs[0]["mvcc/version"] == t.version + 1
    assert obs[1]["fragments_before"] == 30 and obs[1]["fragments_after"] == 3 and obs[1]["rows_rewritten"] == 300


@pytest.mark.slow
def test_batched_compaction_losing_to_a_column_rewrite_is_not_retried(
    instance: dg.DagsterInstance, warehouse: str
) -> None:
    """The batched form maps a lost Rewrite as the mapped form does: a Failure of `commit_rewrite` without a
    step retry, its files removed."""
    from mvcc_dagster.maintenance.compaction import MaintenanceTarget, _compaction_ops

    uri = f"{warehouse}/busy"
    fragmented(uri, 12)
    data_before = {p.name for p in Path(uri, "data").iterdir()}
    reserve, rewrite, commit = _compaction_ops(
        MaintenanceTarget("busy"), mvcc.compaction.CompactionOptions(target_rows_per_fragment=60), "", rewrite_steps=4
    )

    @dg.op
    def concurrent_delete(results: list) -> list:
        # a REWRITE_COLUMNS update: a delete would be carried onto the new fragments (docs/reference/conflicts.md)
        mvcc.open_table(uri).update({"n": "n + 1000"}, where="n = 3", mode="rewrite_columns")
        return results

    @dg.job(
        executor_def=dg.in_process_executor,
        resource_defs={"mvcc_maintenance_io": dg.mem_io_manager, "mvcc": MvccResource(root_uri=warehouse)},
    )
    def racing() -> None:
        results = reserve.alias("reserve_fragments")().map(rewrite.alias("rewrite_fragments")).collect()
        commit.alias("commit_rewrite")(concurrent_delete(results))

    result = racing.execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    assert {"rewrite_fragments[batch_0]", "rewrite_fragments[batch_1]"} <= step_keys(result.all_events)
    assert not [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert failure.step_key == "commit_rewrite"
    assert "lost to a concurrent commit" in failure.step_failure_data.user_failure_data.description
    latest = mvcc.open_table(uri).manifest  # the column rewrite's own file is referenced; the tasks' files are gone
    referenced = {Path(f.path).name for frag in latest.fragments for f in frag.files}
    assert {p.name for p in Path(uri, "data").iterdir()} <= data_before | referenced


def test_one_step_jobs_and_the_schedule_run_in_process(warehouse: str) -> None:
    defs = dg.Definitions(
        jobs=[
            build_retention_job("t"),
            build_index_job("t", "n"),
            build_restore_job("t"),
            build_tag_job("t"),
        ],
        schedules=[build_maintenance_schedule("t", delete_unverified=True)],
        executor=dg.multiprocess_executor,
        resources={"mvcc": MvccResource(root_uri=warehouse)},
    )
    for name in ("mvcc_retention__t", "mvcc_index__t__n_idx", "mvcc_restore__t", "mvcc_tag__t", "mvcc_maintenance__t"):
        assert defs.resolve_job_def(name).executor_def is dg.in_process_executor, name
    cleanup = defs.resolve_job_def("mvcc_maintenance__t").graph.node_named("cleanup_old_versions").definition
    assert cleanup.config_schema.config_type.fields["delete_unverified"].default_value is True
    mapped = build_maintenance_schedule("u", executor="dagster").job
    assert mapped.executor_def is not dg.in_process_executor


def test_bad_executor_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="rewrite_steps must be a positive int.*got 0"):
        build_compaction_job("t", rewrite_steps=0)
    with pytest.raises(ValueError, match="rewrite_steps is not for executor='spark'"):
        build_compaction_job("t", executor="spark", rewrite_steps=2)
    with pytest.raises(ValueError, match="executor must be one of"):
        build_maintenance_schedule("t", executor="threads")


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_explicit_multiprocess_form_and_auto_under_execute_job(
    instance: dg.DagsterInstance, warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real runs (`execute_job` of reconstructable jobs) in a code location whose executor is multiprocess:
    the explicit big-table form starts a process per step, its 8 tasks in 2 batched rewrite steps; the default
    job starts none."""
    import executor_defs

    monkeypatch.setenv(executor_defs.WAREHOUSE_ENV, warehouse)
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(HERE), str(HERE.parents[2]), os.environ.get("PYTHONPATH", "")])
    )
    monkeypatch.chdir(HERE)
    for table, job, steps, processes in (
        (executor_defs.BIG_TABLE, executor_defs.big_job, 2, True),
        (executor_defs.AUTO_TABLE, executor_defs.auto_job, 1, False),
    ):
        uri = f"{warehouse}/{table}"
        fragmented(uri, 80)
        with dg.execute_job(dg.reconstructable(job), instance=instance) as result:
            assert result.success
            keys = step_keys(result.all_events)
            started = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_WORKER_STARTING]
        assert sorted(k for k in keys if k.startswith("rewrite_fragments[")) == [
            f"rewrite_fragments[batch_{i}]" for i in range(steps)
        ]
        assert bool(started) is processes, table
        after = mvcc.open_table(uri)
        assert sorted(after.to_table()["n"].to_pylist()) == list(range(800)) and len(after.get_fragments()) == 8


def test_component_passes_executor_and_delete_unverified(warehouse: str) -> None:
    """The component's `maintenance.executor` (default auto) and `retention.delete_unverified` reach the jobs."""
    from mvcc_dagster import MvccTableComponent

    def built(**attributes: object) -> dg.Definitions:
        attributes = {"key": "orders", "root_uri": warehouse, **attributes}
        return dg.build_defs_for_component(MvccTableComponent.from_attributes_dict(attributes=attributes))

    defs = built(retention={"delete_unverified": True})
    assert defs.resolve_job_def("mvcc_compaction__orders").executor_def is dg.in_process_executor
    for name in ("mvcc_retention__orders", "mvcc_maintenance__orders"):
        cleanup = defs.resolve_job_def(name).graph.node_named("cleanup_old_versions").definition
        assert cleanup.config_schema.config_type.fields["delete_unverified"].default_value is True
    mapped = built(maintenance={"executor": "dagster", "rewrite_steps": 2})
    assert mapped.resolve_job_def("mvcc_compaction__orders").executor_def is not dg.in_process_executor
