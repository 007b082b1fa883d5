"""Randomized deletes, updates and unindexed upserts against a plain evaluation, over the row-address scan's
paths: several fragments with deletion vectors, files of two Parquet layouts (a column made nullable between
writes), an integer IN list answered by the lookup table (`read/integer_in_list.py`) or, with NULLs in the
column or a wide span, by Arrow, and other predicates."""

from __future__ import annotations

import math
import operator
import random

import pyarrow as pa
import pytest

import mvcc_core as mvcc

Row = tuple[int, int | None, str]  # (id, k, s)


def _table(rows: list[Row], nullable_id: bool) -> pa.Table:
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=nullable_id), pa.field("k", pa.int32()), pa.field("s", pa.string())]
    )
    return pa.table([list(c) for c in zip(*rows, strict=True)], schema=schema)


def _sql_list(values: list[int]) -> str:
    return "(" + ", ".join(str(v) for v in values) + ")"


def _check(t: mvcc.Table, model: dict[int, tuple[int | None, str]], what: str) -> None:
    got = sorted(zip(*(t.to_table().column(c).to_pylist() for c in ("id", "k", "s")), strict=True))
    assert got == sorted((i, k, s) for i, (k, s) in model.items()), what


@pytest.mark.parametrize("seed", [0, 1])
def test_row_level_changes_match_a_plain_evaluation(tmp_path, seed: int) -> None:
    rng = random.Random(seed)
    ids = rng.sample(range(-2_000, 2_000), 260)
    rows = [(i, None if rng.random() < 0.1 else rng.randint(-50, 50), f"r{i}") for i in ids]
    t = mvcc.write_table(_table(rows[:200], nullable_id=False), str(tmp_path / "t"), max_rows_per_file=29)
    t.alter_columns({"path": "id", "nullable": True})  # later files: `optional int64 id`, earlier `required`
    t.append(_table(rows[200:], nullable_id=True))
    model = {i: (k, s) for i, k, s in rows}
    gone = set(rng.sample(ids, 30))
    t.delete("id IN " + _sql_list(sorted(gone)))  # deletion vectors in most fragments
    model = {i: v for i, v in model.items() if i not in gone}
    kinds = ["delete_in", "delete_k_in", "delete_mod", "update_in", "upsert", "upsert_wide"]
    for step, kind in enumerate(rng.sample(kinds, len(kinds))):
        live = list(model)
        if kind == "delete_in":  # some values absent or deleted before, some outside every file's range
            values = rng.sample(live, rng.randint(1, 30)) + rng.sample(range(-5_000, 5_000), 5)
            t.delete("id IN " + _sql_list(values))
            model = {i: v for i, v in model.items() if i not in set(values)}
        elif kind == "delete_k_in":  # the column holds NULLs: Arrow evaluates (a NULL is in no list)
            values = rng.sample(range(-50, 51), 6)
            t.delete("k IN " + _sql_list(values))
            model = {i: (k, s) for i, (k, s) in model.items() if k is None or k not in values}
        elif kind == "delete_mod":  # numpy's fmod evaluates it (`IntegerRemainder`); negative ids, any comparison
            m = rng.randint(5, 13)  # each choice deletes about a tenth of the rows or less
            op, r = rng.choice([("=", rng.randint(-4, 4)), ("<", 2 - m), (">=", m - 1), ("<=", -m)])  # (last: none)
            t.delete(f"id % {m} {op} {r}")
            holds = {"=": operator.eq, "<": operator.lt, "<=": operator.le, ">=": operator.ge}[op]
            model = {i: v for i, v in model.items() if not holds(int(math.fmod(i, m)), r)}
        elif kind == "update_in":
            values = rng.sample(live, rng.randint(1, 40))
            t.update({"s": f"'u{step}'"}, where="id IN " + _sql_list(values))
            model.update({i: (model[i][0], f"u{step}") for i in values})
        else:  # an unindexed upsert: the source's keys as an IN list (wide: a span no lookup table covers)
            far = 1 << 40 if kind == "upsert_wide" else 0
            keys = rng.sample(live, rng.randint(1, 40)) + [far + n for n in rng.sample(range(3_000, 4_000), 5)]
            source = [(key, rng.randint(-50, 50), f"m{step}") for key in keys]
            t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
                _table(source, nullable_id=True)
            )
            model.update({key: (k, s) for key, k, s in source})
        _check(t, model, f"step {step}: {kind}")


def test_the_lookup_table_agrees_with_arrow_at_the_ends_of_int64() -> None:
    """Differences that overflow int64 (a value near the minimum, a list near the maximum) match nothing."""
    import numpy as np
    import pyarrow.compute as pc

    from mvcc_core.read.integer_in_list import IntegerInList

    low, high = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    column = pa.array([low, low + 5, -1, 0, 7, high - 100, high - 3, high], pa.int64())
    for values in ([high - 100, high - 95, high], [low, low + 5, low + 99], [-1, 0, 7]):
        lookup = IntegerInList("c", np.array(values, dtype=np.int64))
        assert lookup.mask(column).tolist() == pc.is_in(column, pa.array(values, pa.int64())).to_pylist(), values
    assert IntegerInList("c", np.array([1, 2])).mask(pa.array([1, None])) is None  # NULLs: the caller evaluates


def test_the_remainder_filter_agrees_with_arrow() -> None:
    """`IntegerRemainder` (numpy's fmod) against Arrow evaluating the translator's expression, on random values
    and the ends of int64, for every comparison, divisors from 1 to past int32, negative constants; the filter
    shapes it does not take (a negative divisor, a conjunction, a float column, other arithmetic) are left to
    Arrow, and so is a column holding NULLs."""
    import numpy as np
    import pyarrow.acero as acero
    import pyarrow.compute as pc

    from mvcc_core.read.bound_filter import BoundFilter
    from mvcc_core.read.integer_remainder import IntegerRemainder

    def arrow_mask(table: pa.Table, expr: pc.Expression) -> list[bool]:
        source = acero.Declaration("table_source", acero.TableSourceNodeOptions(table))
        project = acero.Declaration("project", acero.ProjectNodeOptions([expr], ["m"]))
        return pc.fill_null(acero.Declaration.from_sequence([source, project]).to_table().column(0), False).to_pylist()

    rng = random.Random(3)
    schema = pa.schema([("a", pa.int64()), ("b", pa.int64()), ("f", pa.float64())])
    info = np.iinfo(np.int64)
    values = [int(info.min), int(info.min) + 1, int(info.max), int(info.max) - 1, 0, -1, 1]
    values += [rng.randint(-(10**12), 10**12) for _ in range(300)]
    nulls = [None if i % 3 == 0 else v for i, v in enumerate(values)]
    table = pa.table({"a": values, "b": nulls, "f": [0.5] * len(values)}, schema=schema)
    for _ in range(60):
        divisor = rng.choice([1, 2, 3, 7, 10, 97, 2**31 + 11, 2**40])
        value = rng.randint(-divisor - 2, divisor + 2) if divisor < 100 else rng.choice([0, 5, -5])
        sql = f"a % {divisor} {rng.choice(['=', '<>', '<', '<=', '>', '>='])} {value}"
        expr = BoundFilter.bind(sql, schema, schema).arrow
        remainder = IntegerRemainder.of(expr, {"a", "b"})
        assert remainder is not None, sql
        assert remainder.mask(table.column("a")).tolist() == arrow_mask(table, expr), sql
    for sql in ("a % -3 = 1", "a % 3 = 1 AND a > 0", "f % 3 = 1", "a = 3", "a % 3 + 1 = 2", "a % 3 = b"):
        assert IntegerRemainder.of(BoundFilter.bind(sql, schema, schema).arrow, {"a", "b"}) is None, sql
    with_nulls = IntegerRemainder.of(BoundFilter.bind("b % 3 = 1", schema, schema).arrow, {"a", "b"})
    assert with_nulls is not None and with_nulls.mask(table.column("b")) is None  # the caller evaluates
