"""Scalar indices: answers equal a full scan for generated predicates, through table changes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mvcc_core as mvcc
from mvcc_core._proto import table_pb2 as pb
from mvcc_core.format import fragments
from mvcc_core.ops import index_build as scalar
from mvcc_core.read.bound_filter import BoundFilter
from mvcc_core.read.index_planner import choose_index
from mvcc_core.read.scan import Scan


def data(start: int, n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "k": pa.array([None if i % 11 == 0 else i % 17 for i in range(start, start + n)], pa.int64()),
            "g": pa.array([None if i % 13 == 0 else f"g{i % 5}" for i in range(start, start + n)]),
        }
    )


def answer(t: mvcc.Table, predicate: str | pc.Expression, use_index: bool) -> list[tuple]:
    scan = Scan(t.state.store, t.manifest, filter=predicate, use_index=use_index)
    return sorted((tuple(r.values()) for r in scan.to_table().to_pylist()), key=repr)


def count(t: mvcc.Table, predicate: str | pc.Expression, use_index: bool) -> int:
    return Scan(t.state.store, t.manifest, columns=[], filter=predicate, use_index=use_index).count_rows()


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> mvcc.Table:
    uri = str(tmp_path_factory.mktemp("index") / "t")
    t = mvcc.write_table(data(0, 300), uri, max_rows_per_file=60)
    t.create_index("k")
    t.create_index("g", "BITMAP")
    t.append(data(300, 50))  # not covered
    t.delete("id % 7 = 3")  # deleted after the build
    return t


values = st.integers(-3, 20)
k_predicates = st.one_of(
    values.map(lambda v: f"k = {v}"),
    st.lists(values, min_size=1, max_size=4).map(lambda vs: f"k IN ({', '.join(map(str, vs))})"),
    st.tuples(st.sampled_from(["<", "<=", ">", ">=", "<>"]), values).map(lambda p: f"k {p[0]} {p[1]}"),
    st.tuples(values, values).map(lambda p: f"k BETWEEN {p[0]} AND {p[1]}"),
    st.just("k IS NULL"),
    st.just("k IS NOT NULL"),
)
g_predicates = st.one_of(
    st.integers(-1, 6).map(lambda v: f"g = 'g{v}'"),
    st.just("g IS NULL"),
    st.lists(st.integers(0, 6), min_size=1, max_size=3).map(
        lambda vs: "g IN (" + ", ".join(f"'g{v}'" for v in vs) + ")"
    ),
)
extra = st.sampled_from(["", " AND id > 100", " AND id % 2 = 0", " OR id = 5"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(predicate=st.one_of(k_predicates, g_predicates), tail=extra)
def test_index_answers_equal_full_scan(table, predicate, tail) -> None:
    sql = predicate + tail
    assert answer(table, sql, True) == answer(table, sql, False)
    assert count(table, sql, True) == count(table, sql, False)


_OPS = {"=": pc.equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater, ">=": pc.greater_equal, "<>": pc.not_equal}
k_expressions = st.one_of(
    st.tuples(st.sampled_from(sorted(_OPS)), values).map(
        lambda p: (f"k {p[0]} {p[1]}", _OPS[p[0]](pc.field("k"), p[1]))
    ),
    st.tuples(st.sampled_from(sorted(_OPS)), values).map(
        lambda p: (f"{p[1]} {p[0]} k", _OPS[p[0]](pc.scalar(p[1]), pc.field("k")))
    ),
    st.lists(values, min_size=1, max_size=4).map(
        lambda vs: (f"k IN ({', '.join(map(str, vs))})", pc.field("k").isin(vs))
    ),
    st.tuples(values, values).map(
        lambda p: (f"k BETWEEN {p[0]} AND {p[1]}", (pc.field("k") >= p[0]) & (pc.field("k") <= p[1]))
    ),
    st.just(("k IS NULL", pc.field("k").is_null())),
    st.integers(-1, 6).map(lambda v: (f"g = 'g{v}'", pc.field("g") == f"g{v}")),
)
expression_tails = st.sampled_from(
    [("", None), (" AND id > 100", pc.field("id") > 100), (" OR id = 5", pc.field("id") == 5)]
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pair=k_expressions, tail=expression_tails)
def test_expression_index_answers_equal_sql_and_full_scan(table, pair, tail) -> None:
    (sql, expr), (sql_tail, expr_tail) = pair, tail
    if expr_tail is not None:
        expr = expr & expr_tail if sql_tail.startswith(" AND") else expr | expr_tail
    sql += sql_tail
    expected = answer(table, sql, False)
    assert answer(table, expr, True) == answer(table, expr, False) == answer(table, sql, True) == expected
    assert count(table, expr, True) == count(table, sql, False)
    uses_index = Scan(table.state.store, table.manifest, filter=expr).explain().index is not None
    assert uses_index == (Scan(table.state.store, table.manifest, filter=sql).explain().index is not None)


def test_index_is_used_and_survives_changes(tmp_path) -> None:
    t = mvcc.write_table(data(0, 300), str(tmp_path / "t"), max_rows_per_file=60)
    t.create_index("k")
    plan = Scan(t.state.store, t.manifest, filter="k = 3").explain()
    assert plan.index is not None and (plan.index.name, plan.index.type, plan.index.column) == ("k_idx", "BTREE", "k")
    assert plan.index.fragments == plan.fragments and plan.filter_pushed_down
    assert Scan(t.state.store, t.manifest, filter="k = id").explain().index is None  # reads another column too
    assert Scan(t.state.store, t.manifest, filter="k = 3 OR id = 1").explain().index is None  # not a conjunct
    assert answer(t, "k + 1 = 3", True) == answer(t, "k + 1 = 3", False)  # any expression of the column
    predicates = ["k = 3", "k IN (1, 2)", "k > 15", "k IS NULL", "k = 3 AND id > 150", "k = 99"]

    def check() -> None:
        for sql in predicates:
            assert answer(t, sql, True) == answer(t, sql, False), sql

    check()
    t.append(data(300, 30))
    check()
    t.delete("k = 3 AND id < 100")
    check()
    t.update({"k": "k + 100"}, where="id < 30", mode="rewrite_columns")  # the index goes stale for fragment 0
    assert 0 not in t.list_indices()[0]["fragment_ids"]
    check()
    t.update({"k": "k + 100"}, where="id >= 290 AND id < 300", mode="rewrite_rows")
    check()
    t.optimize.compact_files(target_rows_per_fragment=200)
    check()
    info = t.list_indices()[0]
    assert info["num_unindexed_fragments"] > 0
    assert t.optimize.optimize_indices() == 1
    info = t.list_indices()[0]
    assert info["num_unindexed_fragments"] == 0 and info["type"] == "BTree" and info["fields"] == ["k"]
    check()
    t.alter_columns({"path": "k", "name": "kk"})  # the index follows the field id
    assert answer(t, "kk = 4", True) == answer(t, "kk = 4", False)
    assert Scan(t.state.store, t.manifest, filter="kk = 4").explain().index.column == "kk"


def test_create_and_drop_index_errors(tmp_path) -> None:
    t = mvcc.write_table(data(0, 20), str(tmp_path / "t"))
    t.create_index("k", name="my")
    files_before = sorted(p.name for p in (tmp_path / "t").rglob("*"))
    for call, error, match in [
        (lambda: t.create_index("nope"), mvcc.SchemaError, "nope"),
        (lambda: t.create_index("k", index_type="HASH"), ValueError, "index_type"),
        (lambda: t.create_index("k", name="my", replace=False), mvcc.errors.IndexExistsError, "my"),
        (lambda: t.drop_index("other"), mvcc.errors.IndexNotFoundError, "other"),
    ]:
        with pytest.raises(error, match=match):
            call()
    assert sorted(p.name for p in (tmp_path / "t").rglob("*")) == files_before
    t.create_index("k", name="my")  # replace
    assert [i["name"] for i in t.list_indices()] == ["my"]
    t.drop_index("my")
    assert t.list_indices() == [] and t.count_rows("k = 3") == 1
    assert [v.operation for v in t.versions()][-3:] == ["CreateIndex", "CreateIndex", "CreateIndex"]
    assert any(Path(tmp_path / "t" / "_indices").iterdir())


def test_index_built_concurrently_with_an_in_place_update_of_its_column(tmp_path) -> None:
    t = mvcc.write_table(data(0, 40), str(tmp_path / "t"), max_rows_per_file=20)
    builder = mvcc.open_table(str(tmp_path / "t"))
    t.update({"k": "k + 1000"}, where="id < 5", mode="rewrite_columns")
    with pytest.raises(mvcc.RetryableConflictError):
        builder.create_index("k")
    fresh = mvcc.open_table(str(tmp_path / "t"))
    fresh.create_index("k")
    assert answer(fresh, "k >= 1000", True) == answer(fresh, "k >= 1000", False) != []


# ---- lookups that read only some row groups (index statistics, row groups of the data files)


def typed(start: int, n: int) -> pa.Table:
    ids = range(start, start + n)

    def real(i: int) -> float | None:
        if i % 10 == 0:
            return float("nan")
        if i % 15 == 0:
            return None
        return -0.0 if i % 7 == 0 else (i % 13) / 4 - 1.5

    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "key": pa.array([(i * 7919) % 1009 for i in ids], pa.int64()),  # unsorted, nearly unique
            "i32": pa.array([None if i % 9 == 0 else i % 23 - 11 for i in ids], pa.int32()),
            "u": pa.array([i * 31 % 50 for i in ids], pa.uint64()),
            "f": pa.array([real(i) for i in ids], pa.float64()),
            "f32": pa.array([real(i + 3) for i in ids], pa.float32()),
            "s": pa.array([None if i % 12 == 0 else f"s{i % 9}" for i in ids]),
            "name": pa.array([f"name-{i * 7 % 500:04d}" for i in ids]),  # high cardinality: plain encoded
        }
    )


@pytest.fixture(scope="module")
def typed_table(tmp_path_factory) -> mvcc.Table:
    """Small row groups in the data files (16 rows) and the index files (5 rows), so lookups prune both."""
    uri = str(tmp_path_factory.mktemp("typed") / "t")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fragments, "ROW_GROUP_ROWS", 16)
        patch.setattr(scalar, "ROWS_PER_GROUP", 5)
        t = mvcc.write_table(typed(0, 400), uri, max_rows_per_file=150)
        for column, kind in [
            ("key", "BTREE"),
            ("i32", "BTREE"),
            ("u", "BITMAP"),
            ("f", "BTREE"),
            ("f32", "BITMAP"),
            ("s", "BTREE"),
            ("name", "BITMAP"),
        ]:
            t.create_index(column, kind)
        t.append(typed(400, 40))  # not covered
        t.delete("id % 11 = 4 OR id = 170")  # deleted after the build
        t.update({"name": "upper(name)"}, where="id >= 160 AND id < 170", mode="rewrite_columns")  # two files
    assert any(len(f.files) > 1 for f in t.manifest.fragments)
    return t


literals = {
    "key": st.integers(-2, 1012).map(str),
    "i32": st.one_of(st.integers(-13, 13).map(str), st.sampled_from(["2.5", "-0.0", "3.0", "'4'", "1e1"])),
    "u": st.one_of(st.integers(-2, 52).map(str), st.sampled_from(["-1", "18446744073709551615", "7.5"])),
    "f": st.one_of(
        st.integers(-8, 8).map(lambda v: str(v / 4)), st.sampled_from(["-0.0", "0", "1", "0.1", "-2", "'1.25'"])
    ),
    "f32": st.one_of(st.integers(-8, 8).map(lambda v: str(v / 4)), st.sampled_from(["-0.0", "0.1", "2"])),
    "s": st.one_of(st.integers(-1, 9).map(lambda v: f"'s{v}'"), st.sampled_from(["''", "'s'", "'t'", "'S1'"])),
    "name": st.integers(0, 501).map(lambda v: f"'name-{v:04d}'"),
}


@st.composite
def typed_predicates(draw) -> str:
    column = draw(st.sampled_from(sorted(literals)))
    value = literals[column]
    shape = draw(st.sampled_from(["cmp", "flipped", "between", "in", "two", "paren"]))
    op = draw(st.sampled_from(["=", "<", "<=", ">", ">=", "<>"]))
    if shape == "cmp":
        return f"{column} {op} {draw(value)}"
    if shape == "flipped":
        return f"{draw(value)} {op} {column}"
    if shape == "between":
        return f"{column} BETWEEN {draw(value)} AND {draw(value)}"
    if shape == "in":
        items = draw(st.lists(st.one_of(value, st.just("NULL")), min_size=1, max_size=4))
        return f"{column} IN ({', '.join(items)})"
    if shape == "two":
        return f"{column} >= {draw(value)} AND ({column} < {draw(value)})"
    return f"({column} = ({draw(value)}))"


def typed_answer(t: mvcc.Table, predicate: str, use_index: bool, **options) -> list[str]:
    """The rows as sorted reprs (NaN equals NaN there)."""
    scan = Scan(t.state.store, t.manifest, filter=predicate, use_index=use_index, **options)
    return sorted(repr(tuple(r.values())) for r in scan.to_table().to_pylist())


@pytest.mark.parametrize("predicate", ["f > 1.5", "f >= 1.5", "f > 1.5 AND id > 100", "f32 > 1.0", "f32 >= 0.5"])
def test_nan_rows_beside_the_largest_number_are_found(typed_table, predicate) -> None:
    """NaN sorts above every number, so `f > 1.5` matches NaN; the index file's row group holding the last
    1.5s and the first NaNs has min = max = 1.5 (Parquet's statistics leave NaN out) and must still be read."""
    assert typed_answer(typed_table, predicate, True) == typed_answer(typed_table, predicate, False)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(predicate=typed_predicates(), tail=st.sampled_from(["", " AND id > 100", " AND id % 2 = 0", " OR id = 5"]))
@pytest.mark.slow
def test_pruned_lookups_equal_full_scan(typed_table, predicate, tail) -> None:
    sql = predicate + tail
    try:
        expected = typed_answer(typed_table, sql, False)
    except mvcc.errors.PredicateError:
        with pytest.raises(mvcc.errors.PredicateError):
            typed_answer(typed_table, sql, True)
        return
    assert typed_answer(typed_table, sql, True) == expected
    options = {"columns": ["name", "id"], "with_row_address": True, "with_row_id": True}
    assert typed_answer(typed_table, sql, True, **options) == typed_answer(typed_table, sql, False, **options)
    assert count(typed_table, sql, True) == count(typed_table, sql, False)


def test_planner_bounds() -> None:
    schema = pa.schema(
        [("k", pa.int64()), ("i", pa.int32()), ("u", pa.uint64()), ("f", pa.float32()), ("s", pa.string())]
    )
    physical = pa.schema([(f"c{n}", f.type) for n, f in enumerate(schema)])
    fields = [pb.Field(name=f.name, id=n, parent_id=-1) for n, f in enumerate(schema)]
    manifest = pb.Manifest(fields=fields)
    for n in range(len(schema)):
        manifest.indices.append(pb.IndexMetadata(fields=[n], index_type="BTREE", files=[pb.IndexFile(path="x")]))

    def bounds(sql: str) -> list:
        choice = choose_index(BoundFilter.bind(sql, schema, physical), manifest)
        assert choice is not None, sql
        return choice.bounds

    assert bounds("k = 3") == [[(3, True, 3, True)]]
    assert bounds("5 < k") == [[(5, False, None, False)]]
    assert bounds("(k) <= -(4)") == bounds("k <= -4") == [[(None, False, -4, True)]]  # folded constants
    # BETWEEN is two comparisons; `<>` gives no bound
    assert bounds("k BETWEEN 1 AND 4 AND k <> 2 AND k > 0") == [
        [(1, True, None, False)],
        [(None, False, 4, True)],
        [(0, False, None, False)],
    ]
    assert bounds("k IN (1, NULL, -2)") == [[(1, True, 1, True), (-2, True, -2, True)]]
    assert bounds("k IN (NULL)") == [[]]  # matches nothing
    assert bounds("k = 2.5") == bounds("k + 1 = 3") == bounds("k IS NULL") == []
    assert bounds("k = '3'") == [[(3, True, 3, True)]]  # the string is parsed as the column's type, exactly
    assert bounds("k = 3.0") == [[(3, True, 3, True)]]  # exactly an integer: the filter compares in int64
    assert bounds("i = 3000000000") == [] and bounds("i = 7") == [[(7, True, 7, True)]]
    assert bounds("u = -1") == [] and bounds("u = 18446744073709551615") == [[(2**64 - 1, True, 2**64 - 1, True)]]
    assert bounds("f = 0.1") == [] and bounds("f = 0.5") == [[(0.5, True, 0.5, True)]]  # 0.1 is no float32
    assert bounds("s = 'x'") == [[("x", True, "x", True)]] and bounds("lower(s) = 'x'") == []
    assert choose_index(BoundFilter.bind("k = 3", schema), manifest) is None  # table names: not for index files
    with pytest.raises(mvcc.errors.PredicateError):
        BoundFilter.bind("s = 1", schema, physical)  # not a valid filter
    # an Expression gives the same bounds as the SQL it spells
    expressions = [
        (pc.field("k") == 3, "k = 3"),
        (pc.scalar(5) < pc.field("k"), "5 < k"),
        ((pc.field("k") >= 1) & (pc.field("k") <= 4), "k BETWEEN 1 AND 4"),
        (pc.field("k").isin([1, -2]), "k IN (1, -2)"),
        (pc.field("i") == 7, "i = 7"),
        (pc.field("i") == 3_000_000_000, "i = 3000000000"),
        (pc.field("f") == 0.1, "f = 0.1"),
        (pc.field("f") == 0.5, "f = 0.5"),
        (pc.field("s") == "x", "s = 'x'"),
        (pc.field("k").is_null(), "k IS NULL"),
    ]
    for expr, sql in expressions:
        choice = choose_index(BoundFilter.bind(expr, schema, physical), manifest)
        assert choice is not None and choice.bounds == bounds(sql), (expr, sql)
    assert choose_index(BoundFilter.bind(pc.field("k").isin([1, None]), schema, physical), manifest).bounds == []


def test_point_lookup_reads_one_row_group_of_index_and_data(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(fragments, "ROW_GROUP_ROWS", 16)
    monkeypatch.setattr(scalar, "ROWS_PER_GROUP", 8)
    t = mvcc.write_table(typed(0, 400), str(tmp_path / "t"), max_rows_per_file=200)
    t.create_index("key")
    t.create_index("s", "BITMAP")
    t.delete("id = 11")
    reads: list[tuple[str, list[int]]] = []
    original = pq.ParquetFile.read_row_groups

    def spy(self, row_groups, columns=None, **kwargs):
        reads.append((columns[-1], list(row_groups)))
        return original(self, row_groups, columns=columns, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", spy)
    key = typed(0, 400).column("key").to_pylist()
    for sql, rows in [(f"key = {key[250]}", [250]), ("key = 2000", []), (f"key = {key[11]}", [11])]:  # 11: deleted
        reads.clear()
        table = t.to_table(filter=sql)
        assert table.column("id").to_pylist() == [r for r in rows if r != 11]
        index_reads = [groups for column, groups in reads if column == "_rowaddr"]
        data_reads = [groups for column, groups in reads if column != "_rowaddr"]
        assert len(index_reads) <= 1 and all(len(g) == 1 for g in index_reads), reads
        assert data_reads == ([[rows[0] % 200 // 16]] if rows else []), reads
    reads.clear()
    assert t.count_rows("s = 's4'") == typed(0, 400).filter(pc.field("s") == "s4").num_rows
    assert [len(groups) for column, groups in reads if column == "bitmap"] == [1]  # sorted by value: one group
    assert typed_answer(t, "s = 's4'", True) == typed_answer(t, "s = 's4'", False)


def test_cached_filters_and_choices_follow_the_manifest(tmp_path) -> None:
    t = mvcc.write_table(data(0, 100), str(tmp_path / "t"), max_rows_per_file=40)
    for _ in range(2):  # a bad filter fails every time, not only before it is cached
        with pytest.raises(mvcc.errors.PredicateError):
            t.to_table(filter="k = ")
    assert t.to_table(filter="k = 3").num_rows == 5
    t.create_index("k")  # same filter, same fields, now an index
    assert Scan(t.state.store, t.manifest, filter="k = 3").explain().index is not None
    t.alter_columns({"path": "k", "name": "k2"})
    with pytest.raises(mvcc.errors.PredicateError):
        t.to_table(filter="k = 3")
    assert answer(t, "k2 = 3", True) == answer(t, "k2 = 3", False)
    t.drop_index("k_idx")
    assert Scan(t.state.store, t.manifest, filter="k2 = 3").explain().index is None
    t.create_index("k2", "BITMAP")  # a new index file: a new uuid, nothing stale is read
    assert answer(t, "k2 = 3", True) == answer(t, "k2 = 3", False)


def test_lookups_on_every_store(any_uri, monkeypatch) -> None:
    """Local files are read through cached footers, object stores through cached dataset fragments."""
    uri, options = any_uri
    monkeypatch.setattr(fragments, "ROW_GROUP_ROWS", 16)
    monkeypatch.setattr(scalar, "ROWS_PER_GROUP", 8)
    t = mvcc.write_table(typed(0, 200), uri, max_rows_per_file=80, storage_options=options)
    t.create_index("key")
    t.create_index("s", "BITMAP")
    t.create_index("f")
    t.delete("id % 9 = 2")
    t.append(typed(200, 30))
    t = mvcc.open_table(uri, storage_options=options)
    key = typed(0, 230).column("key").to_pylist()
    for sql in [f"key = {key[100]}", f"key = {key[11]}", f"key IN ({key[5]}, {key[210]})", "s = 's3'", "f < 0"]:
        for repeat in range(2):  # cold, then cached footers and fragments
            assert typed_answer(t, sql, True) == typed_answer(t, sql, False), (sql, repeat)
    assert t.to_table(filter=f"key = {key[100]}").column("id").to_pylist() == [100]


@pytest.mark.slow
def test_index_build_runs_as_tasks_on_an_executor(tmp_uri) -> None:
    """The column is read by picklable tasks in other processes; the index equals one built in-process."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from pathlib import Path

    import pyarrow.parquet as pq

    from mvcc_core.ops import index_tasks
    from mvcc_core.ops.index_build import INDEX_FILE, index_dir

    t = None
    for start in range(0, 60, 10):
        ids = pa.array(range(start, start + 10), pa.int64())
        data = pa.table({"id": ids, "k": pa.compute.multiply(ids, 7)})
        t = mvcc.write_table(data, tmp_uri, mode="create" if start == 0 else "append")
    t.delete("id IN (4, 33)")
    tasks = index_tasks.plan(t.manifest, "k", list(t.manifest.fragments), "_indices/x", rows_per_task=25)
    assert [len(task.fragments) for task in tasks] == [3, 3]  # about 25 live rows per task
    calls: list[tuple[int, int]] = []
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        by_pool = t.create_index(
            "k", "BTREE", name="k_idx", executor=pool, progress=lambda done, total: calls.append((done, total))
        ).manifest.indices[0]
    assert calls[-1] == (calls[-1][1], calls[-1][1]) and len(calls) == calls[-1][1] >= 1  # one call per task
    in_process = t.create_index("k", "BTREE", name="k_idx").manifest.indices[0]

    def content(index) -> pa.Table:
        return pq.read_table(f"{tmp_uri}/{index_dir(index)}/{INDEX_FILE}")

    assert content(by_pool).equals(content(in_process)) and content(by_pool).num_rows == 58
    assert not list(Path(tmp_uri, "_indices").rglob("*.arrow"))  # the parts are gone
    t = t.checkout(t.version - 1)  # the version with the index built by the pool
    whole = t.to_table()
    for lo, hi in [(21, 21), (0, 100), (231, 231), (28, 400)]:
        expected = sorted(r["id"] for r in whole.to_pylist() if lo <= r["k"] <= hi)
        assert sorted(t.to_table(filter=f"k >= {lo} AND k <= {hi}")["id"].to_pylist()) == expected


def test_a_failed_index_task_leaves_nothing(tmp_uri) -> None:
    from pathlib import Path

    class DiesAfterOneTask:  # a worker lost mid-build: the first part is written, then the job fails
        def map(self, fn, tasks):
            tasks = list(tasks)
            yield fn(tasks[0])
            raise RuntimeError("executor lost")

    t = None
    for start in range(0, 40, 10):
        data = pa.table({"id": pa.array(range(start, start + 10), pa.int64())})
        t = mvcc.write_table(data, tmp_uri, mode="create" if start == 0 else "append")
    before = t.version
    with pytest.raises(RuntimeError, match="executor lost"):
        t.create_index("id", executor=DiesAfterOneTask())
    assert mvcc.open_table(tmp_uri).version == before
    assert not [p for p in Path(tmp_uri, "_indices").rglob("*") if p.is_file()]


@pytest.mark.parametrize("index_type", ["BTREE", "BITMAP"])
def test_optimize_indices_merges_without_reading_covered_fragments(tmp_uri, index_type) -> None:
    import os

    def chunk(start: int) -> pa.Table:
        ids = pa.array(range(start, start + 10), pa.int64())
        return pa.table({"id": ids, "k": pa.compute.bit_wise_and(ids, 7)})

    t = mvcc.write_table(chunk(0), tmp_uri)
    t.append(chunk(10))
    t.create_index("k", index_type)
    t.append(chunk(20))  # not covered
    t.delete("id = 3")  # covered fragment with a deletion: its entries are kept, the scan drops the row
    t.optimize.compact_files(target_rows_per_fragment=1_000, materialize_deletions_threshold=1.0)
    covered_files = [f"{tmp_uri}/data/{f.data_files()[0].path}" for f in t.get_fragments()]
    # the compaction rewrote the covered fragments, so nothing of the index still points at live rows:
    # append once more and index again, then hide the covered file while optimize_indices runs
    t.optimize.optimize_indices()
    t.append(chunk(30))
    hidden = [(p, p + ".away") for p in covered_files]
    for src, dst in hidden:
        os.rename(src, dst)
    try:
        assert t.optimize.optimize_indices() == 1  # reads only the appended fragment
    finally:
        for src, dst in hidden:
            os.rename(dst, src)
    index = next(i for i in t.list_indices() if i["name"] == "k_idx")
    assert index["num_unindexed_fragments"] == 0 and index["num_indexed_fragments"] == len(t.get_fragments())
    whole = t.to_table()
    for k in range(8):
        expected = sorted(r["id"] for r in whole.to_pylist() if r["k"] == k)
        assert sorted(t.to_table(filter=f"k = {k}")["id"].to_pylist()) == expected
    assert 3 not in t.to_table()["id"].to_pylist() and t.count_rows() == 39
