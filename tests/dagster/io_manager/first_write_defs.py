"""Daily assets of every write mode for the first-write race test
(tests/dagster/io_manager/test_dagster_first_write_race.py), importable by run and step processes: a partitioned
overwrite (pyarrow), a merge (pyarrow) and an append (pandas), run with the multiprocess executor so that each step
commits from its own process."""

import datetime as dt

import dagster as dg
import pandas as pd
import pyarrow as pa

from mvcc_dagster import MvccIOManager, conflict_retry_policy

WAREHOUSE_ENV = "MVCC_TEST_WAREHOUSE"
ROWS_PER_DAY = 20
USERS = 5

daily = dg.DailyPartitionsDefinition(start_date="2026-11-01", timezone="UTC")


def day_of(context: dg.AssetExecutionContext) -> dt.date:
    return dt.date.fromisoformat(context.partition_key)


@dg.asset(partitions_def=daily, metadata={"partition_expr": "day"}, retry_policy=conflict_retry_policy())
def events(context: dg.AssetExecutionContext) -> pa.Table:
    """The day's events: the IO manager replaces that day's rows (created by the first day written)."""
    day = day_of(context)
    base = day.toordinal() * 1000
    return pa.table(
        {
            "day": pa.array([day] * ROWS_PER_DAY, pa.date32()),
            "event_id": pa.array([base + i for i in range(ROWS_PER_DAY)], pa.int64()),
            "user_id": pa.array([i % USERS for i in range(ROWS_PER_DAY)], pa.int64()),
        }
    )


@dg.asset(
    partitions_def=daily,
    metadata={"mvcc/write_mode": "merge", "mvcc/merge_on": "user_id"},
    retry_policy=conflict_retry_policy(),
)
def latest(events: pa.Table) -> pa.Table:
    """Each user's last event of the day (an upsert on user_id)."""
    last = {}
    for row in events.sort_by("event_id").to_pylist():
        last[row["user_id"]] = row
    return pa.Table.from_pylist(list(last.values()), schema=events.schema)


@dg.asset(partitions_def=daily, metadata={"mvcc/write_mode": "append"}, retry_policy=conflict_retry_policy())
def audit(context: dg.AssetExecutionContext) -> pd.DataFrame:
    """One audit row per run and day (appended)."""
    return pd.DataFrame({"day": [context.partition_key], "run_id": [context.run_id]})


job = dg.define_asset_job("first_writes", selection=[events, latest, audit], executor_def=dg.multiprocess_executor)

defs = dg.Definitions(
    assets=[events, latest, audit],
    jobs=[job],
    resources={"io_manager": MvccIOManager(root_uri=dg.EnvVar(WAREHOUSE_ENV))},
)


def first_writes_job() -> dg.JobDefinition:
    """The job, for `reconstructable`."""
    return defs.resolve_job_def("first_writes")


def example_events_job() -> dg.JobDefinition:
    """The example's `daily_events` job (definitions.py at the repository root, which must be importable;
    ``MVCC_WAREHOUSE`` names its warehouse), for `reconstructable`."""
    import definitions

    return definitions.defs.resolve_job_def("daily_events")


def example_sales_job() -> dg.JobDefinition:
    """The example's `daily_sales_catalog` job (the catalog multi_asset and its reader), for `reconstructable`."""
    import definitions

    return definitions.defs.resolve_job_def("daily_sales_catalog")
