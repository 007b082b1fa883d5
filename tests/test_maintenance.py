"""Compaction (ReserveFragments then Rewrite), retention (cleanup_old_versions) and restore after retention."""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import timedelta
from functools import partial
from pathlib import Path

import pyarrow as pa
import pytest
from older_schemas import older_schema_rows

import mvcc_core as mvcc
from mvcc_core.io import open_store
from mvcc_core.maintenance.compaction import run_task
from mvcc_core.txn.conflicts import REWRITE_ROW_ORDER


def data(start: int, n: int) -> pa.Table:
    return pa.table(
        {"id": pa.array(range(start, start + n), pa.int64()), "v": [f"v{i}" for i in range(start, start + n)]}
    )


def rows(t: mvcc.Table) -> list[tuple]:
    return sorted((r["id"], r["v"]) for r in t.to_table().to_pylist())


def fragmented(uri: str, opts=None, **kwargs) -> mvcc.Table:
    """40 rows in 4 fragments, then 6 one-row appends, then deletions: 10 small fragments."""
    t = mvcc.write_table(data(0, 40), uri, storage_options=opts, max_rows_per_file=10, **kwargs)
    for i in range(6):
        t.append(data(100 + i, 1))
    t.delete("id % 4 = 1 OR id = 103")
    return t


# ---- compaction ----------------------------------------------------------------------------------


def test_compaction_preserves_rows_and_history(any_uri) -> None:
    uri, opts = any_uri
    t = fragmented(uri, opts)
    before, version_before, fragments_before = rows(t), t.version, len(t.get_fragments())
    seen = []
    metrics = t.optimize.compact_files(target_rows_per_fragment=25, progress=lambda done, total: seen.append(done))
    assert rows(t) == before
    assert metrics.fragments_removed == fragments_before == 7 and metrics.rows == len(before) == 33
    assert metrics.fragments_added == len(t.get_fragments()) == 2 and metrics.version == t.version
    assert seen == list(range(1, len(seen) + 1)) and seen
    assert all(f.deletion_file() is None and f.physical_rows <= 25 for f in t.get_fragments())
    reopened = mvcc.open_table(uri, storage_options=opts)
    assert [v.operation for v in reopened.versions()][-2:] == ["ReserveFragments", "Rewrite"]
    assert rows(reopened.checkout(version_before)) == before  # older versions still read
    assert len(reopened.checkout(version_before).get_fragments()) == 7
    again = reopened.optimize.compact_files(target_rows_per_fragment=25)
    assert again.version is None and reopened.latest_version == t.version  # nothing to do, nothing committed


def test_compaction_materializes_deletions_and_folds_column_files(tmp_uri) -> None:
    t = mvcc.write_table(data(0, 100), tmp_uri, max_rows_per_file=50)
    t.delete("id < 20")  # 40% of fragment 0
    t.add_columns({"w": "id * 2"})
    t.update({"w": "0"}, where="id >= 90", mode="rewrite_columns")
    expected = sorted(t.to_table().to_pylist(), key=lambda r: r["id"])
    t.optimize.compact_files(target_rows_per_fragment=50)
    assert sorted(t.to_table().to_pylist(), key=lambda r: r["id"]) == expected
    assert [len(f.data_files()) for f in t.get_fragments()] == [1] * len(t.get_fragments())
    assert all(f.deletion_file() is None for f in t.get_fragments())
    assert mvcc.open_table(tmp_uri).optimize.compact_files(target_rows_per_fragment=50).version is None


def test_compaction_keeps_stable_row_ids(tmp_uri) -> None:
    t = fragmented(tmp_uri, enable_stable_row_ids=True)
    ids = {r["id"]: r["_rowid"] for r in t.to_table(with_row_id=True).to_pylist()}
    t.optimize.compact_files(target_rows_per_fragment=100)
    assert {r["id"]: r["_rowid"] for r in t.to_table(with_row_id=True).to_pylist()} == ids


@pytest.mark.slow
def test_plan_tasks_run_in_other_processes(tmp_uri) -> None:
    t = fragmented(tmp_uri)
    before = rows(t)
    plan = mvcc.compaction.plan(t, mvcc.compaction.CompactionOptions(target_rows_per_fragment=15))
    assert plan.tasks and all(len(pickle.dumps(task)) < 10_000 for task in plan.tasks)
    assert len(pickle.dumps(plan.state)) < 20_000  # the table state travels with each task, small
    run = partial(run_task, state=plan.state)  # module-level: pickles to other processes
    with ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as pool:
        results = list(pool.map(run, plan.tasks))
    mvcc.compaction.commit(t, results)
    assert rows(mvcc.open_table(tmp_uri)) == before
    with pytest.raises(mvcc.errors.CompactionError, match="at least one"):
        mvcc.compaction.commit(t, [])


def _append_many(uri: str, n: int, barrier) -> None:
    barrier.wait()
    t = mvcc.open_table(uri)
    for i in range(n):
        t.append(data(1000 + i, 1), max_retries=100)


@pytest.mark.slow
def test_compaction_racing_appends_in_another_process_both_land(tmp_uri) -> None:
    t = fragmented(tmp_uri)
    before = rows(t)
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    proc = ctx.Process(target=_append_many, args=(tmp_uri, 10, barrier))
    proc.start()
    barrier.wait()
    t.optimize.compact_files(target_rows_per_fragment=100)
    proc.join(timeout=120)
    assert proc.exitcode == 0
    final = mvcc.open_table(tmp_uri)
    assert rows(final) == sorted(before + [(1000 + i, f"v{1000 + i}") for i in range(10)])
    ops = [v.operation for v in final.versions()]
    assert "Rewrite" in ops and ops.count("Append") == 16


def _delete_in_process(uri: str, predicate: str) -> None:
    mvcc.open_table(uri).delete(predicate)


def test_compaction_racing_a_delete_of_its_fragments_carries_it_or_retries(tmp_uri) -> None:
    """A delete (another process) lands between the compaction's read and its commit: compaction's Rewrite,
    which keeps the row order, carries the deletion onto its new fragments; a Rewrite that does not say where
    the rows went stays a retryable conflict and its files are removed."""
    t = fragmented(tmp_uri)
    plan = mvcc.compaction.plan(t, mvcc.compaction.CompactionOptions(target_rows_per_fragment=100))
    results = [task.execute(tmp_uri) for task in plan.tasks]
    ctx = mp.get_context("spawn")
    proc = ctx.Process(target=_delete_in_process, args=(tmp_uri, "id = 2"))
    proc.start()
    proc.join(timeout=60)
    assert proc.exitcode == 0
    expected = rows(mvcc.open_table(tmp_uri))
    assert (2, "v2") not in expected
    data_files = sorted((Path(tmp_uri) / "data").iterdir())
    new_files = {f"data/{df.path}" for r in results for f in r.new_fragments for df in _frag(f).files}
    txn = mvcc.compaction.rewrite_transaction(t, results)
    del txn.transaction_properties[REWRITE_ROW_ORDER]
    with pytest.raises(mvcc.RetryableConflictError):
        t.commit(txn)
    assert not any((Path(tmp_uri) / p).exists() for p in new_files)  # the rewrite's files were removed
    assert len(sorted((Path(tmp_uri) / "data").iterdir())) == len(data_files) - len(new_files)
    results = [task.execute(tmp_uri) for task in plan.tasks]  # the same plan, its files written again
    mvcc.compaction.commit(t, results)
    fresh = mvcc.open_table(tmp_uri)
    assert fresh.versions()[-1].operation == "Rewrite" and rows(fresh) == expected


def _frag(data: bytes):
    from mvcc_core._proto import table_pb2 as pb

    return pb.DataFragment.FromString(data)


def test_compaction_reads_files_written_under_older_schemas(any_uri) -> None:
    """One-file fragments are read file by file; a file whose columns differ from the version's (a dropped
    struct field, a column made nullable later) goes through the dataset scan, in order, with the rest."""
    uri, opts = any_uri
    t = mvcc.write_table(
        older_schema_rows(0, 30), uri, storage_options=opts, max_rows_per_file=10, enable_stable_row_ids=True
    )
    t.append(older_schema_rows(30, 5))
    t.drop_columns(["gone", "p.y"])  # metadata only: older files still hold them
    t.alter_columns({"path": "k", "name": "kk"}, {"path": "id", "nullable": True})
    newer = pa.table(
        {
            "id": pa.array([40, 41], pa.int64()),
            "p": pa.array([{"x": 40}, {"x": 41}]),
            "kk": pa.array([40, 41], pa.int32()),
        }
    )
    t.append(newer.cast(t.schema))
    t.delete("id = 12")  # one fragment with a deletion vector between plain ones
    before = t.to_table(with_row_id=True).sort_by("id")
    metrics = t.optimize.compact_files(target_rows_per_fragment=1000)
    assert metrics.fragments_added == len(t.get_fragments()) == 1 and metrics.rows == before.num_rows == 36
    after = mvcc.open_table(uri, storage_options=opts).to_table(with_row_id=True).sort_by("id")
    assert after.schema == before.schema and after.equals(before)  # values, types and stable row ids


def test_compaction_of_a_missing_data_file_fails_clearly_and_leaves_nothing(tmp_uri) -> None:
    t = mvcc.write_table(data(0, 50), tmp_uri, max_rows_per_file=5)
    victim = Path(tmp_uri) / "data" / t.get_fragments()[7].data_files()[0].path
    victim.unlink()
    files_before = set((Path(tmp_uri) / "data").iterdir())
    version = t.version
    with pytest.raises(mvcc.errors.ObjectNotFoundError, match="missing"):
        t.optimize.compact_files(target_rows_per_fragment=100)
    assert set((Path(tmp_uri) / "data").iterdir()) == files_before  # the task's partial output was removed
    assert mvcc.open_table(tmp_uri).latest_version == version + 1  # only the ReserveFragments


def test_compaction_options_are_checked() -> None:
    with pytest.raises(ValueError):
        mvcc.compaction.CompactionOptions(target_rows_per_fragment=0)
    with pytest.raises(ValueError):
        mvcc.compaction.CompactionOptions(materialize_deletions_threshold=1.5)


# ---- retention -----------------------------------------------------------------------------------


def stored(uri: str, opts) -> set[str]:
    return {m.path for m in open_store(uri, opts).list("")}


def test_cleanup_keeps_latest_and_tagged_and_removes_the_rest(any_uri) -> None:
    uri, opts = any_uri
    t = fragmented(uri, opts)
    t.tags.create("tagged", 3)
    t.optimize.compact_files(target_rows_per_fragment=100)
    latest_rows, tagged_rows = rows(t), rows(t.checkout("tagged"))
    everything = stored(uri, opts)
    with pytest.raises(mvcc.errors.TagError, match="tagged"):
        t.cleanup_old_versions(older_than=timedelta(0))
    assert stored(uri, opts) == everything
    dry = t.cleanup_old_versions(older_than=timedelta(0), error_if_tagged_old_versions=False, dry_run=True)
    assert stored(uri, opts) == everything and dry.old_versions == t.version - 2
    stats = t.cleanup_old_versions(older_than=timedelta(0), error_if_tagged_old_versions=False)
    assert stats == dry
    reopened = mvcc.open_table(uri, storage_options=opts)
    assert [v.version for v in reopened.versions()] == [3, t.version]
    assert rows(reopened) == latest_rows and rows(reopened.checkout("tagged")) == tagged_rows
    left = stored(uri, opts)
    assert len(everything) - len(left) == (
        stats.old_versions
        + stats.data_files_removed
        + stats.deletion_files_removed
        + stats.transaction_files_removed
        + stats.index_files_removed
    )
    assert stats.data_files_removed > 0 and stats.deletion_files_removed > 0
    with pytest.raises(mvcc.VersionNotFoundError, match="retention"):
        reopened.restore(2)
    with pytest.raises(mvcc.VersionNotFoundError, match="retention"):
        reopened.checkout(1)
    reopened.restore("tagged")
    assert rows(reopened) == tagged_rows


def test_cleanup_thresholds_and_unverified_files(tmp_uri) -> None:
    t = mvcc.write_table(data(0, 5), tmp_uri)
    for i in range(4):
        t.append(data(10 + i, 1))
    assert t.cleanup_old_versions().old_versions == 0  # nothing is 14 days old
    assert t.cleanup_old_versions(older_than=timedelta(0), retain_versions=2).removed_versions == (1, 2, 3)
    orphan = Path(tmp_uri) / "data" / "orphan.parquet"  # debris of a failed commit
    orphan.write_bytes(b"x")
    assert t.cleanup_old_versions(older_than=timedelta(0)).unverified_files_removed == 0 and orphan.exists()
    old = time.time() - 8 * 24 * 3600
    os.utime(orphan, (old, old))
    stats = t.cleanup_old_versions(older_than=timedelta(0))
    assert stats.unverified_files_removed == 1 and not orphan.exists()
    fresh = Path(tmp_uri) / "data" / "fresh.parquet"
    fresh.write_bytes(b"y")
    assert t.cleanup_old_versions(older_than=timedelta(0), delete_unverified=True).unverified_files_removed == 1
    assert (Path(tmp_uri) / "_versions" / "_latest_version_hint.json").exists()  # retention keeps the hint
    assert rows(mvcc.open_table(tmp_uri)) == rows(t)
    for bad in ({"older_than": 3}, {"retain_versions": 0}):
        with pytest.raises(ValueError):
            t.cleanup_old_versions(**bad)


def _writer(uri: str, n: int, barrier) -> None:
    barrier.wait()
    t = mvcc.open_table(uri)
    for i in range(n):
        t.append(data(5000 + i, 1), max_retries=100)
        if i % 5 == 4:
            t.delete(f"id = {5000 + i}")


def test_writer_committing_during_cleanup_loses_nothing(tmp_uri) -> None:
    t = fragmented(tmp_uri)
    expected = rows(t)
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    proc = ctx.Process(target=_writer, args=(tmp_uri, 20, barrier))
    proc.start()
    barrier.wait()
    for _ in range(5):
        t.cleanup_old_versions(older_than=timedelta(0))
    proc.join(timeout=120)
    assert proc.exitcode == 0
    t.cleanup_old_versions(older_than=timedelta(0))
    final = mvcc.open_table(tmp_uri)
    added = [(5000 + i, f"v{5000 + i}") for i in range(20) if i % 5 != 4]
    assert rows(final) == sorted(expected + added)


@pytest.mark.parametrize("tagged", [1, 32])
def test_a_kept_tagged_version_at_the_latest_version_hint_leaves_the_latest_findable(
    tmp_path: Path, tagged: int
) -> None:
    """The hint (written at version 1 and every 32nd) at a tagged version that retention keeps while it removes
    the versions after it: the lookup from the hint must not stop at that hole and take the tag for the latest."""
    t = mvcc.write_table(pa.table({"id": [0]}), str(tmp_path / "t"))
    for i in range(1, tagged + 3):
        t.append(pa.table({"id": [i]}))
    t.tags.create("release", tagged)
    latest = t.version
    t.cleanup_old_versions(older_than=timedelta(0), error_if_tagged_old_versions=False)
    assert [v.version for v in t.versions()] == [tagged, latest]
    reopened = mvcc.open_table(t.uri)
    assert reopened.version == latest and reopened.count_rows() == latest
    assert reopened.append(pa.table({"id": [99]})).version == latest + 1
