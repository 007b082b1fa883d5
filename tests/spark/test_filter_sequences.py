"""Sequences of queries on ONE DataFrame of the `mvcc` source answer each query alone.

PySpark 4.3 keeps one planned read per loaded DataFrame and reuses it for every query on it (see
docs/guide/spark.md, "Filters"), so a reader that kept anything of one query (a pushed filter, the version it
opened) would answer a later query wrongly. Randomized differential test: sequences of filters (pushed,
partly pushed, not pushable: OR and functions, and no filter at all) run on one DataFrame and on a fresh
one each, with pushdown on and off, with a commit landing in the middle of the sequence; every answer is
compared with the core's `to_table(filter=...)` of the version the DataFrame was loaded at (the shared
one) or of the latest version (the fresh one).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

import pyarrow as pa
import pytest
from spark_helpers import PUSHDOWN, conf

import mvcc_core

# Stress and randomized runs: the slow tier (the fast tier keeps the Spark paths' quick tests).
pytestmark = pytest.mark.slow

ROWS = 3_000
CATEGORIES = ["a", "b", "c", "d"]
FIRST_DAY = date(2026, 1, 1)
SEQUENCE_LENGTH = 8


def random_rows(rng: random.Random, first_id: int, count: int) -> pa.Table:
    """`count` rows with ids from `first_id`: nullable int, string and date columns, no NaN (Spark and
    Arrow order NaN differently; docs/guide/spark.md)."""
    ids = list(range(first_id, first_id + count))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "cat": [None if rng.random() < 0.05 else rng.choice(CATEGORIES) for _ in ids],
            "x": pa.array([None if rng.random() < 0.03 else rng.randrange(100) for _ in ids], pa.int64()),
            "day": [FIRST_DAY + timedelta(days=rng.randrange(120)) for _ in ids],
        }
    )


def make_table(uri: str, rng: random.Random) -> mvcc_core.Table:
    """Several fragments and a deletion vector: partitions and deleted rows both matter to a read."""
    t = mvcc_core.write_table(random_rows(rng, 0, ROWS), uri, max_rows_per_file=500)
    t.delete(f"id % 11 = {rng.randrange(11)}")
    return t


# Filters Spark hands to the reader when pushdown is on (EqualTo, In, IsNull, StringStartsWith, Not, ...).
PUSHED: list[Callable[[random.Random], str]] = [
    lambda r: "x IS NULL",
    lambda r: "x IS NOT NULL",
    lambda r: f"id < {r.randrange(ROWS)}",
    lambda r: f"id >= {r.randrange(ROWS)}",
    lambda r: f"x = {r.randrange(100)}",
    lambda r: f"x IN ({r.randrange(100)}, {r.randrange(100)}, {r.randrange(100)})",
    lambda r: f"cat = '{r.choice(CATEGORIES)}'",
    lambda r: f"cat LIKE '{r.choice(CATEGORIES)}%'",
    lambda r: f"NOT (x > {r.randrange(100)})",
    lambda r: f"x BETWEEN {r.randrange(50)} AND {r.randrange(50, 100)}",
    lambda r: f"day >= DATE'{FIRST_DAY + timedelta(days=r.randrange(120))}'",
]
# Filters Spark keeps to itself: OR across columns and functions.
NOT_PUSHABLE: list[Callable[[random.Random], str]] = [
    lambda r: f"cat = '{r.choice(CATEGORIES)}' OR x < {r.randrange(10)}",
    lambda r: f"x IS NULL OR id > {r.randrange(ROWS)}",
    lambda r: f"abs(x - 50) < {r.randrange(30)}",
    lambda r: f"id % {r.randrange(2, 9)} = 0",
    lambda r: f"upper(cat) = '{r.choice(CATEGORIES).upper()}'",
    lambda r: f"coalesce(x, -1) < {r.randrange(20)}",
]


def random_filter(rng: random.Random) -> str | None:
    """A pushed, partly pushed or not pushable filter, or None (a query with no filter)."""
    kind = rng.choice(["pushed", "partly", "not pushable", "none"])
    if kind == "none":
        return None
    if kind == "pushed":
        return rng.choice(PUSHED)(rng)
    if kind == "not pushable":
        return rng.choice(NOT_PUSHABLE)(rng)
    return f"({rng.choice(PUSHED)(rng)}) AND ({rng.choice(NOT_PUSHABLE)(rng)})"


def spark_ids(df: Any, predicate: str | None) -> list[int]:
    query = df if predicate is None else df.filter(predicate)
    return sorted(query.toArrow().column("id").to_pylist())


def core_ids(table: mvcc_core.Table, predicate: str | None) -> list[int]:
    return sorted(table.to_table(columns=["id"], filter=predicate).column("id").to_pylist())


def both(base: str | None, predicate: str | None) -> str | None:
    """The AND of two optional filters."""
    if base is None or predicate is None:
        return base or predicate
    return f"({base}) AND ({predicate})"


def run_sequence(
    uri: str,
    rng: random.Random,
    shared: Any,
    fresh: Callable[[], Any] | None = None,
    base: str | None = None,
    commit_midway: bool = True,
) -> None:
    """Run SEQUENCE_LENGTH random filters on the DataFrame `shared` (loaded from `uri` just before, with the
    filter `base` if any) and on a `fresh()` one each; with `commit_midway`, an append lands after a random
    query. Every answer is the core's: `shared`'s at the version it was loaded at, the fresh ones' at the
    latest."""
    loaded = mvcc_core.open_table(uri)
    append_after = rng.randrange(SEQUENCE_LENGTH) if commit_midway else None
    latest = loaded
    for step in range(SEQUENCE_LENGTH):
        predicate = random_filter(rng)
        assert spark_ids(shared, predicate) == core_ids(loaded, both(base, predicate)), (step, predicate)
        if fresh is not None:
            assert spark_ids(fresh(), predicate) == core_ids(latest, predicate), (step, predicate)
        if step == append_after:
            latest = mvcc_core.open_table(uri)
            latest.append(random_rows(rng, ROWS + step * 100, 100))


def run_source_sequence(session: Any, uri: str, rng: random.Random, *, commit_midway: bool = True) -> None:
    """`run_sequence` on `format("mvcc")` DataFrames (the shared one with an option of its own, so that a
    Spark Connect server cannot serve the fresh ones from its cached analysis of the shared one)."""
    shared = session.read.format("mvcc").option("rows_per_partition", 700).load(uri)
    run_sequence(uri, rng, shared, lambda: session.read.format("mvcc").load(uri), commit_midway=commit_midway)


@pytest.mark.parametrize("pushdown", ["true", "false"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_filter_sequences_on_one_dataframe(spark: Any, tmp_path: Any, seed: int, pushdown: str) -> None:
    rng = random.Random(seed)
    uri = str(tmp_path / "t")
    make_table(uri, rng)
    with conf(spark, PUSHDOWN, pushdown):
        run_source_sequence(spark, uri, rng)


def test_the_reported_sequence(spark: Any, tmp_path: Any) -> None:
    """The first filter (pushed) must not stay in the DataFrame's read for the second (not pushable)."""
    uri = str(tmp_path / "t")
    t = make_table(uri, random.Random(0))
    with conf(spark, PUSHDOWN, "true"):
        df = spark.read.format("mvcc").load(uri)
        assert spark_ids(df, "x IS NULL") == core_ids(t, "x IS NULL")
        assert spark_ids(df, "cat = 'a' OR x < 3") == core_ids(t, "cat = 'a' OR x < 3")
        assert df.count() == t.count_rows()


def test_filter_sequence_on_spark_connect(connect: Any, tmp_path: Any) -> None:
    """The same on a Spark Connect client. No commit in the middle: a Connect DataFrame is a plan the server
    analyses again once its per-session cache of analyses drops it, and then reads the latest version."""
    rng = random.Random(4)
    uri = str(tmp_path / "t")
    make_table(uri, rng)
    with conf(connect, PUSHDOWN, "true"):
        run_source_sequence(connect, uri, rng, commit_midway=False)


@pytest.mark.parametrize("native", [True, False])
def test_filter_sequence_on_a_dataframe_of_read(spark: Any, tmp_path: Any, native: bool) -> None:
    """`mvcc_core.spark.read(filter=...)`: Spark's Parquet reader over the files the filter keeps (native) or
    the data source; later queries on its DataFrame filter those rows further."""
    from mvcc_core.spark import read

    rng = random.Random(5 + native)
    uri = str(tmp_path / "t")
    make_table(uri, rng)
    base = rng.choice(PUSHED)(rng)
    with conf(spark, PUSHDOWN, "true"):
        run_sequence(uri, rng, read(spark, uri, filter=base, native=native), base=base)
