"""Started by a new version of the table ``events``, two ways:

- ``mvcc_wait_for_version``: a version sensor in the triggerer (``deferrable=True``) that waits for a commit
  from anywhere (Spark, the CLI, another DAG) and hands the version to the next task;
- ``mvcc_on_events_asset``: scheduled on the table's asset, so it runs after each asset event, i.e. each time
  a task that changes the table's data (``mvcc_example_writer`` below, a restore) commits through Airflow.

``mvcc_example_writer`` appends a batch of rows (creating the table on the first run) and emits the asset
event with the version it committed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from airflow.sdk import DAG, task

import mvcc_core as mvcc
from mvcc_airflow import MvccHook, MvccVersionSensor, table_asset
from mvcc_airflow.assets import OPERATION_EXTRA, VERSION_EXTRA

TABLE = "events"
EVENTS = table_asset(TABLE)
# What the three DAGs have in common (each names its own id and schedule).
EXAMPLE_DAG: dict[str, Any] = {
    "start_date": datetime(2026, 1, 1),
    "catchup": False,
    "tags": ["mvcc", "example"],
    "doc_md": __doc__,
}

with DAG(
    dag_id="mvcc_example_writer",
    schedule=None,
    **EXAMPLE_DAG,
):

    @task(outlets=[EVENTS])
    def append_batch(*, outlet_events: Any = None, run_id: str | None = None, dag_run: Any = None) -> int:
        hook = MvccHook()
        uri = hook.table_uri(TABLE)
        options, external = hook.storage_options(TABLE)
        now = datetime.now(UTC)
        batch = pa.table({"id": list(range(100)), "at": [now] * 100})
        # what `versions()` and `mvcc versions` show for this commit: which run wrote it, and why
        commit = {
            "commit_message": f"{dag_run.dag_id if dag_run else 'mvcc_example_writer'}: 100 example rows",
            "transaction_properties": {"airflow.run_id": run_id or ""},
        }
        # append creates the table on the first run (an Overwrite, the table's first version), appends after it
        table = mvcc.write_table(batch, uri, mode="append", storage_options=options, external_store=external, **commit)
        operation = table.versions(limit=1)[-1].operation  # what the version is, as the table records it
        outlet_events[EVENTS].extra = {VERSION_EXTRA: table.version, OPERATION_EXTRA: operation}
        return table.version

    append_batch()

with DAG(
    dag_id="mvcc_wait_for_version",
    schedule=None,
    **EXAMPLE_DAG,
):
    new_version = MvccVersionSensor(
        task_id="new_version", table=TABLE, deferrable=True, skip_maintenance=True, poke_interval=10
    )

    @task
    def report(version: int) -> None:
        print(f"{TABLE} has a new version: {version}")

    report(new_version.output)

with DAG(
    dag_id="mvcc_on_events_asset",
    schedule=[EVENTS],
    **EXAMPLE_DAG,
):

    @task
    def read_new_rows(*, triggering_asset_events: Any = None) -> None:
        for event in triggering_asset_events[EVENTS]:
            print(f"{TABLE}: version {event.extra.get(VERSION_EXTRA)} by {event.extra.get(OPERATION_EXTRA)}")

    read_new_rows()
