"""The advice, the health figures and retention under the table's policy, on real tables through the `mvcc`
connection (in process: the operators' `execute` with no outlets needs nothing of the task context)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from airflow.sdk.exceptions import AirflowSkipException

import mvcc_core as mvcc
from mvcc_airflow import MvccAdviseOperator, MvccCleanupOperator
from mvcc_airflow.hooks import MvccHook
from mvcc_airflow.utils.health import health_figures


def _versions(uri: str, count: int) -> mvcc.Table:
    t = mvcc.write_table(pa.table({"id": [0]}), uri)
    for i in range(1, count):
        t = t.append(pa.table({"id": [i]}))
    return t


def test_cleanup_follows_the_tables_retention_policy_when_not_told(connection: str) -> None:
    t = _versions(f"{connection}/events", 4)
    t.update_config({"mvcc.retention.older_than": "0s", "mvcc.retention.retain_versions": "2"})  # version 5
    result = MvccCleanupOperator(task_id="c", table="events", dry_run=False, when_advised=True).execute({})
    assert result["metrics"]["removed_versions"] == [1, 2, 3]
    assert result["metrics"]["retention"] == {
        "older_than": "0s",
        "older_than_from": "table policy",
        "retain_versions": "2",
        "retain_versions_from": "table policy",
    }
    assert [v.version for v in mvcc.open_table(t.uri).versions()] == [4, 5]
    # nothing is left to remove under the policy: the advice names no retention and the task is skipped
    with pytest.raises(AirflowSkipException, match="no retention advised"):
        MvccCleanupOperator(task_id="c", table="events", dry_run=False, when_advised=True).execute({})


def test_an_argument_wins_over_the_policy_and_the_rest_still_follows_it(connection: str) -> None:
    _versions(f"{connection}/events", 5)
    MvccHook().open_table("events").update_config({"mvcc.retention.retain_versions": "3"})  # version 6
    op = MvccCleanupOperator(task_id="c", table="events", older_than="0s", dry_run=False)
    result = op.execute({})
    assert result["metrics"]["removed_versions"] == [1, 2, 3]  # the newest 3 kept, by the policy
    setting = result["metrics"]["retention"]
    assert (setting["older_than_from"], setting["retain_versions_from"]) == ("argument", "table policy")
    # an explicit age nothing is older than: a dry run removes nothing, so the task is skipped
    with pytest.raises(AirflowSkipException, match="no retention advised"):
        MvccCleanupOperator(task_id="c", table="events", older_than="1000d", when_advised=True).execute({})


def test_the_advice_and_the_health_figures_of_a_table_with_deletions(connection: str) -> None:
    t = mvcc.write_table(pa.table({"id": list(range(100))}), f"{connection}/events")
    t.delete("id < 40")
    result = MvccAdviseOperator(task_id="a", table="events").execute({})  # no short circuit: just the advice
    assert result["due"] == ["materialize_deletions"] and result["version"] == 2
    figures = result["metrics"]
    assert figures["deleted_share"] == 0.4 and figures["small_fragments"] == 0 and figures["versions_kept"] == 2
    assert figures["top_advice"] == "materialize_deletions" and figures["top_advice_score"] == pytest.approx(0.4)
    assert figures["stored_bytes"] == figures["live_bytes"] > 0  # the delete wrote a deletion file, no data file
    t.checkout_latest().optimize.compact_files()
    after = health_figures(mvcc.open_table(t.uri))
    assert after["deleted_share"] == 0.0 and after["top_advice"] is None
    assert after["stored_bytes"] > after["live_bytes"]  # the old data file is kept until retention
    assert MvccAdviseOperator(task_id="a", table="events", kinds=["retention"]).execute({})["due"] == []
