"""`build_compaction_job(..., executor="spark")`: the compaction tasks run on the core's `SparkExecutor`
inside one Dagster step (on the shared local session, reached through dagster-pyspark's `PySparkResource`),
between the same ReserveFragments and one Rewrite as the mapped job."""

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import mvcc_core as mvcc

dg = pytest.importorskip("dagster", reason="dagster is not installed (extra 'dagster')")
dagster_pyspark = pytest.importorskip("dagster_pyspark", reason="dagster-pyspark is not installed (extra 'dagster')")

from mvcc_dagster import MvccResource, build_compaction_job  # noqa: E402 - after the skips

# Stress and randomized runs: the slow tier (the fast tier keeps the Spark paths' quick tests).
pytestmark = pytest.mark.slow


def fragmented(uri: str, fragments: int, rows: int = 10) -> mvcc.Table:
    t = mvcc.write_table(pa.table({"n": list(range(rows))}), uri)
    for i in range(1, fragments):
        t.append(pa.table({"n": list(range(i * rows, (i + 1) * rows))}))
    return t


def resources(warehouse: str) -> dict[str, Any]:
    # getOrCreate in the resource's setup returns the tests' one session: no second JVM
    return {
        "mvcc": MvccResource(root_uri=warehouse),
        "pyspark": dagster_pyspark.PySparkResource(spark_config={"spark.master": "local[2]"}),
    }


@pytest.mark.timeout(240)
def test_compaction_tasks_run_on_spark_in_one_step(spark: Any, tmp_path: Path) -> None:
    warehouse = str(tmp_path)
    t = fragmented(f"{warehouse}/events", 40)
    before_version, before_rows = t.version, sorted(t.to_table()["n"].to_pylist())
    tracker = spark.sparkContext.statusTracker()
    jobs_before = set(tracker.getJobIdsForGroup())
    job = build_compaction_job(
        "events", options=mvcc.compaction.CompactionOptions(target_rows_per_fragment=100), executor="spark"
    )

    with dg.instance_for_test() as instance:
        result = job.execute_in_process(instance=instance, resources=resources(warehouse))
        assert result.success
        steps = {e.step_key for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_SUCCESS}
        assert steps == {"reserve_fragments", "rewrite_fragments", "commit_rewrite"}  # no mapped steps
        (rewrite_output,) = [
            e
            for e in result.all_events
            if e.event_type == dg.DagsterEventType.STEP_OUTPUT and e.step_key == "rewrite_fragments"
        ]
        meta = {k: v.value for k, v in rewrite_output.event_specific_data.metadata.items()}
        observations = instance.fetch_observations(dg.AssetKey("events"), limit=10).records

    assert meta["tasks"] == 4 and meta["spark_method"] == "rdd" and meta["rows"] == 400
    new_jobs = set(tracker.getJobIdsForGroup()) - jobs_before
    stages = [tracker.getStageInfo(s) for j in new_jobs for s in tracker.getJobInfo(j).stageIds]
    assert any(stage is not None and stage.numTasks == 4 for stage in stages)  # one Spark task per compaction task

    after = mvcc.open_table(f"{warehouse}/events")
    history = after.versions()[before_version:]
    assert [v.operation for v in history] == ["ReserveFragments", "Rewrite"]
    assert all(v.transaction_properties["dagster/run_id"] == result.run_id for v in history)
    assert sorted(after.to_table()["n"].to_pylist()) == before_rows
    assert len(after.get_fragments()) == 4
    ops = sorted(r.asset_observation.metadata["mvcc/operation"].value for r in observations)
    assert ops == ["ReserveFragments", "Rewrite"]


def test_spark_compaction_with_nothing_to_do(spark: Any, tmp_path: Path) -> None:
    """One fragment: no task reaches Spark, nothing is committed, the run succeeds."""
    t = fragmented(f"{tmp_path}/one", 1)
    job = build_compaction_job("one", executor="spark")
    with dg.instance_for_test() as instance:
        assert job.execute_in_process(instance=instance, resources=resources(str(tmp_path))).success
    assert mvcc.open_table(f"{tmp_path}/one").version == t.version


def test_unknown_executor_is_refused() -> None:
    with pytest.raises(ValueError, match="executor must be one of .*'spark'.*got 'ray'"):
        build_compaction_job("events", executor="ray")
