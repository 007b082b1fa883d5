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
