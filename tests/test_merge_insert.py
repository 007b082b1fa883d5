"""merge_insert (upsert) against a plain-Python oracle."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core.ops.merge_insert import key_hash

SCHEMA = pa.schema([("id", pa.int64()), ("grp", pa.string()), ("v", pa.float64())])


def table(rows: list[tuple]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in rows], schema=SCHEMA)


def content(t: mvcc.Table) -> list[tuple]:
    return sorted((tuple(r.values()) for r in t.to_table().to_pylist()), key=repr)


def oracle_upsert(rows, source, on, update=True, insert=True, delete_by_source=None, condition=None):
    """The expected rows, computed in plain Python; `delete_by_source` is a predicate over a row or True."""
    key = lambda r: tuple(r[SCHEMA.names.index(c)] for c in on)  # noqa: E731
    by_key = {key(s): s for s in source if None not in key(s)}
    out = []
    for r in rows:
        k = key(r)
        if None not in k and k in by_key:
            out.append(by_key[k] if update and (condition is None or condition(by_key[k], r)) else r)
        elif delete_by_source is True or (delete_by_source and delete_by_source(r)):
            continue
        else:
            out.append(r)
    target_keys = {key(r) for r in rows if None not in key(r)}
    if insert:
        out += [s for s in source if None in key(s) or key(s) not in target_keys]
    return sorted(out, key=repr)


def test_upserts_match_oracle_with_reopen_and_time_travel(any_uri) -> None:
    uri, opts = any_uri
    rows = [(i, "a" if i % 2 else "b", float(i)) for i in range(30)]
    t = mvcc.write_table(table(rows), uri, storage_options=opts, max_rows_per_file=10)
    history = {1: sorted(rows, key=repr)}

    source = [(3, "x", 3.5), (17, "x", 1.0), (40, "y", 4.0), (None, "n", 0.0)]
    stats = t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(table(source))
    assert stats == {"num_inserted_rows": 2, "num_updated_rows": 2, "num_deleted_rows": 0}
    rows = oracle_upsert(rows, source, ["id"])
    assert content(t) == rows
    history[t.version] = rows

    source = [(5, "z", 100.0), (6, "z", -1.0), (41, "z", 0.0)]  # update only where source.v > target.v
    t.merge_insert("id").when_matched_update_all("source.v > target.v").execute(table(source))
    rows = oracle_upsert(rows, source, ["id"], insert=False, condition=lambda s, r: s[2] > r[2])
    assert content(t) == rows
    history[t.version] = rows

    source = [(i, "k", 0.0) for i in range(0, 20)]
    stats = t.merge_insert("id").when_not_matched_by_source_delete("grp = 'a'").execute(table(source))
    rows = oracle_upsert(rows, source, ["id"], update=False, insert=False, delete_by_source=lambda r: r[1] == "a")
    assert stats["num_deleted_rows"] > 0 and content(t) == rows
    history[t.version] = rows

    source = [(1, "b", 9.0), (100, "q", 1.0)]
    t.merge_insert(
        "id"
    ).when_matched_update_all().when_not_matched_insert_all().when_not_matched_by_source_delete().execute(table(source))
    rows = oracle_upsert(rows, source, ["id"], delete_by_source=True)
    assert content(t) == rows
    history[t.version] = rows

    reopened = mvcc.open_table(uri, storage_options=opts)
    assert content(reopened) == rows
    for version, expected in history.items():
        assert content(reopened.checkout(version)) == expected, version
    assert [v.operation for v in reopened.versions()] == ["Overwrite"] + ["Update"] * 4


def test_composite_keys_and_inserted_rows_filter(tmp_path) -> None:
    rows = [(i % 5, "a" if i < 5 else "b", float(i)) for i in range(10)]
    t = mvcc.write_table(table(rows), str(tmp_path / "t"), max_rows_per_file=3)
    source = [(0, "a", -1.0), (0, "c", -2.0), (4, "b", -3.0), (4, None, -4.0)]
    stats = t.merge_insert(["id", "grp"]).when_matched_update_all().when_not_matched_insert_all().execute(table(source))
    assert stats == {"num_inserted_rows": 2, "num_updated_rows": 2, "num_deleted_rows": 0}
    assert content(t) == oracle_upsert(rows, source, ["id", "grp"])
    txn = t.transaction()
    ids = {f.name: f.id for f in t.manifest.fields}
    assert list(txn.operation.inserted_rows.field_ids) == [ids["id"], ids["grp"]]
    assert sorted(txn.operation.inserted_rows.key_hashes) == sorted([key_hash([0, "c"]), key_hash([4, None])])
    assert len(txn.operation.fields_modified) == 1  # v: every non-key column


def test_nothing_to_do_commits_nothing(tmp_path) -> None:
    t = mvcc.write_table(table([(1, "a", 1.0)]), str(tmp_path / "t"))
    stats = t.merge_insert("id").when_matched_update_all().execute(table([(2, "b", 2.0)]))
    assert stats == {"num_inserted_rows": 0, "num_updated_rows": 0, "num_deleted_rows": 0}
    assert t.latest_version == 1


def test_stable_row_ids_survive_upserts(tmp_path) -> None:
    t = mvcc.write_table(table([(i, "a", 0.0) for i in range(6)]), str(tmp_path / "t"), enable_stable_row_ids=True)
    t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
        table([(2, "u", 1.0), (9, "i", 1.0)])
    )
    got = {r["id"]: r["_rowid"] for r in t.to_table(with_row_id=True).to_pylist()}
    assert got == {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 9: 6}


@pytest.mark.parametrize(
    ("on", "source", "match"),
    [
        ("nope", table([(1, "a", 1.0)]), "nope"),
        ("id", table([(1, "a", 1.0), (1, "b", 2.0)]), "unique"),
        ("id", pa.table({"id": ["x"], "grp": ["a"], "v": [1.0]}), "id"),
        ("id", pa.table({"id": [1], "v": [1.0], "zz": [1]}), "zz"),  # a missing column is fine (pylance's)
        ("id", pa.table({"v": [1.0]}), "key column"),
    ],
)
def test_bad_input_leaves_table_unchanged(tmp_path, on, source, match) -> None:
    uri = str(tmp_path / "t")
    t = mvcc.write_table(table([(1, "a", 1.0), (2, "b", 2.0)]), uri)
    before = sorted(p.relative_to(uri) for p in Path(uri).rglob("*"))
    with pytest.raises(mvcc.SchemaError, match=match):
        t.merge_insert(on).when_matched_update_all().when_not_matched_insert_all().execute(source)
    with pytest.raises(mvcc.errors.PredicateError):
        t.merge_insert("id").when_matched_update_all("source.nope > 1").execute(table([(1, "a", 1.0)]))
    assert sorted(p.relative_to(uri) for p in Path(uri).rglob("*")) == before
    assert t.latest_version == 1


def test_concurrent_upserts_of_the_same_fragment(tmp_path) -> None:
    uri = str(tmp_path / "t")
    mvcc.write_table(table([(i, "a", 0.0) for i in range(10)]), uri)
    a, b, c = mvcc.open_table(uri), mvcc.open_table(uri), mvcc.open_table(uri)
    a.merge_insert("id").when_matched_update_all().execute(table([(1, "a", 1.0)]))
    b.merge_insert("id").when_matched_update_all().execute(table([(2, "b", 2.0)]))  # other row: rebased
    assert [r for r in content(mvcc.open_table(uri)) if r[2]] == [(1, "a", 1.0), (2, "b", 2.0)]
    data_files = sorted((Path(uri) / "data").iterdir())
    with pytest.raises(mvcc.RetryableConflictError) as info:  # the same row: retryable
        c.merge_insert("id").when_matched_update_all().execute(table([(2, "c", 3.0)]))
    assert info.value.row_addresses == [2]
    assert sorted((Path(uri) / "data").iterdir()) == data_files  # c's files were removed
    mvcc.open_table(uri).merge_insert("id").when_matched_update_all().execute(table([(2, "c", 3.0)]))
    assert [r for r in content(mvcc.open_table(uri)) if r[2]] == [(1, "a", 1.0), (2, "c", 3.0)]


def test_failure_after_writing_leaves_no_files(tmp_path, monkeypatch) -> None:
    uri = str(tmp_path / "t")
    t = mvcc.write_table(table([(i, "a", 0.0) for i in range(4)]), uri, enable_stable_row_ids=True)
    before = sorted(p.relative_to(uri) for p in Path(uri).rglob("*"))

    def fail(*args, **kwargs):
        raise OSError("injected")

    monkeypatch.setattr("mvcc_core.ops.merge_insert.delete_addresses", fail)  # after both data writes
    with pytest.raises(OSError, match="injected"):
        t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
            table([(1, "u", 1.0), (9, "i", 1.0)])
        )
    monkeypatch.undo()
    monkeypatch.setattr("mvcc_core.ops.merge_insert.row_ids.split", fail)  # between the two data writes
    with pytest.raises(OSError, match="injected"):
        t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
            table([(1, "u", 1.0), (9, "i", 1.0)])
        )
    assert sorted(p.relative_to(uri) for p in Path(uri).rglob("*")) == before
    assert t.latest_version == 1


def test_concurrent_upserts_inserting_the_same_new_key_conflict(tmp_path) -> None:
    uri = str(tmp_path / "t")
    mvcc.write_table(table([(1, "a", 0.0)]), uri)
    a, b, c = mvcc.open_table(uri), mvcc.open_table(uri), mvcc.open_table(uri)
    a.merge_insert("id").when_not_matched_insert_all().execute(table([(7, "a", 1.0)]))
    c.merge_insert("id").when_not_matched_insert_all().execute(table([(8, "c", 1.0)]))  # another key: lands
    with pytest.raises(mvcc.RetryableConflictError, match="same new key"):
        b.merge_insert("id").when_not_matched_insert_all().execute(table([(7, "b", 2.0)]))
    mvcc.open_table(uri).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
        table([(7, "b", 2.0)])
    )
    assert content(mvcc.open_table(uri)) == [(1, "a", 0.0), (7, "b", 2.0), (8, "c", 1.0)]


@pytest.mark.parametrize("key", ["id", "grp"])
def test_random_upsert_sequences_match_oracle(tmp_path, key) -> None:
    """The target scan keeps only rows whose key is among the source's (a semi-join on an integer or string
    key): random sources (present, absent and NULL keys, over several files) against the oracle."""
    import random

    rng = random.Random(31)
    schema_index = SCHEMA.names.index(key)

    def make(i: int) -> tuple:
        return (i, f"g{i}", float(i)) if key == "grp" else (i, rng.choice("ab"), float(i))

    rows = [make(i) for i in range(0, 80, 2)]
    t = mvcc.write_table(table(rows), str(tmp_path / "t"), max_rows_per_file=7)
    for round_ in range(6):
        picked = rng.sample(range(-5, 100), rng.randint(1, 15))
        source = [(i, f"g{i}", float(-round_)) if key == "grp" else (i, "s", float(-round_)) for i in picked]
        if rng.random() < 0.3:
            source.append((None, None, 1.0) if key == "grp" else (None, "n", 1.0))
        if key == "grp":  # keys unique in the source: the string column is the key
            source = list({s[schema_index]: s for s in source}.values())
        t.merge_insert(key).when_matched_update_all().when_not_matched_insert_all().execute(table(source))
        rows = oracle_upsert(rows, source, [key])
        assert content(t) == rows, round_


@pytest.mark.parametrize("key_type", [pa.int64(), pa.string()])
def test_null_keys_on_both_sides_match_nothing(tmp_path, key_type: pa.DataType) -> None:
    """A NULL target key is not the NULL source key: that target row stays, that source row is inserted."""
    keys = [1, None, 2, None] if key_type == pa.int64() else ["a", None, "b", None]
    t = mvcc.write_table(pa.table({"k": pa.array(keys, key_type), "v": [1, 2, 3, 4]}), str(tmp_path / "t"))
    new = [None, keys[0]]
    source = pa.table({"k": pa.array(new, key_type), "v": [10, 20]})
    stats = t.merge_insert("k").when_matched_update_all().when_not_matched_insert_all().execute(source)
    assert (stats["num_updated_rows"], stats["num_inserted_rows"]) == (1, 1)
    got = sorted(t.to_table().to_pylist(), key=lambda r: r["v"])
    assert got == [
        {"k": None, "v": 2},
        {"k": keys[2], "v": 3},
        {"k": None, "v": 4},
        {"k": None, "v": 10},
        {"k": keys[0], "v": 20},
    ]
    # every target row joins when unmatched ones are deleted: the NULL ones are unmatched too
    t = mvcc.write_table(pa.table({"k": pa.array(keys, key_type), "v": [1, 2, 3, 4]}), str(tmp_path / "u"))
    builder = t.merge_insert("k").when_matched_update_all().when_not_matched_insert_all()
    builder.when_not_matched_by_source_delete().execute(source)
    assert sorted(t.to_table().to_pylist(), key=lambda r: r["v"]) == [{"k": None, "v": 10}, {"k": keys[0], "v": 20}]
