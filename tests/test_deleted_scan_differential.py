"""Scans of fragments with deletion vectors, checked against a plain evaluation over randomized histories.

Each history appends fragments of random sizes (some larger than the scan's batch, which are streamed) and
deletes random rows in between (vectors that grow, packed deletion files naming several fragments); after
every step the live rows are read every way a caller can (whole, in small batches, projected, filtered,
sliced by limit / offset, counted) and compared, in order, with a Python list of the rows that should be
live. The unfiltered paths apply the vectors to whole files (`Scan._whole_files`, `Scan._streamed_file`).
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pyarrow as pa
import pytest

import mvcc_core as mvcc

Row = dict[str, Any]
SCHEMA = pa.schema([("id", pa.int64()), ("a", pa.int32()), ("s", pa.string())])


def _rows(start: int, count: int, rng: random.Random) -> list[Row]:
    return [
        {"id": i, "a": None if rng.random() < 0.1 else rng.randint(-5, 5), "s": rng.choice(["x", "yy", "", None])}
        for i in range(start, start + count)
    ]


def _check(t: mvcc.Table, live: list[Row], rng: random.Random) -> None:
    ids = [r["id"] for r in live]
    assert t.to_table().to_pylist() == live
    assert t.count_rows() == len(live)
    batch_size = rng.choice([1, 7, 40])
    batches = list(t.to_batches(batch_size=batch_size))
    assert all(b.num_rows <= batch_size for b in batches)
    assert [r for b in batches for r in b.to_pylist()] == live
    columns = rng.sample(["id", "a", "s"], rng.randint(1, 3))
    assert t.to_table(columns=columns).to_pylist() == [{c: r[c] for c in columns} for r in live]
    limit, offset = rng.randint(0, len(live) + 2), rng.randint(0, len(live) + 2)
    assert t.to_table(columns=["id"], limit=limit, offset=offset)["id"].to_pylist() == ids[offset : offset + limit]
    value = rng.randint(-5, 5)
    want = [r["id"] for r in live if r["a"] is not None and r["a"] >= value]
    assert t.to_table(columns=["id"], filter=f"a >= {value}")["id"].to_pylist() == want
    assert t.count_rows(filter=f"a >= {value}") == len(want)
    addressed = t.scanner(["id"], with_row_address=True).to_table()
    assert addressed["id"].to_pylist() == ids


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("where", ["local", "memory"])
def test_scans_of_fragments_with_deletion_vectors_match_a_plain_evaluation(seed, where, tmp_path) -> None:
    rng = random.Random(seed)
    uri = str(tmp_path / "t") if where == "local" else f"memory://mvcc-deleted-scan-{uuid.uuid4().hex}"
    live = _rows(0, rng.randint(1, 60), rng)
    t = mvcc.write_table(pa.Table.from_pylist(live, schema=SCHEMA), uri)
    next_id = len(live)
    for _ in range(5):
        if rng.random() < 0.5:
            added = _rows(next_id, rng.choice([1, 5, 45, 90]), rng)
            next_id += len(added)
            t.append(pa.Table.from_pylist(added, schema=SCHEMA))
            live += added
        else:
            share = rng.choice([0.02, 0.2])  # below and above `deleted_rows.TAKE_DELETED_SHARE`
            gone = {r["id"] for r in live if rng.random() < share}
            if gone:
                t.delete(f"id IN ({', '.join(str(i) for i in sorted(gone))})")
                live = [r for r in live if r["id"] not in gone]
        _check(t, live, rng)
