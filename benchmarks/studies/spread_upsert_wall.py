"""Where a spread merge_insert's wall time goes on a busy machine: per thread, running on a core, waiting for
one (the kernel's runqueue delay, `/proc/self/task/*/schedstat`) or blocked (the GIL, I/O, a lock).

The table and the 10k-key source are `bench_row_level.py`'s (1M rows in 200 fragments, 5k existing keys
spread over the table, 5k new). Linux only. Not a test: run it by hand.

    python -m benchmarks.studies.spread_upsert_wall --repeat 7
    python -m benchmarks.studies.spread_upsert_wall --index     # with a BTREE on the key
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

import mvcc_core as mvcc
import mvcc_core.read.scan_row_addresses as row_address_reads
from benchmarks.discard import discard
from benchmarks.suite.bench_row_level import data


def _schedstat() -> tuple[float, float]:
    """(ms run on a core, ms waited for one) of the calling thread so far."""
    with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as f:
        run, wait, _ = f.read().split()
    return int(run) / 1e6, int(wait) / 1e6


class _TimedPool:
    """The reader pool, recording each task's wall time, time on a core and time waiting for one."""

    def __init__(self, pool: object, records: list[tuple[float, float, float]]) -> None:
        self._pool, self._records = pool, records

    def map(self, fn: Callable, items: object) -> object:
        def timed(item: object) -> object:
            start, (run, wait) = time.perf_counter(), _schedstat()
            out = fn(item)
            run_after, wait_after = _schedstat()
            self._records.append(((time.perf_counter() - start) * 1e3, run_after - run, wait_after - wait))
            return out

        return self._pool.map(timed, items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--index", action="store_true", help="a BTREE on the key")
    args = parser.parse_args()
    rows = 1_000_000
    root = Path(tempfile.mkdtemp(prefix="mvcc-upsert-wall-"))
    base = mvcc.write_table(data(rows), str(root / "base"), max_rows_per_file=rows // 200)
    if args.index:
        base.create_scalar_index("id", "BTREE")
    keys = np.concatenate(
        [np.sort(np.random.default_rng(0).choice(rows, 5_000, replace=False)), np.arange(rows, rows + 5_000)]
    )
    source = pa.table({"id": keys, "value": np.full(10_000, -1.0), "name": pa.array([f"n{i % 1000}" for i in keys])})
    records: list[tuple[float, float, float]] = []
    pool = row_address_reads.read_pool
    row_address_reads.read_pool = lambda: _TimedPool(pool(), records)
    results = []
    for i in range(args.repeat):
        path = root / f"copy-{i}"
        shutil.copytree(root / "base", path)
        os.sync()
        table = mvcc.open_table(str(path))
        records.clear()
        wall, cpu, (run, wait) = time.perf_counter(), time.process_time(), _schedstat()
        table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(source)
        wall, cpu = (time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3
        run_after, wait_after = _schedstat()
        tasks = [sum(r[j] for r in records) for j in range(3)]
        blocked = tasks[0] - tasks[1] - tasks[2]
        results.append((wall, cpu, run_after - run, wait_after - wait, *tasks, blocked))
    discard(root)
    print(f"load average {os.getloadavg()[0]:.1f}; medians of {args.repeat}, ms")
    names = ["wall", "CPU", "main on core", "main waiting for a core", "reader tasks' wall (sum)", "on core",
             "waiting for a core", "blocked (GIL, I/O)"]  # fmt: skip
    for j, name in enumerate(names):
        print(f"  {name}: {statistics.median(r[j] for r in results):.0f}")


if __name__ == "__main__":
    main()
