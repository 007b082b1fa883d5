"""Float filters and file statistics: Parquet's min/max leave NaN out, so the writer records each file's NaN
count (`mvcc_core.format.nan_counts`) and a NaN-ordered `x > c` (which NaN satisfies) skips files by it."""

from __future__ import annotations

import math
import random
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mvcc_core as mvcc
from mvcc_core.format.nan_counts import NAN_COUNTS_KEY
from mvcc_core.read.bound_filter import BoundFilter
from mvcc_core.read.row_group_stats import Verdict, nan_counts, statistics_check

NAN = float("nan")


def _files(uri: str) -> list[pq.FileMetaData]:
    t = mvcc.open_table(uri)
    return [pq.ParquetFile(f"{uri}/data/{f.files[0].path}").metadata for f in t.state.manifest.fragments]


def _verdicts(uri: str, sql: str) -> list[Verdict]:
    t = mvcc.open_table(uri)
    check = statistics_check(BoundFilter.bind(sql, t.schema).conjuncts, t.schema, {"x": "c0", "i": "c1"})
    assert check is not None
    return [check.verdict(metadata) for metadata in _files(uri)]


def _three_files(uri: str) -> None:
    """Files of x in [0, 0.4] (no NaN), [0, 0.4] with a NaN, [0.6, 1] (no NaN)."""
    t = mvcc.write_table(pa.table({"x": [0.0, 0.4], "i": [1, 2]}), uri)
    t.append(pa.table({"x": [0.0, NAN, 0.4], "i": [3, 4, 5]}))
    t.append(pa.table({"x": [0.6, 1.0], "i": [6, 7]}))


def test_the_writer_records_nan_counts_and_greater_than_skips_files_without_nan(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _three_files(uri)
    assert [nan_counts(m) for m in _files(uri)] == [{"c0": 0}, {"c0": 1}, {"c0": 0}]
    # `x > 0.5` is `x > 0.5 OR isnan(x)`: the NaN file may match, the first cannot, the last matches whole
    assert _verdicts(uri, "x > 0.5") == [Verdict.NONE, Verdict.SOME, Verdict.ALL]
    assert _verdicts(uri, "x >= 0.4") == [Verdict.SOME, Verdict.SOME, Verdict.ALL]
    # NaN never satisfies `<`: the NaN file is ruled out by min/max all the same, but never matches whole
    assert _verdicts(uri, "x < 0.0") == [Verdict.NONE, Verdict.NONE, Verdict.NONE]
    assert _verdicts(uri, "x <= 0.4") == [Verdict.ALL, Verdict.SOME, Verdict.NONE]
    t = mvcc.open_table(uri)
    assert sorted(t.to_table(filter="x > 0.5").column("i").to_pylist()) == [4, 6, 7]
    assert t.count_rows("x <= 0.4") == 4  # not 5: the NaN row fails `<=` (Arrow's count by statistics would say 5)


def test_files_without_nan_counts_are_never_ruled_out_by_a_nan_ordered_comparison(tmp_path: Path) -> None:
    """A table written before the counts (a checked-in fixture written by the previous code: the three files of
    `_three_files`) reads as before: its NaN counts are unknown, so `x > c` reads every file."""
    uri = str(tmp_path / "old")
    shutil.copytree(Path(__file__).parent / "fixtures" / "floats_without_nan_counts", uri)
    assert all(NAN_COUNTS_KEY.encode() not in (m.metadata or {}) for m in _files(uri))
    assert _verdicts(uri, "x > 0.5") == [Verdict.SOME, Verdict.SOME, Verdict.SOME]
    assert _verdicts(uri, "x < 0.0") == [Verdict.NONE, Verdict.NONE, Verdict.NONE]  # NaN never matches `<`
    t = mvcc.open_table(uri)
    assert sorted(t.to_table(filter="x > 0.5").column("i").to_pylist()) == [4, 6, 7]
    assert t.count_rows("x <= 0.4") == 4
    t.append(pa.table({"x": [0.7], "i": [8]}))  # a new file beside the old ones records its count
    assert nan_counts(_files(uri)[-1]) == {"c0": 0}
    assert sorted(t.to_table(filter="x > 0.5").column("i").to_pylist()) == [4, 6, 7, 8]


def _matches(op: str, value: float | None, literal: float) -> bool:
    """DataFusion's float order, which pylance's filters use: NaN equals NaN and is above every number."""
    if value is None:
        return False
    if math.isnan(value):
        return op in (">", ">=", "<>")
    return {"=": value == literal, "<>": value != literal, "<": value < literal, "<=": value <= literal,
            ">": value > literal, ">=": value >= literal}[op]  # fmt: skip


@pytest.mark.parametrize("seed", [1, pytest.param(2, marks=pytest.mark.slow), pytest.param(3, marks=pytest.mark.slow)])
def test_float_filters_equal_a_plain_evaluation(tmp_path: Path, seed: int) -> None:
    """Random float comparisons (alone and with an integer range) over files with NaN, NULL, -0.0 and
    infinities or none of them, some files with deleted rows: scans, counts and deletes select exactly
    the rows a plain evaluation in DataFusion's order selects."""
    rng = random.Random(seed)
    specials = [NAN, None, -0.0, 0.0, math.inf, -math.inf]
    rows: list[tuple[int, float | None]] = []
    t = whole = None  # `whole` keeps every row: Arrow counts its files by statistics
    for file in range(8):
        base = rng.uniform(-2, 2)
        values = [round(base + rng.uniform(0, 1), 2) for _ in range(20)]
        if file % 2:  # every other file holds special values
            for _ in range(3):
                values[rng.randrange(20)] = rng.choice(specials)
        ids = list(range(len(rows), len(rows) + 20))
        batch = pa.table({"x": pa.array(values, pa.float64()), "i": pa.array(ids, pa.int64())})
        rows += list(zip(ids, values, strict=True))
        if t is None:
            t = mvcc.write_table(batch, str(tmp_path / "t"))
            whole = mvcc.write_table(batch, str(tmp_path / "whole"))
        else:
            t.append(batch)
            whole.append(batch)
    t.delete("i % 7 = 3")
    every_row, rows = rows, [r for r in rows if r[0] % 7 != 3]
    for _ in range(5 if seed == 1 else 12):  # the fast tier's seed does fewer rounds
        op = rng.choice(["=", "<>", "<", "<=", ">", ">="])
        literal = rng.choice([round(rng.uniform(-3, 4), 2), 0.0, -0.0])
        low = rng.randrange(160)
        sql = f"x {op} {literal!r}" + (f" AND i >= {low}" if rng.random() < 0.4 else "")
        in_whole = [i for i, v in every_row if _matches(op, v, literal) and (" AND " not in sql or i >= low)]
        assert whole.count_rows(sql) == len(in_whole), sql
        assert sorted(whole.to_table(filter=sql).column("i").to_pylist()) == in_whole, sql
        expected = sorted(i for i, v in rows if _matches(op, v, literal) and (" AND " not in sql or i >= low))
        assert sorted(t.to_table(filter=sql).column("i").to_pylist()) == expected, sql
        assert t.count_rows(sql) == len(expected), sql
        found = t.to_table(columns=["i"], filter=sql, with_row_address=True)
        assert sorted(found.column("i").to_pylist()) == expected, sql
    copy = mvcc.write_table(t.to_table(), str(tmp_path / "copy"))  # one file: every special value together
    for sql, op, literal in [("x > 0.5", ">", 0.5), ("x >= -1.0", ">=", -1.0), ("x < 1.0", "<", 1.0)]:
        expected = sorted(i for i, v in rows if _matches(op, v, literal))
        assert sorted(copy.to_table(filter=sql).column("i").to_pylist()) == expected, sql
        copy_t = mvcc.write_table(t.to_table(), str(tmp_path / f"d{len(expected)}{op}"))
        copy_t.delete(sql)
        assert sorted(copy_t.to_table().column("i").to_pylist()) == sorted(
            i for i, _ in rows if i not in set(expected)
        ), sql
