"""The `mvcc` data source, `write` and `SparkExecutor` through a real Spark Connect session.

The client (`pyspark.sql.connect`) sends plans over gRPC; the server plans them and runs the data source's
`reader()`/`writer()`/`commit()` and every `read`/`write`/`mapInArrow` function in its own Python workers,
as with any Connect server. The server is the shared test JVM (conftest's `connect` fixture).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from spark_helpers import PUSHDOWN, ROOT, conf, same
from test_read import filter_table, history
from test_write import all_files

import mvcc_core
from mvcc_core.spark import WRITE_PATH_PROPERTY, SparkExecutor, write
from mvcc_core.spark.executor import is_connect


@pytest.mark.slow
def test_a_connect_session_runs_this_checkout(connect: Any) -> None:
    """The session is a Connect client, and the server's Python workers import this checkout."""
    assert is_connect(connect)

    def where(batches: Any) -> Any:
        import mvcc_core as m

        for _ in batches:
            yield pa.RecordBatch.from_arrays([pa.array([os.path.dirname(m.__file__)])], names=["path"])

    rows = connect.range(1, numPartitions=1).mapInArrow(where, "path string").collect()
    assert [r["path"] for r in rows] == [str(ROOT / "mvcc_core")]


@pytest.mark.slow
def test_read_versions_of_a_history(connect: Any, tmp_path: Path) -> None:
    t = history(str(tmp_path / "t"))
    for version in (3, t.version):  # rows deleted; after schema changes, compaction and a delete
        expected = t.checkout(version).to_table().sort_by("id")
        got = connect.read.format("mvcc").option("version", version).load(t.uri).toArrow().sort_by("id")
        assert got.schema.names == expected.schema.names, version
        assert got.equals(expected.cast(got.schema)), version
    latest = connect.read.format("mvcc").load(t.uri)
    assert latest.count() == t.count_rows()


@pytest.mark.parametrize("pushdown", ["true", "false"])
@pytest.mark.slow
def test_filtered_reads_equal_the_core(connect: Any, tmp_path: Path, pushdown: str) -> None:
    t = filter_table(str(tmp_path / "t"))
    with conf(connect, PUSHDOWN, pushdown):
        df = connect.read.format("mvcc").option("rows_per_partition", 10).load(t.uri)
        for predicate in ("id > 20 AND s LIKE 'v3%'", "f < 3.0"):
            got = sorted(r["id"] for r in df.where(predicate).collect())
            assert got == sorted(t.to_table(filter=predicate).column("id").to_pylist()), predicate
        assert [r["id"] for r in df.where("id = 42").collect()] == [42]


@pytest.mark.slow
def test_data_source_append_overwrite_and_replace_where(connect: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    rows = [(i, "2026-11-01" if i % 2 else "2026-11-02") for i in range(10)]
    df = connect.createDataFrame(rows, "id long, day string").repartition(2)
    df.write.format("mvcc").mode("append").save(uri)  # creates the table
    df.write.format("mvcc").mode("append").option("commit_message", "again").save(uri)
    t = mvcc_core.open_table(uri)
    assert t.version == 2 and t.count_rows() == 20
    assert t.versions()[-1].message == "again"
    assert t.versions()[-1].transaction_properties[WRITE_PATH_PROPERTY] == "datasource"

    new = connect.createDataFrame([(100, "2026-11-01"), (101, "2026-11-01")], "id long, day string")
    new.write.format("mvcc").mode("overwrite").option("replaceWhere", "day = '2026-11-01'").save(uri)
    t = mvcc_core.open_table(uri)
    assert t.version == 3 and t.versions()[-1].operation == "Update"
    assert sorted(t.to_table(filter="day = '2026-11-01'").column("id").to_pylist()) == [100, 101]
    assert sorted(t.to_table(filter="day = '2026-11-02'").column("id").to_pylist()) == [0, 0, 2, 2, 4, 4, 6, 6, 8, 8]

    # a row outside the predicate: the job fails, nothing is committed or left behind
    before = all_files(uri)
    bad = connect.createDataFrame([(7, "2026-11-01"), (8, "2026-11-03")], "id long, day string").repartition(1)
    with pytest.raises(Exception, match="2026-11-03"):
        bad.write.format("mvcc").mode("overwrite").option("replaceWhere", "day = '2026-11-01'").save(uri)
    assert all_files(uri) == before

    connect.createDataFrame([(1, "x")], "id long, day string").write.format("mvcc").mode("overwrite").save(uri)
    t = mvcc_core.open_table(uri)
    assert t.version == 4 and t.versions()[-1].operation == "Overwrite"
    assert t.to_table().to_pylist() == [{"id": 1, "day": "x"}]


@pytest.mark.slow
def test_round_trip_through_connect_keeps_the_table_types(connect: Any, tmp_path: Path) -> None:
    from test_read import all_types

    source = mvcc_core.write_table(all_types(), str(tmp_path / "src"))
    df = connect.read.format("mvcc").load(source.uri)
    t = write(df, source.uri, mode="append")
    assert t.schema.equals(source.schema) and t.version == 2
    original = source.to_table()
    assert same(t.to_table().slice(original.num_rows).sort_by("id"), original)


@pytest.mark.slow
def test_write_returns_the_table_and_raises_core_types(connect: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    df = connect.range(0, 100, numPartitions=4)
    t = write(df, uri, transaction_properties={"job": "nightly"}, commit_message="load")
    assert isinstance(t, mvcc_core.Table) and t.version == 1 and t.count_rows() == 100
    info = t.versions()[-1]
    assert info.transaction_properties["job"] == "nightly"
    assert info.transaction_properties[WRITE_PATH_PROPERTY] == "write"
    t = write(connect.range(200, 210, numPartitions=2), uri, mode="overwrite", where="id >= 50")
    assert t.version == 2 and sorted(t.to_table().column("id").to_pylist()) == list(range(50)) + list(range(200, 210))

    before = all_files(uri)
    with pytest.raises(mvcc_core.errors.PredicateError, match="id >= 50"):
        write(connect.range(0, 60, numPartitions=1), uri, mode="overwrite", where="id >= 50")
    with pytest.raises(mvcc_core.SchemaError, match=r"column\(s\) \['x'\] are not in the table"):
        write(connect.range(3).selectExpr("id", "id AS x"), uri)
    assert all_files(uri) == before and mvcc_core.open_table(uri).version == 2


@pytest.mark.slow
def test_a_failed_job_leaves_nothing(connect: Any, tmp_path: Path) -> None:
    """One partition: no straggler task can outlive the failure (on Connect `write()` cannot wait for
    tasks; see docs/guide/spark.md)."""
    from pyspark.sql.connect.functions import udf  # the generic one builds a classic Column in this process

    @udf("long")
    def boom(x):  # noqa: ANN001 - no hints: pyspark reads hints as a pandas UDF
        if x == 500:
            raise RuntimeError("boom in partition")
        return x

    uri = str(tmp_path / "t")
    mvcc_core.write_table(pa.table({"id": pa.array([1], pa.int64())}), uri)
    before = all_files(uri)
    failing = connect.range(0, 1000, numPartitions=1).select(boom("id").alias("id"))
    with pytest.raises(Exception, match="boom in partition"):
        failing.write.format("mvcc").mode("append").save(uri)
    assert all_files(uri) == before
    with pytest.raises(Exception, match="boom in partition"):
        write(failing, uri)
    assert all_files(uri) == before
    assert mvcc_core.open_table(uri).version == 1


@pytest.mark.slow
def test_spark_executor_on_connect(connect: Any, tmp_path: Path) -> None:
    """`SparkExecutor(connect)` picks the DataFrame method; compaction and an index build equal in-process."""
    from test_executor_s3_concurrency import small_fragments

    executor = SparkExecutor(connect)
    assert executor.method == "dataframe"
    with pytest.raises(ValueError, match="method 'rdd' needs a classic session"):
        SparkExecutor(connect, method="rdd")
    options = {"target_rows_per_fragment": 20, "max_rows_per_task": 20}
    local = small_fragments(str(tmp_path / "local"))
    on_spark = small_fragments(str(tmp_path / "spark"))
    local_metrics = local.optimize.compact_files(**options)
    spark_metrics = on_spark.optimize.compact_files(**options, executor=executor)
    assert spark_metrics.fragments_removed == local_metrics.fragments_removed == 10
    assert spark_metrics.fragments_added == local_metrics.fragments_added
    assert same(on_spark.to_table(), local.to_table())
    local.create_index("g", "BITMAP")
    on_spark.create_index("g", "BITMAP", executor=executor)
    assert on_spark.scanner(filter="g = 3").explain().index is not None
    assert same(on_spark.to_table(filter="g = 3"), local.to_table(filter="g = 3"))

    def fail(x: int) -> int:
        if x == 2:
            raise mvcc_core.errors.CompactionError(f"task {x} failed")
        return x

    with pytest.raises(mvcc_core.errors.CompactionError, match="task 2 failed"):
        list(executor.map(fail, range(4)))
    assert list(executor.map(lambda x: x * x, range(5))) == [0, 1, 4, 9, 16]
