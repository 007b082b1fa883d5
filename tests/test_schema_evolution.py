"""Schema evolution (add_columns / merge, drop_columns / alter_columns, replace_column) against an oracle."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import mvcc_core as mvcc


def data(n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "price": pa.array([i * 1.5 for i in range(n)], pa.float64()),
            "s": pa.array(
                [{"x": i, "y": f"y{i}"} for i in range(n)], pa.struct([("x", pa.int64()), ("y", pa.string())])
            ),
        }
    )


def rows(t: mvcc.Table) -> list[dict]:
    return sorted(t.to_table().to_pylist(), key=lambda r: r[next(iter(r))])


def files(uri: str) -> list[Path]:
    return sorted(p.relative_to(uri) for p in Path(uri).rglob("*"))


@pytest.mark.slow
def test_evolution_matches_oracle_with_time_travel(any_uri) -> None:
    uri, opts = any_uri
    t = mvcc.write_table(data(30), uri, storage_options=opts, max_rows_per_file=10)
    oracle = [dict(r) for r in data(30).to_pylist()]
    history = {t.version: [dict(r) for r in oracle]}

    def check() -> None:
        history[t.version] = [dict(r) for r in oracle]
        assert rows(t) == sorted(oracle, key=lambda r: r[next(iter(r))])

    t.delete("id IN (4, 25)")
    oracle = [r for r in oracle if r["id"] not in (4, 25)]
    check()
    t.add_columns({"double": "price * 2", "one": "1", "sx": "s.x + id"})
    for r in oracle:
        r.update(double=r["price"] * 2, one=1, sx=r["s"]["x"] + r["id"])
    check()
    t.add_columns(pa.field("note", pa.string()))
    for r in oracle:
        r["note"] = None
    check()
    t.merge(pa.table({"key": pa.array([1, 2, 25, 99], pa.int64()), "tag": ["a", "b", "c", "d"]}), "id", "key")
    for r in oracle:
        r["tag"] = {1: "a", 2: "b"}.get(r["id"])
    check()
    t.alter_columns({"path": "price", "name": "cost"}, {"path": "s.x", "name": "xx"})
    for r in oracle:
        r["cost"] = r.pop("price")
        r["s"] = {"xx": r["s"]["x"], "y": r["s"]["y"]}
    oracle = [{k: r[k] for k in ["id", "cost", "s", "double", "one", "sx", "note", "tag"]} for r in oracle]
    check()
    assert t.to_table(filter="s.xx >= 28 AND cost > 0").column("id").to_pylist() == [28, 29]  # pushed down
    t.drop_columns(["one", "s.y"])
    for r in oracle:
        del r["one"]
        r["s"] = {"xx": r["s"]["xx"]}
    check()
    new = {"id": 100, "cost": 1.0, "s": {"xx": 5}, "double": 2.0, "sx": 7, "note": "n", "tag": "t"}
    t.append(pa.Table.from_pylist([new], schema=t.schema))
    oracle.append(dict(new))
    check()
    t.replace_column("note", {0: [f"r{i}" for i in range(10)]})  # fragment 0: physical rows 0..9, 4 deleted
    for r in oracle:
        if r["id"] < 10:
            r["note"] = f"r{r['id']}"
    check()
    assert [v.operation for v in t.versions()] == [
        "Overwrite", "Delete", "Merge", "Merge", "Merge", "Project", "Project", "Append", "DataReplacement"
    ]  # fmt: skip
    reopened = mvcc.open_table(uri, storage_options=opts)
    assert rows(reopened) == sorted(oracle, key=lambda r: r["id"])
    for version, expected in history.items():
        assert rows(reopened.checkout(version)) == sorted(expected, key=lambda r: r[next(iter(r))]), version


def test_dropped_column_re_added_under_its_name_does_not_see_old_data(tmp_uri) -> None:
    t = mvcc.write_table(data(5), tmp_uri)
    t.drop_columns("price")
    t.add_columns(pa.field("price", pa.float64()))
    assert t.to_table().column("price").to_pylist() == [None] * 5
    assert t.checkout(1).to_table().column("price").to_pylist() == [i * 1.5 for i in range(5)]
    t.alter_columns({"path": "id", "name": "price_id"})
    t.alter_columns({"path": "price", "nullable": True})
    assert t.count_rows("price_id > 2") == 2


def test_drop_and_rename_are_metadata_only(tmp_uri) -> None:
    t = mvcc.write_table(data(10), tmp_uri, max_rows_per_file=5)
    data_files = sorted((Path(tmp_uri) / "data").iterdir())
    t.drop_columns(["price"])
    t.alter_columns({"path": "s", "name": "nested"})
    assert sorted((Path(tmp_uri) / "data").iterdir()) == data_files
    assert t.schema.names == ["id", "nested"]


def test_add_columns_on_empty_table_and_null_merge_keys(tmp_uri) -> None:
    t = mvcc.write_table(data(0), tmp_uri)
    t.add_columns({"p2": "price + 1"})
    assert t.schema.names == ["id", "price", "s", "p2"] and t.count_rows() == 0
    t.append(pa.Table.from_pylist([{"id": 1, "price": 1.0, "s": {"x": 1, "y": "a"}, "p2": 2.0}], schema=t.schema))
    t.merge(pa.table({"id": pa.array([None, 1], pa.int64()), "w": [10, 20]}), "id")
    assert t.to_table(columns=["id", "w"]).to_pylist() == [{"id": 1, "w": 20}]


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda t: t.add_columns({"id": "price"}), mvcc.SchemaError, "already exist"),
        (lambda t: t.add_columns({"z": "nope + 1"}), mvcc.errors.PredicateError, "nope"),
        (lambda t: t.add_columns({"z": "10 / (id - 3)"}), mvcc.SchemaError, "cannot compute"),
        (lambda t: t.add_columns(pa.field("z", pa.int64(), nullable=False)), mvcc.SchemaError, "nullable"),
        (lambda t: t.add_columns(42), mvcc.SchemaError, "dict"),
        (lambda t: t.merge(pa.table({"id": [1, 1], "w": [1, 2]}), "id"), mvcc.SchemaError, "duplicate"),
        (lambda t: t.merge(pa.table({"id": ["a"], "w": [1]}), "id"), mvcc.SchemaError, "key types"),
        (lambda t: t.merge(pa.table({"k": [1], "w": [1]}), "id"), mvcc.SchemaError, "'id'"),
        (lambda t: t.drop_columns(["nope"]), mvcc.SchemaError, "nope"),
        (lambda t: t.drop_columns(["id", "price", "s"]), mvcc.SchemaError, "every column"),
        (lambda t: t.drop_columns(["s.x", "s.y"]), mvcc.SchemaError, "last field"),
        (lambda t: t.drop_columns(["price.x"]), mvcc.SchemaError, "not a struct"),
        (lambda t: t.alter_columns({"path": "id", "name": "price"}), mvcc.SchemaError, "exists"),
        (lambda t: t.alter_columns({"path": "s.z", "name": "w"}), mvcc.SchemaError, 'Column "z" does not exist'),
        (lambda t: t.alter_columns({"path": "price", "nullable": False}), mvcc.SchemaError, "non-nullable"),
        (lambda t: t.alter_columns({"path": "id", "data_type": pa.list_(pa.int64())}), mvcc.SchemaError, "type"),
        (lambda t: t.alter_columns({"path": "id", "colour": "red"}), mvcc.SchemaError, "colour"),
        (lambda t: t.replace_column("price", {0: [1.0, 2.0]}), mvcc.SchemaError, "5 rows"),
        (lambda t: t.replace_column("price", {0: ["a"] * 5}), mvcc.SchemaError, "double"),
        (lambda t: t.replace_column("price", {7: [1.0] * 5}), mvcc.SchemaError, "fragment"),
        (lambda t: t.replace_column("nope", {0: [1.0] * 5}), mvcc.SchemaError, "nope"),
    ],
)
def test_bad_input_leaves_table_unchanged(tmp_uri, call, error, match) -> None:
    t = mvcc.write_table(data(10), tmp_uri, max_rows_per_file=5)
    before = files(tmp_uri)
    with pytest.raises(error, match=match):
        call(t)
    assert files(tmp_uri) == before
    assert mvcc.open_table(tmp_uri).version == 1 and rows(mvcc.open_table(tmp_uri)) == data(10).to_pylist()


def test_add_columns_racing_an_append_is_retryable_and_leaves_nothing(tmp_uri) -> None:
    mvcc.write_table(data(10), tmp_uri)
    a, b = mvcc.open_table(tmp_uri), mvcc.open_table(tmp_uri)
    a.append(data(2))
    data_files = sorted((Path(tmp_uri) / "data").iterdir())
    with pytest.raises(mvcc.RetryableConflictError):
        b.add_columns({"p2": "price * 2"})
    assert sorted((Path(tmp_uri) / "data").iterdir()) == data_files  # b's column files were removed
    fresh = mvcc.open_table(tmp_uri)
    fresh.add_columns({"p2": "price * 2"})
    assert fresh.to_table(columns=["p2"]).column(0).to_pylist() == [i * 3.0 for i in range(10)] + [0.0, 3.0]


def test_replace_column_of_a_nested_column_and_tombstones(tmp_uri) -> None:
    t = mvcc.write_table(data(4), tmp_uri)
    t.replace_column("s", {0: [{"x": -i, "y": "new"} for i in range(4)]})
    assert t.to_table().column("s").to_pylist() == [{"x": -i, "y": "new"} for i in range(4)]
    (frag,) = t.get_fragments()
    ids = {f.name: f.id for f in t.manifest.fields}
    assert [list(f.fields) for f in frag.data_files()] == [
        [ids["id"], ids["price"], -2, -2, -2],
        [ids["s"], ids["x"], ids["y"]],
    ]
    assert t.checkout(1).to_table().column("s").to_pylist() == data(4).column("s").to_pylist()
