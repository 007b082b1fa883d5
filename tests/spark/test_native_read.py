"""`mvcc_core.spark.read`: a version read by Spark's own Parquet reader equals the core's read."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from test_read import FILTERS, all_types, filter_table, history

import mvcc_core
from mvcc_core.spark import read
from mvcc_core.spark.writes import spark_arrow_schema


def uses_parquet_scan(df: Any) -> bool:
    """Whether Spark's plan reads the files with its own Parquet scan (not a Python source or UDF)."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    return "FileScan parquet" in plan and "BatchEvalPython" not in plan and "PythonDataSource" not in plan


def test_every_type_equals_the_data_source(spark: Any, tmp_path: Any) -> None:
    t = mvcc_core.write_table(all_types(), str(tmp_path / "t"))
    df = read(spark, t.uri)
    assert uses_parquet_scan(df)
    got = df.toArrow().sort_by("id")
    via_source = spark.read.format("mvcc").load(t.uri).toArrow().sort_by("id")
    assert df.schema == spark.read.format("mvcc").load(t.uri).schema
    expected = t.to_table()
    target = spark_arrow_schema(expected.schema)
    for name in expected.schema.names:
        want = expected.column(name).cast(target.field(name).type).to_pylist()
        assert repr(got.column(name).to_pylist()) == repr(want), name
        assert repr(got.column(name).to_pylist()) == repr(via_source.column(name).to_pylist()), name


@pytest.mark.slow
def test_every_version_of_a_history(spark: Any, tmp_path: Any) -> None:
    """Deletes, updates, added (with values: two-file fragments), renamed and dropped columns, compaction."""
    t = history(str(tmp_path / "t"))
    for version in range(1, t.version + 1):
        expected = t.checkout(version).to_table()
        got = read(spark, t.uri, version=version).toArrow()
        assert got.schema.names == expected.schema.names, version
        assert got.sort_by("id").equals(expected.sort_by("id").cast(got.schema)), version


def test_deleted_rows_are_dropped_and_columns_projected(spark: Any, tmp_path: Any) -> None:
    t = mvcc_core.write_table(pa.table({"id": list(range(1000)), "v": [i * 2 for i in range(1000)]}),
                              str(tmp_path / "t"), max_rows_per_file=100)  # fmt: skip
    t.delete("id % 7 = 0 OR id > 950")
    df = read(spark, t.uri, columns=["v"])
    assert uses_parquet_scan(df) and df.columns == ["v"]
    assert sorted(r["v"] for r in df.collect()) == sorted(t.to_table(columns=["v"]).column("v").to_pylist())


def test_time_travel_by_tag_and_timestamp(spark: Any, tmp_path: Any) -> None:
    t = mvcc_core.write_table(pa.table({"id": [1, 2]}), str(tmp_path / "t"))
    t.tags.create("first", 1)
    when = t.timestamp
    t.append(pa.table({"id": [3]}))
    assert read(spark, t.uri, version="first").count() == 2
    assert read(spark, t.uri, version=when).count() == 2
    assert read(spark, t.uri).count() == 3


@pytest.mark.parametrize("predicate", FILTERS)
def test_filters_equal_spark_filtering(spark: Any, tmp_path: Any, predicate: str) -> None:
    t = filter_table(str(tmp_path / "t"))
    expected = sorted(r["id"] for r in spark.read.format("mvcc").load(t.uri).where(predicate).collect())
    assert sorted(r["id"] for r in read(spark, t.uri, filter=predicate).collect()) == expected


def test_a_selective_filter_reads_only_the_files_that_may_match(spark: Any, tmp_path: Any) -> None:
    t = mvcc_core.write_table(pa.table({"id": list(range(100))}), str(tmp_path / "t"), max_rows_per_file=10)
    df = read(spark, t.uri, filter="id = 42")
    assert [r["id"] for r in df.collect()] == [42]
    files = df._jdf.inputFiles()
    assert len(files) == 1
    assert read(spark, t.uri, filter="id > 1000").count() == 0


def test_empty_table_and_bad_input(spark: Any, tmp_path: Any) -> None:
    t = mvcc_core.write_table(pa.table({"id": pa.array([], pa.int64())}), str(tmp_path / "t"))
    assert read(spark, t.uri).count() == 0 and read(spark, t.uri).columns == ["id"]
    with pytest.raises(mvcc_core.SchemaError, match=r"no column\(s\) \['nope'\]"):
        read(spark, t.uri, columns=["nope"])
    with pytest.raises(mvcc_core.TableNotFoundError, match="no mvcc table"):
        read(spark, str(tmp_path / "missing"))
    u = mvcc_core.write_table(pa.table({"id": [1], "u": pa.array([1], pa.uint32())}), str(tmp_path / "u"))
    with pytest.raises(mvcc_core.SchemaError, match="column 'u' of type uint32 has no Spark type"):
        read(spark, u.uri)
    assert read(spark, u.uri, columns=["id"]).collect()[0]["id"] == 1


def test_s3_tables_go_through_the_data_source(spark: Any, s3_uri: str, s3_options: dict) -> None:
    t = mvcc_core.write_table(pa.table({"id": list(range(10))}), s3_uri, storage_options=s3_options)
    t.delete("id < 3")
    df = read(spark, s3_uri, storage_options=s3_options, filter="id > 4")
    assert not uses_parquet_scan(df)
    assert sorted(r["id"] for r in df.collect()) == [5, 6, 7, 8, 9]
    with pytest.raises(ValueError, match="native=True needs a table on a local disk"):
        read(spark, s3_uri, storage_options=s3_options, native=True)
