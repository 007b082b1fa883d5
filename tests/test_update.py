"""Update (REWRITE_ROWS) against a plain-Python oracle."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core.transaction import read_transaction


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


def test_update_matches_oracle(any_uri) -> None:
    uri, opts = any_uri
    t = mvcc.write_table(data(40), uri, storage_options=opts, max_rows_per_file=10)
    rows = {r["id"]: dict(r) for r in data(40).to_pylist()}
    assert t.update({"price": "price * 2 + 1", "name": "'cheap'"}, where="id < 15 AND name IS NOT NULL") == {
        "num_rows_updated": 12
    }
    for i, r in rows.items():
        if i < 15 and r["name"] is not None:
            r["price"], r["name"] = i * 2.0 + 1, "cheap"
    assert by_id(t) == rows
    t.update({"name": None}, where="id >= 35")
    for i in range(35, 40):
        rows[i]["name"] = None
    t.update({"price": 0})  # every row
    for r in rows.values():
        r["price"] = 0.0
    reopened = mvcc.open_table(uri, storage_options=opts)
    assert by_id(reopened) == rows and reopened.count_rows() == 40
    assert [v.operation for v in reopened.versions()] == ["Overwrite", "Update", "Update", "Update"]
    assert by_id(reopened.checkout(1)) == {r["id"]: r for r in data(40).to_pylist()}
    txn = read_transaction(reopened._store, reopened.checkout(2).manifest.transaction_file)
    ids = {f.name: f.id for f in reopened.manifest.fields}
    assert sorted(txn.operation.fields_modified) == sorted([ids["price"], ids["name"]])
    assert txn.operation.update_mode == 0  # REWRITE_ROWS


def test_update_no_match_commits_nothing(tmp_uri) -> None:
    t = mvcc.write_table(data(5), tmp_uri)
    assert t.update({"price": 1}, where="id > 100") == {"num_rows_updated": 0}
    assert t.latest_version() == 1


def test_bad_update_values_leave_table_unchanged(tmp_uri) -> None:
    t = mvcc.write_table(data(5), tmp_uri)
    before = sorted(p.relative_to(tmp_uri) for p in Path(tmp_uri).rglob("*"))
    with pytest.raises(mvcc.SchemaError, match="nope"):
        t.update({"nope": 1})
    with pytest.raises(mvcc.SchemaError, match="price"):
        t.update({"price": "name"})  # a string column into a double
    with pytest.raises(mvcc.SchemaError, match="price"):
        t.update({"price": "'not a number'"})
    with pytest.raises(mvcc.PredicateError):
        t.update({"price": "unknown_col + 1"})
    with pytest.raises(mvcc.PredicateError):
        t.update({"price": 1}, where="id = = 1")
    assert sorted(p.relative_to(tmp_uri) for p in Path(tmp_uri).rglob("*")) == before
    assert t.latest_version() == 1


def test_update_racing_a_delete_of_the_same_fragment_is_retryable(tmp_uri) -> None:
    mvcc.write_table(data(10), tmp_uri)
    a, b = mvcc.open_table(tmp_uri), mvcc.open_table(tmp_uri)
    a.delete("id = 1")
    with pytest.raises(mvcc.RetryableConflictError):
        b.update({"price": 9}, where="id = 2")
    assert len(list((Path(tmp_uri) / "data").iterdir())) == 1  # b's new data file was removed
    mvcc.open_table(tmp_uri).update({"price": 9}, where="id = 2")
    assert by_id(mvcc.open_table(tmp_uri))[2]["price"] == 9.0
