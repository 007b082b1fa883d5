"""Partial progress: `compaction.commit(..., partial=True)` lands every group that does not conflict and reports
the rest; `compact_files(partial_progress=True, max_commits=K)` commits finished groups in up to K Rewrites, plans a
lost group again once, then drops and reports it, never the whole run. Differential: the rows after equal a plain
evaluation of what the other writer acknowledged, and the files of the groups that lost are gone."""

from __future__ import annotations

import multiprocessing
import random
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from maintenance_files import file_rows

import mvcc_core as mvcc
from mvcc_core import failpoints
from mvcc_core.format.bases import data_file_location
from mvcc_core.io import open_store


def batch(ids: list[int], v: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([v] * len(ids), pa.int64())})


def rows(t: mvcc.Table) -> list[tuple]:
    return sorted((r["id"], r["v"]) for r in t.to_table().to_pylist())


def walled(uri: str, opts=None, groups: int = 4, small: int = 3) -> mvcc.Table:
    """`groups` runs of `small` one-row fragments, each run after a 20-row fragment (a wall at target 10)."""
    t = mvcc.write_table(batch(list(range(20))), uri, storage_options=opts)
    next_id = 20
    for g in range(groups):
        if g:
            t.append(batch(list(range(next_id, next_id + 20))))
            next_id += 20
        for _ in range(small):
            t.append(batch([next_id]))
            next_id += 1
    return t


def new_files_exist(t: mvcc.Table, result: mvcc.compaction.RewriteResult) -> list[bool]:
    from mvcc_core._proto import table_pb2 as pb

    state = t.state
    out = []
    for raw in result.new_fragments:
        for data_file in pb.DataFragment.FromString(raw).files:
            store, rel = data_file_location(state.store, state.manifest.base_paths, data_file)
            out.append(store.exists(rel))
    return out


def first_old_id(result: mvcc.compaction.RewriteResult) -> int:
    from mvcc_core._proto import table_pb2 as pb

    return pb.DataFragment.FromString(result.old_fragments[0]).id


def test_partial_commit_lands_what_does_not_conflict_and_reports_the_rest(any_uri) -> None:
    uri, opts = any_uri
    t = walled(uri, opts)
    plan = mvcc.compaction.plan(t, target_rows_per_fragment=10)
    assert len(plan.tasks) == 4
    results = mvcc.compaction.run_tasks(plan.tasks, plan.state)
    # another writer changes values in the second group's first fragment (REWRITE_COLUMNS: not carried)
    victim = first_old_id(results[1])
    other = mvcc.open_table(uri, storage_options=opts)
    victim_id = next(
        r["id"] for r in other.to_table(with_row_address=True).to_pylist() if r["_rowaddr"] >> 32 == victim
    )
    other.update({"v": "v + 7"}, where=f"id = {victim_id}", mode="rewrite_columns")
    expected = rows(other)
    outcome = mvcc.compaction.commit(plan.state, results, partial=True)
    assert [first_old_id(r) for r in outcome.committed] == [first_old_id(r) for i, r in enumerate(results) if i != 1]
    assert outcome.conflicted == (results[1],) and "conflicts with Update" in outcome.reasons[0]
    assert len(outcome.versions) == 1 and outcome.state.version == outcome.versions[0]
    latest = mvcc.open_table(uri, storage_options=opts)
    assert rows(latest) == expected
    assert not any(new_files_exist(latest, results[1]))  # the loser's files are removed
    assert all(new_files_exist(latest, r)[0] for r in outcome.committed)
    assert victim in {f.fragment_id for f in latest.get_fragments()}  # the contested fragment is untouched
    latest.optimize.compact_files(target_rows_per_fragment=10)  # folds the update's file; then read the files
    assert rows(latest) == expected == file_rows(latest)


def test_partial_commit_of_results_without_conflict_is_one_rewrite(tmp_uri) -> None:
    t = walled(tmp_uri)
    plan = mvcc.compaction.plan(t, target_rows_per_fragment=10)
    outcome = mvcc.compaction.commit(plan.state, mvcc.compaction.run_tasks(plan.tasks, plan.state), partial=True)
    assert len(outcome.committed) == 4 and outcome.conflicted == () and len(outcome.versions) == 1
    assert mvcc.open_table(tmp_uri).versions()[-1].operation == "Rewrite"


@pytest.mark.parametrize(("groups", "max_commits", "commits"), [(10, 3, 3), (4, 10, 4), (5, 1, 1), (7, 2, 2)])
def test_partial_progress_commits_in_at_most_max_commits_rewrites(any_uri, groups, max_commits, commits) -> None:
    uri, opts = any_uri
    t = walled(uri, opts, groups=groups, small=2)
    before, version = rows(t), t.version
    seen: list[int] = []
    metrics = t.optimize.compact_files(
        target_rows_per_fragment=10,
        partial_progress=True,
        max_commits=max_commits,
        progress=lambda done, total: seen.append(done),
    )
    history = [v.operation for v in mvcc.open_table(uri, storage_options=opts).versions()[version:]]
    assert history == ["ReserveFragments"] + ["Rewrite"] * commits
    assert metrics.commits == commits and len(metrics.versions) == commits and metrics.version == t.version
    assert metrics.fragments_removed == 2 * groups and metrics.fragments_added == groups
    assert metrics.conflicted_groups == () and seen == list(range(1, groups + 1))
    assert rows(t) == before == file_rows(t)


def test_max_commits_needs_partial_progress(tmp_uri) -> None:
    t = walled(tmp_uri)
    with pytest.raises(ValueError, match="partial_progress=True"):
        t.optimize.compact_files(max_commits=2)
    with pytest.raises(ValueError, match="positive int"):
        t.optimize.compact_files(partial_progress=True, max_commits=0)


class MeddlingExecutor:
    """Runs tasks in this thread; after the first result of each `map`, another handle updates a value in the
    fragment `victim` (REWRITE_COLUMNS), so the group holding it loses its commit. `times`: how many maps meddle."""

    def __init__(self, uri: str, victim_id: int, times: int) -> None:
        self.uri, self.victim_id, self.times = uri, victim_id, times
        self.meddled = 0

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[Any]:
        for i, task in enumerate(tasks):
            yield fn(task)
            if i == 0 and self.meddled < self.times:
                self.meddled += 1
                mvcc.open_table(self.uri).update({"v": "v + 1"}, where=f"id = {self.victim_id}", mode="rewrite_columns")


@pytest.mark.parametrize("times", [1, 2])
def test_a_lost_group_is_planned_again_once_then_dropped_and_reported(tmp_uri, times: int) -> None:
    t = walled(tmp_uri, groups=4)
    victim_id = 20 + 3 + 20 + 1  # the second fragment of the third group
    before = {k: v for k, v in rows(t)}
    executor = MeddlingExecutor(tmp_uri, victim_id, times)
    metrics = t.optimize.compact_files(
        target_rows_per_fragment=10, partial_progress=True, max_commits=4, executor=executor
    )
    expected = sorted((k, v + (times if k == victim_id else 0)) for k, v in before.items())
    latest = mvcc.open_table(tmp_uri)
    assert rows(latest) == expected
    if times == 1:  # re-planned on the latest version and landed
        assert metrics.conflicted_groups == () and metrics.commits == 4  # three groups, then the lost one again
        assert metrics.fragments_removed == 12
    else:  # lost again: dropped and reported, the other three landed
        assert len(metrics.conflicted_groups) == 1 and metrics.commits == 3
        assert set(metrics.conflicted_groups[0]) <= {f.fragment_id for f in latest.get_fragments()}  # kept as they were
        assert len(metrics.conflicted_groups[0]) == 3 and metrics.fragments_removed == 9
        assert "conflicts with Update" in metrics.conflicts[0]
    latest.optimize.compact_files(target_rows_per_fragment=10)
    assert rows(latest) == expected == file_rows(latest)


# ---- beside a writer in another process --------------------------------------------------------


def _writer(uri: str, log_path: str, stop_path: str, seed: int) -> None:
    """Append small batches, delete rows and update values (REWRITE_COLUMNS) until `stop_path` exists; log each
    acknowledged change."""
    rng = random.Random(seed)
    next_id = 1_000_000
    with open(log_path, "w") as log:
        while not Path(stop_path).exists():
            t = mvcc.open_table(uri)
            try:
                roll = rng.random()
                if roll < 0.5:
                    ids = list(range(next_id, next_id + rng.randint(1, 3)))
                    next_id = ids[-1] + 1
                    t.append(batch(ids))
                    log.write(f"ack append {' '.join(map(str, ids))}\n")
                else:
                    live = t.to_table(columns=["id"]).column("id").to_pylist()
                    chosen = rng.sample(live, min(len(live), rng.randint(1, 3)))
                    where = f"id IN ({', '.join(map(str, chosen))})"
                    if roll < 0.75:
                        t.delete(where)
                        log.write(f"ack delete {' '.join(map(str, chosen))}\n")
                    else:
                        t.update({"v": "v + 1"}, where=where, mode="rewrite_columns")
                        log.write(f"ack update {' '.join(map(str, chosen))}\n")
            except mvcc.RetryableConflictError:
                log.write("retry\n")
            log.flush()


@pytest.mark.slow  # a writer in another process for seconds: the slow tier's kind
def test_partial_progress_beside_a_writer_process_keeps_every_acknowledged_change(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = mvcc.write_table(batch(list(range(10))), uri)
    for i in range(1, 60):
        t.append(batch(list(range(i * 10, i * 10 + 10))))
    log_path, stop_path = str(tmp_path / "writer.log"), str(tmp_path / "stop")
    proc = multiprocessing.get_context("spawn").Process(target=_writer, args=(uri, log_path, stop_path, 7))
    proc.start()
    runs: list[mvcc.compaction.CompactionMetrics] = []
    try:
        started = time.monotonic()
        while not (Path(log_path).exists() and "ack" in Path(log_path).read_text()):
            assert time.monotonic() - started < 120 and proc.is_alive(), "the writer did not start"
            time.sleep(0.1)
        deadline = time.monotonic() + 12
        while time.monotonic() < deadline:
            with failpoints.armed("commit.after_transaction_file", "sleep(0.15)"):
                runs.append(
                    mvcc.open_table(uri).optimize.compact_files(
                        target_rows_per_fragment=40, max_rows_per_task=40, partial_progress=True, max_commits=3
                    )
                )
    finally:
        Path(stop_path).touch()
        proc.join(timeout=60)
    assert proc.exitcode == 0
    values = {i: 0 for i in range(600)}
    for line in Path(log_path).read_text().splitlines():
        words = line.split()
        if words[0] != "ack":
            continue
        ids = [int(w) for w in words[2:]]
        for i in ids:
            if words[1] == "append":
                values[i] = 0
            elif words[1] == "delete":
                values.pop(i, None)
            elif i in values:
                values[i] += 1
    expected = sorted(values.items())
    final = mvcc.open_table(uri)
    assert rows(final) == expected
    assert sum(m.commits for m in runs) > 0  # compaction made progress beside the writer
    print(
        f"{len(runs)} runs, {sum(m.commits for m in runs)} Rewrites, "
        f"{sum(len(m.conflicted_groups) for m in runs)} groups dropped, {Path(log_path).read_text().count('ack')} acks"
    )
    final.optimize.compact_files(target_rows_per_fragment=10_000)  # fold every file, then read the files
    assert rows(final) == expected == file_rows(final)
    store = open_store(uri)
    referenced = {df.path for f in final.state.manifest.fragments for df in f.files}
    assert referenced <= {m.path.removeprefix("data/") for m in store.list("data")}


def test_partial_progress_with_deferred_index_remap_keeps_lookups_right(tmp_uri) -> None:
    """Several Rewrites each carry a fragment reuse index version: lookups through the index still find every row."""
    t = mvcc.write_table(batch(list(range(20))), tmp_uri)
    keys = []
    for g in range(6):
        t.append(batch(list(range(100 + g * 50, 130 + g * 50))))
        for i in range(3):
            keys.append(1000 + g * 10 + i)
            t.append(batch([keys[-1]]))
    t.create_index("id", "BTREE")
    t.delete("id = 1001")
    metrics = t.optimize.compact_files(
        target_rows_per_fragment=25, defer_index_remap=True, partial_progress=True, max_commits=3
    )
    assert metrics.commits == 2 and metrics.fragments_removed == 17
    latest = mvcc.open_table(tmp_uri)
    for key in [*keys, 105, 20, 379]:
        found = latest.to_table(filter=f"id = {key}").num_rows
        assert found == (0 if key in (1001, 20) else 1), key
    latest.optimize.optimize_indices()
    assert sum(latest.to_table(filter=f"id = {key}").num_rows for key in keys) == len(keys) - 1


@pytest.mark.parametrize("seed", range(10))
def test_randomized_concurrent_changes_between_tasks_and_a_partial_commit(tmp_uri, seed: int) -> None:
    """Random appends, deletes and value updates by another handle between the tasks and the partial commit: what
    lands plus what was set aside leaves exactly the other writer's rows, and every loser's files are gone."""
    rng = random.Random(seed)
    t = walled(tmp_uri, groups=rng.randint(2, 6), small=rng.randint(2, 4))
    plan = mvcc.compaction.plan(t, target_rows_per_fragment=10)
    results = mvcc.compaction.run_tasks(plan.tasks, plan.state)
    values = dict(rows(t))
    other = mvcc.open_table(tmp_uri)
    next_id = 10_000
    for _ in range(rng.randint(1, 5)):
        live = sorted(values)
        chosen = rng.sample(live, rng.randint(1, 3))
        where = f"id IN ({', '.join(map(str, chosen))})"
        roll = rng.random()
        if roll < 0.3:
            other.append(batch([next_id]))
            values[next_id] = 0
            next_id += 1
        elif roll < 0.6:
            other.delete(where)
            for i in chosen:
                values.pop(i)
        else:
            other.update({"v": "v + 1"}, where=where, mode="rewrite_columns")
            for i in chosen:
                values[i] += 1
    outcome = mvcc.compaction.commit(plan.state, results, partial=True)
    assert len(outcome.committed) + len(outcome.conflicted) == len(results)
    latest = mvcc.open_table(tmp_uri)
    assert rows(latest) == sorted(values.items())
    for lost in outcome.conflicted:
        assert not any(new_files_exist(latest, lost))
    landed_ids = {f.fragment_id for f in latest.get_fragments()}
    for result in outcome.committed:
        assert all(new_files_exist(latest, result))
        assert not {pb_id for pb_id in _old(result)} & landed_ids  # its old fragments are gone
    latest.optimize.compact_files(target_rows_per_fragment=10)
    assert rows(latest) == sorted(values.items()) == file_rows(latest)


def _old(result: mvcc.compaction.RewriteResult) -> set[int]:
    from mvcc_core._proto import table_pb2 as pb

    return {pb.DataFragment.FromString(f).id for f in result.old_fragments}
