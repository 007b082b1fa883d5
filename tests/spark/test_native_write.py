"""`mvcc_core.spark.write` through Spark's own Parquet writer: the same table as the core's writer makes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from spark_helpers import same
from test_read import all_types
from test_write import all_files, failing_frame

import mvcc_core
from mvcc_core.spark import WRITE_ID_PROPERTY, read, write


def test_native_and_core_writers_make_equal_tables(spark: Any, tmp_path: Any) -> None:
    """Every type, into a new table and into a table with its own types (zones, dictionaries, large strings)."""
    source = mvcc_core.write_table(all_types(), str(tmp_path / "src"))
    df = spark.read.format("mvcc").load(source.uri)
    by_spark = write(df, str(tmp_path / "native"), native=True)
    by_core = write(df, str(tmp_path / "core"), native=False)
    assert by_spark.schema.equals(by_core.schema)
    assert same(by_spark.to_table().sort_by("id"), by_core.to_table().sort_by("id"))
    appended = write(df, source.uri, mode="append", native=True)
    assert appended.schema.equals(source.schema)
    assert same(appended.to_table().slice(source.count_rows()).sort_by("id"), source.to_table().sort_by("id"))
    # the files are the table's own: named by the write id, no staging left, readable by every path
    write_id = appended.versions()[-1].transaction_properties[WRITE_ID_PROPERTY]
    new_files = [f.data_files()[0].path for f in appended.get_fragments()[len(source.get_fragments()) :]]
    assert new_files and all(p.startswith(write_id) and p.endswith(".parquet") for p in new_files)
    assert not [p for p in all_files(appended.uri) if "staging" in p]
    assert read(spark, appended.uri).count() == appended.count_rows()


def test_files_are_split_and_pruned_like_the_core_s(spark: Any, tmp_path: Any) -> None:
    df = spark.range(0, 1000, numPartitions=2).selectExpr("id", "id % 10 AS g")
    t = write(df, str(tmp_path / "t"), max_rows_per_file=100, native=True)
    assert len(t.get_fragments()) == 10 and all(f.physical_rows == 100 for f in t.get_fragments())
    assert t.count_rows("id >= 950") == 50
    assert len(t.scanner(filter="id >= 950").candidate_fragments()) == 1  # statistics prune the others
    t.delete("g = 3")
    t.optimize.compact_files()
    assert t.count_rows() == 900


def test_a_failed_native_write_leaves_nothing(spark: Any, tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    mvcc_core.write_table(pa.table({"id": pa.array([1], pa.int64())}), uri)
    before = all_files(uri)
    with pytest.raises(Exception, match="boom in partition"):
        write(failing_frame(spark), uri, native=True)
    assert all_files(uri) == before
    assert not [p for p in Path(uri, "data").iterdir() if p.is_dir()]
    assert mvcc_core.open_table(uri).version == 1


def test_what_native_cannot_write_is_named(spark: Any, tmp_path: Any, s3_uri: str, s3_options: dict) -> None:
    uri = str(tmp_path / "t")
    mvcc_core.write_table(pa.table({"id": [1], "day": ["a"]}), uri)
    df = spark.createDataFrame([(2, "a")], "id long, day string")
    with pytest.raises(ValueError, match="partition-scoped overwrite"):
        write(df, uri, mode="overwrite", where="day = 'a'", native=True)
    strict = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    mvcc_core.write_table(pa.table({"id": [1]}, schema=strict), str(tmp_path / "strict"))
    with pytest.raises(ValueError, match=r"non-nullable column\(s\) \['id'\]"):
        write(spark.createDataFrame([(2,)], "id long"), str(tmp_path / "strict"), native=True)
    with pytest.raises(ValueError, match="not on a local disk"):
        write(df, s3_uri, storage_options=s3_options, native=True)
    # unset: the core's writer takes these, and checks them
    assert write(df, uri, mode="overwrite", where="day = 'a'").count_rows() == 1
    assert write(spark.createDataFrame([(2,)], "id long"), str(tmp_path / "strict")).count_rows() == 2
