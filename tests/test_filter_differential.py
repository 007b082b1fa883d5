"""Random SQL filters, constant sub-expressions included, against a plain Python evaluation of SQL.

Each filter is generated together with its meaning: a function of one row that returns True, False or None
(SQL's unknown), spelled out with three-valued logic. The rows a filter keeps are those where it is True.
Every way mvcc reads with a filter is compared with that answer: `to_table`, `count_rows`, `to_batches`, a
row-address scan, a `scanner` on tables without and with deletion vectors, with BTREE and BITMAP indices
(and fragments appended after the index build), with fragments of several data files, in memory; `delete`
and `update` on fresh tables. Constant filters (`true`, `1 = 2`, `NULL`, `NOT true`, `true AND a > 3`) read
no column, which the row-address scan of fragments with deletion vectors must still count rows for.
"""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest

import mvcc_core as mvcc

Row = dict[str, Any]
Truth = bool | None
Meaning = Callable[[Row], Truth]

ROWS = 120


def rows() -> pa.Table:
    rng = random.Random(7)
    return pa.table(
        {
            "id": pa.array(range(ROWS), pa.int64()),
            "a": pa.array([None if rng.random() < 0.15 else rng.randint(-5, 5) for _ in range(ROWS)], pa.int64()),
            "f": pa.array(
                [None if rng.random() < 0.15 else round(rng.uniform(-3, 3), 2) for _ in range(ROWS)], pa.float64()
            ),
            "s": pa.array([None if rng.random() < 0.15 else rng.choice("xyz") + rng.choice("ab") for _ in range(ROWS)]),
            "b": pa.array([None if rng.random() < 0.15 else rng.random() < 0.5 for _ in range(ROWS)], pa.bool_()),
        }
    )


# ---- three-valued logic


def sql_and(*values: Truth) -> Truth:
    if any(v is False for v in values):
        return False
    return None if any(v is None for v in values) else True


def sql_or(*values: Truth) -> Truth:
    if any(v is True for v in values):
        return True
    return None if any(v is None for v in values) else False


def sql_not(value: Truth) -> Truth:
    return None if value is None else not value


COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda x, y: x == y,
    "<>": lambda x, y: x != y,
    "<": lambda x, y: x < y,
    "<=": lambda x, y: x <= y,
    ">": lambda x, y: x > y,
    ">=": lambda x, y: x >= y,
}


def compare(op: str, x: Any, y: Any) -> Truth:
    return None if x is None or y is None else COMPARE[op](x, y)


def like(value: str | None, pattern: str) -> Truth:
    if value is None:
        return None
    regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.DOTALL) is not None


# ---- random filters with their meaning


class Filters:
    """Random (sql, meaning) pairs; `constant()` never reads a column."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def constant(self) -> tuple[str, Meaning]:
        rng = self.rng
        kind = rng.randrange(6)
        if kind == 0:
            value = rng.choice([True, False])
            return ("true" if value else "false"), lambda r: value
        if kind == 1:
            return "NULL", lambda r: None
        if kind == 2:
            x, y, op = rng.randint(0, 3), rng.randint(0, 3), rng.choice(list(COMPARE))
            return f"{x} {op} {y}", lambda r: COMPARE[op](x, y)
        if kind == 3:
            op = rng.choice(list(COMPARE))
            return f"NULL {op} {rng.randint(0, 3)}", lambda r: None
        if kind == 4:
            x = rng.randint(0, 3)
            return f"{x} IN (1, 2)", lambda r: x in (1, 2)
        inner, meaning = self.constant()
        return f"NOT ({inner})", lambda r: sql_not(meaning(r))

    def atom(self) -> tuple[str, Meaning]:
        rng = self.rng
        kind = rng.randrange(11)
        if kind <= 1:
            return self.constant()
        if kind == 2:
            column, value = rng.choice([("id", rng.randint(-5, ROWS + 5)), ("a", rng.randint(-6, 6))])
            op = rng.choice(list(COMPARE))
            if rng.random() < 0.5:
                return f"{column} {op} {value}", lambda r: compare(op, r[column], value)
            return f"{value} {op} {column}", lambda r: compare(op, value, r[column])
        if kind == 3:
            value, op = round(rng.uniform(-3, 3), 1), rng.choice(list(COMPARE))
            return f"f {op} {value}", lambda r: compare(op, r["f"], value)
        if kind == 4:
            column = rng.choice(["a", "f", "s", "b"])
            if rng.random() < 0.5:
                return f"{column} IS NULL", lambda r: r[column] is None
            return f"{column} IS NOT NULL", lambda r: r[column] is not None
        if kind == 5:
            values = rng.sample(range(-5, 6), rng.randint(1, 4))
            with_null = rng.random() < 0.3
            listed = ", ".join(map(str, values)) + (", NULL" if with_null else "")

            def member(r: Row) -> Truth:
                if r["a"] is None:
                    return None
                return True if r["a"] in values else (None if with_null else False)

            if rng.random() < 0.5:
                return f"a IN ({listed})", member
            return f"a NOT IN ({listed})", lambda r: sql_not(member(r))
        if kind == 6:
            low = rng.randint(-5, 3)
            high = low + rng.randint(0, 4)
            return (
                f"a BETWEEN {low} AND {high}",
                lambda r: sql_and(compare(">=", r["a"], low), compare("<=", r["a"], high)),
            )
        if kind == 7:
            pattern = rng.choice(["x%", "%a", "_b", "y_", "%", "z%b"])
            return f"s LIKE '{pattern}'", lambda r: like(r["s"], pattern)
        if kind == 8:
            value = rng.choice([True, False])
            return f"b = {str(value).lower()}", lambda r: compare("=", r["b"], value)
        if kind == 9:
            k, rest = rng.randint(2, 4), rng.randint(0, 1)
            # SQL's % takes the dividend's sign; id is never negative
            return f"id % {k} = {rest}", lambda r: r["id"] % k == rest
        offset, op, value = rng.randint(-2, 2), rng.choice(list(COMPARE)), rng.randint(-4, 4)
        return (
            f"a + {offset} {op} {value}",
            lambda r: None if r["a"] is None else COMPARE[op](r["a"] + offset, value),
        )

    def expression(self, depth: int = 0) -> tuple[str, Meaning]:
        rng = self.rng
        if depth >= 3 or rng.random() < 0.35:
            return self.atom()
        kind = rng.randrange(3)
        if kind == 2:
            inner, meaning = self.expression(depth + 1)
            return f"NOT ({inner})", lambda r: sql_not(meaning(r))
        parts = [self.expression(depth + 1) for _ in range(rng.randint(2, 3))]
        word, combine = ("AND", sql_and) if kind == 0 else ("OR", sql_or)
        sql = f" {word} ".join(f"({p})" for p, _ in parts)
        meanings = [m for _, m in parts]
        return sql, lambda r: combine(*(m(r) for m in meanings))

    def many(self, count: int) -> Iterator[tuple[str, Meaning]]:
        for _ in range(count):
            yield self.expression()


CONSTANTS = ["true", "false", "NOT true", "1 = 1", "1 = 2", "true AND id > 3", "NULL", "NOT NULL", "id > 3 OR true"]


def expected_ids(live: list[Row], meaning: Meaning) -> list[int]:
    return sorted(r["id"] for r in live if meaning(r) is True)


# ---- tables


def build(kind: str, uri: str) -> mvcc.Table:
    """A table of `rows()` in one of the layouts every read path must agree on."""
    t = mvcc.write_table(rows(), uri, max_rows_per_file=30)
    if kind in ("deleted", "indexed", "multi_file", "memory"):
        t.delete("id % 7 = 3")
    if kind == "indexed":
        t.create_scalar_index("a", "BTREE")
        t.create_scalar_index("s", "BITMAP")
        extra = rows().slice(0, 20)
        t.append(extra.set_column(0, "id", pa.array(range(ROWS, ROWS + 20), pa.int64())))
        t.delete("id = 125")
    if kind == "multi_file":
        t.add_columns({"g": "id * 2"})
        t.delete("id = 50")
    return t


KINDS = ["plain", "deleted", "indexed", "multi_file", "memory"]


@pytest.fixture(scope="module", params=KINDS)
def table(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[mvcc.Table]:
    if request.param == "memory":
        uri = f"memory://mvcc-differential-{uuid.uuid4().hex}"
    else:
        uri = str(tmp_path_factory.mktemp(request.param) / "t")
    yield build(request.param, uri)
    if request.param == "memory":
        from fsspec.implementations.memory import MemoryFileSystem

        MemoryFileSystem().rm(MemoryFileSystem._strip_protocol(uri), recursive=True)


def live_rows(t: mvcc.Table) -> list[Row]:
    """The live rows, read without a filter (the reference the filtered reads are checked against)."""
    return t.to_table(columns=["id", "a", "f", "s", "b"]).to_pylist()


def read_every_way(t: mvcc.Table, sql: str) -> dict[str, Any]:
    by_batches = [i for b in t.to_batches(columns=["id"], filter=sql) for i in b.column(0).to_pylist()]
    addressed = t.scanner(["id"], sql, with_row_address=True).to_table()
    return {
        "to_table": sorted(t.to_table(filter=sql)["id"].to_pylist()),
        "count_rows": t.count_rows(filter=sql),
        "to_batches": sorted(by_batches),
        "row_addresses": sorted(addressed["id"].to_pylist()),
        "limited": sorted(t.to_table(columns=["id"], filter=sql, limit=1000, offset=0)["id"].to_pylist()),
    }


def check(t: mvcc.Table, live: list[Row], sql: str, meaning: Meaning) -> None:
    want = expected_ids(live, meaning)
    got = read_every_way(t, sql)
    assert got == {
        "to_table": want,
        "count_rows": len(want),
        "to_batches": want,
        "row_addresses": want,
        "limited": want,
    }, sql


def test_constant_filters(table: mvcc.Table) -> None:
    live = live_rows(table)
    meanings: dict[str, Meaning] = {
        "true": lambda r: True,
        "false": lambda r: False,
        "NOT true": lambda r: False,
        "1 = 1": lambda r: True,
        "1 = 2": lambda r: False,
        "true AND id > 3": lambda r: r["id"] > 3,
        "NULL": lambda r: None,
        "NOT NULL": lambda r: None,
        "id > 3 OR true": lambda r: True,
    }
    assert list(meanings) == CONSTANTS
    for sql, meaning in meanings.items():
        check(table, live, sql, meaning)


def test_random_filters(table: mvcc.Table) -> None:
    live = live_rows(table)
    for sql, meaning in Filters(seed=11).many(120):
        check(table, live, sql, meaning)


@pytest.mark.parametrize(("seed", "backend"), [(0, "local"), (1, "local"), (2, "memory")])
def test_random_delete_and_update(seed: int, backend: str, tmp_path, memory_uri: str) -> None:
    """delete and update with random filters (a fresh table with deletion vectors for each)."""
    filters = Filters(seed=100 + seed)
    root = str(tmp_path) if backend == "local" else memory_uri
    for round_ in range(6):
        sql, meaning = filters.constant() if round_ < 2 else filters.expression()
        t = build("deleted", f"{root}/{round_}-delete")
        live = live_rows(t)
        want = expected_ids(live, meaning)
        assert t.delete(sql)["num_deleted_rows"] == len(want), sql
        assert sorted(t.to_table()["id"].to_pylist()) == sorted({r["id"] for r in live} - set(want)), sql

        t = build("indexed", f"{root}/{round_}-update")
        live = live_rows(t)
        want = expected_ids(live, meaning)
        assert t.update({"s": "'updated'"}, where=sql)["num_rows_updated"] == len(want), sql
        updated = t.to_table(columns=["id"], filter="s = 'updated'")["id"].to_pylist()
        assert sorted(updated) == want, sql
