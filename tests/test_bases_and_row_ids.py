"""Base paths (UpdateBases), MemWAL state (UpdateMemWalState) and stable row ids."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core.format import features
from mvcc_core.table import DatasetBasePath


def data(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "v": pa.array([0] * n, pa.int64())})


# ---- base paths ------------------------------------------------------------------------------


def test_data_written_to_a_second_base_is_read_back(any_uri, tmp_path) -> None:
    uri, opts = any_uri
    extra = uri + "-extra" if "://" in uri else str(tmp_path / "extra")
    t = mvcc.write_table(data(0, 5), uri, storage_options=opts)
    t.add_bases([DatasetBasePath(extra, name="cold"), DatasetBasePath(extra + "-root", is_dataset_root=True)])
    bases = {b.path: b for b in t.manifest.base_paths}
    assert sorted(b.id for b in bases.values()) == [1, 2] and bases[extra].name == "cold"
    t.append(data(10, 3), target_base="cold")
    t.append(data(20, 2), target_base=bases[extra + "-root"].id)
    t.delete("id = 11")
    reopened = mvcc.open_table(uri, storage_options=opts)
    assert sorted(reopened.to_table().column("id").to_pylist()) == [0, 1, 2, 3, 4, 10, 12, 20, 21]
    assert [f.data_files()[0].base_id for f in reopened.get_fragments() if f.data_files()[0].base_id is not None] == [
        1,
        2,
    ]
    assert reopened.manifest.reader_feature_flags & features.FLAG_BASE_PATHS
    if "://" not in uri:
        assert len(list(Path(extra).glob("*.parquet"))) == 1
        assert len(list((Path(extra + "-root") / "data").glob("*.parquet"))) == 1


def test_clashing_base_paths_are_refused(tmp_path) -> None:
    t = mvcc.write_table(data(0, 2), str(tmp_path / "t"))
    t.add_bases([DatasetBasePath(str(tmp_path / "a"), name="a")])
    for bad in (
        [DatasetBasePath(str(tmp_path / "a"), name="other")],  # same path
        [DatasetBasePath(str(tmp_path / "b"), name="a")],  # same name
        [DatasetBasePath(str(tmp_path / "c")), DatasetBasePath(str(tmp_path / "c"))],  # twice
        [DatasetBasePath(t.uri)],  # the table itself
        [DatasetBasePath("")],
        [],
    ):
        with pytest.raises(mvcc.errors.BasePathError):
            t.add_bases(bad)
    with pytest.raises(mvcc.errors.BasePathError, match="nope"):
        t.append(data(5, 1), target_base="nope")
    assert t.latest_version == 2 and len(list((tmp_path / "t" / "data").iterdir())) == 1


def test_concurrent_add_bases_get_distinct_ids_or_clash(tmp_path) -> None:
    mvcc.write_table(data(0, 2), str(tmp_path / "t"))
    a, b = mvcc.open_table(str(tmp_path / "t")), mvcc.open_table(str(tmp_path / "t"))
    a.add_bases([DatasetBasePath(str(tmp_path / "x"), name="x")])
    b.add_bases([DatasetBasePath(str(tmp_path / "y"), name="y")])  # different name and path: compatible
    assert sorted(bp.id for bp in mvcc.open_table(str(tmp_path / "t")).manifest.base_paths) == [1, 2]
    c, d = mvcc.open_table(str(tmp_path / "t")), mvcc.open_table(str(tmp_path / "t"))
    c.add_bases([DatasetBasePath(str(tmp_path / "z"), name="z")])
    with pytest.raises(mvcc.IncompatibleConflictError):
        d.add_bases([DatasetBasePath(str(tmp_path / "z2"), name="z")])


# ---- MemWAL state ----------------------------------------------------------------------------


def test_mem_wal_generations_through_update_mem_wal_state_and_update(any_uri) -> None:
    uri, opts = any_uri
    t = mvcc.write_table(data(0, 5), uri, storage_options=opts)
    r1, r2 = uuid.uuid4(), uuid.uuid4()
    assert t.list_indices() == []
    t.mark_generations_merged({r1: 1, str(r2): 4})
    t.update({"v": 1}, where="id = 2", merged_generations={r1: 2})
    reopened = mvcc.open_table(uri, storage_options=opts)
    assert reopened.mem_wal_state() == {str(r1): 2, str(r2): 4}
    (index,) = reopened.list_indices()
    assert index["name"] == "__lance_mem_wal" and index["regions"] == {str(r1): 2, str(r2): 4}
    txn = reopened.transaction()
    assert txn.operation.name == "Update" and [g.generation for g in txn.operation.merged_generations] == [2]
    assert reopened.checkout(2).mem_wal_state() == {str(r1): 1, str(r2): 4}
    for bad in ({r1: 2}, {"not-a-uuid": 1}, {r1: -1}, {}):
        with pytest.raises(ValueError):
            reopened.mark_generations_merged(bad)
    assert reopened.latest_version == 3


def test_concurrent_mem_wal_updates_of_one_region_conflict(tmp_path) -> None:
    mvcc.write_table(data(0, 2), str(tmp_path / "t"))
    a, b = mvcc.open_table(str(tmp_path / "t")), mvcc.open_table(str(tmp_path / "t"))
    region = uuid.uuid4()
    a.mark_generations_merged({region: 1})
    with pytest.raises(mvcc.RetryableConflictError):
        b.mark_generations_merged({region: 2})
    mvcc.open_table(str(tmp_path / "t")).mark_generations_merged({region: 2})


# ---- stable row ids --------------------------------------------------------------------------


def row_ids(t: mvcc.Table) -> dict[int, int]:
    return {r["id"]: r["_rowid"] for r in t.to_table(columns=["id"], with_row_id=True).to_pylist()}


@pytest.mark.parametrize("mode", ["rewrite_rows", "rewrite_columns"])
def test_stable_row_ids_survive_updates_and_deletes(any_uri, mode) -> None:
    uri, opts = any_uri
    t = mvcc.write_table(data(0, 30), uri, storage_options=opts, max_rows_per_file=10, enable_stable_row_ids=True)
    assert row_ids(t) == {i: i for i in range(30)}
    t.append(data(30, 5))
    t.update({"v": "v + 1"}, where="id % 3 = 0", mode=mode)
    t.delete("id IN (1, 31)")
    t.update({"v": "v + 1"}, where="id > 25", mode=mode)
    expected = {i: i for i in range(35) if i not in (1, 31)}
    reopened = mvcc.open_table(uri, storage_options=opts)
    assert row_ids(reopened) == expected
    assert reopened.to_table(filter="id = 27").column("v").to_pylist() == [2]
    assert reopened.manifest.next_row_id == 35
    if mode == "rewrite_rows":  # rows moved to new fragments, yet kept their ids
        assert {f.fragment_id for f in reopened.get_fragments()} != {0, 1, 2, 3}
    reopened.restore(2)
    reopened.append(data(40, 1))
    assert row_ids(reopened)[40] == 35  # ids are never reused, also not after a restore


def test_table_without_stable_row_ids_uses_row_addresses(tmp_path) -> None:
    t = mvcc.write_table(data(0, 4), str(tmp_path / "t"), max_rows_per_file=2)
    got = t.to_table(with_row_id=True, with_row_address=True)
    assert got.column("_rowid").to_pylist() == got.column("_rowaddr").to_pylist() == [0, 1, 1 << 32, (1 << 32) + 1]
    assert not t.manifest.reader_feature_flags & features.FLAG_STABLE_ROW_IDS
    assert all(not f.metadata.HasField("row_id_sequence") for f in t.get_fragments())
    with pytest.raises(mvcc.errors.UnsupportedFeatureError, match="created"):
        mvcc.write_table(data(4, 1), str(tmp_path / "t"), mode="append", enable_stable_row_ids=True)


def test_reader_without_the_flag_refuses_the_table(tmp_path, monkeypatch) -> None:
    mvcc.write_table(data(0, 4), str(tmp_path / "t"), enable_stable_row_ids=True)
    monkeypatch.setattr(features, "KNOWN_READER_FLAGS", features.KNOWN_READER_FLAGS & ~features.FLAG_STABLE_ROW_IDS)
    with pytest.raises(mvcc.errors.UnsupportedFeatureError, match="stable_row_ids"):
        mvcc.open_table(str(tmp_path / "t"))


def test_stable_row_ids_with_many_ids_in_one_fragment_use_the_array_encoding(tmp_path) -> None:
    t = mvcc.write_table(data(0, 1000), str(tmp_path / "t"), enable_stable_row_ids=True)
    t.update({"v": 1}, where="id % 7 = 0", mode="rewrite_rows")  # moved rows: ids 0, 7, 14, ...
    moved = t.get_fragments()[-1]
    assert moved.metadata.row_id_sequence.inline_sequence[0] == 1
    assert row_ids(t) == {i: i for i in range(1000)}


@pytest.mark.parametrize("ids", [[5, 3, 4], [9, 0], [2**63, 1, 2], [7, 8, 9], []])
def test_row_id_sequences_round_trip_in_any_order_without_overflow_warnings(ids) -> None:
    import warnings

    import numpy as np

    from mvcc_core.format import row_ids

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # uint64 subtraction of a larger id from a smaller one used to warn
        sequence = row_ids.encode(np.array(ids, dtype=np.uint64))
    fragment = row_ids.pb.DataFragment(id=1, physical_rows=len(ids), row_id_sequence=sequence)
    assert row_ids.decode(fragment).tolist() == ids
