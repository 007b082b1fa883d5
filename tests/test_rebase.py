"""Rebase of row-level changes, and the specification's three conflict scenarios through the public API."""

from __future__ import annotations

import multiprocessing as mp

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core.verify import verify


def data(n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(n), pa.int64()), "v": pa.array([0] * n, pa.int64())})


def content(t: mvcc.Table) -> dict[int, int]:
    return {r["id"]: r["v"] for r in t.to_table().to_pylist()}


def test_two_deletes_of_different_rows_in_one_fragment_both_land(any_uri) -> None:
    uri, opts = any_uri
    mvcc.write_table(data(20), uri, storage_options=opts)
    a, b = mvcc.open_table(uri, storage_options=opts), mvcc.open_table(uri, storage_options=opts)
    a.delete("id = 3")
    b.delete("id IN (5, 6)")  # rebased onto a's version
    final = mvcc.open_table(uri, storage_options=opts)
    assert sorted(content(final)) == [i for i in range(20) if i not in (3, 5, 6)]
    assert [v.operation for v in final.versions()] == ["Overwrite", "Delete", "Delete"]
    assert final.get_fragments()[0].num_deletions == 3


def test_rebase_of_a_packed_deletion_file_keeps_it_for_the_fragments_not_rebased(tmp_uri) -> None:
    mvcc.write_table(data(30), tmp_uri, max_rows_per_file=10)
    a, b = mvcc.open_table(tmp_uri), mvcc.open_table(tmp_uri)
    a.delete("id = 1")  # theirs: fragment 0 only
    b.delete("id IN (2, 12, 22)")  # ours: one packed file for fragments 0, 1, 2; fragment 0 is rebased
    final = mvcc.open_table(tmp_uri)
    assert sorted(content(final)) == [i for i in range(30) if i not in (1, 2, 12, 22)]
    frags = final.get_fragments()
    assert not frags[0].metadata.deletion_file.HasField("content_size")  # the merged vector, in a file of its own
    assert frags[1].metadata.deletion_file.id == frags[2].metadata.deletion_file.id and frags[
        1
    ].metadata.deletion_file.HasField("content_size")
    assert verify(final, all_versions=True).ok


@pytest.mark.parametrize("mode", ["rewrite_rows", "rewrite_columns"])
def test_update_and_delete_of_different_rows_rebase(tmp_uri, mode) -> None:
    mvcc.write_table(data(20), tmp_uri, max_rows_per_file=10)
    a, b = mvcc.open_table(tmp_uri), mvcc.open_table(tmp_uri)
    a.update({"v": "v + 1"}, where="id < 4", mode=mode)  # theirs
    b.delete("id IN (5, 12)")  # ours: rebased over either update mode
    c = mvcc.open_table(tmp_uri).checkout(2)
    mvcc.open_table(tmp_uri).delete("id = 15")
    c.update({"v": "v + 10"}, where="id = 9", mode="rewrite_rows")  # an update rebased over a delete
    expected = {i: (1 if i < 4 else 0) for i in range(20) if i not in (5, 12, 15)}
    expected[9] = 10
    assert content(mvcc.open_table(tmp_uri)) == expected


def test_same_rows_are_a_retryable_conflict_with_the_rows(tmp_uri) -> None:
    mvcc.write_table(data(20), tmp_uri)
    a, b = mvcc.open_table(tmp_uri), mvcc.open_table(tmp_uri)
    a.update({"v": 1}, where="id IN (2, 3)")
    with pytest.raises(mvcc.RetryableConflictError) as info:
        b.delete("id IN (3, 4)")
    assert info.value.row_addresses == [3] and info.value.conflicting_operation == "Update"
    mvcc.open_table(tmp_uri).delete("id IN (3, 4)")  # re-run on the new version
    assert 3 not in content(mvcc.open_table(tmp_uri))


def _delete_row(uri: str, row: int, barrier) -> None:
    barrier.wait()
    mvcc.open_table(uri).delete(f"id = {row}", max_retries=100)


@pytest.mark.slow
def test_concurrent_deletes_in_processes_all_land(tmp_uri) -> None:
    mvcc.write_table(data(40), tmp_uri)
    ctx = mp.get_context("spawn")
    rows = [1, 5, 9, 13, 17, 21]
    barrier = ctx.Barrier(len(rows))
    procs = [ctx.Process(target=_delete_row, args=(tmp_uri, r, barrier)) for r in rows]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * len(rows)
    final = mvcc.open_table(tmp_uri)
    assert sorted(content(final)) == [i for i in range(40) if i not in rows]
    assert [v.version for v in final.versions()] == list(range(1, len(rows) + 2))


def test_update_racing_a_compaction_of_its_fragment_is_retryable_then_succeeds(tmp_uri) -> None:
    t = mvcc.write_table(data(10), tmp_uri, max_rows_per_file=2)
    stale = mvcc.open_table(tmp_uri)
    t.optimize.compact_files(target_rows_per_fragment=100)
    with pytest.raises(mvcc.RetryableConflictError):
        stale.update({"v": 7}, where="id = 4")
    mvcc.open_table(tmp_uri).update({"v": 7}, where="id = 4")
    assert content(mvcc.open_table(tmp_uri))[4] == 7


def test_delete_racing_a_restore_is_incompatible(tmp_uri) -> None:
    t = mvcc.write_table(data(10), tmp_uri)
    t.append(data(3))
    stale = mvcc.open_table(tmp_uri)
    mvcc.open_table(tmp_uri).restore(1)
    with pytest.raises(mvcc.IncompatibleConflictError) as info:
        stale.delete("id = 1")
    assert info.value.conflicting_operation == "Restore" and info.value.read_version == 2
