"""The fragment reuse index: compaction with defer_index_remap, reads through it, and its rebases."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from pyroaring import BitMap

import mvcc_core as mvcc
from mvcc_core import compaction
from mvcc_core.format import fragment_reuse as frag_reuse
from mvcc_core.format.naming import FRAG_REUSE_INDEX
from mvcc_core.maintenance.optimize import stage_optimize_indices
from mvcc_core.ops.index_build import covered
from mvcc_core.verify import verify

PREDICATES = ["k = 7", "k IN (3, 18, 40)", "k >= 10 AND k < 20", "k > 45", "k = 1000"]


def build(uri: str, fragments: int = 6, rows: int = 10) -> mvcc.Table:
    """`fragments` small fragments with `k` = id % 50 (unsorted enough), indexed by BTREE."""
    t = None
    for f in range(fragments):
        ids = np.arange(f * rows, (f + 1) * rows, dtype=np.int64)
        data = pa.table({"id": ids, "k": (ids * 7) % 50})
        t = mvcc.write_table(data, uri, mode="create" if f == 0 else "append")
    t.create_index("k", "BTREE")
    return t


def expected(t: mvcc.Table, predicate: str) -> list[int]:
    """The oracle: the same filter over a plain pyarrow table of the version's rows."""

    from mvcc_core.read.sql_filter import to_expression

    whole = t.to_table(columns=["id", "k"])
    return sorted(whole.filter(to_expression(predicate, whole.schema)).column("id").to_pylist()) if whole else []


def answers(t: mvcc.Table, predicate: str) -> list[int]:
    return sorted(t.to_table(columns=["id"], filter=predicate).column("id").to_pylist())


def fri_versions(t: mvcc.Table) -> list[int]:
    return [v.dataset_version for v in frag_reuse.details_of(frag_reuse.find(t.manifest)).versions]


def index_of(t: mvcc.Table):
    return next(i for i in t.manifest.indices if i.index_type == "BTREE")


def test_deferred_remap_keeps_the_index_covering_moved_rows(tmp_uri) -> None:
    t = build(tmp_uri)
    t.delete("id IN (3, 14, 15, 59)")  # deleted rows must not come back through the old addresses
    before = {p: answers(t, p) for p in PREDICATES}
    t.optimize.compact_files(target_rows_per_fragment=25, defer_index_remap=True)
    assert [v.operation for v in t.versions()][-2:] == ["ReserveFragments", "Rewrite"]
    live = {f.fragment_id for f in t.get_fragments()}
    assert live <= covered(index_of(t))  # nothing became unindexed
    assert fri_versions(t) == [t.version]
    assert [i for i in t.list_indices() if i["name"] == FRAG_REUSE_INDEX]
    for p in PREDICATES:
        assert answers(t, p) == before[p] == expected(t, p), p
        assert t.count_rows(filter=p) == len(before[p])
    # a second deferred compaction chains a second version; answers still go through both
    t.append(pa.table({"id": pa.array([100, 101], pa.int64()), "k": pa.array([7, 7], pa.int64())}))
    t.optimize.optimize_indices()  # rebuilds (trims the reuse index) ...
    assert frag_reuse.find(t.manifest) is None
    t.delete("id = 21")
    t.optimize.compact_files(target_rows_per_fragment=1_000, defer_index_remap=True)
    t.optimize.compact_files(target_rows_per_fragment=1_000, materialize_deletions_threshold=0.0,
                             defer_index_remap=True)  # fmt: skip
    for p in PREDICATES:
        assert answers(t, p) == expected(t, p), p
    # optimize_indices rebuilds the index at the latest version and drops the reuse index
    rebuilt = t.optimize.optimize_indices()
    assert rebuilt == 1 and frag_reuse.find(t.manifest) is None
    assert index_of(t).dataset_version == t.version - 1
    for p in PREDICATES:
        assert answers(t, p) == expected(t, p), p
    # older versions still read their own index and reuse index
    old = t.checkout(t.version - 1)
    assert answers(old, "k = 7") == expected(old, "k = 7")


def test_without_defer_rewritten_fragments_leave_the_index(tmp_uri) -> None:
    t = build(tmp_uri)
    t.optimize.compact_files(target_rows_per_fragment=25)
    assert frag_reuse.find(t.manifest) is None
    assert not {f.fragment_id for f in t.get_fragments()} & covered(index_of(t))
    for p in PREDICATES:
        assert answers(t, p) == expected(t, p), p


def test_two_deferred_compactions_at_once_are_retryable(tmp_uri) -> None:
    t = build(tmp_uri)
    a, b = mvcc.open_table(tmp_uri), mvcc.open_table(tmp_uri)
    plan_a = compaction.plan(a, compaction.CompactionOptions(target_rows_per_fragment=25, defer_index_remap=True))
    plan_b = compaction.plan(b, compaction.CompactionOptions(target_rows_per_fragment=25, defer_index_remap=True))
    results_a = [task.execute(tmp_uri) for task in plan_a.tasks]
    results_b = [task.execute(tmp_uri) for task in plan_b.tasks]
    compaction.commit(a.checkout(plan_a.read_version), results_a, defer_index_remap=True)
    with pytest.raises(mvcc.RetryableConflictError):  # overlapping fragments, and both carry the index
        compaction.commit(b.checkout(plan_b.read_version), results_b, defer_index_remap=True)
    assert answers(mvcc.open_table(tmp_uri), "k = 7") == expected(t, "k = 7")


def test_rewrite_rebases_over_a_trim_of_the_reuse_index(tmp_uri) -> None:
    t = build(tmp_uri, fragments=8)
    t.optimize.compact_files(target_rows_per_fragment=15, max_rows_per_task=20, defer_index_remap=True)
    first = fri_versions(t)
    assert len(first) == 1
    t.append(pa.table({"id": pa.array(range(200, 210), pa.int64()), "k": pa.array([7] * 10, pa.int64())}))
    t.append(pa.table({"id": pa.array(range(210, 220), pa.int64()), "k": pa.array([8] * 10, pa.int64())}))
    # ours: a deferred compaction of the two new fragments, planned and executed at this version
    ours = mvcc.open_table(tmp_uri)
    options = compaction.CompactionOptions(target_rows_per_fragment=100, defer_index_remap=True)
    plan = compaction.plan(ours, options)
    results = [task.execute(tmp_uri) for task in plan.tasks]
    # theirs: optimize_indices rebuilds the index and trims the reuse index (a CreateIndex writing it)
    theirs = mvcc.open_table(tmp_uri)
    assert theirs.optimize.optimize_indices() == 1
    assert frag_reuse.find(theirs.manifest) is None
    landed = compaction.commit(ours.checkout(plan.read_version), results, defer_index_remap=True)
    final = mvcc.open_table(tmp_uri)
    assert final.version == landed.version
    txn = final.transaction()
    assert txn.read_version == final.version - 1  # rebased: a new transaction file on the latest version
    assert fri_versions(final) == [final.version]  # ours only: their trim of the first version kept
    for p in [*PREDICATES, "k = 8"]:
        assert answers(final, p) == expected(final, p), p


def test_trim_rebases_over_a_deferred_compaction(tmp_uri) -> None:
    t = build(tmp_uri, fragments=8)
    t.optimize.compact_files(target_rows_per_fragment=15, max_rows_per_task=20, defer_index_remap=True)
    t.append(pa.table({"id": pa.array(range(200, 210), pa.int64()), "k": pa.array([7] * 10, pa.int64())}))
    t.append(pa.table({"id": pa.array(range(210, 220), pa.int64()), "k": pa.array([8] * 10, pa.int64())}))
    trimmer = mvcc.open_table(tmp_uri)  # reads now, commits after the compaction below
    compactor = mvcc.open_table(tmp_uri)
    compactor.optimize.compact_files(target_rows_per_fragment=100, defer_index_remap=True)
    theirs_version = compactor.version
    assert trimmer.optimize.optimize_indices() == 1
    final = mvcc.open_table(tmp_uri)
    assert final.manifest.version == theirs_version + 1
    # the trim removed the first compaction's version but kept theirs, which the rebuilt index needs:
    # it was built before their rewrite, so its coverage and addresses follow the moved rows
    assert fri_versions(final) == [theirs_version]
    assert {f.fragment_id for f in final.get_fragments()} <= covered(index_of(final))
    for p in [*PREDICATES, "k = 8"]:
        assert answers(final, p) == expected(final, p), p


def test_address_map_follows_groups_and_drops_deleted_rows() -> None:
    from mvcc_core._proto import table_pb2 as pb

    old = [pb.DataFragment(id=4, physical_rows=3), pb.DataFragment(id=2, physical_rows=4)]
    new = [pb.DataFragment(id=9, physical_rows=3), pb.DataFragment(id=10, physical_rows=2)]
    group = frag_reuse.group_of(old, {2: BitMap([1, 3])}, new)
    fri = frag_reuse.stamp(frag_reuse.with_version(None, [group], 0), 7)
    mapping = frag_reuse.AddressMap(fri, since_version=6)

    def addr(frag: int, offset: int) -> int:
        return frag << 32 | offset

    got = mapping.translate(np.array([addr(4, 0), addr(4, 2), addr(2, 0), addr(2, 1), addr(2, 2), addr(5, 1)]))
    assert got.tolist() == [addr(9, 0), addr(9, 2), addr(10, 0), addr(10, 1), addr(5, 1)]
    assert not frag_reuse.AddressMap(fri, since_version=7)  # an index built at the rewrite needs nothing
    bitmap = frag_reuse.remap_fragment_bitmap(BitMap([2, 4, 5]), group)
    assert set(bitmap) == {5, 9, 10}
    assert set(frag_reuse.remap_fragment_bitmap(BitMap([2, 5]), group)) == {2, 5}  # partly covered: unchanged
    bad = frag_reuse.group_of(old, {}, new)  # 7 live rows into 5
    with pytest.raises(ValueError, match="7 live rows into 5"):
        frag_reuse.AddressMap(frag_reuse.stamp(frag_reuse.with_version(None, [bad], 0), 7), 0)


def test_create_index_of_the_mem_wal_singleton_is_refused(tmp_uri) -> None:
    from mvcc_core._proto import table_pb2 as pb

    t = build(tmp_uri, fragments=1)
    before = t.version
    with pytest.raises(mvcc.MvccError, match="UpdateMemWalState"):
        t.commit(mvcc.operations.CreateIndex(new_indices=[pb.IndexMetadata(name="__lance_mem_wal")]))
    assert mvcc.open_table(tmp_uri).version == before


def test_column_rewrites_of_different_columns_and_rows_rebase(tmp_uri) -> None:
    data = pa.table({"id": pa.array(range(10), pa.int64()), "a": [0] * 10, "b": [0] * 10})
    mvcc.write_table(data, tmp_uri)
    x, y, z = (mvcc.open_table(tmp_uri) for _ in range(3))
    x.update({"a": 1}, where="id = 1", mode="rewrite_columns")
    y.update({"b": 2}, where="id = 2", mode="rewrite_columns")  # other column, other row: rebased
    rows = {r["id"]: (r["a"], r["b"]) for r in mvcc.open_table(tmp_uri).to_table().to_pylist()}
    assert rows[1] == (1, 0) and rows[2] == (0, 2) and len(rows) == 10
    with pytest.raises(mvcc.RetryableConflictError, match="rewrote field"):
        z.update({"a": 3}, where="id = 3", mode="rewrite_columns")  # same column: its file has row 1's old a
    mvcc.open_table(tmp_uri).update({"a": 3}, where="id = 3", mode="rewrite_columns")
    rows = {r["id"]: (r["a"], r["b"]) for r in mvcc.open_table(tmp_uri).to_table().to_pylist()}
    assert rows[1] == (1, 0) and rows[2] == (0, 2) and rows[3] == (3, 0)


def test_trim_keeps_the_versions_an_index_committed_meanwhile_still_needs(tmp_uri) -> None:
    """An index built before a deferred compaction lands after the trim was planned: the trim, rebased onto
    it, must keep the reuse version that index reads its moved rows through (else lookups miss them)."""
    t = build(tmp_uri, fragments=8)
    early = mvcc.open_table(tmp_uri).create_index_uncommitted("k", "BTREE", name="k_idx")  # built here ...
    t.optimize.compact_files(target_rows_per_fragment=15, max_rows_per_task=20, defer_index_remap=True)
    moved_at = fri_versions(t)
    t.create_index("k", "BTREE", name="k_idx")  # current again: nothing needs the reuse version any more ...
    trimmer = mvcc.open_table(tmp_uri)  # ... so a trim planned now drops it
    mvcc.open_table(tmp_uri).commit(early)  # ... committed after the compaction, replacing the current one
    final = mvcc.open_table(tmp_uri)
    assert fri_versions(final) == moved_at
    assert trimmer.optimize.optimize_indices() == 0  # the rebased trim keeps the version: a no-op
    final = mvcc.open_table(tmp_uri)
    assert fri_versions(final) == moved_at
    for p in PREDICATES:
        assert answers(final, p) == expected(final, p), p


def test_an_index_built_before_a_trimmed_compaction_is_retryable(tmp_uri) -> None:
    """The other order: the trim lands first, so the early index's moved rows could not be found any more."""
    t = build(tmp_uri, fragments=8)
    early = mvcc.open_table(tmp_uri).create_index_uncommitted("k", "BTREE", name="k_idx")
    t.optimize.compact_files(target_rows_per_fragment=15, max_rows_per_task=20, defer_index_remap=True)
    assert t.optimize.optimize_indices() == 1  # rebuilt at the latest version, the reuse index trimmed
    assert frag_reuse.find(mvcc.open_table(tmp_uri).manifest) is None
    with pytest.raises(mvcc.RetryableConflictError, match="fragment reuse version theirs trimmed"):
        mvcc.open_table(tmp_uri).commit(early)
    final = mvcc.open_table(tmp_uri)
    for p in PREDICATES:
        assert answers(final, p) == expected(final, p), p


def test_deep_verify_finds_an_index_that_misses_moved_rows(tmp_uri) -> None:
    """Such an index (committed by older versions of this code) is found by `verify(deep=True)`; a rebuild
    mends it. Healthy indices, with and without a reuse index to read through, are not reported."""
    t = build(tmp_uri, fragments=8)
    early = mvcc.open_table(tmp_uri).create_index_uncommitted("k", "BTREE", name="k_idx")
    t.optimize.compact_files(target_rows_per_fragment=15, max_rows_per_task=20, defer_index_remap=True)
    t.create_index("k", "BTREE", name="k_idx")
    trim, _ = stage_optimize_indices(mvcc.open_table(tmp_uri).state)  # drops the reuse index: none needs it
    mvcc.open_table(tmp_uri).commit(early)  # ... until this one lands, built before the compaction
    assert verify(mvcc.open_table(tmp_uri), deep=True).ok  # translated through the reuse index
    latest = mvcc.open_table(tmp_uri)
    latest.commit(trim.operation, read_version=latest.version)  # the trim as if the index had not been seen
    broken = mvcc.open_table(tmp_uri)
    problems = [p for p in verify(broken, deep=True).problems if p.kind == "index"]
    assert len(problems) == 1 and "fewer row addresses" in problems[0].problem
    assert not verify(broken).problems  # a shallow check does not read index files
    broken.create_index("k", "BTREE", name="k_idx")
    mended = mvcc.open_table(tmp_uri)
    assert verify(mended, deep=True).ok
    for p in PREDICATES:
        assert answers(mended, p) == expected(mended, p), p
