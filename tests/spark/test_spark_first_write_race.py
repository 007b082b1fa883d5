"""Spark first writes that another writer beats to creating the table: both land, on every Spark path.

The race is made deterministic with real processes: the DataFrame's own tasks (Spark's Python workers,
other OS processes) create the table while the write runs, after the driver planned the write for a missing
table. The write must then be applied to that table (an Append, the partition overwrite, a later Overwrite),
not fail with TableExistsError. The last test races a Spark write with pyarrow writers in spawned processes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import multiprocessing as mp
import os
from typing import Any

import pyarrow as pa
import pytest

import mvcc_core
from mvcc_core import failpoints
from mvcc_core.spark import write

# Stress and randomized runs: the slow tier (the fast tier keeps the Spark paths' quick tests).
pytestmark = pytest.mark.slow

DAY1, DAY2 = dt.date(2026, 11, 1), dt.date(2026, 11, 2)
SCHEMA = pa.schema([("day", pa.date32()), ("id", pa.int64()), ("writer", pa.string())])
SPARK_SCHEMA = "day date, id long, writer string"


def rows(day: dt.date, ids: list[int], writer: str) -> pa.Table:
    return pa.table(
        {"day": pa.array([day] * len(ids), pa.date32()), "id": ids, "writer": [writer] * len(ids)}, schema=SCHEMA
    )


def content(uri: str) -> list[tuple]:
    return sorted((r["day"], r["id"], r["writer"]) for r in mvcc_core.open_table(uri).to_table().to_pylist())


def _create_while_running(uri: str, winner: pa.Table):  # noqa: ANN202 - a closure for mapInArrow
    """A task function that creates the table (once, whichever task comes first), then passes its rows on."""

    def run(batches: Any) -> Any:
        with contextlib.suppress(mvcc_core.TableExistsError):  # another task created it
            mvcc_core.write_table(winner, uri, mode="create", transaction_properties={"writer": "winner"})
        yield from batches

    return run


def racing_frame(spark: Any, uri: str, day: dt.date, ids: list[int], winner: pa.Table) -> Any:
    """Our rows, whose computation (in Spark's workers) creates the table with `winner`'s rows first."""
    df = spark.createDataFrame([(day, i, "spark") for i in ids], SPARK_SCHEMA).repartition(2)
    return df.mapInArrow(_create_while_running(uri, winner), SPARK_SCHEMA)


def both_days() -> pa.Table:
    return pa.concat_tables([rows(DAY1, [1, 2], "winner"), rows(DAY2, [3], "winner")])


@pytest.mark.parametrize("native", [None, False])
def test_write_append_lands_in_the_table_created_meanwhile(spark: Any, tmp_path: Any, native: bool | None) -> None:
    uri = str(tmp_path / "t")
    t = write(racing_frame(spark, uri, DAY1, [10, 11], both_days()), uri, mode="append", native=native)
    assert t.version == 2
    assert [(i.operation, i.transaction_properties.get("writer")) for i in t.versions()] == [
        ("Overwrite", "winner"),
        ("Append", None),
    ]
    assert content(uri) == sorted([*rows_of(both_days()), (DAY1, 10, "spark"), (DAY1, 11, "spark")])


def rows_of(table: pa.Table) -> list[tuple]:
    return [(r["day"], r["id"], r["writer"]) for r in table.to_pylist()]


def test_write_partition_overwrite_replaces_its_day_in_the_table_created_meanwhile(spark: Any, tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    where = "day = DATE '2026-11-01'"
    t = write(racing_frame(spark, uri, DAY1, [10], both_days()), uri, mode="overwrite", where=where)
    assert t.version == 2 and t.transaction().operation.name == "Update"
    assert content(uri) == [(DAY1, 10, "spark"), (DAY2, 3, "winner")]


def test_write_plain_overwrite_wins_as_the_next_version(spark: Any, tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    t = write(racing_frame(spark, uri, DAY2, [7], both_days()), uri, mode="overwrite")
    assert t.version == 2 and [i.operation for i in t.versions()] == ["Overwrite", "Overwrite"]
    assert content(uri) == [(DAY2, 7, "spark")]


def test_data_source_append_and_replace_where_land_in_the_table_created_meanwhile(spark: Any, tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    racing_frame(spark, uri, DAY1, [10], both_days()).write.format("mvcc").mode("append").save(uri)
    assert content(uri) == sorted([*rows_of(both_days()), (DAY1, 10, "spark")])
    other = str(tmp_path / "u")
    (
        racing_frame(spark, other, DAY2, [20, 21], both_days())
        .write.format("mvcc")
        .mode("overwrite")
        .option("replaceWhere", "day = DATE '2026-11-02'")
        .save(other)
    )
    assert content(other) == [(DAY1, 1, "winner"), (DAY1, 2, "winner"), (DAY2, 20, "spark"), (DAY2, 21, "spark")]
    assert mvcc_core.open_table(other).version == 2


def test_a_winner_with_another_schema_is_a_schema_error_and_nothing_is_left(spark: Any, tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    winner = pa.table({"day": pa.array([DAY1], pa.date32()), "id": pa.array([1], pa.int32())})
    with pytest.raises(mvcc_core.SchemaError, match="another writer created the table"):
        write(racing_frame(spark, uri, DAY1, [10], winner), uri, mode="append")
    t = mvcc_core.open_table(uri)
    assert t.version == 1
    assert len(os.listdir(os.path.join(uri, "data"))) == len(t.get_fragments())  # only the winner's file


def _pyarrow_append(uri: str, day: dt.date, ids: list[int], writer: str, start: Any) -> None:
    failpoints.arm("commit.after_transaction_file", "sleep(0.5)")
    start.wait()
    mvcc_core.write_table(rows(day, ids, writer), uri, mode="append")


def test_spark_write_races_pyarrow_writers_in_other_processes(spark: Any, tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    procs = [
        ctx.Process(target=_pyarrow_append, args=(uri, DAY1, [100 + i], f"p{i}", start), daemon=True) for i in range(2)
    ]
    for p in procs:
        p.start()
    df = spark.createDataFrame([(DAY2, i, "spark") for i in range(5)], SPARK_SCHEMA).repartition(2)
    start.set()
    with failpoints.armed("commit.after_transaction_file", "sleep(0.5)"):
        t = write(df, uri, mode="append")
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0]
    assert mvcc_core.open_table(uri).version == 3
    assert content(uri) == sorted([(DAY1, 100, "p0"), (DAY1, 101, "p1")] + [(DAY2, i, "spark") for i in range(5)])
    assert t.version in (1, 2, 3)
