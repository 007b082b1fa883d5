"""A code location for the PostgreSQL instance's run-queue test (tests/dagster/test_postgres_instance.py): two
tables' compaction jobs, loaded through a code server and imported by the run workers it starts.

In-process executor: each run is one run-worker process (the failpoint armed through MVCC_FAILPOINTS slows its
commits, so a run lasts long enough for the queue to be seen holding the next run of its table back).
"""

import dagster as dg

import mvcc_core as mvcc
from mvcc_dagster import MvccResource, build_compaction_job

WAREHOUSE_ENV = "MVCC_TEST_WAREHOUSE"
TABLES = ("pg_queue_left", "pg_queue_right")
JOBS = {table: f"mvcc_compaction__{table}" for table in TABLES}

defs = dg.Definitions(
    jobs=[
        build_compaction_job(
            table, options=mvcc.compaction.CompactionOptions(target_rows_per_fragment=60), executor="in_process"
        )
        for table in TABLES
    ],
    resources={"mvcc": MvccResource(root_uri=dg.EnvVar(WAREHOUSE_ENV))},
)
