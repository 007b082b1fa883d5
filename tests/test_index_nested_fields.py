"""Scalar indices on struct fields (`create_scalar_index("st.x")`, pylance's dotted paths): built (in this process
and as executor tasks), used by filters on the field, described, listed, updated, dropped; every answer equals a
plain evaluation of the filter in Python over randomized histories (appends, deletes, compaction, index updates).
"""

from __future__ import annotations

import math
import random
from typing import Any

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core.executor import ThreadExecutor
from mvcc_core.verify import verify

INNER = pa.struct([("k", pa.int64())])
ST = pa.struct([("x", pa.int32()), ("s", pa.string()), ("f", pa.float64()), ("inner", INNER)])
SCHEMA = pa.schema([("id", pa.int64()), ("st", ST), ("x", pa.int32())])  # a top-level `x` too: no confusion
INDICES = {"st.x": "BTREE", "st.s": "BITMAP", "st.inner.k": "BTREE", "st.f": "BTREE"}
Row = dict[str, Any]


def _rows(start: int, count: int, rng: random.Random) -> list[Row]:
    out = []
    for i in range(start, start + count):
        st = None
        if rng.random() > 0.08:
            f = rng.choice([math.nan, None, -1.5, 0.0, 2.5, 7.0])
            inner = None if rng.random() < 0.1 else {"k": None if rng.random() < 0.1 else rng.randint(0, 6)}
            x = None if rng.random() < 0.1 else rng.randint(-3, 5)
            st = {"x": x, "s": rng.choice(["a", "bb", "", None]), "f": f, "inner": inner}
        out.append({"id": i, "st": st, "x": rng.randint(-3, 5)})
    return out


def _get(row: Row, path: str) -> Any:
    value: Any = row
    for part in path.split("."):
        if value is None:
            return None
        value = value[part]
    return value


def _condition(rng: random.Random) -> tuple[str, Any]:
    """A SQL condition on an indexed struct field and its Python evaluation (True, False or None for NULL)."""
    v = rng.randint(-3, 5)
    k = rng.randint(0, 6)
    f = rng.choice([-1.5, 0.0, 2.5, 7.0])

    def cmp(path: str, op: Any) -> Any:
        return lambda r: None if _get(r, path) is None else op(_get(r, path))

    def nan_gt(r: Row) -> Any:  # NaN above every number (DataFusion's order)
        value = _get(r, "st.f")
        return None if value is None else (math.isnan(value) or value > f)

    choices = [
        (f"st.x = {v}", cmp("st.x", lambda x: x == v)),
        (f"st.x >= {v}", cmp("st.x", lambda x: x >= v)),
        (f"st.x < {v}", cmp("st.x", lambda x: x < v)),
        (f"st.x IN ({v}, {v + 2})", cmp("st.x", lambda x: x in (v, v + 2))),
        ("st.x IS NULL", lambda r: _get(r, "st.x") is None),
        ("st.x IS NOT NULL", lambda r: _get(r, "st.x") is not None),
        ("st.s = 'a'", cmp("st.s", lambda s: s == "a")),
        ("st.s IN ('', 'bb')", cmp("st.s", lambda s: s in ("", "bb"))),
        (f"st.inner.k = {k}", cmp("st.inner.k", lambda x: x == k)),
        (f"st.inner.k > {k}", cmp("st.inner.k", lambda x: x > k)),
        (f"st.f > {f}", nan_gt),
        (f"st.f < {f}", cmp("st.f", lambda x: not math.isnan(x) and x < f)),
        (f"x = {v}", lambda r: r["x"] == v),  # the top-level column of the same name is not indexed
    ]
    return rng.choice(choices)


def _filter(rng: random.Random) -> tuple[str, Any]:
    first, keep = _condition(rng)
    if rng.random() < 0.5:
        return first, keep
    v = rng.randint(0, 200)
    second = rng.choice([(f"id >= {v}", lambda r: r["id"] >= v), _condition(rng)])
    return f"{first} AND {second[0]}", lambda r: _and(keep(r), second[1](r))


def _and(a: Any, b: Any) -> Any:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _check(t: mvcc.Table, live: list[Row], rng: random.Random, indexed: bool) -> None:
    for _ in range(12):
        sql, keep = _filter(rng)
        want = [r["id"] for r in live if keep(r) is True]
        got = t.to_table(columns=["id"], filter=sql)["id"].to_pylist()
        assert sorted(got) == sorted(want), sql  # (an update's moved rows come last)
        assert t.count_rows(sql) == len(want), sql
        plan = t.scanner(["id"], sql).explain()
        # (a negation over a struct holding a float is applied after the read, never pushed down or indexed)
        if indexed and plan.filter_pushed_down and " AND " not in sql and not sql.startswith("x "):
            assert plan.index is not None and plan.index.column == sql.split(" ")[0], sql
        if (sql.startswith("x ") and " AND " not in sql) or not indexed:
            assert plan.index is None, sql
    sql = f"st.x = {rng.randint(-3, 5)}"
    assert (t.scanner(["id"], sql).explain().index is not None) == indexed
    rows = {r["id"]: repr(r) for r in t.to_table(filter="st.x >= 0").to_pylist()}  # (repr: NaN equals NaN)
    assert rows == {r["id"]: repr(r) for r in live if _get(r, "st.x") is not None and _get(r, "st.x") >= 0}


@pytest.mark.parametrize("seed", range(3))
def test_indices_on_struct_fields_answer_as_a_plain_evaluation(seed: int, tmp_path) -> None:
    rng = random.Random(seed)
    live = _rows(0, rng.randint(20, 60), rng)
    t = mvcc.write_table(pa.Table.from_pylist(live, schema=SCHEMA), str(tmp_path / "t"), max_rows_per_file=15)
    next_id = len(live)
    executor = ThreadExecutor(2) if seed % 2 else None
    for path, kind in INDICES.items():
        t.create_scalar_index(path, kind, executor=executor)
    names = {i["name"]: i["fields"] for i in t.list_indices()}
    assert names == {f"{p}_idx": [p] for p in INDICES}
    assert {d.name: d.field_names for d in t.describe_indices()} == names
    _check(t, live, rng, indexed=True)
    for step in range(4):
        rows = _rows(next_id, rng.randint(1, 25), rng)
        next_id += len(rows)
        t.append(pa.Table.from_pylist(rows, schema=SCHEMA))  # not covered by the indices until they are updated
        live += rows
        k, r = rng.randint(2, 6), rng.randint(0, 5)
        t.delete(f"id % {k} = {r}")
        live = [row for row in live if row["id"] % k != r]
        _check(t, live, rng, indexed=True)
        if step in (0, 3):  # the struct rewritten in place (a file per fragment) or its rows moved
            k, r = rng.randint(2, 6), rng.randint(0, 5)
            t.update({"st": "NULL"}, where=f"id % {k} = {r}", mode=rng.choice(["rewrite_rows", "rewrite_columns"]))
            live = [{**row, "st": None} if row["id"] % k == r else row for row in live]
            _check(t, live, rng, indexed=True)
        if step == 1:
            t.optimize.optimize_indices()  # merges the covered entries with the new fragments'
            assert all(i["num_unindexed_fragments"] == 0 for i in t.list_indices())
        if step == 2:
            t.optimize.compact_files(target_rows_per_fragment=40)
        _check(t, live, rng, indexed=True)  # compaction remaps the indices to the rows' new places
    for path in INDICES:
        t.drop_index(f"{path}_idx")
    assert t.list_indices() == []
    _check(t, live, rng, indexed=False)


def test_index_names_of_renamed_struct_fields_follow_the_schema(tmp_path) -> None:
    t = mvcc.write_table(pa.Table.from_pylist(_rows(0, 30, random.Random(3)), schema=SCHEMA), str(tmp_path / "t"))
    t.create_scalar_index("st.inner.k", "BTREE")
    want = t.to_table(columns=["id"], filter="st.inner.k = 2")
    t.alter_columns({"path": "st", "name": "meta"}, {"path": "meta.inner.k", "name": "key"})
    assert [i["fields"] for i in t.list_indices()] == [["meta.inner.key"]]
    assert t.describe_indices()[0].field_names == ["meta.inner.key"]
    scan = t.scanner(["id"], "meta.inner.key = 2")
    assert scan.explain().index is not None and scan.explain().index.column == "meta.inner.key"
    assert scan.to_table() == want


def test_indices_refuse_what_is_no_scalar_field(tmp_path) -> None:
    t = mvcc.write_table(pa.Table.from_pylist(_rows(0, 5, random.Random(4)), schema=SCHEMA), str(tmp_path / "t"))
    with pytest.raises(mvcc.SchemaError, match="scalar indices need a scalar column, it is struct"):
        t.create_scalar_index("st.inner", "BTREE")
    with pytest.raises(mvcc.SchemaError, match="no such column or struct field"):
        t.create_scalar_index("st.nope", "BTREE")
    with pytest.raises(mvcc.SchemaError, match="no such column or struct field"):
        t.create_scalar_index("id.x", "BTREE")
    assert t.list_indices() == []


def test_struct_field_index_as_pylance(tmp_path) -> None:
    lance = pytest.importorskip("lance")
    rows = _rows(0, 40, random.Random(5))
    data = pa.Table.from_pylist(rows, schema=SCHEMA)
    theirs = lance.write_dataset(data, str(tmp_path / "lance"))
    ours = mvcc.write_table(data, str(tmp_path / "mvcc"))
    for t in (theirs, ours):
        t.create_scalar_index("st.x", "BTREE")
        t.create_scalar_index("st.s", "BITMAP")
        t.delete("id % 5 = 1")
    described = sorted((d.name, d.field_names) for d in theirs.describe_indices())
    assert sorted((d.name, d.field_names) for d in ours.describe_indices()) == described
    assert sorted((i["name"], i["fields"]) for i in ours.list_indices()) == described
    for sql in ("st.x = 2", "st.x > 1 AND id < 30", "st.x IS NULL", "st.s = 'bb'", "st.s IN ('a', '')"):
        assert ours.to_table(columns=["id"], filter=sql) == theirs.to_table(columns=["id"], filter=sql), sql


def test_a_struct_rewritten_in_place_is_no_longer_covered_by_its_fields_indices(tmp_path) -> None:
    rows = _rows(0, 30, random.Random(6))
    t = mvcc.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), str(tmp_path / "t"), max_rows_per_file=10)
    t.create_scalar_index("st.x", "BTREE")
    t.update({"st": "NULL"}, where="id < 4", mode="rewrite_columns")  # fragment 0 gets a new file for `st`
    assert t.list_indices()[0]["fragment_ids"] == [1, 2]
    t.optimize.optimize_indices()  # fragment 0 is read again, with its new values
    assert t.list_indices()[0]["fragment_ids"] == [0, 1, 2]
    want = [r["id"] for r in rows if r["id"] < 4 or _get(r, "st.x") is None]
    assert t.to_table(columns=["id"], filter="st.x IS NULL")["id"].to_pylist() == want


def test_dropping_a_column_or_field_drops_its_indices(tmp_path) -> None:
    t = mvcc.write_table(pa.Table.from_pylist(_rows(0, 20, random.Random(7)), schema=SCHEMA), str(tmp_path / "t"))
    for path in ("st.x", "st.inner.k", "x", "id"):
        t.create_scalar_index(path, "BTREE")
    t.drop_columns(["st.inner", "x"])
    assert sorted(i["fields"][0] for i in t.list_indices()) == ["id", "st.x"]
    with pytest.raises(mvcc.SchemaError, match=r"index\(es\) \['id_idx'\] are built on it"):
        t.alter_columns({"path": "id", "data_type": pa.int32()})  # as pylance: drop the index first
    t.drop_index("id_idx")
    t.alter_columns({"path": "id", "data_type": pa.int32()})
    assert [i["fields"] for i in t.list_indices()] == [["st.x"]]
    t.drop_columns(["st"])
    assert t.list_indices() == []
    assert len(t.checkout(5).list_indices()) == 4  # older versions keep theirs (5: the last index built)
    assert verify(t, all_versions=True).problems == []  # no index names a field the schema lacks


def test_a_struct_field_index_rebuilt_after_a_deferred_remap_stays_on_its_field(tmp_path) -> None:
    rng = random.Random(8)
    rows = _rows(0, 10, rng)
    t = mvcc.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), str(tmp_path / "t"))
    for start in range(10, 50, 10):  # small fragments for compaction; the top-level `x` shares the field's name
        more = _rows(start, 10, rng)
        t.append(pa.Table.from_pylist(more, schema=SCHEMA))
        rows += more
    t.create_scalar_index("st.x", "BTREE")
    t.optimize.compact_files(target_rows_per_fragment=1_000, defer_index_remap=True)
    t.optimize.optimize_indices()  # rebuilds the index whose row addresses moved
    assert [i["fields"] for i in t.list_indices()] == [["st.x"]]
    scan = t.scanner(["id"], "st.x = 2")
    assert scan.explain().index is not None and scan.explain().index.column == "st.x"
    want = sorted(r["id"] for r in rows if _get(r, "st.x") == 2)
    assert sorted(scan.to_table()["id"].to_pylist()) == want
