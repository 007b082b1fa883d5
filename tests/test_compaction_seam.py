"""The compaction seam an orchestrator uses: the plan names the version of its own ReserveFragments (even when
another writer commits before the tasks run), `commit` takes the plan's state and returns the Rewrite's
state, and `summarize` is the one sum of task results."""

import pyarrow as pa

import mvcc_core as mvcc


def fragmented(uri: str, fragments: int = 6) -> mvcc.Table:
    t = mvcc.write_table(pa.table({"n": [0]}), uri)
    for i in range(1, fragments):
        t.append(pa.table({"n": [i]}))
    return t


def test_plan_carries_its_reservation_and_commit_takes_the_plan_state(tmp_path) -> None:
    t = fragmented(str(tmp_path / "t"))
    plan = mvcc.compaction.plan(t, target_rows_per_fragment=4)
    assert plan.read_version == t.version and plan.reserved_version == t.version + 1
    reserved = t.checkout(plan.reserved_version).transaction()
    assert reserved.operation.name == "ReserveFragments"
    assert plan.fragments == 6 and plan.new_fragment_ids == 2
    mvcc.open_table(t.uri).append(pa.table({"n": [99]}))  # another writer lands before the tasks run

    results = mvcc.compaction.run_tasks(plan.tasks, plan.state)
    committed = mvcc.compaction.commit(plan.state, results)
    assert committed.version == plan.reserved_version + 2  # on top of the concurrent append
    metrics = mvcc.compaction.summarize(results, read_state=plan.state, committed=committed)
    assert (metrics.fragments_removed, metrics.fragments_added, metrics.rows) == (6, 2, 6)
    assert (metrics.fragments_before, metrics.fragments_after) == (6, 3)
    assert metrics.version == committed.version and metrics.files_removed == 6
    assert metrics.bytes_read == sum(r.bytes_read for r in results) > 0
    assert sorted(mvcc.open_table(t.uri).to_table()["n"].to_pylist()) == [0, 1, 2, 3, 4, 5, 99]


def test_nothing_to_do_reserves_nothing(tmp_path) -> None:
    t = fragmented(str(tmp_path / "t"), 1)
    plan = mvcc.compaction.plan(t)
    assert plan.tasks == [] and plan.reserved_version is None and plan.fragments == 0
    assert mvcc.open_table(t.uri).version == t.version
    assert mvcc.compaction.summarize([]) == mvcc.compaction.CompactionMetrics()
