"""The operators' argument checks (when the DAG file is parsed) and their retry defaults."""

from __future__ import annotations

from datetime import timedelta

import pytest

from mvcc_airflow import (
    MvccCleanupOperator,
    MvccCompactOperator,
    MvccRestoreOperator,
    MvccVersionSensor,
    mvcc_compaction_group,
)
from mvcc_airflow.operators import to_duration


def test_older_than_takes_the_clis_durations() -> None:
    assert to_duration("7d") == timedelta(days=7)
    assert to_duration("1w2d") == timedelta(days=9)
    assert to_duration(timedelta(hours=3)) == timedelta(hours=3)
    with pytest.raises(ValueError, match=r"older_than: not a duration: '7 days'"):
        to_duration("7 days")
    with pytest.raises(ValueError, match="older_than must not be negative"):
        to_duration(timedelta(days=-1))


def test_operators_refuse_bad_arguments_by_their_names() -> None:
    with pytest.raises(ValueError, match="older_than: not a duration"):
        MvccCleanupOperator(task_id="c", table="t", older_than="soon")
    with pytest.raises(ValueError, match="retain_versions must be a positive integer"):
        MvccCleanupOperator(task_id="c", table="t", older_than="7d", retain_versions=0)
    with pytest.raises(ValueError, match=r"options: unknown compaction option\(s\) \['target_rows'\]"):
        MvccCompactOperator(task_id="c", table="t", options={"target_rows": 5})
    with pytest.raises(ValueError, match="options: target_rows_per_fragment must be positive"):
        mvcc_compaction_group("t", options={"target_rows_per_fragment": 0})
    with pytest.raises(ValueError, match="exactly one of version, tag and timestamp"):
        MvccRestoreOperator(task_id="r", table="memory://wh/t", version=3, tag="good")
    with pytest.raises(ValueError, match="table must be a table name or a uri"):
        MvccCompactOperator(task_id="c", table="")
    with pytest.raises(ValueError, match="give after_version with mode='reschedule'"):
        MvccVersionSensor(task_id="s", table="t", mode="reschedule")


def test_operators_retry_with_backoff_unless_told_otherwise() -> None:
    op = MvccCleanupOperator(task_id="c", table="t", older_than="7d")
    assert (op.retries, op.retry_delay, op.retry_exponential_backoff) == (4, timedelta(seconds=2), 2.0)
    assert MvccCleanupOperator(task_id="c", table="t", older_than="7d", retries=0).retries == 0
    assert op.dry_run is True


def test_compaction_options_are_checked_by_their_argument_names() -> None:
    from mvcc_airflow import MvccAdviseOperator, MvccPlanFleetOperator

    with pytest.raises(ValueError, match="max_bytes must be positive"):
        MvccCompactOperator(task_id="c", table="t", max_bytes=0)
    with pytest.raises(ValueError, match=r"max_bytes: 'lots' is not a size"):
        MvccCompactOperator(task_id="c", table="t", max_bytes="lots")
    with pytest.raises(ValueError, match="max_bytes is given twice"):
        MvccCompactOperator(task_id="c", table="t", options={"max_bytes": 5}, max_bytes=5)
    with pytest.raises(ValueError, match="give sort_by or zorder_by, not both"):
        mvcc_compaction_group("t", sort_by=["a"], zorder_by=["x", "y"])
    with pytest.raises(ValueError, match="zorder_by takes 2 to 4 columns"):
        MvccCompactOperator(task_id="c", table="t", zorder_by=["x"])
    with pytest.raises(ValueError, match="where must be a SQL filter"):
        MvccCompactOperator(task_id="c", table="t", where="  ")
    with pytest.raises(ValueError, match="max_commits bounds the Rewrites of partial progress"):
        MvccCompactOperator(task_id="c", table="t", max_commits=2)
    with pytest.raises(ValueError, match="partial_progress must be True or False"):
        mvcc_compaction_group("t", partial_progress="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_bytes cannot be a template here"):
        mvcc_compaction_group("t", max_bytes="{{ params.budget }}")
    with pytest.raises(ValueError, match="short_circuit must be True or False"):
        MvccAdviseOperator(task_id="a", table="t", short_circuit="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kinds must name advice kinds"):
        MvccAdviseOperator(task_id="a", table="t", kinds=["vacuum"])
    with pytest.raises(ValueError, match=r"quiet_hours is \(start, end\)"):
        MvccPlanFleetOperator(task_id="p", tables=["t"], quiet_hours=["22:00"])
    with pytest.raises(ValueError, match="tables must be a list of table names"):
        MvccPlanFleetOperator(task_id="p", tables="t")
    # templated values are checked once rendered; a size string and a column string are the CLI's and the policy's
    op = MvccCompactOperator(task_id="c", table="t", max_bytes="{{ params.budget }}", sort_by="user,ts")
    op.max_bytes = "128MiB"
    assert op.fields() == {"max_bytes": 128 * 2**20, "sort_by": ["user", "ts"]}
    op.max_bytes = "lots"
    with pytest.raises(Exception, match=r"c: max_bytes: 'lots' is not a size"):
        op.fields()


def test_retention_follows_the_tables_policy_unless_told() -> None:
    op = MvccCleanupOperator(task_id="c", table="t")
    assert op.older_than is None and op.retain_versions is None and op.dry_run is True


def test_fleet_steps_map_the_chosen_tables_in_rank_order(tmp_path) -> None:
    import pyarrow as pa

    import mvcc_core as mvcc
    from mvcc_airflow.operators import fleet_steps

    for name, batches in (("big", 12), ("small", 4), ("fine", 1)):
        t = None
        for i in range(batches):
            data = pa.table({"id": [i]})
            t = mvcc.write_table(data, str(tmp_path / name)) if t is None else t.append(data)
    plan = mvcc.compaction.plan_fleet({n: str(tmp_path / n) for n in ("big", "small", "fine")}).to_dict()
    shares = {e["name"]: e["byte_share"] for e in plan["chosen"]}
    steps = fleet_steps(plan, {"big": "wh/big", "small": "wh/small"})
    assert steps["compact"] == [
        {"table": "wh/big", "max_bytes": shares["big"]},
        {"table": "wh/small", "max_bytes": shares["small"]},
    ]
    assert [s["table"] for s in steps["optimize_indices"]] == ["wh/big", "wh/small"]  # after a compaction too
    assert steps["retention"] == []
