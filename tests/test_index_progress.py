"""`create_index(..., progress=)` reports without an executor too: after each group of fragments read here."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mvcc_core as mvcc
from mvcc_core.ops import index_tasks
from mvcc_core.ops.index_build import INDEX_FILE, index_dir


def fragments_table(uri: str, sizes: list[int]) -> mvcc.Table:
    """One fragment per size, ids counting up, `k` = 7 * id."""
    start, t = 0, None
    for n in sizes:
        ids = pa.array(range(start, start + n), pa.int64())
        data = pa.table({"id": ids, "k": pa.compute.multiply(ids, 7)})
        t = mvcc.write_table(data, uri, mode="create" if start == 0 else "append")
        start += n
    assert t is not None
    return t


def test_create_index_calls_progress_in_process(tmp_uri) -> None:
    t = fragments_table(tmp_uri, [10, 10, 10])
    calls: list[tuple[int, int]] = []
    with_progress = t.create_index("k", progress=lambda done, total: calls.append((done, total))).manifest.indices[0]
    assert calls == [(1, 1)]  # 30 rows: one group of about a million
    without = t.create_index("k").manifest.indices[0]

    def content(index) -> pa.Table:
        return pq.read_table(f"{tmp_uri}/{index_dir(index)}/{INDEX_FILE}")

    assert content(with_progress).equals(content(without)) and content(without).num_rows == 30


@pytest.mark.parametrize("seed", range(4))
def test_reading_in_groups_is_reading_at_once(tmp_uri, seed: int) -> None:
    """Random fragment sizes and deletions: the groups read one by one give the rows of one scan, in order,
    with one progress call per group and the last one (total, total)."""
    rng = random.Random(seed)
    t = fragments_table(tmp_uri, [rng.randint(1, 30) for _ in range(rng.randint(1, 9))])
    t.delete(f"id % {rng.randint(2, 5)} = 0")
    fragments = list(t.manifest.fragments)
    rows_per_task = rng.choice([1, 7, 25, 1000])
    calls: list[tuple[int, int]] = []
    store, manifest = t.state.store, t.manifest
    grouped = index_tasks.read_in_process(
        store, manifest, "k", fragments, rows_per_task=rows_per_task, progress=lambda d, n: calls.append((d, n))
    )
    at_once = index_tasks.read_in_process(store, manifest, "k", fragments, rows_per_task=rows_per_task)
    assert grouped.equals(at_once) and grouped.num_rows == t.count_rows()
    groups = len(index_tasks.fragment_groups(fragments, rows_per_task))
    assert calls == [(done, groups) for done in range(1, groups + 1)]
