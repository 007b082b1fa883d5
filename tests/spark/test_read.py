"""Reads through `spark.read.format("mvcc")`: types, versions, time travel, pushdown, partitions."""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pytest
from spark_helpers import PUSHDOWN, ROOT, conf

import mvcc_core


def spark_rows(df: Any) -> pa.Table:
    return df.toArrow()


def sorted_by(table: pa.Table, key: str) -> pa.Table:
    return table.sort_by(key)


def test_workers_import_this_checkout(spark: Any) -> None:
    def where(_: Any) -> list[str]:
        import mvcc_core as m

        return [os.path.dirname(m.__file__)]

    found = spark.sparkContext.parallelize([0], 1).flatMap(where).collect()
    assert found == [str(ROOT / "mvcc_core")]


def test_static_registration(static_registration: bool) -> None:
    assert static_registration, "pyspark_mvcc on PYTHONPATH should register 'mvcc' without register()"


def test_read_equals_to_table(spark: Any, tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    t = mvcc_core.write_table(pa.table({"id": list(range(10)), "s": [f"v{i}" for i in range(10)]}), uri)
    got = spark_rows(spark.read.format("mvcc").load(uri))
    assert sorted_by(got, "id").equals(t.to_table())


def all_types() -> pa.Table:
    """Every Arrow type mvcc stores and Spark has a type for."""
    from datetime import date, datetime
    from decimal import Decimal
    from zoneinfo import ZoneInfo

    ny = ZoneInfo("America/New_York")
    n = 4
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "i8": pa.array([1, -2, None, 127], pa.int8()),
            "i16": pa.array([1, -2, None, 32767], pa.int16()),
            "i32": pa.array([1, -2, None, 2**31 - 1], pa.int32()),
            "f32": pa.array([1.5, None, float("nan"), -0.0], pa.float32()),
            "f64": pa.array([1.25, None, float("inf"), 2.0], pa.float64()),
            "dec": pa.array([Decimal("1.10"), None, Decimal("-99999.99"), Decimal("0.01")], pa.decimal128(7, 2)),
            "s": pa.array(["a", None, "ü", ""], pa.string()),
            "ls": pa.array(["x", "y", None, "z"], pa.large_string()),
            "dict": pa.array(["red", "blue", "red", None]).dictionary_encode(),
            "bin": pa.array([b"\x00", None, b"abc", b""], pa.binary()),
            "flag": pa.array([True, False, None, True]),
            "day": pa.array([date(2026, 11, 1), None, date(1970, 1, 1), date(2000, 2, 29)], pa.date32()),
            "ts_utc": pa.array(
                [datetime(2026, 1, 1, 12), None, datetime(1999, 12, 31), datetime(2026, 6, 1)],
                pa.timestamp("us", "UTC"),
            ),
            "ts_ny": pa.array(
                [
                    datetime(2026, 3, 8, 1, 30, tzinfo=ny),
                    None,
                    datetime(2026, 7, 1, tzinfo=ny),
                    datetime(2026, 11, 1, 1, 30, tzinfo=ny),
                ],
                pa.timestamp("us", "America/New_York"),
            ),
            "ts_ntz": pa.array(
                [datetime(2026, 1, 1), None, datetime(2026, 1, 2), datetime(1900, 1, 1)], pa.timestamp("us")
            ),
            "nested": pa.array(
                [{"a": 1, "b": ["x"]}, None, {"a": None, "b": []}, {"a": 3, "b": None}],
                pa.struct([("a", pa.int32()), ("b", pa.list_(pa.string()))]),
            ),
            "ints": pa.array([[1, 2], None, [], [None]], pa.list_(pa.int64())),
        }
    )


def test_read_every_type(spark: Any, tmp_path: Any) -> None:
    from mvcc_core.spark.writes import spark_arrow_schema

    t = mvcc_core.write_table(all_types(), str(tmp_path / "t"))
    got = sorted_by(spark.read.format("mvcc").load(t.uri).toArrow(), "id")
    expected = t.to_table()
    target = spark_arrow_schema(expected.schema)
    assert got.schema.names == expected.schema.names
    for name in expected.schema.names:
        want = expected.column(name).cast(target.field(name).type).to_pylist()
        assert repr(got.column(name).to_pylist()) == repr(want), name  # repr: nan == nan, -0.0 != 0.0
    # instants survive the zone change: New York wall clock 01:30 on 2026-03-08 is 06:30 UTC
    assert got.column("ts_ny")[0].as_py().isoformat() == "2026-03-08T06:30:00+00:00"


def test_unsupported_type_named(spark: Any, tmp_path: Any) -> None:
    t = mvcc_core.write_table(pa.table({"id": [1], "u": pa.array([1], pa.uint32())}), str(tmp_path / "t"))
    with pytest.raises(Exception, match="column 'u' of type uint32 has no Spark type"):
        spark.read.format("mvcc").load(t.uri).schema  # noqa: B018
    # the columns option leaves it out
    got = spark.read.format("mvcc").option("columns", "id").load(t.uri).toArrow()
    assert got.column("id").to_pylist() == [1]


def history(uri: str) -> mvcc_core.Table:
    """A history with appends, deletes, updates, schema changes (add, drop, rename) and compaction."""
    t = mvcc_core.write_table(pa.table({"id": list(range(20)), "v": [i * 1.5 for i in range(20)]}), uri)
    t.append(pa.table({"id": list(range(20, 30)), "v": [float(i) for i in range(20, 30)]}))
    t.delete("id % 3 = 0")
    t.update({"v": "v + 100"}, where="id > 25")
    t.add_columns({"w": "id * 2"})
    t.alter_columns({"path": "v", "name": "value"})
    t.append(pa.table({"id": [100, 101], "value": [1.0, 2.0], "w": [0, 0]}))
    t.drop_columns(["w"])
    t.optimize.compact_files()
    t.delete("id = 100")
    return t


def test_every_version_of_a_history(spark: Any, tmp_path: Any) -> None:
    t = history(str(tmp_path / "t"))
    assert t.version >= 10
    for version in range(1, t.version + 1):
        expected = t.checkout(version).to_table()
        got = spark.read.format("mvcc").option("version", version).load(t.uri).toArrow()
        assert got.schema.names == expected.schema.names, version
        assert sorted_by(got, "id").equals(sorted_by(expected, "id").cast(got.schema)), version


def test_time_travel_by_tag_and_timestamp(spark: Any, tmp_path: Any) -> None:
    t = mvcc_core.write_table(pa.table({"id": [1, 2]}), str(tmp_path / "t"))
    t.tags.create("first", 1)
    when = t.timestamp
    t.append(pa.table({"id": [3]}))
    assert spark.read.format("mvcc").option("tag", "first").load(t.uri).count() == 2
    assert spark.read.format("mvcc").option("timestamp", when.isoformat()).load(t.uri).count() == 2
    assert spark.read.format("mvcc").load(t.uri).count() == 3


def test_partitions_group_fragments(spark: Any, tmp_path: Any) -> None:
    t = mvcc_core.write_table(pa.table({"id": list(range(100))}), str(tmp_path / "t"), max_rows_per_file=10)
    assert len(t.get_fragments()) == 10
    df = spark.read.format("mvcc").option("rows_per_partition", 30).load(t.uri)
    assert df.rdd.getNumPartitions() == 4  # 30 + 30 + 30 + 10 rows
    assert sorted(df.toArrow().column("id").to_pylist()) == list(range(100))
    assert spark.read.format("mvcc").load(t.uri).rdd.getNumPartitions() == 1


def test_partitions_sized_by_the_table(tmp_path: Any) -> None:
    """Without `rows_per_partition` a read plans about 4 partitions of the table's rows (at least 128 Ki rows
    each): a file's small remainder joins the file before it instead of costing a task alone (the layout Spark's
    writer leaves: files of max_rows_per_file rows and a remainder per writer task)."""
    from mvcc_core.spark import MvccDataSource

    uri = str(tmp_path / "t")
    for start in range(0, 720_000, 180_000):  # 4 writes, each a 150,000-row file and a 30,000-row one
        chunk = pa.table({"id": pa.array(range(start, start + 180_000), pa.int64())})
        mvcc_core.write_table(chunk, uri, mode="append", max_rows_per_file=150_000)
    fragments = mvcc_core.open_table(uri).get_fragments()
    assert [f.physical_rows for f in fragments] == [150_000, 30_000] * 4
    source = MvccDataSource({"path": uri})
    partitions = source.reader(source.schema()).partitions()
    ids = [f.fragment_id for f in fragments]
    assert [p.fragment_ids for p in partitions] == [tuple(ids[i : i + 2]) for i in range(0, 8, 2)]
    explicit = MvccDataSource({"path": uri, "rows_per_partition": "150000"})
    assert len(explicit.reader(explicit.schema()).partitions()) == 5  # 150k, 180k x 3, 30k: the option wins


def test_group_fragments_keeps_order_and_balances() -> None:
    """Every fragment once, in table order; sized by the table, partitions come in multiples of 4, each
    within a fragment of the target (`partition_rows`) and never below 128 Ki rows unless the table is."""
    import random

    from mvcc_core._proto import table_pb2 as pb
    from mvcc_core.spark.options import DEFAULT_ROWS_PER_PARTITION, MAX_ROWS_PER_PARTITION, partition_rows
    from mvcc_core.spark.source import group_fragments

    rng = random.Random(31)
    for _ in range(200):
        sizes = [rng.choice([1, 1_000, 50_000, 201_424, 1_048_576]) for _ in range(rng.randint(1, 80))]
        fragments = [pb.DataFragment(id=i + 1, physical_rows=n) for i, n in enumerate(sizes)]
        groups = group_fragments(fragments, None)
        assert [i for g in groups for i in g] == [f.id for f in fragments]
        target = partition_rows(sum(sizes))
        assert DEFAULT_ROWS_PER_PARTITION <= target <= MAX_ROWS_PER_PARTITION
        rows = [sum(sizes[i - 1] for i in g) for g in groups]
        biggest = max(sizes)
        assert all(r <= target + biggest / 2 or len(g) == 1 for r, g in zip(rows, groups, strict=True))
        assert all(r >= target - biggest / 2 for r in rows[:-1]) or any(len(g) == 64 for g in groups)
    assert group_fragments([], None) == [()]


@pytest.mark.parametrize("pushdown", ["true", "false"])
def test_a_filtered_query_leaves_the_dataframe_whole(spark: Any, tmp_path: Any, pushdown: str) -> None:
    """Spark filters every query itself: a selective query plans every fragment, and the next query on the
    same DataFrame (no filter) still reads every row."""
    t = mvcc_core.write_table(pa.table({"id": list(range(100))}), str(tmp_path / "t"), max_rows_per_file=10)
    t.create_index("id")
    with conf(spark, PUSHDOWN, pushdown):
        df = spark.read.format("mvcc").option("rows_per_partition", 10).load(t.uri)
        selective = df.where("id IN (3, 97)")
        assert selective.rdd.getNumPartitions() == 10
        assert sorted(r["id"] for r in selective.collect()) == [3, 97]
        assert df.count() == 100 and df.rdd.getNumPartitions() == 10


def test_the_reader_takes_no_pushed_filter() -> None:
    """PySpark 4.3 reuses one planned read for every query on a DataFrame: a reader that took a pushed
    filter would apply it to later queries (docs/guide/spark.md, "Filters")."""
    from pyspark.sql.datasource import DataSourceReader

    from mvcc_core.spark import MvccReader

    assert MvccReader.pushFilters is DataSourceReader.pushFilters


@pytest.mark.parametrize("pushdown", ["true", "false"])
def test_a_dataframe_reads_the_version_it_was_loaded_at(spark: Any, tmp_path: Any, pushdown: str) -> None:
    """Every query on a DataFrame reads the version `load()` resolved (the one whose schema it has), whether
    or not a query pushes filters; a new `load()` reads the latest."""
    t = mvcc_core.write_table(pa.table({"id": list(range(10))}), str(tmp_path / "t"))
    with conf(spark, PUSHDOWN, pushdown):
        df = spark.read.format("mvcc").load(t.uri)
        t.append(pa.table({"id": [10, 11]}))
        assert df.where("id > 5").count() == 4
        assert df.count() == 10
        assert spark.read.format("mvcc").load(t.uri).count() == 12


def test_empty_table(spark: Any, tmp_path: Any) -> None:
    t = mvcc_core.write_table(pa.table({"id": pa.array([], pa.int64())}), str(tmp_path / "t"))
    assert spark.read.format("mvcc").load(t.uri).count() == 0


FILTERS = [
    "id = 7",
    "id > 20 AND s LIKE 'v1%'",
    "s IN ('v3', 'v40', 'nope')",
    "f < 3.0",
    "f IS NULL OR id < 2",
    "NOT (id <=> 5)",
    "s LIKE '%9'",
    "s LIKE '%2%'",
    "day >= DATE'2026-01-10'",
    "id IS NOT NULL AND grp = 'b'",
]


def filter_table(uri: str) -> mvcc_core.Table:
    from datetime import date, timedelta

    n = 50
    data = pa.table(
        {
            "id": list(range(n)),
            "s": [None if i == 4 else f"v{i}" for i in range(n)],
            "f": [float("nan") if i == 3 else (None if i == 6 else i / 2) for i in range(n)],
            "day": [date(2026, 1, 1) + timedelta(days=i) for i in range(n)],
            "grp": pa.array(["a" if i % 2 else "b" for i in range(n)]).dictionary_encode(),
        }
    )
    t = mvcc_core.write_table(data, uri, max_rows_per_file=10)
    t.delete("id = 8")
    return t


@pytest.mark.parametrize("pushdown", ["true", "false"])
@pytest.mark.slow
def test_filters_equal_spark_filtering(spark: Any, tmp_path: Any, pushdown: str) -> None:
    t = filter_table(str(tmp_path / "t"))
    with conf(spark, PUSHDOWN, "false"):
        unfiltered = spark.read.format("mvcc").load(t.uri).cache()
        expected = {f: sorted(r["id"] for r in unfiltered.where(f).collect()) for f in FILTERS}
        unfiltered.unpersist()
    with conf(spark, PUSHDOWN, pushdown):
        for predicate in FILTERS:
            got = sorted(r["id"] for r in spark.read.format("mvcc").load(t.uri).where(predicate).collect())
            assert got == expected[predicate], predicate
    assert expected["id = 7"] == [7] and 3 in expected["NOT (id <=> 5)"]


BAD_READS = [
    ({"verison": "1"}, "unknown mvcc read option"),
    ({"version": "99"}, "99"),
    ({"version": "x"}, "'version' must be a positive integer"),
    ({"tag": "nope"}, "nope"),
    ({"version": "1", "tag": "a"}, "at most one"),
    ({"timestamp": "yesterday"}, "ISO 8601"),
    ({"timestamp": "2000-01-01T00:00:00Z"}, "no version committed at or before"),
    ({"columns": "id,zz"}, "no column"),
]


@pytest.mark.parametrize(("options", "message"), BAD_READS)
def test_bad_read_options(spark: Any, tmp_path: Any, options: dict[str, str], message: str) -> None:
    t = mvcc_core.write_table(pa.table({"id": [1]}), str(tmp_path / "t"))
    with pytest.raises(Exception, match=message):
        spark.read.format("mvcc").options(**options).load(t.uri).collect()


def test_not_an_mvcc_path(spark: Any, tmp_path: Any) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "x.parquet").write_bytes(b"not a table")
    with pytest.raises(Exception, match="no mvcc table at"):
        spark.read.format("mvcc").load(str(tmp_path / "plain")).collect()


NAN_FILTERS = ["f > 3", "f >= 5", "NOT (f < 3)", "f = 'NaN'", "f > 0 AND id > 0", "f IS NULL OR f > 4"]


@pytest.mark.parametrize("as_argument", [True, False])
def test_native_read_keeps_the_nan_rows_spark_keeps(spark: Any, tmp_path: Any, as_argument: bool) -> None:
    """Spark orders NaN above every number; pyarrow's Parquet statistics leave NaN out of min/max. Neither the
    core's fragment pruning nor Spark's Parquet pushdown may then drop a NaN row that Spark's filter keeps:
    `read()` answers as the data source does (Spark's filter over every row)."""
    from mvcc_core.spark import read

    uri = str(tmp_path / "t")
    t = mvcc_core.write_table(pa.table({"id": [1, 2, 3], "f": pa.array([1.0, float("nan"), None], pa.float32())}), uri)
    t.append(pa.table({"id": [4], "f": pa.array([5.0], pa.float32())}))
    source = spark.read.format("mvcc").load(uri)
    for predicate in NAN_FILTERS:
        expected = sorted(r["id"] for r in source.where(predicate).collect())
        native = read(spark, uri, filter=predicate) if as_argument else read(spark, uri).where(predicate)
        assert sorted(r["id"] for r in native.collect()) == expected, predicate
    assert sorted(r["id"] for r in source.where("f > 3").collect()) == [2, 4]
    assert read(spark, uri).schema == source.schema
