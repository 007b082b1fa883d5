"""SparkExecutor (compaction, index builds), the S3 variant, and concurrent writers."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import pyarrow as pa
import pytest
from spark_helpers import ROOT, same

import mvcc_core
from mvcc_core.spark import SparkExecutor, write

# Stress and randomized runs: the slow tier (the fast tier keeps the Spark paths' quick tests).
pytestmark = pytest.mark.slow


def small_fragments(uri: str, storage_options: dict | None = None) -> mvcc_core.Table:
    t = mvcc_core.write_table(
        pa.table({"id": list(range(60)), "g": [i % 5 for i in range(60)]}),
        uri,
        max_rows_per_file=6,
        storage_options=storage_options,
    )
    t.delete("id % 7 = 0")
    return t


@pytest.mark.parametrize("method", ["rdd", "dataframe"])
def test_compaction_and_index_on_spark_equal_in_process(spark: Any, tmp_path: Any, method: str) -> None:
    options = {"target_rows_per_fragment": 20, "max_rows_per_task": 20}
    local = small_fragments(str(tmp_path / "local"))
    on_spark = small_fragments(str(tmp_path / "spark"))
    local_metrics = local.optimize.compact_files(**options)
    spark_metrics = on_spark.optimize.compact_files(**options, executor=SparkExecutor(spark, method=method))
    assert spark_metrics.fragments_removed == local_metrics.fragments_removed == 10
    assert spark_metrics.fragments_added == local_metrics.fragments_added
    assert same(on_spark.to_table(), local.to_table())
    assert [live.physical_rows for live in on_spark.get_fragments()] == [f.physical_rows for f in local.get_fragments()]
    local.create_index("g", "BITMAP")
    on_spark.create_index("g", "BITMAP", executor=SparkExecutor(spark, method=method))
    scan = on_spark.scanner(filter="g = 3")
    assert scan.explain().index is not None
    assert same(scan.to_table(), local.to_table(filter="g = 3"))


def test_executor_keeps_order_and_error_types(spark: Any) -> None:
    executor = SparkExecutor(spark)
    assert list(executor.map(lambda x: x * x, range(7))) == [x * x for x in range(7)]
    assert list(executor.map(lambda x: x, [])) == []

    def fail(x: int) -> int:
        if x == 2:
            raise mvcc_core.errors.CompactionError(f"task {x} failed")
        return x

    for method in ("rdd", "dataframe"):
        with pytest.raises(mvcc_core.errors.CompactionError, match="task 2 failed"):
            list(SparkExecutor(spark, method=method).map(fail, range(4)))


@pytest.mark.s3
def test_s3_read_and_write(spark: Any, s3_uri: str, s3_options: dict) -> None:
    t = small_fragments(s3_uri, s3_options)
    reader = spark.read.format("mvcc").options(**s3_options)
    df = reader.load(s3_uri)
    assert same(df.toArrow().sort_by("id"), t.to_table().sort_by("id"))
    df.where("g = 1").write.format("mvcc").options(**s3_options).mode("append").save(s3_uri)
    t2 = write(df.where("g = 2"), s3_uri, storage_options=s3_options)
    assert t2.version == t.version + 2
    assert t2.count_rows() == t.count_rows() + t.count_rows("g = 1") + t.count_rows("g = 2")
    assert spark.read.format("mvcc").options(**s3_options).load(s3_uri).count() == t2.count_rows()


def test_replace_where_racing_an_append(spark: Any, tmp_path: Any) -> None:
    """The replaceWhere pinned its read version; an append lands before it commits: of the same partition
    -> RetryableConflictError and nothing of ours is left; of another partition -> ours lands too."""
    from mvcc_core.spark.writes import plan_write

    uri = str(tmp_path / "t")
    mvcc_core.write_table(pa.table({"id": [1, 2], "day": ["a", "b"]}), uri)
    df = spark.createDataFrame([(10, "a")], "id long, day string")
    for other_day, conflicts in (("a", True), ("b", False)):
        plan = plan_write(df.schema, uri, mode="overwrite", where="day = 'a'", storage_options=None)
        fragments = plan.write_batches(df.toArrow().to_batches())
        mvcc_core.open_table(uri).append(pa.table({"id": [99], "day": [other_day]}))
        if conflicts:
            with pytest.raises(mvcc_core.RetryableConflictError):
                plan.commit(fragments, commit_message=None, transaction_properties=None, path="write")
            assert plan.remove_files() == []  # the core removed the staged files already
            assert not [f for f in (tmp_path / "t" / "data").iterdir() if f.name.startswith(plan.write_id)]
        else:
            t = plan.commit(fragments, commit_message=None, transaction_properties=None, path="write")
            assert sorted(t.to_table(filter="day = 'a'").column("id").to_pylist()) == [10]
            assert 99 in t.to_table(filter="day = 'b'").column("id").to_pylist()


WRITER = """
import sys, pyarrow as pa, mvcc_core
uri, start = sys.argv[1], int(sys.argv[2])
t = mvcc_core.open_table(uri)
for i in range(start, start + 10):
    for attempt in range(50):
        try:
            mvcc_core.open_table(uri).append(pa.table({"id": pa.array([i], pa.int64())}))
            break
        except mvcc_core.RetryableConflictError:
            continue
"""


def test_concurrent_spark_and_process_writers(spark: Any, tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    mvcc_core.write_table(pa.table({"id": pa.array([-1], pa.int64())}), uri)
    proc = subprocess.Popen([sys.executable, "-c", WRITER, uri, "1000"], cwd=ROOT)
    errors: list[BaseException] = []

    def spark_writes() -> None:
        try:
            for k in range(3):
                write(spark.range(k * 100, k * 100 + 50, numPartitions=2), uri)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    thread = threading.Thread(target=spark_writes)
    thread.start()
    thread.join()
    assert proc.wait(timeout=120) == 0
    assert not errors
    t = mvcc_core.open_table(uri)
    ids = t.to_table().column("id").to_pylist()
    expected = [-1] + list(range(1000, 1010)) + [i for k in range(3) for i in range(k * 100, k * 100 + 50)]
    assert sorted(ids) == sorted(expected)  # every row exactly once
    assert [v.version for v in t.versions()] == list(range(1, 1 + 1 + 10 + 3))  # one version per commit
