"""Dagster maintenance jobs (in process, real instance) on hostile tables: the compaction and restore
jobs on a table whose latest manifest names a data file outside its root fail with the typed error and touch
nothing outside the root; restoring an intact version commits past the hostile one; a data file that disagrees
with the manifest fails compaction with `DataFileMismatchError` naming the file."""

from __future__ import annotations

import io
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_hostile_manifests import ids, rows, set_path, snapshot, tamper, victim_file

import mvcc_core as mvcc
from mvcc_dagster import MvccResource, build_compaction_job, build_restore_job

pytestmark = pytest.mark.slow


def failure_text(result: dg.ExecuteInProcessResult) -> str:
    failures = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    return " ".join(e.step_failure_data.user_failure_data.description or "" for e in failures)


def hostile(warehouse: str, tmp_path: Path) -> tuple[str, Path, dict[str, bytes]]:
    """Table `t`: versions 1-3 (three fragments), version 3's manifest crafted to read `../../victim/...`."""
    victim = victim_file(tmp_path / "victim")
    uri = f"{warehouse}/t"
    t = mvcc.write_table(rows(0, 3), uri)
    t.append(rows(3, 2))
    t.append(rows(5, 1))
    tamper(t, set_path("../../victim/file.parquet"))
    return uri, victim.parent, snapshot(victim.parent)


def test_compaction_and_restore_jobs_on_a_path_leaving_the_root(
    instance: dg.DagsterInstance, warehouse: str, tmp_path: Path
) -> None:
    uri, outside, before = hostile(warehouse, tmp_path)
    resources = {"mvcc": MvccResource(root_uri=warehouse)}
    result = build_compaction_job("t", executor="in_process").execute_in_process(
        instance=instance, resources=resources, raise_on_error=False
    )
    assert not result.success
    text = failure_text(result)
    assert "fragments[0].files[0].path" in text and "'../../victim/file.parquet'" in text
    restore = build_restore_job("t")

    def run(version: int) -> dg.ExecuteInProcessResult:
        return restore.execute_in_process(
            instance=instance,
            resources=resources,
            run_config={"ops": {"restore": {"config": {"version": version}}}},
            raise_on_error=False,
        )

    bad = run(3)
    assert not bad.success and "fragments[0].files[0].path" in failure_text(bad)
    assert snapshot(outside) == before
    assert run(2).success  # an intact version commits past the hostile latest
    assert ids(mvcc.open_table(uri)) == [0, 1, 2, 3, 4]
    assert (
        build_compaction_job("t", executor="in_process")
        .execute_in_process(instance=instance, resources=resources)
        .success
    )
    assert ids(mvcc.open_table(uri)) == [0, 1, 2, 3, 4] and snapshot(outside) == before


def test_compaction_job_on_a_data_file_of_another_type(instance: dg.DagsterInstance, warehouse: str) -> None:
    uri = f"{warehouse}/t"
    t = mvcc.write_table(rows(0, 3), uri).append(rows(3, 2))
    path = t.manifest.fragments[0].files[0].path
    sink = io.BytesIO()
    pq.write_table(pa.table({f"c{t.manifest.fields[0].id}": ["x", "y", "z"]}), sink)
    t.state.store.put(f"data/{path}", sink.getvalue())
    tamper(t, lambda m: setattr(m.fragments[0].files[0], "file_size_bytes", len(sink.getvalue())))
    result = build_compaction_job("t", executor="in_process").execute_in_process(
        instance=instance, resources={"mvcc": MvccResource(root_uri=warehouse)}, raise_on_error=False
    )
    assert not result.success
    text = failure_text(result)
    assert "DataFileMismatchError" in text and path in text and "column 'id'" in text
