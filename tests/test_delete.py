"""Delete with deletion vectors, checked against a plain-Python oracle."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyroaring import BitMap64

import mvcc_core as mvcc
from mvcc_core.format.features import FLAG_PACKED_DELETION_FILES


def data(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": [None if i % 7 == 0 else f"n{i}" for i in ids],
            "st": [{"x": i % 3, "y": str(i)} for i in ids],
        }
    )


def oracle(rows: list[dict], keep) -> list[int]:
    return [r["id"] for r in rows if keep(r)]


def test_delete_matches_oracle_and_time_travel(any_uri) -> None:
    uri, opts = any_uri
    t = mvcc.write_table(data(100), uri, storage_options=opts, max_rows_per_file=10)
    rows = data(100).to_pylist()
    t.delete("id % 3 = 0")
    expect_v2 = oracle(rows, lambda r: r["id"] % 3 != 0)
    t.delete("name IS NULL OR id >= 90")
    expect_v3 = oracle(rows, lambda r: r["id"] % 3 != 0 and r["name"] is not None and r["id"] < 90)
    t.delete("st.x = 1 AND id < 50")  # nested column
    expect_v4 = [i for i in expect_v3 if not (i % 3 == 1 and i < 50)]
    assert t.version == 4
    r = mvcc.open_table(uri, storage_options=opts)
    assert r.to_table()["id"].to_pylist() == expect_v4
    assert r.count_rows() == len(expect_v4)  # metadata only
    assert r.count_rows(filter="id < 20") == len([i for i in expect_v4 if i < 20])
    for version, expected in [(1, list(range(100))), (2, expect_v2), (3, expect_v3), (4, expect_v4)]:
        assert r.checkout(version).to_table()["id"].to_pylist() == expected
    assert [v.operation for v in r.versions()] == ["Overwrite", "Delete", "Delete", "Delete"]
    # appends after deletes read back with the old rows still deleted
    r.append(data(5, start=1000))
    assert r.to_table()["id"].to_pylist() == expect_v4 + list(range(1000, 1005))


def test_fully_deleted_fragments_leave_the_manifest(tmp_uri) -> None:
    t = mvcc.write_table(data(30), tmp_uri, max_rows_per_file=10)
    t.delete("id >= 10 AND id < 20")
    assert [f.fragment_id for f in t.get_fragments()] == [0, 2]
    t.delete("id = 25")
    t.delete("id >= 20")  # fragment 2 had one row deleted already: merged, then fully gone
    assert [f.fragment_id for f in t.get_fragments()] == [0]
    assert t.to_table()["id"].to_pylist() == list(range(10))
    txn = t.transaction()
    assert txn.operation.deleted_fragment_ids == [2]
    assert txn.operation.predicate == "id >= 20"
    affected = BitMap64.deserialize(txn.operation.affected_rows)
    assert sorted(affected) == [(2 << 32) | o for o in range(10) if o != 5]


def test_deletion_vector_and_row_addresses(tmp_uri) -> None:
    t = mvcc.write_table(data(20), tmp_uri, max_rows_per_file=10)
    t.delete("id IN (1, 3, 12)")
    frag0, frag1 = t.get_fragments()
    assert frag0.num_deletions == 2 and frag1.num_deletions == 1
    got = t.to_table(columns=["id"], with_row_address=True)
    assert (1 << 32 | 2) not in got["_rowaddr"].to_pylist()  # id 12 is deleted
    assert all(a >> 32 == i // 10 and a & 0xFFFFFFFF == i % 10 for i, a in zip(*got.to_pydict().values(), strict=True))
    # one packed file for the commit (read version 1), each fragment's vector a slice of it
    assert frag0.metadata.deletion_file.id == frag1.metadata.deletion_file.id
    assert os.listdir(Path(tmp_uri) / "_deletions") == [f"1-{frag0.metadata.deletion_file.id}.bin"]
    assert frag0.metadata.deletion_file.content_offset == 0
    assert frag1.metadata.deletion_file.content_offset == frag0.metadata.deletion_file.content_size
    assert t.manifest.reader_feature_flags & FLAG_PACKED_DELETION_FILES
    t.delete("id = 15")  # one fragment: its own file, as before packing
    assert f"1-2-{t.get_fragments()[1].metadata.deletion_file.id}.bin" in os.listdir(Path(tmp_uri) / "_deletions")
    assert t.to_table()["id"].to_pylist() == [i for i in range(20) if i not in (1, 3, 12, 15)]


def test_nulls_in_predicates_delete_nothing(tmp_uri) -> None:
    t = mvcc.write_table(data(10), tmp_uri)
    t.delete("name = NULL")  # unknown, never true
    t.delete("id > 100")
    assert t.version == 1 and t.count_rows() == 10


def test_bad_predicate_leaves_table_unchanged(tmp_uri) -> None:
    t = mvcc.write_table(data(10), tmp_uri)
    before = sorted(p.relative_to(tmp_uri) for p in Path(tmp_uri).rglob("*"))
    for bad in ("nope = 1", "id = = 2", "name > 3"):
        with pytest.raises(mvcc.errors.PredicateError):
            t.delete(bad)
    assert sorted(p.relative_to(tmp_uri) for p in Path(tmp_uri).rglob("*")) == before
    assert t.latest_version == 1


def test_delete_races(tmp_uri) -> None:
    mvcc.write_table(data(30), tmp_uri, max_rows_per_file=10)
    a, b, c = (mvcc.open_table(tmp_uri) for _ in range(3))
    a.append(data(5, start=100))
    b.delete("id < 5")  # compatible with a concurrent append
    assert b.to_table()["id"].to_pylist() == list(range(5, 30)) + list(range(100, 105))
    # other rows of the same fragment deleted concurrently: rebased, both deletions land
    e = mvcc.open_table(tmp_uri)
    c.delete("id = 7")
    assert sorted(c.to_table()["id"].to_pylist()) == [i for i in range(5, 30) if i != 7] + list(range(100, 105))
    # b's vector (still in b's version) and the merged one; c's first vector was removed after the rebase
    assert len(list((Path(tmp_uri) / "_deletions").iterdir())) == 2
    # the same row deleted concurrently: retryable, naming the row
    with pytest.raises(mvcc.RetryableConflictError, match="0:7") as info:
        e.delete("id = 7 OR id = 8")
    assert info.value.row_addresses == [7]
    d = mvcc.open_table(tmp_uri)
    mvcc.open_table(tmp_uri).restore(1)
    with pytest.raises(mvcc.IncompatibleConflictError):
        d.delete("id = 8")


def test_row_changes_after_a_nested_field_is_dropped(tmp_uri) -> None:
    """Data files still hold the dropped struct field: the row-address scan reads the narrower struct."""
    t = mvcc.write_table(data(40), tmp_uri, max_rows_per_file=7)
    t.drop_columns("st.x")
    t.delete("id % 5 = 0 OR st.y = '13'")
    t.update({"name": "'u'"}, where="id > 30")
    t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
        pa.table({"id": [1, 99], "name": ["m1", "m99"], "st": pa.array([{"y": "a"}, {"y": "b"}])})
    )
    out = {r["id"]: r for r in mvcc.open_table(tmp_uri).to_table().to_pylist()}
    kept = [i for i in range(40) if i % 5 and i != 13] + [99]
    assert sorted(out) == sorted(kept)
    assert out[1] == {"id": 1, "name": "m1", "st": {"y": "a"}}
    assert out[31] == {"id": 31, "name": "u", "st": {"y": "31"}}
    assert out[2]["st"] == {"y": "2"}


def test_row_count_disagreeing_with_the_manifest_is_corrupt(tmp_uri) -> None:
    """A data file replaced by one of another length must not shift row addresses silently."""
    t = mvcc.write_table(data(20), tmp_uri, max_rows_per_file=10)
    path = Path(tmp_uri.removeprefix("file://")) / "data" / t.manifest.fragments[1].files[0].path
    original = pq.read_table(path)
    pq.write_table(data(9, 10).rename_columns(original.column_names).cast(original.schema), path)
    with pytest.raises(mvcc.errors.CorruptManifestError, match="9 rows"):
        t.delete("id % 2 = 0")  # not prunable by statistics: every file is read
    assert mvcc.open_table(tmp_uri).version == 1


def test_table_of_per_fragment_deletion_files_stays_readable_and_writable(tmp_path) -> None:
    """A table written before packed deletion files (a checked-in fixture: 3 fragments of 4 rows, ids 1, 5, 6
    deleted, one deletion file per fragment) reads as before; a delete on top packs, and reads both kinds."""
    uri = tmp_path / "t"
    shutil.copytree(Path(__file__).parent / "fixtures" / "per_fragment_deletions", uri)
    t = mvcc.open_table(str(uri))
    assert not t.manifest.reader_feature_flags & FLAG_PACKED_DELETION_FILES
    assert t.to_table()["id"].to_pylist() == [0, 2, 3, 4, 7, 8, 9, 10, 11]
    assert t.count_rows("id < 6") == 4
    t.delete("id IN (0, 2, 7, 9)")  # fragments 0, 1 (old files merged into a packed one) and 2
    assert t.manifest.reader_feature_flags & FLAG_PACKED_DELETION_FILES
    assert mvcc.open_table(str(uri)).to_table()["id"].to_pylist() == [3, 4, 8, 10, 11]
    assert mvcc.open_table(str(uri), version=2).to_table()["id"].to_pylist() == [0, 2, 3, 4, 7, 8, 9, 10, 11]


def test_a_long_in_list_is_recorded_as_its_range(tmp_uri) -> None:
    """A GDPR-style delete of thousands of keys records the keys' range, not the list; the rows deleted, the
    affected addresses and conflicts with a concurrent delete are as before."""
    t = mvcc.write_table(data(3_000), tmp_uri, max_rows_per_file=500)
    gone = list(range(1, 3_000, 3))
    predicate = f"id IN ({', '.join(str(i) for i in gone)})"
    assert len(predicate) > 4_096
    other = mvcc.open_table(tmp_uri)
    assert t.delete(predicate)["num_deleted_rows"] == len(gone)
    assert t.transaction().operation.predicate == '"id" >= 1 AND "id" <= 2998'
    assert len(BitMap64.deserialize(t.transaction().operation.affected_rows)) == len(gone)
    assert sorted(t.to_table()["id"].to_pylist()) == sorted(set(range(3_000)) - set(gone))
    with pytest.raises(mvcc.RetryableConflictError):  # the same rows: still told apart by their addresses
        other.delete("id IN (4, 7)")
    t.delete("id = 0 OR id IN (2, 5)")  # short, or not one IN list: kept whole
    assert t.transaction().operation.predicate == "id = 0 OR id IN (2, 5)"


def test_a_catalog_branch_runs_a_long_in_list_again_whole(tmp_path) -> None:
    """A catalog branch records its delete's predicate whole (the Delete itself records the range): a publish
    after main changed the same rows runs that text again on main's rows, where the range would delete rows the
    list does not name."""
    from catalog_helpers import make

    cat = make(str(tmp_path / "cat"), tables=("s.a",))  # ids 1, 2, 3
    with cat.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": list(range(4, 3_000))}))
    cat.create_branch("dev")
    gone = list(range(1, 3_000, 3))
    with cat.transaction(branch="dev") as tx:
        tx.table("s.a").delete(f"id IN ({', '.join(str(i) for i in gone)})")
    with cat.transaction() as tx:  # the same row on main: the publish runs the branch's delete again
        tx.table("s.a").delete("id = 1")
    cat.publish_branch("dev")
    assert sorted(cat.table("s.a").to_table()["id"].to_pylist()) == sorted(set(range(1, 3_000)) - set(gone))
