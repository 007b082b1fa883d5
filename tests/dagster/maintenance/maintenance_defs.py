"""A compaction job for the maintenance tests, importable by the step processes of the multiprocess executor
(each `rewrite_fragments[task_i]` step re-imports this module to rebuild the job)."""

import dagster as dg

import mvcc_core as mvcc
from mvcc_dagster import MvccResource, build_compaction_job

WAREHOUSE_ENV = "MVCC_TEST_WAREHOUSE"
TABLE = "fragmented"
OPTIONS = mvcc.compaction.CompactionOptions(target_rows_per_fragment=300)

defs = dg.Definitions(
    jobs=[build_compaction_job(TABLE, options=OPTIONS, executor="dagster")],
    executor=dg.multiprocess_executor.configured({"max_concurrent": 2}),
    resources={"mvcc": MvccResource(root_uri=dg.EnvVar(WAREHOUSE_ENV))},
)


def compaction_job() -> dg.JobDefinition:
    """The job, for `reconstructable`."""
    return defs.resolve_job_def(f"mvcc_compaction__{TABLE}")
