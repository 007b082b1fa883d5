"""The compaction job's run config on real tables and a real instance: `where` and `sort_by` scope and lay out
what one run rewrites; a bad scope fails the step naming the config; with `partial_progress` a group that
loses to a concurrent change (made from another thread between the rewrite and the commit) is dropped and
reported while the other groups land, where without it the whole Rewrite is lost.

The concurrent change is an in-place update of one row's column (`mode="rewrite_columns"`): a concurrent
*delete* of rows a Rewrite moved does not conflict in this core, which carries the deletions onto the new
fragments (docs/design/conflicts.md), so it cannot make a group lose (the first assertion below checks it
would have landed anyway)."""

import threading
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_dagster import MvccResource, build_compaction_job


def days_table(uri: str) -> mvcc.Table:
    """Eight fragments of 10 rows: n 0-39 on day a (fragments 0-3), 40-79 on day b, each fragment's n reversed."""
    t = mvcc.write_table(pa.table({"n": list(range(9, -1, -1)), "day": ["a"] * 10}), uri)
    for i in range(1, 8):
        t.append(pa.table({"n": list(range(i * 10 + 9, i * 10 - 1, -1)), "day": ["a" if i < 4 else "b"] * 10}))
    return t


def observation(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    """The metadata of the commit step's observation (the last one the run recorded)."""
    events = [e for e in result.all_events if e.event_type_value == "ASSET_OBSERVATION"]
    meta = events[-1].event_specific_data.asset_observation.metadata  # type: ignore[union-attr]
    return {k: v.value for k, v in meta.items()}


def test_where_and_sort_by_from_the_run_config(instance: dg.DagsterInstance, warehouse: str) -> None:
    uri = f"{warehouse}/days"
    days_table(uri)
    job = build_compaction_job("days", executor="in_process")
    resources = {"mvcc": MvccResource(root_uri=warehouse)}
    config = {"ops": {"reserve_fragments": {"config": {"where": "day = 'a'", "sort_by": ["n"]}}}}
    result = job.execute_in_process(run_config=config, instance=instance, resources=resources)
    assert result.success
    t = mvcc.open_table(uri)
    fragments = t.get_fragments()
    # day a's four fragments became one, sorted by n; day b's four are untouched
    assert len(fragments) == 5
    rows = t.to_table().to_pylist()
    day_a = [r["n"] for r in rows if r["day"] == "a"]
    assert day_a == list(range(40))  # sorted (the writes had each fragment reversed)
    day_b = [r["n"] for r in rows if r["day"] == "b"]
    assert day_b == [n for i in range(4, 8) for n in range(i * 10 + 9, i * 10 - 1, -1)]
    assert fragments[0].count_rows() == 40
    reserved = [
        e.event_specific_data.asset_observation.metadata  # type: ignore[union-attr]
        for e in result.all_events
        if e.event_type_value == "ASSET_OBSERVATION"
    ][0]
    assert reserved["where"].value == "day = 'a'" and reserved["layout"].value == "sort by n"
    assert reserved["fragments_planned"].value == 4


def test_a_bad_scope_fails_naming_the_config(instance: dg.DagsterInstance, warehouse: str) -> None:
    """A z-order of one column fails the reserve step (nothing committed), in the config's words; at
    definition time the same scope is refused by the factory."""
    days_table(f"{warehouse}/bad")
    job = build_compaction_job("bad", executor="in_process")
    result = job.execute_in_process(
        run_config={"ops": {"reserve_fragments": {"config": {"zorder_by": ["n"]}}}},
        instance=instance,
        resources={"mvcc": MvccResource(root_uri=warehouse)},
        raise_on_error=False,
    )
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    message = failure.step_failure_data.error.message  # type: ignore[union-attr]
    assert "reserve_fragments config" in message and "zorder_by" in message
    assert mvcc.open_table(f"{warehouse}/bad").version == 8
    with pytest.raises(ValueError, match="compaction job of bad: .*zorder_by"):
        build_compaction_job("bad", zorder_by=["n"])


def concurrent_change_after_rewrite(uri: str, change: str) -> dg.HookDefinition:
    """A hook on the rewrite step: once the tasks have written their fragments (nothing committed yet), another
    thread changes row n = 0, which lives in the first group's first fragment: ``delete`` deletes it,
    ``update`` sets its day in place (a REWRITE_COLUMNS update)."""

    def act() -> None:
        t = mvcc.open_table(uri)
        if change == "delete":
            t.delete("n = 0")
        else:
            t.update({"day": "'z'"}, where="n = 0", mode="rewrite_columns")

    @dg.success_hook(name=f"concurrent_{change}")
    def hook(context: dg.HookContext) -> None:
        if context.op.name != "rewrite_fragments":
            return
        worker = threading.Thread(target=act)
        worker.start()
        worker.join()

    return hook


def run_with_change(
    instance: dg.DagsterInstance, warehouse: str, name: str, change: str, partial: bool
) -> tuple[dg.ExecuteInProcessResult, mvcc.Table]:
    uri = f"{warehouse}/{name}"
    days_table(uri)
    options = mvcc.compaction.CompactionOptions(target_rows_per_fragment=1000, max_rows_per_task=20)  # 4 groups
    job = build_compaction_job(name, options=options, partial_progress=partial).with_hooks(
        {concurrent_change_after_rewrite(uri, change)}
    )
    result = job.execute_in_process(
        instance=instance, resources={"mvcc": MvccResource(root_uri=warehouse)}, raise_on_error=False
    )
    return result, mvcc.open_table(uri)


def test_a_concurrent_delete_is_carried_onto_the_rewrite(instance: dg.DagsterInstance, warehouse: str) -> None:
    result, t = run_with_change(instance, warehouse, "deleted", "delete", partial=False)
    assert result.success and len(t.get_fragments()) == 4
    assert sorted(t.to_table().column("n").to_pylist()) == list(range(1, 80))


@pytest.mark.parametrize("partial", [False, True])
def test_partial_commit_keeps_the_groups_that_do_not_conflict(
    instance: dg.DagsterInstance, warehouse: str, partial: bool
) -> None:
    result, t = run_with_change(instance, warehouse, "groups", "update", partial)
    assert sorted(t.to_table().column("n").to_pylist()) == list(range(80))
    assert t.to_table(filter="n = 0").column("day").to_pylist() == ["z"]  # the update holds either way
    if not partial:
        # one Rewrite of the four groups: the update of a rewritten fragment makes it lose, every group's work
        assert not result.success
        [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
        assert "partial_progress" in failure.step_failure_data.error.message  # type: ignore[union-attr]
        assert len(t.get_fragments()) == 8
        return
    assert result.success
    meta = observation(result)
    assert (meta["groups_committed"], meta["groups_dropped"]) == (3, 1)
    assert len(meta["dropped_reasons"]) == 1 and "conflicts with Update" in meta["dropped_reasons"][0]
    assert meta["partial_progress"] is True and meta["fragments_removed"] == 6
    # groups 2-4 (fragments 2-7) became three fragments; group 1's two stay as they were
    assert len(t.get_fragments()) == 5
    assert t.transaction().operation.name == "Rewrite"
