"""Compaction tasks and results cross XCom as JSON: every field comes back equal, whatever its type (ints,
serialized fragments, a clustering order, a row map, None)."""

from __future__ import annotations

import json

import pytest

import mvcc_core as mvcc

pytest.importorskip("airflow.sdk")

from mvcc_airflow.utils import compaction_calls  # noqa: E402


def _through_json(data: dict) -> dict:
    return json.loads(json.dumps(data))  # what XCom stores and hands back


@pytest.mark.parametrize("clustering", [None, ("sort", ("user",)), ("zorder", ("x", "y"))])
def test_a_task_comes_back_equal(clustering: tuple | None) -> None:
    task = mvcc.compaction.CompactionTask(
        read_version=7,
        fragments=(b"\x00\x01\xff", b"fragment"),
        new_fragment_ids=(11, 12),
        target_rows_per_fragment=1_000,
        clustering=clustering,
    )
    assert compaction_calls.task_from_xcom(_through_json(compaction_calls.task_to_xcom(task))) == task


@pytest.mark.parametrize(("row_order", "row_sources"), [("kept", None), ("zorder", bytes(8))])
def test_a_result_comes_back_equal(row_order: str, row_sources: bytes | None) -> None:
    result = mvcc.compaction.RewriteResult(
        read_version=7,
        old_fragments=(b"old",),
        new_fragments=(b"new", b"\x00"),
        rows=3,
        bytes_written=100,
        bytes_read=120,
        row_order=row_order,
        row_sources=row_sources,
    )
    assert compaction_calls.result_from_xcom(_through_json(compaction_calls.result_to_xcom(result))) == result
