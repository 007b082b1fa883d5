"""Compaction's reads of runs of small files against a plain scan: fragments spread over the table's root and two
base paths (runs of files in different stores), with deletions, stable row ids or not, randomized."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core.table import DatasetBasePath


def rows(start: int, n: int, rng: random.Random) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "v": pa.array([rng.random() for _ in ids], pa.float64()),
            "s": pa.array([f"s{rng.randrange(50)}" if rng.random() > 0.1 else None for _ in ids], pa.string()),
        }
    )


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("stable", [False, True])
def test_compaction_over_mixed_bases_equals_a_plain_scan(tmp_path, seed: int, stable: bool) -> None:
    rng = random.Random(seed)
    uri = str(tmp_path / "t")
    t = mvcc.write_table(rows(0, rng.randint(1, 40), rng), uri, enable_stable_row_ids=stable)
    t.add_bases(
        [DatasetBasePath(str(tmp_path / "cold"), name="cold"), DatasetBasePath(str(tmp_path / "warm"), name="warm")]
    )
    start = 1_000
    for _ in range(rng.randint(8, 20)):
        target = rng.choice([None, None, "cold", "warm"])  # runs of the same store, and changes between them
        for _ in range(rng.randint(1, 3)):
            n = rng.randint(1, 40)
            if target is None:
                t.append(rows(start, n, rng))
            else:
                t.append(rows(start, n, rng), target_base=target)
            start += n
    for _ in range(rng.randint(0, 3)):
        t.delete(f"id % {rng.randint(3, 9)} = {rng.randint(0, 2)}")
    before = t.to_table(with_row_id=stable).sort_by("id")
    metrics = t.optimize.compact_files(target_rows_per_fragment=100_000)
    after = mvcc.open_table(uri)
    assert len(after.get_fragments()) == 1 and metrics.fragments_removed > 1
    got = after.to_table(with_row_id=stable)
    assert got.column("id").to_pylist() == sorted(got.column("id").to_pylist())  # the row order is kept
    assert got.sort_by("id").equals(before)  # every live row, its values and (with stable row ids) its row id
