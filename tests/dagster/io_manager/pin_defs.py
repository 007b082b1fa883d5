"""Assets for the load_input pinning test, importable for `reconstructable` (re-execution needs it)."""

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from mvcc_dagster import MvccIOManager

WAREHOUSE_ENV = "MVCC_TEST_WAREHOUSE"
days = dg.StaticPartitionsDefinition(["a", "b"])


@dg.asset(partitions_def=days, metadata={"partition_expr": "part"})
def src(context: dg.AssetExecutionContext) -> pa.Table:
    """Rows of the partition; the run tag `value` sets their value."""
    value = int(context.run.tags.get("value", "1"))
    return pa.table({"part": [context.partition_key] * 2, "v": [value, value]})


@dg.asset(partitions_def=days, metadata={"partition_expr": "part"})
def dst(context: dg.AssetExecutionContext, src: pa.Table) -> pa.Table:
    """The sum of the loaded upstream rows (and how many there were)."""
    return pa.table({"part": [context.partition_key], "total": [pc.sum(src["v"]).as_py()], "rows": [src.num_rows]})


defs = dg.Definitions(
    assets=[src, dst],
    jobs=[dg.define_asset_job("both", selection=[src, dst], executor_def=dg.in_process_executor)],
    resources={"io_manager": MvccIOManager(root_uri=dg.EnvVar(WAREHOUSE_ENV))},
)


def both() -> dg.JobDefinition:
    """The job, for `reconstructable`."""
    return defs.resolve_job_def("both")
