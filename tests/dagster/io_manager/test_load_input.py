"""load_input reads the upstream at the version its materialization recorded, filtered to the mapped
partition: a re-execution reads what the original run read, even after the upstream moved on."""

import os
from collections.abc import Iterator

import dagster as dg
import pin_defs
import pyarrow as pa
import pytest

import mvcc_core as mvcc


@pytest.fixture
def pinned_env(warehouse: str) -> Iterator[str]:
    os.environ[pin_defs.WAREHOUSE_ENV] = warehouse
    yield warehouse
    del os.environ[pin_defs.WAREHOUSE_ENV]


def dst_row(warehouse: str, part: str) -> dict:
    rows = [r for r in mvcc.open_table(f"{warehouse}/dst").to_table().to_pylist() if r["part"] == part]
    assert len(rows) == 1
    return rows[0]


def test_reexecution_reads_the_original_version(instance: dg.DagsterInstance, pinned_env: str) -> None:
    warehouse = pinned_env
    job = dg.reconstructable(pin_defs.both)
    tags = {"dagster/partition": "a", "value": "1"}
    with dg.execute_job(job, instance=instance, tags=tags) as first:
        assert first.success
        run_id = first.run_id
    with dg.execute_job(job, instance=instance, tags={"dagster/partition": "b", "value": "5"}) as other:
        assert other.success
    src_v1 = mvcc.open_table(f"{warehouse}/src").version
    assert dst_row(warehouse, "a") == {"part": "a", "total": 2, "rows": 2}  # only partition a's rows were read

    # The upstream gets newer versions: a Dagster materialization of partition a and a commit from outside.
    assert dg.materialize(
        [pin_defs.src], instance=instance, partition_key="a", tags={"value": "100"}, resources=pin_defs.defs.resources
    ).success
    mvcc.open_table(f"{warehouse}/src").append(pa.table({"part": ["a"], "v": [1000]}))

    # Re-executing only the downstream step of the first run reads src as that run did.
    options = dg.ReexecutionOptions(parent_run_id=run_id, step_selection=["dst"])
    # (the UI copies the parent run's tags to a re-execution; execute_job takes them explicitly)
    with dg.execute_job(job, instance=instance, reexecution_options=options, tags=tags) as again:
        assert again.success
        loaded = [
            e for e in again.all_events if e.event_type == dg.DagsterEventType.LOADED_INPUT and e.step_key == "dst"
        ]
        assert loaded[0].event_specific_data.metadata["mvcc/version"].value == 1 < src_v1  # its first commit
    assert dst_row(warehouse, "a") == {"part": "a", "total": 2, "rows": 2}

    # A fresh run of the downstream reads the newest materialization (value 100), not the outside commit.
    fresh = dg.materialize(
        [pin_defs.src, pin_defs.dst],
        instance=instance,
        partition_key="a",
        selection=[pin_defs.dst],
        resources=pin_defs.defs.resources,
    )
    assert fresh.success
    assert dst_row(warehouse, "a") == {"part": "a", "total": 200, "rows": 2}
