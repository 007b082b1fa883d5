"""A code location for the run-retry and run-queue tests (tests/dagster/test_run_retry_and_queue.py), loaded
through a code server and imported by the run workers it starts.

In-process executor: each run is one run-worker process (the failpoint armed through MVCC_FAILPOINTS slows
its commits); a step process per rewrite task would only add seconds of imports per step on a shared machine.
"""

import dagster as dg

import mvcc_core as mvcc
from mvcc_dagster import MvccResource, build_compaction_job

WAREHOUSE_ENV = "MVCC_TEST_WAREHOUSE"
TABLE = "daemoned"
JOB = f"mvcc_compaction__{TABLE}"

defs = dg.Definitions(
    jobs=[
        build_compaction_job(
            TABLE, options=mvcc.compaction.CompactionOptions(target_rows_per_fragment=60), executor="in_process"
        )
    ],
    resources={"mvcc": MvccResource(root_uri=dg.EnvVar(WAREHOUSE_ENV))},
)
