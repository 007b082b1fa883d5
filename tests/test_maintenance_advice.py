"""`t.optimize.recommend()`: advice from the manifest (and a listing of the versions) alone, with figures that
match what the maintenance then does; and planning plus advice on a table of 10,000 fragments well inside 100 ms."""

from __future__ import annotations

import dataclasses
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core.compaction import MaintenanceAdvice


def batch(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([i % 7 for i in ids], pa.int64())})


def kinds(advice: list[MaintenanceAdvice]) -> dict[str, MaintenanceAdvice]:
    return {a.kind: a for a in advice}


def test_advice_is_frozen_and_exported_with_the_maintenance_types() -> None:
    assert dataclasses.is_dataclass(MaintenanceAdvice) and MaintenanceAdvice.__dataclass_params__.frozen
    assert mvcc.compaction.MaintenanceAdvice is MaintenanceAdvice and "MaintenanceAdvice" in mvcc.compaction.__all__


def test_a_healthy_table_gets_no_advice(any_uri) -> None:
    uri, opts = any_uri
    t = mvcc.write_table(batch(list(range(100))), uri, storage_options=opts)
    assert t.optimize.recommend() == []


def test_compaction_advice_says_what_compaction_then_does(any_uri) -> None:
    uri, opts = any_uri
    t = mvcc.write_table(batch(list(range(50))), uri, storage_options=opts)
    for i in range(1, 12):
        t.append(batch([100 + i]))
    t.update_config({"mvcc.compaction.target_rows_per_fragment": "40"})
    advice = kinds(t.optimize.recommend())
    assert set(advice) == {"compact"}
    compact = advice["compact"]
    assert compact.fragments_before == 12 and compact.fragments_after == 2
    assert "11 of 12 fragments" in compact.reason and "40 rows" in compact.reason
    assert compact.score == pytest.approx(10 / 12) and compact.call == "t.optimize.compact_files()"
    metrics = t.optimize.compact_files()
    assert metrics.fragments_after == compact.fragments_after and metrics.bytes_read == compact.bytes_to_rewrite
    assert t.optimize.recommend() == []


def test_deletions_indices_and_retention(tmp_uri) -> None:
    t = mvcc.write_table(batch(list(range(1000))), tmp_uri, max_rows_per_file=500)
    t.create_index("id", "BTREE")
    t.delete("id < 200")  # 40% of the first fragment
    t.append(batch(list(range(1000, 1600))))  # a fragment the index misses
    t.update_config(
        {
            "mvcc.retention.older_than": "1h",
            "mvcc.retention.retain_versions": "2",
            "mvcc.compaction.target_rows_per_fragment": "250",
        }
    )
    advice = t.optimize.recommend()
    assert advice == sorted(advice, key=lambda a: -a.score)
    by_kind = kinds(advice)
    assert set(by_kind) == {"materialize_deletions", "optimize_indices"}  # versions are minutes old
    deletions = by_kind["materialize_deletions"]
    assert "200 deleted rows" in deletions.reason and deletions.fragments_before == 3
    assert deletions.fragments_after == 4  # the first fragment's 300 live rows at a target of 250
    assert deletions.score == pytest.approx(200 / 1600)
    index = by_kind["optimize_indices"]
    assert "600 of 1,400 live rows" in index.reason and index.score == pytest.approx(600 / 1400)
    later = kinds(mvcc.compaction.recommend(t, now=datetime.now(UTC) + timedelta(hours=2)))
    assert "retention" in later and "versions are older than 1:00:00" in later["retention"].reason
    removable = t.state.version - 2
    assert later["retention"].reason.startswith(f"{removable} of {t.state.version} versions")
    t.optimize.optimize_indices()
    assert "optimize_indices" not in kinds(t.optimize.recommend())


def test_advice_reads_no_data_file(tmp_uri) -> None:
    """With every data, deletion and index file gone from the disk, the advice is the same."""
    t = mvcc.write_table(batch(list(range(100))), tmp_uri, max_rows_per_file=10)
    t.create_index("id", "BTREE")
    t.delete("id < 5")
    t.append(batch([500]))
    before = t.optimize.recommend()
    assert {a.kind for a in before} == {"compact", "optimize_indices"}
    for directory in ("data", "_deletions", "_indices"):
        shutil.rmtree(Path(tmp_uri) / directory)
    with pytest.raises(mvcc.errors.MvccError):
        mvcc.open_table(tmp_uri).to_table()  # the data is really gone
    assert mvcc.open_table(tmp_uri).optimize.recommend() == before


@pytest.mark.slow
def test_planning_and_advice_on_ten_thousand_fragments_take_under_100_ms(tmp_uri) -> None:
    ids = list(range(100_000))
    t = mvcc.write_table(batch(ids), tmp_uri, max_rows_per_file=10)
    assert len(t.state.manifest.fragments) == 10_000
    t.create_index("id", "BTREE")
    best_plan = best_advice = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        plan = mvcc.compaction.plan_unreserved(t, target_rows_per_fragment=1000, max_bytes=64 * 2**20)
        best_plan = min(best_plan, time.perf_counter() - start)
        start = time.perf_counter()
        advice = t.optimize.recommend()
        best_advice = min(best_advice, time.perf_counter() - start)
    assert plan.tasks and advice
    assert best_plan < 0.1 and best_advice < 0.1, (best_plan, best_advice)
