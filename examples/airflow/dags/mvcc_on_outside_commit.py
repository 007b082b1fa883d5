"""Started by commits made outside Airflow: ``mvcc_on_outside_commit`` is scheduled on the watched asset of the
table ``partner_feed``, the table ``examples/outside_writer.py`` appends to with `mvcc_core` alone.

``table_asset("partner_feed", watch=True)`` gives the asset an `AssetWatcher`: the triggerer polls the table's
latest version every ``poll_interval`` seconds and emits one asset event per new version, whoever committed
it, with the version, its operation, message and transaction properties as the event's ``payload``. Each
event (or each batch of events that arrive before the run starts) starts one run of this DAG, which reads the
rows the new versions hold.

    python examples/outside_writer.py     # one commit: one asset event, one run
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, task

from mvcc_airflow import MvccHook, table_asset

TABLE = "partner_feed"
PARTNER_FEED = table_asset(TABLE, watch=True, poll_interval=10, skip_maintenance=True)

with DAG(
    dag_id="mvcc_on_outside_commit",
    schedule=[PARTNER_FEED],
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["mvcc", "example"],
    doc_md=__doc__,
):

    @task
    def read_new_versions(*, triggering_asset_events: Any = None) -> list[int]:
        """Name each new version and count the rows it holds (the table at that version)."""
        versions = []
        for event in triggering_asset_events[PARTNER_FEED]:
            payload = event.extra.get("payload", {})
            version = int(payload["version"])
            rows = MvccHook().open_table(TABLE, version).count_rows()
            print(f"{TABLE}: version {version} by {payload.get('operation')} ({payload.get('message')!r}), {rows} rows")
            versions.append(version)
        return versions

    read_new_versions()
