"""The example deployment: ``dagster dev -w workspace.yaml`` (docs/integrations/dagster/index.md).

A PySpark ingest asset writes a day of synthetic events through the Spark data source
(`mvcc_core.spark.write`, via `MvccIOManager`); two pyarrow assets read it at the version its
materialization recorded: an upsert table (latest event per user, ``merge`` on ``user_id``) and a daily
aggregate. All three are daily partitioned, so re-running a day replaces exactly that day's rows.
A multi_asset (`sales_load`) writes a fact table and its dimension through the catalog at
``{warehouse}/catalog``, both in one catalog version, and `revenue_by_segment` reads them from that version.
`payments` is written with write-audit-publish: to a branch per run, published after its blocking check passed.

Where the tables live: ``MVCC_WAREHOUSE`` (default: ``warehouse/`` next to this file). For S3 set it to
``s3://bucket/prefix``; credentials, region and endpoint come from the standard ``AWS_*`` variables
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, ``AWS_ENDPOINT_URL`` for MinIO and the
like); ``MVCC_EXTERNAL_STORE`` optionally names an external manifest store.
"""

import os
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
from dagster_pyspark import PySparkResource

from mvcc_dagster import (
    BranchAudit,
    MvccCatalogResource,
    MvccIOManager,
    MvccResource,
    audited_output,
    branch_check,
    build_catalog_health_checks,
    build_catalog_maintenance_job,
    build_compaction_job,
    build_health_sensor,
    build_maintenance_schedule,
    build_restore_job,
    build_retention_job,
    build_table_health_checks,
    build_version_sensor,
    conflict_retry_policy,
)
from mvcc_dagster.metadata import RESTORE_TAG, WRITE_AUDIT_PUBLISH

WAREHOUSE_ENV = "MVCC_WAREHOUSE"
EVENTS_PER_DAY = 1000
USERS = 50

# Spark's Python workers must run this interpreter (the one with mvcc installed); a local session reads the
# variable when it starts its workers (the `spark.pyspark.python` setting is not honoured by local sessions).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

daily = dg.DailyPartitionsDefinition(start_date="2026-11-01", timezone="UTC")


def warehouse_root() -> str:
    """The warehouse root: ``$MVCC_WAREHOUSE`` or ``warehouse/`` beside this file."""
    return os.environ.get(WAREHOUSE_ENV) or str(Path(__file__).resolve().parent / "warehouse")


@dg.asset(
    partitions_def=daily,
    metadata={"partition_expr": "event_time"},
    kinds={"spark", "mvcc"},
    group_name="events",
    retry_policy=conflict_retry_policy(),
    description="Synthetic click events of one day, generated and written by Spark (one commit per day).",
)
def raw_events(context: dg.AssetExecutionContext, pyspark: PySparkResource) -> Any:
    """The day's events as a Spark DataFrame; the IO manager replaces that day's rows in one commit."""
    from pyspark.sql import functions as F

    window = context.partition_time_window
    start = int(window.start.timestamp())
    seconds = int(window.end.timestamp()) - start
    spark = pyspark.spark_session
    return spark.range(EVENTS_PER_DAY, numPartitions=2).select(
        F.col("id").alias("event_id"),
        (F.col("id") % USERS).alias("user_id"),
        F.timestamp_seconds(F.lit(start) + (F.col("id") * 7919) % seconds).alias("event_time"),
        ((F.col("id") * 37) % 1000 / F.lit(10.0)).alias("amount"),
        F.lit(context.partition_key).alias("day_key"),
    )


@dg.asset(
    partitions_def=daily,
    metadata={"mvcc/write_mode": "merge", "mvcc/merge_on": "user_id"},
    kinds={"pyarrow", "mvcc"},
    group_name="events",
    retry_policy=conflict_retry_policy(),
    description="Each user's latest event (an upsert on user_id).",
)
def user_latest(raw_events: pa.Table) -> pa.Table:
    """The last event per user of the loaded day(s)."""
    ordered = raw_events.sort_by([("user_id", "ascending"), ("event_time", "descending")])
    users = ordered.column("user_id").to_pylist()
    first = [i for i, u in enumerate(users) if i == 0 or users[i - 1] != u]
    return ordered.take(pa.array(first, pa.int64())).select(["user_id", "event_time", "amount", "event_id"])


@dg.asset(
    partitions_def=daily,
    metadata={"partition_expr": "day"},
    kinds={"pyarrow", "mvcc"},
    group_name="events",
    retry_policy=conflict_retry_policy(),
    description="Revenue and event count per day (a date-partitioned aggregate).",
)
def daily_revenue(context: dg.AssetExecutionContext, raw_events: pa.Table) -> pa.Table:
    """One row per day of the partition(s)."""
    days = pc.cast(raw_events.column("event_time"), pa.timestamp("us", "UTC")).cast(pa.date32())
    grouped = (
        raw_events.append_column("day", days).group_by("day").aggregate([("amount", "sum"), ("event_id", "count")])
    )
    renamed = grouped.rename_columns({"amount_sum": "revenue", "event_id_count": "events"})
    return renamed.select(["day", "revenue", "events"])


def resources(root_uri: str | None = None) -> dict[str, Any]:
    """The resources of the example: the warehouse (resource and IO manager) and a local Spark session."""
    root = root_uri or warehouse_root()
    external_store = os.environ.get("MVCC_EXTERNAL_STORE") or None
    warehouse = MvccResource(root_uri=root, external_store=external_store)
    return {
        "mvcc": warehouse,
        "io_manager": MvccIOManager(mvcc=warehouse),
        "mvcc_catalog": MvccCatalogResource(root_uri=f"{root.rstrip('/')}/catalog"),
        "pyspark": PySparkResource(
            spark_config={
                "spark.master": "local[2]",
                "spark.ui.enabled": "false",
                "spark.sql.session.timeZone": "UTC",
                "spark.sql.shuffle.partitions": "2",
            }
        ),
    }


ASSETS = [raw_events, user_latest, daily_revenue]
TABLES = [a.key.to_user_string() for a in ASSETS]


# ---- The catalog (docs/integrations/dagster/catalog.md "Multi-table assets"): a fact table and its dimension, one
# catalog version ----
# `sales_load` writes the day's orders (the fact table) and the day's customer snapshot (its dimension) into
# the catalog at ``{warehouse}/catalog`` in ONE transaction: a reader of the catalog sees both or neither.
# `revenue_by_segment` joins the two from the one catalog version their materializations recorded.

SALES_ORDERS = dg.AssetKey(["sales", "orders"])
SALES_CUSTOMERS = dg.AssetKey(["sales", "customers"])
ORDERS_PER_DAY = 200
CUSTOMERS = 20
SEGMENTS = ("retail", "wholesale", "online")


@dg.multi_asset(
    name="sales_load",
    specs=[
        dg.AssetSpec(
            SALES_ORDERS,
            metadata={"partition_expr": "order_day"},
            kinds={"mvcc"},
            group_name="sales",
            description="Orders of one day (the fact table, catalog table sales.orders).",
        ),
        dg.AssetSpec(
            SALES_CUSTOMERS,
            metadata={"partition_expr": "as_of"},
            kinds={"mvcc"},
            group_name="sales",
            description="Each customer's segment as of the day (the dimension, catalog table sales.customers).",
        ),
    ],
    partitions_def=daily,
    retry_policy=conflict_retry_policy(),
)
def sales_load(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
    """Both tables of the day, replaced in one catalog transaction (each table's day partition)."""
    day = context.partition_time_window.start.date()
    seed = day.toordinal()
    orders = pa.table(
        {
            "order_id": pa.array([seed * 1000 + i for i in range(ORDERS_PER_DAY)], pa.int64()),
            "customer_id": pa.array([(i * 7) % CUSTOMERS for i in range(ORDERS_PER_DAY)], pa.int64()),
            "amount": pa.array([float((i * 37 + seed) % 500) / 10 for i in range(ORDERS_PER_DAY)]),
            "order_day": pa.array([day] * ORDERS_PER_DAY, pa.date32()),
        }
    )
    customers = pa.table(
        {
            "customer_id": pa.array(list(range(CUSTOMERS)), pa.int64()),
            "segment": [SEGMENTS[(c + seed) % len(SEGMENTS)] for c in range(CUSTOMERS)],
            "as_of": pa.array([day] * CUSTOMERS, pa.date32()),
        }
    )
    with mvcc_catalog.transaction(context) as tx:
        tx.overwrite(SALES_ORDERS, orders)
        tx.overwrite(SALES_CUSTOMERS, customers)
    return tx.materialize_results()


@dg.asset(
    key=["sales", "revenue_by_segment"],
    deps=[SALES_ORDERS, SALES_CUSTOMERS],
    partitions_def=daily,
    metadata={"partition_expr": "day"},
    kinds={"pyarrow", "mvcc"},
    group_name="sales",
    retry_policy=conflict_retry_policy(),
    description="Revenue per customer segment and day, from one catalog snapshot of orders and customers.",
)
def revenue_by_segment(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource) -> pa.Table:
    """Orders joined with the customer snapshot of the same day, both read at the catalog version recorded
    by their materializations (so the two are always from the same publish)."""
    window = context.partition_time_window
    start, end = window.start.date().isoformat(), window.end.date().isoformat()
    snapshot = mvcc_catalog.snapshot_for(context, [SALES_ORDERS, SALES_CUSTOMERS])
    orders = snapshot.table(mvcc_catalog.table_name(SALES_ORDERS)).to_table(
        filter=f"order_day >= DATE '{start}' AND order_day < DATE '{end}'"
    )
    customers = snapshot.table(mvcc_catalog.table_name(SALES_CUSTOMERS)).to_table(
        filter=f"as_of >= DATE '{start}' AND as_of < DATE '{end}'"
    )
    joined = orders.join(
        customers, keys=["customer_id", "order_day"], right_keys=["customer_id", "as_of"], join_type="inner"
    )
    grouped = joined.group_by(["order_day", "segment"]).aggregate([("amount", "sum")])
    context.add_output_metadata({"mvcc/source_catalog_version": snapshot.version, "orders_read": orders.num_rows})
    return grouped.rename_columns({"order_day": "day", "amount_sum": "revenue"}).select(["day", "segment", "revenue"])


CATALOG_ASSETS = [sales_load, revenue_by_segment]
# ---- end of the catalog example ----

# ---- Write-audit-publish (docs/guide/write_audit_publish.md)
# ----------------------------------------------------------
# `payments` is written to a branch named after the run (dagster-wap-<run id>); its blocking branch check
# `amounts_positive` reads that branch version in the same step, and only when it passes does the day reach main,
# in one commit. Launch a day with the run config ``ops: {payments: {config: {inject_bad_rows: true}}}`` to see
# the check fail: main keeps its rows, and the branch stays (for inspection) until the retention job removes it.
PAYMENTS_PER_DAY = 100


class PaymentsConfig(dg.Config):
    """The run config of `payments`."""

    inject_bad_rows: bool = False
    """Write two payments with negative amounts (the check then fails and nothing is published)."""


@branch_check("payments")
def amounts_positive(audit: BranchAudit) -> dg.AssetCheckResult:
    """Every payment of the written day has a positive amount (blocking: a failure stops the publish)."""
    amounts = audit.rows(["amount"]).column("amount")
    bad = int(pc.sum(pc.less_equal(amounts, 0)).as_py() or 0)
    return dg.AssetCheckResult(passed=bad == 0, metadata={"non_positive_amounts": bad, "rows": len(amounts)})


@dg.asset(
    partitions_def=daily,
    metadata={WRITE_AUDIT_PUBLISH: True, "partition_expr": "paid_at"},
    check_specs=[amounts_positive.spec],
    kinds={"pyarrow", "mvcc"},
    group_name="payments",
    retry_policy=conflict_retry_policy(),
    description="Payments of one day, published to main only after the blocking check passed on the run's branch.",
)
def payments(context: dg.AssetExecutionContext, config: PaymentsConfig) -> Iterator[Any]:
    """The day's payments; with ``inject_bad_rows`` two of them are negative. Yielded through `audited_output`,
    which returns the branch check's result to Dagster after the IO manager's write, audit and publish."""
    start = context.partition_time_window.start
    seconds = int((context.partition_time_window.end - start).total_seconds())
    amounts = [float(1 + (i * 37) % 500) for i in range(PAYMENTS_PER_DAY)]
    if config.inject_bad_rows:
        amounts[:2] = [-5.0, -12.5]
    rows = pa.table(
        {
            "payment_id": pa.array([start.toordinal() * 1000 + i for i in range(PAYMENTS_PER_DAY)], pa.int64()),
            "paid_at": pa.array(
                [start + timedelta(seconds=(i * 7919) % seconds) for i in range(PAYMENTS_PER_DAY)],
                pa.timestamp("us", "UTC"),
            ),
            "amount": amounts,
        }
    )
    yield from audited_output(context, rows)


WAP_TABLE = "payments"
# ---- end of write-audit-publish ---------------------------------------------------------------------------------
RETENTION = timedelta(days=7)
OUTSIDE_TABLE = "partner_feed"
# Every table of the example, by how it is stored: tables at ``{warehouse}/{asset key}`` (written by the IO
# manager, or outside Dagster) and the catalog's tables (written by `sales_load`, opened through the catalog).
PATH_TABLES = [*TABLES, "sales/revenue_by_segment", OUTSIDE_TABLE, WAP_TABLE]
CATALOG_TABLES = [SALES_ORDERS.to_user_string(), SALES_CUSTOMERS.to_user_string()]

# Maintenance (docs/integrations/dagster/maintenance.md "Maintenance jobs"): per table a compaction, a retention and
# a restore job, a
# nightly maintenance schedule (compaction, index optimize, retention; stopped until turned on), health
# checks, a health sensor requesting the repair jobs, and a version sensor recording commits made outside
# Dagster (all sensors stopped by default, as Dagster's are). The catalog's tables have the same health checks
# and one catalog maintenance job (each table compacted as a catalog version, then the catalog's retention).
COMPACTION = {t: build_compaction_job(t) for t in PATH_TABLES}
RETENTION_JOBS = {t: build_retention_job(t, older_than=RETENTION) for t in PATH_TABLES}
RESTORE = {t: build_restore_job(t) for t in PATH_TABLES}
SCHEDULES = [build_maintenance_schedule(t, cron="0 3 * * *", older_than=RETENTION) for t in PATH_TABLES]
CATALOG_MAINTENANCE = build_catalog_maintenance_job(CATALOG_TABLES, older_than=RETENTION)
SCHEDULES.append(
    dg.ScheduleDefinition(
        name="mvcc_catalog_maintenance_schedule",
        cron_schedule="30 3 * * *",
        job=CATALOG_MAINTENANCE,
        default_status=dg.DefaultScheduleStatus.STOPPED,
    )
)

# ---- Backfills via restore, and a table written outside Dagster (docs/integrations/dagster/backfills.md "Backfills
# via restore") ----
# `daily_events_restore_backfill` carries the run tag mvcc/backfill_restore=true: a backfill launched from it
# (the job's Partitions tab, or any backfill given that tag) first restores each table to the version before
# the backfill's earliest day was first written (one Restore per table, once per backfill), then recomputes
# the days; it fails before committing when a later day would be lost. `partner_feed` is written by
# examples/outside_writer.py (plain Python, no Dagster): the version sensor records its commits as runless
# materializations of the asset below.
RESTORE_BACKFILL_JOB = dg.define_asset_job(
    "daily_events_restore_backfill",
    selection=ASSETS,
    tags={RESTORE_TAG: "true"},  # "allow-data-loss" would also drop days written after the backfilled ones
    description="Backfill with restore: roll the tables back to before the first backfilled day, then recompute.",
)
OUTSIDE_ASSET = dg.AssetSpec(
    OUTSIDE_TABLE,
    kinds={"mvcc"},
    group_name="outside",
    description="Written outside Dagster by examples/outside_writer.py; recorded by the version sensor.",
)
# ---- end of the backfill / outside writer block ----------------------------------------------------------------

defs = dg.Definitions(
    assets=[*ASSETS, *CATALOG_ASSETS, OUTSIDE_ASSET, payments],
    asset_checks=[*build_table_health_checks(PATH_TABLES), *build_catalog_health_checks(CATALOG_TABLES)],
    jobs=[
        dg.define_asset_job("daily_events", selection=ASSETS),
        dg.define_asset_job("daily_sales_catalog", selection=CATALOG_ASSETS),
        *COMPACTION.values(),
        *RETENTION_JOBS.values(),
        *RESTORE.values(),
        CATALOG_MAINTENANCE,
        RESTORE_BACKFILL_JOB,
    ],
    schedules=SCHEDULES,
    sensors=[
        build_version_sensor(PATH_TABLES),
        build_health_sensor(PATH_TABLES, compaction_job=COMPACTION, retention_job=RETENTION_JOBS),
    ],
    resources=resources(),
)
