"""A write-audit-publish asset and its downstream in a code location whose executor is multiprocess: the
branch check is found in the step's own process (registered when that process loads this module)."""

import os
from collections.abc import Iterator
from typing import Any

import dagster as dg
import pyarrow as pa

from mvcc_dagster import BranchAudit, MvccIOManager, audited_output, branch_check
from mvcc_dagster.metadata import WRITE_AUDIT_PUBLISH

WAREHOUSE_ENV = "MVCC_TEST_WAREHOUSE"
BAD_ENV = "MVCC_TEST_WAP_BAD"


@branch_check("audited")
def no_negative(audit: BranchAudit) -> dg.AssetCheckResult:
    """No negative value on the branch."""
    bad = audit.table.count_rows("v < 0")
    return dg.AssetCheckResult(passed=bad == 0, metadata={"negative": bad, "pid": os.getpid()})


@dg.asset(metadata={WRITE_AUDIT_PUBLISH: True}, check_specs=[no_negative.spec])
def audited(context: dg.AssetExecutionContext) -> Iterator[Any]:
    sign = -1 if os.environ.get(BAD_ENV) else 1
    yield from audited_output(context, pa.table({"v": [sign * i for i in range(1, 6)]}))


@dg.asset
def audited_total(audited: pa.Table) -> pa.Table:
    return pa.table({"total": [sum(audited.column("v").to_pylist())]})


defs = dg.Definitions(
    assets=[audited, audited_total],
    jobs=[dg.define_asset_job("wap_job", selection=[audited, audited_total])],
    executor=dg.multiprocess_executor.configured({"max_concurrent": 2}),
    resources={"io_manager": MvccIOManager(root_uri=dg.EnvVar(WAREHOUSE_ENV))},
)


def wap_job() -> dg.JobDefinition:
    """The job, for `reconstructable`."""
    return defs.resolve_job_def("wap_job")
