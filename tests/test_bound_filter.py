"""Filters bound once: SQL and pyarrow Expressions read the same columns, push down alike and use indices alike."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import mvcc_core as mvcc
from mvcc_core.read.bound_filter import BoundFilter
from mvcc_core.read.scan import Scan

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("kid", pa.string()),
        ("k id", pa.int32()),
        ("a.b", pa.int64()),
        ("a", pa.struct([("b", pa.int64()), ("id", pa.string())])),
    ]
)


def data(start: int, n: int) -> pa.Table:
    ids = range(start, start + n)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "kid": pa.array([f"k{i % 7}" for i in ids]),
            "k id": pa.array([i % 5 for i in ids], pa.int32()),
            "a.b": pa.array([-i for i in ids], pa.int64()),
            "a": pa.array([{"b": i % 3, "id": f"x{i}"} for i in ids], SCHEMA.field("a").type),
        },
        schema=SCHEMA,
    )


@pytest.mark.parametrize(
    ("expr", "columns"),
    [
        (pc.field("kid") == "k1", ("kid",)),  # not `id`, although "id" is inside "kid"
        (pc.field("k id") > 2, ("k id",)),
        (pc.field("a.b") == -3, ("a.b",)),  # one column whose name has a dot, not the struct `a`
        (pc.field("a", "b") == 1, ("a",)),  # a struct field: its column
        (pc.field("a", "id") == "x3", ("a",)),
        ((pc.field("kid") == "k1") | pc.match_like(pc.field("a", "id"), "x1%"), ("kid", "a")),
        (pc.utf8_lower(pc.field("kid")) == "k2", ("kid",)),
        (pc.field("k id").cast(pa.int64()) == 3, ("k id",)),
        (pc.scalar(True), ()),
    ],
)
def test_expression_columns_come_from_field_references(expr: pc.Expression, columns: tuple[str, ...]) -> None:
    bound = BoundFilter.bind(expr, SCHEMA)
    assert bound.columns == columns


def test_sql_and_expression_bind_alike() -> None:
    physical = pa.schema([pa.field(f"c{i}", f.type) for i, f in enumerate(SCHEMA)])
    sql = BoundFilter.bind("id >= 3 AND id < 10 AND kid IS NULL", SCHEMA, physical)
    expr = BoundFilter.bind((pc.field("id") >= 3) & (pc.field("id") < 10) & pc.field("kid").is_null(), SCHEMA, physical)
    for bound in (sql, expr):
        assert bound.physical and bound.columns == ("id", "kid") and bound.prunable
        assert [(c.column, c.op) for c in bound.comparisons] == [("id", ">="), ("id", "<"), ("kid", "is_null")]
        assert [c.value for c in bound.comparisons] == [pa.scalar(3), pa.scalar(10), None]
    # both name the physical columns and keep the same rows of data over them
    rows_over_physical = pa.Table.from_arrays(data(0, 20).columns, schema=physical).set_column(
        1, "c1", pa.array([None if i % 4 == 0 else "x" for i in range(20)])
    )
    assert rows_over_physical.filter(sql.arrow)["c0"].to_pylist() == [4, 8]
    assert rows_over_physical.filter(expr.arrow)["c0"].to_pylist() == [4, 8]
    # literals are typed as the column, exactly, or not listed
    [comparison] = BoundFilter.bind(pc.field("k id") == 4, SCHEMA).comparisons
    assert comparison.value.type == pa.int32() and comparison.value.as_py() == 4
    assert BoundFilter.bind(pc.field("k id") == 2.5, SCHEMA).comparisons == ()
    assert not BoundFilter.bind(pc.multiply(pc.field("id"), 2) == 4, SCHEMA).prunable
    assert not BoundFilter.bind((pc.field("id") == 1) | (pc.field("id") == 2), SCHEMA).prunable
    # a NULL in an isin list matches null rows (pyarrow's default): no plain comparison
    assert BoundFilter.bind(pc.field("kid").isin(["k1", None]), SCHEMA).comparisons == ()
    [isin] = BoundFilter.bind(pc.field("kid").isin(["k1", "k2"]), SCHEMA).comparisons
    assert isin.op == "in" and isin.value.to_pylist() == ["k1", "k2"]


def test_bad_expressions_name_the_problem() -> None:
    with pytest.raises(mvcc.errors.PredicateError, match="unknown column 'nope'"):
        BoundFilter.bind((pc.field("id") > 1) & (pc.field("nope") == 1), SCHEMA)
    with pytest.raises(mvcc.errors.PredicateError, match="not a boolean"):
        BoundFilter.bind(pc.field("id") + 1, SCHEMA)
    with pytest.raises(mvcc.errors.PredicateError, match="SQL string or a pyarrow"):
        BoundFilter.bind(42, SCHEMA)  # type: ignore[arg-type]


@pytest.fixture
def table(tmp_path: Path) -> mvcc.Table:
    t = mvcc.write_table(data(0, 200), str(tmp_path / "t"), max_rows_per_file=50)
    t.create_index("kid", "BITMAP")
    t.create_index("id")
    t.append(data(200, 30))  # not covered
    t.delete("id % 9 = 4")
    return t


def rows(t: mvcc.Table, filter, **options) -> list[tuple]:  # noqa: A002
    return sorted(tuple(r.values()) for r in t.to_table(filter=filter, **options).to_pylist())


def test_expression_filter_reads_only_its_columns(table: mvcc.Table) -> None:
    plan = Scan(table.state.store, table.manifest, columns=["k id"], filter=pc.field("kid") == "k1").explain()
    assert plan.columns == ("kid", "k id") and plan.filter_columns == ("kid",) and plan.filter_pushed_down
    sql_plan = Scan(table.state.store, table.manifest, columns=["k id"], filter="kid = 'k1'").explain()
    assert sql_plan == plan


@pytest.mark.parametrize(
    ("expr", "sql", "column"),
    [
        (pc.field("kid") == "k3", "kid = 'k3'", "kid"),
        (pc.field("kid").isin(["k1", "k5"]), "kid IN ('k1', 'k5')", "kid"),
        ((pc.field("id") >= 40) & (pc.field("id") < 140), "id >= 40 AND id < 140", "id"),
        (pc.scalar(100) < pc.field("id"), "100 < id", "id"),
        ((pc.field("id") == 77) & (pc.field("k id") > 0), "id = 77 AND `k id` > 0", "id"),
        (pc.field("id").is_null(), "id IS NULL", "id"),
    ],
)
def test_expression_filter_uses_the_index_like_sql(table: mvcc.Table, expr, sql, column) -> None:
    plan = Scan(table.state.store, table.manifest, filter=expr).explain()
    assert plan.index is not None and plan.index.column == column
    assert plan == Scan(table.state.store, table.manifest, filter=sql).explain()
    full = Scan(table.state.store, table.manifest, filter=expr, use_index=False)
    assert full.explain().index is None
    expected = sorted(tuple(r.values()) for r in full.to_table().to_pylist())
    assert rows(table, expr) == rows(table, sql) == expected
    assert table.count_rows(expr) == table.count_rows(sql) == len(expected)
    extra = {"columns": ["kid"], "with_row_address": True, "with_row_id": True}
    assert rows(table, expr, **extra) == rows(table, sql, **extra)


def _corrupt_data_pages(path: Path) -> None:
    """Overwrite a Parquet file's pages, keeping its footer: a read of its rows fails, its statistics load."""
    raw = bytearray(path.read_bytes())
    footer = int.from_bytes(raw[-8:-4], "little") + 8
    raw[4 : len(raw) - footer] = b"\xff" * (len(raw) - footer - 4)
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("with_row_address", [False, True])  # pushed into the scan / pruned before the read
def test_expression_filters_skip_files_by_statistics(tmp_path: Path, with_row_address: bool) -> None:
    t = mvcc.write_table(data(0, 100), str(tmp_path / "t"), max_rows_per_file=50)
    second = tmp_path / "t" / "data" / t.manifest.fragments[1].files[0].path
    _corrupt_data_pages(second)
    assert pq.ParquetFile(second).metadata.num_rows == 50  # the footer is intact
    options = {"with_row_address": with_row_address}
    for expr, sql, expected in [(pc.field("id") < 10, "id < 10", 10), (pc.field("id").isin([3, 4]), "id IN (3, 4)", 2)]:
        assert t.to_table(filter=expr, **options) == t.to_table(filter=sql, **options)
        assert t.to_table(filter=expr, **options).num_rows == expected
    assert t.count_rows(pc.field("id") < 10) == 10
    # no statistics can rule the file out: it is read (Arrow's OSError of a torn page is a StorageError)
    with pytest.raises((mvcc.errors.StorageError, pa.ArrowException)):
        t.to_table(filter=pc.multiply(pc.field("id"), 2) == 4, **options)


def test_positional_field_references_still_filter(table: mvcc.Table) -> None:
    """An Expression naming a field by position cannot be analysed: every column is read, and the filter is
    applied to the rows read (the same rows as by name)."""
    expr = pc.field(1) == "k2"
    plan = Scan(table.state.store, table.manifest, columns=["id"], filter=expr).explain()
    assert not plan.filter_pushed_down and plan.columns == tuple(SCHEMA.names) and plan.index is None
    assert table.to_table(columns=["id"], filter=expr) == table.to_table(columns=["id"], filter="kid = 'k2'")


def test_negated_float_comparisons_keep_nan_rows(tmp_path) -> None:
    """Parquet statistics leave NaN out of min/max, so a row group of [1.5, 1.5, NaN, NaN] has min = max =
    1.5 and Arrow would prune it for `f != 1.5`; such filters are applied after the read instead."""
    nan = float("nan")
    values = [1.5, 1.5, nan, nan] * 3 + [2.0, None, nan, 1.5]
    data = pa.table({"id": pa.array(range(len(values)), pa.int64()), "f": pa.array(values, pa.float64())})
    t = mvcc.write_table(data, str(tmp_path / "t"), max_rows_per_file=4)
    t.create_index("f")

    def expected(mask: list[bool]) -> list[int]:
        return [i for i, keep in enumerate(mask) if keep]

    not_equal = [v is not None and (v != 1.5) for v in values]  # NaN != 1.5 is true; NULL is not
    not_less = [v is not None and not (v < 2.0) for v in values]
    for filter_, mask in [
        ("f <> 1.5", not_equal),
        (pc.field("f") != 1.5, not_equal),
        ("NOT (f = 1.5)", not_equal),
        ("NOT (f < 2.0)", not_less),
        (~(pc.field("f") < 2.0), not_less),
        ("f NOT IN (1.5)", not_equal),
    ]:
        got = sorted(t.to_table(filter=filter_).column("id").to_pylist())
        assert got == expected(mask), filter_
        assert t.count_rows(filter_) == len(expected(mask)), filter_
    assert Scan(t.state.store, t.manifest, filter="f <> 1.5").explain().filter_pushed_down is False
    assert Scan(t.state.store, t.manifest, filter="f > 1.0").explain().filter_pushed_down is True


def test_expressions_without_literals_bind_and_push_down(tmp_path) -> None:
    """is_valid / is_null carry no literal: their serialized form has a column-less one-row batch."""
    t = mvcc.write_table(pa.table({"id": pa.array([1, None, 3], pa.int64())}), str(tmp_path / "t"))
    assert t.to_table(filter=pc.field("id").is_valid())["id"].to_pylist() == [1, 3]
    assert t.to_table(filter=pc.field("id").is_null())["id"].to_pylist() == [None]
    plan = Scan(t.state.store, t.manifest, filter=pc.field("id").is_valid()).explain()
    assert plan.filter_pushed_down and plan.filter_columns == ("id",)


def test_candidate_fragments_drop_what_statistics_or_an_index_rule_out(tmp_path) -> None:
    t = mvcc.write_table(pa.table({"id": pa.array(range(100), pa.int64())}), str(tmp_path / "t"), max_rows_per_file=10)
    t.append(pa.table({"id": pa.array([5, 500], pa.int64())}))  # fragment 10 overlaps fragment 0's range

    def ids(filter_) -> list[int]:
        return [f.id for f in Scan(t.state.store, t.manifest, filter=filter_).candidate_fragments()]

    assert ids(None) == list(range(11))
    assert ids("id = 5") == [0, 10]
    assert ids(pc.field("id") >= 95) == [9, 10]
    assert ids("id > 1000") == []
    assert ids("id % 10 = 0") == list(range(11))  # statistics cannot rule anything out
    t.create_index("id")  # covers every fragment: only those holding a match stay
    assert ids("id = 500") == [10]
    assert ids("id IN (3, 97)") == [0, 9]
