"""Filters that NaN rows satisfy, against a plain evaluation, over files whose statistics leave NaN out.

Parquet's min/max leave NaN out. Arrow's dataset scan takes them as bounds of every value and dropped row
groups whose NaN rows matched (`isnan(x)`, `x IN (.., NaN)`, a NaN-ordered `x > c`); the statistics check
answered `x = NaN` with "no row" for a file whose min/max did not hold the other values. Each seed builds a
table of several fragments (NaN-only, NaN beside one value, mixed with nulls), then compares random filters
(Arrow Expressions against `Table.filter` on the unfiltered rows; SQL against Spark's NaN semantics:
NaN = NaN, NaN above every number) in `to_table`, `count_rows` and `delete`; with one row group per file and
with several (the scan then reads only the row groups the statistics check keeps).
"""

import math
import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mvcc_core as mvcc

VALUES = [-1.0, 0.5, 1.0, 3.0, 9.0, float("nan"), None]


def _fragment(rng: random.Random, start: int) -> pa.Table:
    kind = rng.choice(["nan_only", "nan_and_one", "mixed"])
    rows = rng.randint(20, 80)
    if kind == "nan_only":
        xs = [float("nan")] * rows
    elif kind == "nan_and_one":
        one = rng.choice(VALUES[:5])
        xs = [rng.choice([float("nan"), one]) for _ in range(rows)]
    else:
        xs = [rng.choice(VALUES) for _ in range(rows)]
    return pa.table({"x": pa.array(xs, pa.float64()), "i": list(range(start, start + rows))})


def _spark(op: str, x: float | None, values: list[float]) -> bool:
    """`x op values` with Spark's NaN semantics (NULL never matches)."""
    if x is None:
        return False

    def key(v: float) -> float:
        return math.inf if math.isnan(v) else v

    def eq(a: float, b: float) -> bool:
        return (math.isnan(a) and math.isnan(b)) or a == b

    if op == "in":
        return any(eq(x, v) for v in values)
    v = values[0]
    if op == "=":
        return eq(x, v)
    if math.isnan(x) and math.isnan(v):
        return op in (">=", "<=")
    return {">": key(x) > key(v), ">=": key(x) >= key(v), "<": key(x) < key(v), "<=": key(x) <= key(v)}[op]


def _literal(v: float) -> str:
    return "CAST('NaN' AS DOUBLE)" if math.isnan(v) else repr(v)


@pytest.mark.parametrize("group_rows", [None, 16])
@pytest.mark.parametrize("seed", range(3))
def test_nan_matching_filters_agree_with_a_plain_evaluation(tmp_path, monkeypatch, seed: int, group_rows) -> None:
    if group_rows is not None:  # files of several row groups: the scan keeps only those its check cannot rule out
        monkeypatch.setattr("mvcc_core.format.fragments.ROW_GROUP_ROWS", group_rows)
    rng = random.Random(seed)
    uri = str(tmp_path / "t")
    t = mvcc.write_table(_fragment(rng, 0), uri)
    start = t.count_rows()
    for _ in range(rng.randint(2, 4)):
        part = _fragment(rng, start)
        t.append(part)
        start += part.num_rows
    rows = t.to_table()
    xs, ids = rows["x"].to_pylist(), rows["i"].to_pylist()
    numbers = [v for v in VALUES if v is not None]
    for _ in range(12):
        lst = rng.sample(numbers, rng.randint(1, 3))
        expr = rng.choice([pc.field("x").isin(lst), pc.is_nan(pc.field("x")), pc.field("x") == rng.choice(numbers[:5])])
        want = sorted(rows.filter(expr)["i"].to_pylist())
        assert sorted(t.to_table(filter=expr)["i"].to_pylist()) == want, (seed, str(expr))
        assert t.count_rows(filter=expr) == len(want), (seed, str(expr))
        op = rng.choice(["in", "=", ">", ">=", "<", "<="])
        vals = lst if op == "in" else lst[:1]
        sql = f"x IN ({', '.join(map(_literal, vals))})" if op == "in" else f"x {op} {_literal(vals[0])}"
        want = sorted(i for x, i in zip(xs, ids, strict=True) if _spark(op, x, vals))
        assert sorted(t.to_table(filter=sql)["i"].to_pylist()) == want, (seed, sql)
        assert t.count_rows(filter=sql) == len(want), (seed, sql)
    sql = "x IN (100.0, CAST('NaN' AS DOUBLE))"
    left = sorted(i for x, i in zip(xs, ids, strict=True) if not _spark("in", x, [100.0, float("nan")]))
    t.delete(sql)
    assert sorted(mvcc.open_table(uri).to_table()["i"].to_pylist()) == left
