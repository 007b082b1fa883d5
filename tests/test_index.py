"""Scalar indices: answers equal a full scan for generated predicates, through table changes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mvcc_core as mvcc
from mvcc_core.scan import Scan


def data(start: int, n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "k": pa.array([None if i % 11 == 0 else i % 17 for i in range(start, start + n)], pa.int64()),
            "g": pa.array([None if i % 13 == 0 else f"g{i % 5}" for i in range(start, start + n)]),
        }
    )


def answer(t: mvcc.Table, predicate: str, use_index: bool) -> list[tuple]:
    scan = Scan(t._store, t.manifest, filter=predicate, use_index=use_index)
    return sorted((tuple(r.values()) for r in scan.to_table().to_pylist()), key=repr)


def count(t: mvcc.Table, predicate: str, use_index: bool) -> int:
    return Scan(t._store, t.manifest, columns=[], filter=predicate, use_index=use_index).count_rows()


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


def test_index_is_used_and_survives_changes(tmp_path) -> None:
    t = mvcc.write_table(data(0, 300), str(tmp_path / "t"), max_rows_per_file=60)
    t.create_index("k")
    scan = Scan(t._store, t.manifest, filter="k = 3")
    assert scan._index_choice() is not None
    assert Scan(t._store, t.manifest, filter="k = id")._index_choice() is None  # reads another column too
    assert Scan(t._store, t.manifest, filter="k = 3 OR id = 1")._index_choice() is None  # not a conjunct
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
    assert info["num_unindexed_fragments"] == 0 and info["type"] == "BTREE" and info["fields"] == ["k"]
    check()
    t.alter_columns({"path": "k", "name": "kk"})  # the index follows the field id
    assert answer(t, "kk = 4", True) == answer(t, "kk = 4", False)
    assert Scan(t._store, t.manifest, filter="kk = 4")._index_choice() is not None


def test_create_and_drop_index_errors(tmp_path) -> None:
    t = mvcc.write_table(data(0, 20), str(tmp_path / "t"))
    t.create_index("k", name="my")
    files_before = sorted(p.name for p in (tmp_path / "t").rglob("*"))
    for call, match in [
        (lambda: t.create_index("nope"), "nope"),
        (lambda: t.create_index("k", index_type="HASH"), "index_type"),
        (lambda: t.create_index("k", name="my", replace=False), "my"),
        (lambda: t.drop_index("other"), "other"),
    ]:
        with pytest.raises(mvcc.SchemaError, match=match):
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
