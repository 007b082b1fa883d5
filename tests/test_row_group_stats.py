"""Row-group statistics checks made on the reader threads of a row-address scan (`mvcc_core.read.row_group_stats`)."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import mvcc_core as mvcc
from mvcc_core.read.bound_filter import BoundFilter
from mvcc_core.read.row_group_stats import Verdict, column_positions, statistics_check

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])


def _file(tmp_path: Path, ids: list[int | None], names: list[str | None], row_group_size: int = 2) -> pq.FileMetaData:
    path = tmp_path / f"f{random.getrandbits(32)}.parquet"
    table = pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array(names, pa.string())})
    pq.write_table(table, path, row_group_size=row_group_size)
    return pq.ParquetFile(path).metadata


def _check(sql: str):
    bound = BoundFilter.bind(sql, SCHEMA)
    return statistics_check(bound.conjuncts, SCHEMA, {"id": "id", "name": "name", "score": "score"})


@pytest.mark.parametrize(
    ("sql", "ruled_out"),
    [
        ("id = 5", True),  # row groups [1, 2] and [3, 4]
        ("id = 3", False),
        ("id > 4", True),
        ("id >= 4", False),
        ("id < 1", True),
        ("id <= 1", False),
        ("id IN (0, 7, 9)", True),
        ("id IN (0, 2, 9)", False),
        ("id >= 2 AND id <= 3", False),  # spans two row groups
        ("id > 2 AND name = 'zz'", True),  # the second conjunct rules both groups out
        ("name < 'a'", True),
        ("name >= 'd'", False),
        ("name IS NULL", True),
    ],
)
def test_comparisons_rule_files_out_by_every_row_group(tmp_path: Path, sql: str, ruled_out: bool) -> None:
    metadata = _file(tmp_path, [1, 2, 3, 4], ["a", "b", "c", "d"])
    check = _check(sql)
    assert check is not None
    assert check.rules_out(metadata) is ruled_out


@pytest.mark.parametrize(
    ("sql", "verdict"),
    [
        ("id >= 1 AND id <= 4", Verdict.ALL),
        ("id > 0", Verdict.ALL),
        ("id < 4", Verdict.SOME),
        ("id >= 1 AND name < 'e'", Verdict.ALL),
        ("id >= 1 AND id % 2 = 0", Verdict.SOME),  # a conjunct the statistics cannot decide
        ("id IN (1, 2, 3, 4)", Verdict.SOME),  # min and max differ: some row may be outside the list
        ("id > 9", Verdict.NONE),
    ],
)
def test_files_matching_whole_are_recognised(tmp_path: Path, sql: str, verdict: Verdict) -> None:
    metadata = _file(tmp_path, [1, 2, 3, 4], ["a", "b", "c", "d"])
    assert _check(sql).verdict(metadata) is verdict
    with_null = _file(tmp_path, [1, None, 3, 4], ["a", "b", "c", "d"])
    assert _check("id >= 1").verdict(with_null) is Verdict.SOME  # the null row does not match
    same = _file(tmp_path, [7, 7], ["q", "q"])
    assert _check("id IN (3, 7)").verdict(same) is Verdict.ALL


def test_column_positions_name_leaves_as_the_footer_does(tmp_path: Path) -> None:
    """`column_positions` (kept per footer layout by the row-address scan) names each leaf as the footer's
    `path_in_schema`, nested and dotted names included."""
    table = pa.table(
        {
            "a.b": pa.array([1, 2], pa.int64()),
            "s": pa.array([{"x": 1, "y": "p"}, {"x": 2, "y": "q"}]),
            "l": pa.array([[1], [2, 3]]),
            "id": pa.array([5, 6], pa.int64()),
        }
    )
    path = tmp_path / "nested.parquet"
    pq.write_table(table, path)
    reader = pq.ParquetReader()
    reader.open(str(path))
    first = reader.metadata.row_group(0)
    assert column_positions(reader.column_paths) == {
        first.column(i).path_in_schema: i for i in range(first.num_columns)
    }


def test_verdicts_with_kept_positions_equal_fresh_ones(tmp_path: Path) -> None:
    """Random IN lists, ranges and equalities over random files: the verdict given the layout's column positions
    is the verdict computed from the footer alone, and NONE only when no row matches."""
    rng = random.Random(5)
    for _ in range(25):
        ids = sorted(rng.sample(range(200), rng.randint(1, 8)))
        if rng.random() < 0.3:
            ids[rng.randrange(len(ids))] = None
        names = [rng.choice(["a", "b", "c", None]) for _ in ids]
        metadata = _file(tmp_path, ids, names, row_group_size=rng.randint(1, 4))
        positions = column_positions([["id"], ["name"]])  # the layout `_file` writes
        keys = rng.sample(range(-5, 210), rng.randint(1, 30))
        for sql in (
            f"id IN ({', '.join(map(str, keys))})",
            f"id >= {keys[0]} AND id < {keys[-1]}",
            f"id = {keys[0]} AND name = 'b'",
            f"name IN ('b', 'c') AND id IN ({', '.join(map(str, keys))})",
        ):
            check = _check(sql)
            verdict = check.verdict(metadata)
            assert check.verdict(metadata, positions) is verdict, sql
            rows = pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array(names, pa.string())})
            matching = rows.filter(BoundFilter.bind(sql, SCHEMA).arrow).num_rows
            if verdict is Verdict.NONE:
                assert matching == 0, sql
            if verdict is Verdict.ALL:
                assert matching == len(ids), sql


def test_nulls_and_missing_columns_keep_the_file(tmp_path: Path) -> None:
    with_nulls = _file(tmp_path, [None, None, 5, 6], [None, "x", "y", "z"])
    assert not _check("name IS NULL").rules_out(with_nulls)
    assert _check("id = 1").rules_out(with_nulls)  # the all-null group has no min/max: it cannot match `=`
    no_name = pq.ParquetFile(_write(tmp_path, pa.table({"id": [1, 2]}))).metadata
    assert not _check("name = 'q'").rules_out(no_name)  # read as nulls: left to the scan


def _write(tmp_path: Path, table: pa.Table) -> Path:
    path = tmp_path / "plain.parquet"
    pq.write_table(table, path)
    return path


def test_undecidable_filters_fall_back() -> None:
    assert _check("id % 2 = 0") is None  # no comparison at all
    assert _check("score > 1.5") is not None  # floats: decided here with the files' NaN counts (test_nan_pruning.py)


def test_row_address_scans_equal_an_unpruned_filter(tmp_path: Path) -> None:
    """Random range, IN and string filters: a delete through the threads' statistics checks removes exactly
    the rows the same filter selects from the whole table read without any pruning."""
    rng = random.Random(7)
    rows = 2_000
    table = pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "name": pa.array([f"k{i:05d}" if i % 11 else None for i in range(rows)]),
            "score": pa.array([i * 0.25 for i in range(rows)]),
        }
    )
    base = mvcc.write_table(table, str(tmp_path / "t"), max_rows_per_file=100)
    for round_ in range(12):
        low = rng.randrange(rows)
        high = low + rng.randrange(1, 400)
        picks = ", ".join(str(rng.randrange(rows + 50)) for _ in range(5))
        sql = rng.choice(
            [
                f"id >= {low} AND id < {high}",
                f"id IN ({picks})",
                f"name > 'k{low:05d}' AND name <= 'k{high:05d}'",
                f"id > {low} AND name IS NULL",
            ]
        )
        live = table.filter(pc.not_equal(pc.bit_wise_and(table.column("id"), 7), 3))  # deleted before
        expected = live.filter(pc.invert(pc.fill_null(_evaluate(live, sql), False)))
        t = mvcc.write_table(base.to_table(), str(tmp_path / f"r{round_}"), max_rows_per_file=100)
        t.delete("id % 8 = 3")
        found = t.to_table(columns=["id"], filter=sql, with_row_address=True)
        t.delete(sql)
        assert t.to_table().sort_by("id") == expected.sort_by("id"), sql
        assert found.num_rows == live.num_rows - expected.num_rows, sql


def _evaluate(table: pa.Table, sql: str) -> pa.ChunkedArray:
    """The filter's value per row, computed by pyarrow over the whole table (no file, no statistics)."""
    return ds.dataset(table).to_table(columns={"m": BoundFilter.bind(sql, table.schema).arrow}).column("m")


@pytest.mark.parametrize("stable", [False, True])
def test_row_address_scans_over_many_reader_tasks_equal_a_plain_evaluation(tmp_path, monkeypatch, stable) -> None:
    """Each reader task evaluates the filter over its own run of files: with runs of ~3 files, rows,
    row addresses and row ids of random filters over fragments with deletion vectors equal a plain evaluation."""
    import mvcc_core.read.scan_row_addresses as row_addresses

    monkeypatch.setattr(row_addresses, "_LOCAL_PART_ROWS", 250)  # 100-row files: a reader task per 3 files
    rng = random.Random(11 + stable)
    table = pa.table({"id": pa.array(range(2_000), pa.int64()), "name": [f"k{i % 37}" for i in range(2_000)]})
    t = mvcc.write_table(table, str(tmp_path / "t"), max_rows_per_file=100, enable_stable_row_ids=stable)
    t.delete("id % 9 = 4")
    live = table.filter(pc.not_equal(pc.remainder(table.column("id"), 9), 4))
    for _ in range(6):
        low = rng.randrange(2_000)
        sql = rng.choice([f"id % 5 = {low % 5}", f"id >= {low} AND name <> 'k3'", f"name = 'k{low % 37}'", "true"])
        expected = live.filter(pc.fill_null(_evaluate(live, sql), False))
        found = t.to_table(columns=["id"], filter=sql, with_row_address=True, with_row_id=True)
        assert found.column("id").to_pylist() == expected.column("id").to_pylist(), sql
        ids = found.column("id").to_pylist()
        addresses = found.column("_rowaddr").to_pylist()
        assert [a >> 32 for a in addresses] == [i // 100 for i in ids], sql  # fragment i holds ids 100 i ..
        assert [a & 0xFFFFFFFF for a in addresses] == [i % 100 for i in ids], sql
        assert found.column("_rowid").to_pylist() == (ids if stable else addresses), sql
