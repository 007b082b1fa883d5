"""A catalog multi_asset and a downstream reader, importable for `reconstructable` (re-execution needs it)."""

import os

import dagster as dg
import pyarrow as pa

from mvcc_dagster import MvccCatalogResource

ROOT_ENV = "MVCC_TEST_CATALOG_ROOT"
FAIL_ENV = "MVCC_TEST_CATALOG_FAIL_AFTER_PUBLISH"  # set: `load` fails after its publish, before reporting
ORDERS, CUSTOMERS = dg.AssetKey(["sales", "orders"]), dg.AssetKey(["sales", "customers"])


@dg.multi_asset(specs=[dg.AssetSpec(ORDERS), dg.AssetSpec(CUSTOMERS)])
def load(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
    """Appends batch `batch` (a run tag) to both tables in one catalog version."""
    n = int(context.run.tags.get("batch", "1"))
    with mvcc_catalog.transaction(context) as tx:
        tx.append(ORDERS, pa.table({"order_id": [n * 10, n * 10 + 1], "batch": [n, n]}))
        tx.append(CUSTOMERS, pa.table({"customer_id": [n], "batch": [n]}))
    if os.environ.get(FAIL_ENV):
        raise RuntimeError("the step failed after its publish, before reporting")
    return tx.materialize_results()


@dg.asset(deps=[ORDERS, CUSTOMERS])
def report(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource) -> dg.MaterializeResult:
    """Records the catalog version it read and the batches it saw in both tables."""
    snap = mvcc_catalog.snapshot_for(context, [ORDERS, CUSTOMERS])
    orders = sorted(set(snap.table("sales.orders").to_table()["batch"].to_pylist()))
    customers = sorted(snap.table("sales.customers").to_table()["batch"].to_pylist())
    assert orders == customers
    return dg.MaterializeResult(metadata={"read_catalog_version": snap.version, "batches": orders})


defs = dg.Definitions(
    assets=[load, report],
    jobs=[dg.define_asset_job("both", selection=[load, report], executor_def=dg.in_process_executor)],
    resources={"mvcc_catalog": MvccCatalogResource(root_uri=dg.EnvVar(ROOT_ENV))},
)


def both() -> dg.JobDefinition:
    """The job, for `reconstructable`."""
    return defs.resolve_job_def("both")
