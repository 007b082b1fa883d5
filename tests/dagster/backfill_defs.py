"""A daily-partitioned asset for the backfill test, importable by the processes that run it (the runs of the
backfill are launched in worker processes; each run's step in another process by the multiprocess executor)."""

import os
from datetime import timedelta
from typing import Any

import dagster as dg
import pyarrow as pa

from mvcc_dagster import MvccIOManager, conflict_retry_policy

WAREHOUSE_ENV = "MVCC_TEST_WAREHOUSE"
ROWS_PER_DAY = 96
daily = dg.DailyPartitionsDefinition(start_date="2026-02-01", end_date="2026-02-09")


@dg.asset(partitions_def=daily, metadata={"partition_expr": "ts"}, retry_policy=conflict_retry_policy())
def clicks(context: dg.AssetExecutionContext) -> pa.Table:
    """Every quarter hour of the day, tagged with the partition key."""
    start = context.partition_time_window.start
    return pa.table(
        {
            "ts": [start + timedelta(minutes=15 * i) for i in range(ROWS_PER_DAY)],
            "day": [context.partition_key] * ROWS_PER_DAY,
        }
    )


defs = dg.Definitions(
    assets=[clicks],
    jobs=[
        dg.define_asset_job(
            "clicks_job", selection=[clicks], executor_def=dg.multiprocess_executor.configured({"max_concurrent": 4})
        )
    ],
    resources={"io_manager": MvccIOManager(root_uri=dg.EnvVar(WAREHOUSE_ENV), conflict_retry_delay=0.05)},
)


def clicks_job() -> dg.JobDefinition:
    """The job, for `reconstructable` (the multiprocess executor re-imports it in the step's process)."""
    return defs.resolve_job_def("clicks_job")


def run_partition(instance_ref: Any, key: str) -> tuple[str, bool]:
    """One run of the backfill (what a run launcher does): materialize partition `key` on the shared instance."""
    assert os.environ.get(WAREHOUSE_ENV)
    # The step's process imports this module from the run's working directory (Dagster resolves local modules
    # there), so the run works in this directory, as a code location's working_directory would.
    os.chdir(os.path.dirname(os.path.abspath(__file__)))
    job = dg.reconstructable(clicks_job)
    with (
        dg.DagsterInstance.from_ref(instance_ref) as instance,
        dg.execute_job(job, instance=instance, tags={"dagster/partition": key}, raise_on_error=False) as result,
    ):
        return result.run_id, result.success
