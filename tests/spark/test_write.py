"""Writes: `df.write.format("mvcc")` (data source) and `mvcc_core.spark.write` (committed here)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from spark_helpers import same
from test_read import all_types

import mvcc_core
from mvcc_core.spark import WRITE_ID_PROPERTY, WRITE_PATH_PROPERTY, write


def data_files(uri: str) -> list[str]:
    root = Path(uri) / "data"
    return sorted(os.listdir(root)) if root.exists() else []


def all_files(uri: str) -> list[str]:
    return sorted(str(p.relative_to(uri)) for p in Path(uri).rglob("*") if p.is_file())


def test_round_trip_every_type(spark: Any, tmp_path: Any) -> None:
    """mvcc -> Spark -> mvcc: a new table from the Spark read, and an append to the original table."""
    source = mvcc_core.write_table(all_types(), str(tmp_path / "src"))
    df = spark.read.format("mvcc").load(source.uri)
    df.write.format("mvcc").mode("append").save(str(tmp_path / "copy"))
    copy = mvcc_core.open_table(str(tmp_path / "copy"))
    original = source.to_table().sort_by("id")
    got = copy.to_table().sort_by("id")
    assert got.num_rows == original.num_rows
    for name in original.schema.names:  # the copy has Spark's types: zones as UTC instants, plain strings
        want = original.column(name).cast(got.schema.field(name).type)
        assert repr(got.column(name).to_pylist()) == repr(want.to_pylist()), name
    # back into the original table: its own types (New York zone, dictionary, large strings) are kept
    t = write(df, source.uri, mode="append")
    assert t.schema.equals(source.schema)
    doubled = t.to_table()
    assert doubled.num_rows == 2 * original.num_rows
    assert same(doubled.slice(original.num_rows).sort_by("id"), original)


def test_data_source_append_and_overwrite(spark: Any, tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    df = spark.createDataFrame([(i, f"s{i}") for i in range(10)], "id long, s string").repartition(3)
    df.write.format("mvcc").mode("append").save(uri)  # creates
    df.write.format("mvcc").mode("append").option("commit_message", "again").save(uri)
    t = mvcc_core.open_table(uri)
    assert t.version == 2 and t.count_rows() == 20
    info = t.versions()[-1]
    assert info.message == "again" and info.operation == "Append"
    assert info.transaction_properties[WRITE_PATH_PROPERTY] == "datasource"
    write_id = info.transaction_properties[WRITE_ID_PROPERTY]
    assert sum(f.startswith(write_id) for f in data_files(uri)) == len(t.get_fragments()) // 2
    spark.createDataFrame([(99, "x")], "id long, s string").write.format("mvcc").mode("overwrite").save(uri)
    t = mvcc_core.open_table(uri)
    assert t.version == 3 and t.to_table().to_pylist() == [{"id": 99, "s": "x"}]


def test_replace_where(spark: Any, tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    rows = [(i, "2026-11-01" if i % 2 else "2026-11-02") for i in range(10)]
    mvcc_core.write_table(pa.table({"id": [r[0] for r in rows], "day": [r[1] for r in rows]}), uri)
    new = spark.createDataFrame([(100, "2026-11-01"), (101, "2026-11-01")], "id long, day string")
    new.write.format("mvcc").mode("overwrite").option("replaceWhere", "day = '2026-11-01'").save(uri)
    t = mvcc_core.open_table(uri)
    assert t.version == 2
    assert sorted(t.to_table(filter="day = '2026-11-01'").column("id").to_pylist()) == [100, 101]
    assert sorted(t.to_table(filter="day = '2026-11-02'").column("id").to_pylist()) == [0, 2, 4, 6, 8]
    # write(): the same, returning the version; a row outside the predicate fails closed, typed
    t = write(new.selectExpr("id + 100 AS id", "day"), uri, mode="overwrite", where="day = '2026-11-01'")
    assert t.version == 3 and sorted(t.to_table(filter="day = '2026-11-01'").column("id").to_pylist()) == [200, 201]
    before = data_files(uri)
    bad = spark.createDataFrame([(7, "2026-11-01"), (8, "2026-11-03")], "id long, day string").repartition(2)
    with pytest.raises(mvcc_core.errors.PredicateError, match="2026-11-03"):
        write(bad, uri, mode="overwrite", where="day = '2026-11-01'")
    assert data_files(uri) == before and mvcc_core.open_table(uri).version == 3


def test_write_returns_table_and_properties(spark: Any, tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    df = spark.range(0, 100, numPartitions=4)
    t = write(df, uri, transaction_properties={"job": "nightly"}, commit_message="load")
    assert isinstance(t, mvcc_core.Table) and t.version == 1 and t.count_rows() == 100
    info = t.versions()[-1]
    assert info.transaction_properties["job"] == "nightly" and info.message == "load"
    assert info.transaction_properties[WRITE_PATH_PROPERTY] == "write"
    t2 = write(df, uri, mode="overwrite")
    assert t2.version == 2 and t2.count_rows() == 100 and t2.versions()[-1].operation == "Overwrite"


def failing_frame(spark: Any) -> Any:
    from pyspark.sql.functions import udf

    @udf("long")
    def boom(x):  # noqa: ANN001 - no hints: pyspark reads hints as a pandas UDF
        if x == 5:
            raise RuntimeError("boom in partition")
        return x

    return spark.range(0, 1000, numPartitions=2).select(boom("id").alias("id"))


@pytest.mark.slow
def test_failed_spark_job_leaves_nothing(spark: Any, tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    mvcc_core.write_table(pa.table({"id": pa.array([1], pa.int64())}), uri)
    before = all_files(uri)
    with pytest.raises(Exception, match="boom in partition"):
        failing_frame(spark).write.format("mvcc").mode("append").save(uri)
    assert all_files(uri) == before
    with pytest.raises(Exception, match="boom in partition"):
        write(failing_frame(spark), uri)
    assert all_files(uri) == before
    assert mvcc_core.open_table(uri).version == 1


BAD_WRITES = [
    ({"replaceWhere": "day = = 1"}, "overwrite", "day = = 1"),
    ({"replaceWhere": "nope = 1"}, "overwrite", "nope"),
    ({"replaceWhere": "id = 1"}, "append", "replaceWhere needs"),
    ({"max_rows_per_fil": "3"}, "append", "unknown mvcc write option"),
    ({"transaction_properties": "[1]"}, "append", "JSON object"),
]


@pytest.mark.parametrize(("options", "mode", "message"), BAD_WRITES)
def test_bad_writes_write_nothing(spark: Any, tmp_path: Any, options: dict, mode: str, message: str) -> None:
    uri = str(tmp_path / "t")
    mvcc_core.write_table(pa.table({"id": pa.array([1], pa.int64())}), uri)
    before = all_files(uri)
    df = spark.createDataFrame([(1,)], "id long")
    with pytest.raises(Exception, match=message):
        df.write.format("mvcc").mode(mode).options(**options).save(uri)
    assert all_files(uri) == before


def test_schema_mismatch_refused_before_tasks(spark: Any, tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    mvcc_core.write_table(pa.table({"id": pa.array([1], pa.int64()), "s": ["a"]}), uri)
    before = all_files(uri)
    wrong = spark.createDataFrame([(1, 2)], "id long, s long")
    with pytest.raises(Exception, match="column 's': table has string, DataFrame has int64"):
        wrong.write.format("mvcc").mode("append").save(uri)
    with pytest.raises(mvcc_core.SchemaError, match=r"missing column\(s\) \['s'\]"):
        write(spark.createDataFrame([(1,)], "id long"), uri)
    assert all_files(uri) == before


def test_error_modes(spark: Any, tmp_path: Any) -> None:
    df = spark.createDataFrame([(1,)], "id long")
    with pytest.raises(ValueError, match="mode 'append' or 'overwrite'"):
        write(df, str(tmp_path / "t"), mode="ignore")
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        df.write.format("mvcc").save(str(tmp_path / "t"))  # Spark's default mode, errorifexists
    assert not (tmp_path / "t").exists()


@pytest.mark.slow
def test_a_failed_write_removes_a_straggler_task_file_within_the_settle_window(tmp_path: Any) -> None:
    """Where the driver cannot wait for the failed job's tasks (the data source's `abort`, `write()` on
    Connect), a task file that appears after the first cleanup pass but within the window is removed too;
    without a window it stays (left to retention)."""
    import threading
    import time

    from mvcc_core.spark.writes import plan_write

    uri = str(tmp_path / "t")
    mvcc_core.write_table(pa.table({"id": pa.array([1], pa.int64())}), uri)
    before = all_files(uri)
    batch = pa.record_batch({"id": pa.array([2, 3], pa.int64())})
    for settle, left in ((3.0, 0), (0.0, 1)):
        plan = plan_write(pa.schema([("id", pa.int64())]), uri, mode="append", where=None, storage_options=None)
        plan.write_batches([batch])  # a task that finished before the failure

        def straggler(plan=plan) -> None:  # noqa: ANN001 - bound per round
            time.sleep(1.0)
            plan.write_batches([batch])

        thread = threading.Thread(target=straggler)
        thread.start()
        removed = plan.remove_files(settle=settle)
        thread.join()
        assert len(removed) == 2 - left
        late = [f for f in data_files(uri) if f.startswith(plan.write_id)]
        assert len(late) == left
        plan.remove_files()
    assert all_files(uri) == before
