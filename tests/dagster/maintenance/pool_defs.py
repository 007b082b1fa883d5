"""A compaction job for the pools test (tests/dagster/maintenance/test_pool_runs.py), importable by the run processes.

In-process executor: the test is about two runs' committing steps, and step processes would only add
seconds of imports per step on a shared machine; pools are claimed by the in-process executor the same way.
"""

import dagster as dg

import mvcc_core as mvcc
from mvcc_dagster import MvccResource, build_compaction_job

WAREHOUSE_ENV = "MVCC_TEST_WAREHOUSE"
TABLE = "pooled"

defs = dg.Definitions(
    jobs=[
        build_compaction_job(
            TABLE, options=mvcc.compaction.CompactionOptions(target_rows_per_fragment=300), executor="in_process"
        )
    ],
    resources={"mvcc": MvccResource(root_uri=dg.EnvVar(WAREHOUSE_ENV))},
)


def compaction_job() -> dg.JobDefinition:
    """The job, for `reconstructable`."""
    return defs.resolve_job_def(f"mvcc_compaction__{TABLE}")
