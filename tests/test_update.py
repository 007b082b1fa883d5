"""Update (REWRITE_ROWS) against a plain-Python oracle."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import mvcc_core as mvcc


def data(n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "price": pa.array([i * 1.0 for i in range(n)]),
            "name": [None if i % 5 == 0 else f"n{i}" for i in range(n)],
        }
    )


def by_id(t: mvcc.Table) -> dict[int, dict]:
    return {r["id"]: r for r in t.to_table().to_pylist()}


@pytest.mark.parametrize("mode", ["rewrite_rows", "rewrite_columns"])
@pytest.mark.slow
def test_update_matches_oracle(any_uri, mode) -> None:
    uri, opts = any_uri
    t = mvcc.write_table(data(40), uri, storage_options=opts, max_rows_per_file=10)
    rows = {r["id"]: dict(r) for r in data(40).to_pylist()}
    assert t.update({"price": "price * 2 + 1", "name": "'cheap'"}, where="id < 15 AND name IS NOT NULL", mode=mode) == {
        "num_rows_updated": 12
    }
    for i, r in rows.items():
        if i < 15 and r["name"] is not None:
            r["price"], r["name"] = i * 2.0 + 1, "cheap"
    assert by_id(t) == rows
    t.update({"name": None}, where="id >= 35", mode=mode)
    for i in range(35, 40):
        rows[i]["name"] = None
    t.update({"price": 0}, mode=mode)  # every row
    for r in rows.values():
        r["price"] = 0.0
    reopened = mvcc.open_table(uri, storage_options=opts)
    assert by_id(reopened) == rows and reopened.count_rows() == 40
    assert [v.operation for v in reopened.versions()] == ["Overwrite", "Update", "Update", "Update"]
    assert by_id(reopened.checkout(1)) == {r["id"]: r for r in data(40).to_pylist()}
    txn = reopened.transaction(2)
    ids = {f.name: f.id for f in reopened.manifest.fields}
    assert sorted(txn.operation.fields_modified) == sorted([ids["price"], ids["name"]])
    assert txn.operation.update_mode == (0 if mode == "rewrite_rows" else 1)
    if mode == "rewrite_columns":  # rows stay where they were: no new fragments, same row addresses
        assert [f.fragment_id for f in reopened.get_fragments()] == [0, 1, 2, 3]
        assert all(len(f.data_files()) >= 2 for f in reopened.get_fragments())


def test_update_no_match_commits_nothing(tmp_uri) -> None:
    t = mvcc.write_table(data(5), tmp_uri)
    assert t.update({"price": 1}, where="id > 100") == {"num_rows_updated": 0}
    assert t.latest_version == 1


def test_bad_update_values_leave_table_unchanged(tmp_uri) -> None:
    t = mvcc.write_table(data(5), tmp_uri)
    before = sorted(p.relative_to(tmp_uri) for p in Path(tmp_uri).rglob("*"))
    with pytest.raises(mvcc.SchemaError, match="nope"):
        t.update({"nope": 1})
    with pytest.raises(mvcc.SchemaError, match="price"):
        t.update({"price": "name"})  # a string column into a double
    with pytest.raises(mvcc.SchemaError, match="price"):
        t.update({"price": "'not a number'"})
    with pytest.raises(mvcc.errors.PredicateError):
        t.update({"price": "unknown_col + 1"})
    with pytest.raises(mvcc.errors.PredicateError):
        t.update({"price": 1}, where="id = = 1")
    assert sorted(p.relative_to(tmp_uri) for p in Path(tmp_uri).rglob("*")) == before
    assert t.latest_version == 1


def test_update_racing_a_delete_of_the_same_row_is_retryable(tmp_uri) -> None:
    mvcc.write_table(data(10), tmp_uri)
    a, b, c = mvcc.open_table(tmp_uri), mvcc.open_table(tmp_uri), mvcc.open_table(tmp_uri)
    a.delete("id = 2")
    with pytest.raises(mvcc.RetryableConflictError):
        b.update({"price": 9}, where="id = 2", mode="rewrite_rows")
    assert len(list((Path(tmp_uri) / "data").iterdir())) == 1  # b's new data file was removed
    # REWRITE_COLUMNS of another row rebases: its column file joins the fragment with a's deletion vector
    c.update({"price": 9}, where="id = 3", mode="rewrite_columns")
    rows = by_id(mvcc.open_table(tmp_uri))
    assert 2 not in rows and rows[3]["price"] == 9.0 and len(rows) == 9


def test_rewrite_columns_keeps_deletions_and_computes_only_matched_rows(tmp_uri) -> None:
    t = mvcc.write_table(
        pa.table({"id": pa.array(range(20), pa.int64()), "d": pa.array([i % 4 for i in range(20)], pa.int64())}),
        tmp_uri,
        max_rows_per_file=10,
    )
    t.delete("id IN (3, 13)")
    # 100 / d fails for d = 0; those rows do not match, so they must not be computed
    assert t.update({"id": "100 / d"}, where="d <> 0", mode="rewrite_columns") == {"num_rows_updated": 13}
    expected = sorted((100 // (i % 4) if i % 4 else i, i % 4) for i in range(20) if i not in (3, 13))
    assert sorted((r["id"], r["d"]) for r in t.to_table().to_pylist()) == expected
    assert t.count_rows() == 18
    assert t.checkout(2).count_rows() == 18 and sorted(t.checkout(2).to_table().column("id").to_pylist()) == [
        i for i in range(20) if i not in (3, 13)
    ]


def test_rewrite_columns_then_rename_drop_append(tmp_uri) -> None:
    t = mvcc.write_table(data(30), tmp_uri, max_rows_per_file=10)
    t.update({"price": "price + 0.5"}, mode="rewrite_columns")
    t.update({"price": "price * 2"}, where="id < 5", mode="rewrite_columns")
    # the first update's price file is fully superseded, so fragment 0 drops it: original + newest
    assert [list(f.fields) for f in t.get_fragments()[0].data_files()] == [[0, -2, 2], [1]]
    t.alter_columns({"path": "price", "name": "cost"})
    t.append(pa.table({"id": pa.array([99], pa.int64()), "cost": [1.0], "name": ["new"]}))
    got = {r["id"]: r["cost"] for r in t.to_table().to_pylist()}
    assert got == {**{i: (i + 0.5) * (2 if i < 5 else 1) for i in range(30)}, 99: 1.0}
    t.drop_columns(["cost"])
    assert t.to_table().column_names == ["id", "name"] and t.count_rows("name = 'new'") == 1


def test_update_mode_is_chosen_by_cost(tmp_uri) -> None:
    wide = pa.table({f"c{i}": pa.array(range(100), pa.int64()) for i in range(8)})
    t = mvcc.write_table(wide, tmp_uri, max_rows_per_file=50)
    t.update({"c1": "c1 + 1"})  # every row, one column of eight
    assert transaction_mode(t) == 1
    t.update({"c1": 0}, where="c0 = 7")  # one row
    assert transaction_mode(t) == 0
    t.update({f"c{i}": 0 for i in range(8)})  # every column: rewriting columns cannot win
    assert transaction_mode(t) == 0
    assert t.to_table().to_pylist() == [{f"c{i}": 0 for i in range(8)}] * 100
    with pytest.raises(ValueError, match="mode"):
        t.update({"c1": 1}, mode="sideways")


def transaction_mode(t: mvcc.Table) -> int:
    return t.transaction().operation.update_mode


def test_rewrite_columns_nested_and_null_into_non_nullable(tmp_uri) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("s", pa.struct([("x", pa.int64())]))])
    t = mvcc.write_table(pa.table({"id": [1, 2, 3], "s": [{"x": 1}, {"x": 2}, None]}, schema=schema), tmp_uri)
    t.update({"s": "s"}, where="s.x = 2", mode="rewrite_columns")
    assert t.to_table().column("s").to_pylist() == [{"x": 1}, {"x": 2}, None]
    before = sorted(p.relative_to(tmp_uri) for p in Path(tmp_uri).rglob("*"))
    with pytest.raises(mvcc.SchemaError, match="id"):
        t.update({"id": None}, where="id = 1", mode="rewrite_columns")
    assert sorted(p.relative_to(tmp_uri) for p in Path(tmp_uri).rglob("*")) == before
