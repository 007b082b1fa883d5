"""Assets of the backfill-via-restore tests, importable by a code location and by run workers.

`orders` (daily, partition-scoped overwrite on `day`) and `customer_last` (daily, ``merge`` on `customer`: the
last order per customer, an upsert that a partition re-run cannot undo). The run tag ``deploy: bad`` is the
bad deploy: negative amounts and an order of a customer ``ghost`` that does not exist.
"""

import os
from datetime import date
from typing import Any

import dagster as dg
import pyarrow as pa

from mvcc_dagster import MvccIOManager

WAREHOUSE_ENV = "MVCC_TEST_WAREHOUSE"
CUSTOMERS = ["ann", "bob", "cid"]
daily = dg.DailyPartitionsDefinition(start_date="2026-03-01", end_date="2026-03-15")


def orders_of(day: str, bad: bool) -> pa.Table:
    """The orders of `day`: one per customer (amount from the day), plus the ghost order of a bad deploy."""
    d = date.fromisoformat(day)
    customers = CUSTOMERS + (["ghost"] if bad else [])
    sign = -1 if bad else 1
    return pa.table(
        {
            "day": pa.array([d] * len(customers), pa.date32()),
            "customer": customers,
            "amount": pa.array([sign * (d.day * 10 + i) for i in range(len(customers))], pa.int64()),
        }
    )


@dg.asset(partitions_def=daily, metadata={"partition_expr": "day"})
def orders(context: dg.AssetExecutionContext) -> pa.Table:
    """The day's orders (the run tag ``deploy`` = ``bad`` writes wrong rows)."""
    return orders_of(context.partition_key, context.run.tags.get("deploy") == "bad")


@dg.asset(partitions_def=daily, metadata={"mvcc/write_mode": "merge", "mvcc/merge_on": "customer"})
def customer_last(orders: pa.Table) -> pa.Table:
    """Each customer's latest order among the loaded day(s), upserted on customer."""
    rows = sorted(orders.to_pylist(), key=lambda r: (r["customer"], r["day"]))
    latest = {r["customer"]: r for r in rows}
    return pa.table(
        {
            "customer": list(latest),
            "day": pa.array([r["day"] for r in latest.values()], pa.date32()),
            "amount": pa.array([r["amount"] for r in latest.values()], pa.int64()),
        }
    )


@dg.asset(partitions_def=daily, metadata={"partition_expr": "day"}, backfill_policy=dg.BackfillPolicy.single_run())
def order_totals(orders: pa.Table) -> pa.Table:
    """Per day: the number of orders and their sum (a backfill of it is one run over the whole range)."""
    grouped = orders.group_by("day").aggregate([("amount", "sum"), ("amount", "count")])
    renamed = grouped.rename_columns({"amount_sum": "total", "amount_count": "orders"})
    return renamed.select(["day", "orders", "total"])


def resources() -> dict[str, Any]:
    return {"io_manager": MvccIOManager(root_uri=dg.EnvVar(WAREHOUSE_ENV))}


defs = dg.Definitions(
    assets=[orders, customer_last, order_totals],
    jobs=[dg.define_asset_job("orders_job", selection=[orders, customer_last], executor_def=dg.in_process_executor)],
    resources=resources(),
    executor=dg.in_process_executor,  # the backfill daemon's runs execute their steps in the run's process
)


def orders_job() -> dg.JobDefinition:
    """The job, for `reconstructable` (runs launched in other processes)."""
    return defs.resolve_job_def("orders_job")


def run_partition(instance_ref: Any, key: str, tags: dict[str, str]) -> tuple[str, bool]:
    """One run of a backfill, as a run launcher starts it: partition `key` with the backfill's tags."""
    assert os.environ.get(WAREHOUSE_ENV)
    os.chdir(os.path.dirname(os.path.abspath(__file__)))
    job = dg.reconstructable(orders_job)
    with (
        dg.DagsterInstance.from_ref(instance_ref) as instance,
        dg.execute_job(job, instance=instance, tags={**tags, "dagster/partition": key}, raise_on_error=False) as result,
    ):
        return result.run_id, result.success
