"""Compaction jobs under a code location whose default executor is multiprocess (Dagster's own default),
importable by step processes: the default job (``executor="auto"``) and the explicit big-table form with a
bounded number of batched rewrite steps (``executor="dagster", rewrite_steps=2``)."""

import dagster as dg

import mvcc_core as mvcc
from mvcc_dagster import MvccResource, build_compaction_job

WAREHOUSE_ENV = "MVCC_TEST_WAREHOUSE"
AUTO_TABLE = "auto_table"
BIG_TABLE = "big_table"
OPTIONS = mvcc.compaction.CompactionOptions(target_rows_per_fragment=100)

defs = dg.Definitions(
    jobs=[
        build_compaction_job(AUTO_TABLE, options=OPTIONS),
        build_compaction_job(BIG_TABLE, options=OPTIONS, executor="dagster", rewrite_steps=2),
    ],
    executor=dg.multiprocess_executor.configured({"max_concurrent": 2}),
    resources={"mvcc": MvccResource(root_uri=dg.EnvVar(WAREHOUSE_ENV))},
)


def auto_job() -> dg.JobDefinition:
    """The default job, for `reconstructable`."""
    return defs.resolve_job_def(f"mvcc_compaction__{AUTO_TABLE}")


def big_job() -> dg.JobDefinition:
    """The explicit multiprocess form, for `reconstructable`."""
    return defs.resolve_job_def(f"mvcc_compaction__{BIG_TABLE}")
