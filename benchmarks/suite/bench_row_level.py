"""Row-level change benchmarks: mvcc against pylance on the same data, in the same run, as ratios.

Workloads, each on a fresh copy of a 1M-row table of 200 fragments (5,000 rows each), timing only the
operation: delete 10% of the rows (spread over every fragment), update 1% of the rows, merge_insert of
10,000 rows (half updates of existing keys, half new keys) with the existing keys clustered at the end of the
table and with them spread over the whole table, and the spread one again on tables with a BTREE index on the
key (pylance's and mvcc's merge_insert both ask it). mvcc and pylance repetitions alternate, so a burst of load
on the (shared) machine hits both; wall and CPU time (`time.process_time`, all threads) are both reported.
Not a test: run it by hand, or through `benchmarks/run.py`.

    python -m benchmarks.suite.bench_row_level            # 1M rows, median of 5
    python -m benchmarks.suite.bench_row_level --quick    # 200k rows, one run
    python -m benchmarks.suite.bench_row_level --only delete --repeat 9
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import mvcc_core as mvcc
from benchmarks.discard import discard


def data(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {"id": ids, "value": ids * 0.5, "name": pa.array([f"n{i % 1000}" for i in range(start, start + n)])}
    )


def timed(setup: Callable[[], Any], op: Callable[[Any], Any], repeat: int) -> tuple[float, Any]:
    """Median milliseconds of `op(setup())` over `repeat` runs, and the last handle."""
    times, handle = [], None
    for _ in range(repeat):
        handle = setup()
        start = time.perf_counter()
        op(handle)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3, handle


def one_run(setup: Callable[[], Any], op: Callable[[Any], Any]) -> tuple[float, float]:
    """(wall ms, CPU ms) of `op(setup())`, timing only the operation."""
    handle = setup()
    wall, cpu = time.perf_counter(), time.process_time()
    op(handle)
    return (time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--repeat", type=int, help="repetitions per workload (default 5, 1 with --quick)")
    parser.add_argument("--only", help="run only workloads whose name contains this")
    args = parser.parse_args()
    rows = 200_000 if args.quick else 1_000_000
    per_fragment = rows // 200
    repeat = args.repeat or (1 if args.quick else 5)
    root = Path(tempfile.mkdtemp(prefix="mvcc-bench-rows-"))
    table = data(rows)
    mvcc.write_table(table, str(root / "mvcc-base"), max_rows_per_file=per_fragment)
    lance.write_dataset(table, str(root / "lance-base"), max_rows_per_file=per_fragment)
    # the same tables with a BTREE index on the key, for merge_insert on an indexed key (both use it)
    mvcc.write_table(table, str(root / "mvcc_indexed-base"), max_rows_per_file=per_fragment).create_scalar_index(
        "id", "BTREE"
    )
    lance.write_dataset(table, str(root / "lance_indexed-base"), max_rows_per_file=per_fragment).create_scalar_index(
        "id", "BTREE"
    )
    upsert = pa.concat_tables([data(5_000, rows - 5_000), data(5_000, rows)])  # 5k existing keys, 5k new
    upsert = upsert.set_column(1, "value", pa.array(np.full(10_000, -1.0)))
    # the same with the 5k existing keys spread over the whole table (no key-range pruning possible)
    spread_keys = np.sort(np.random.default_rng(0).choice(rows, 5_000, replace=False))
    spread = pa.table(
        {
            "id": np.concatenate([spread_keys, np.arange(rows, rows + 5_000)]),
            "value": np.full(10_000, -1.0),
            "name": pa.array([f"n{i % 1000}" for i in np.concatenate([spread_keys, np.arange(rows, rows + 5_000)])]),
        }
    )

    # Each repetition works on a copy under a new path: files are immutable under their names, so a
    # per-process cache keyed by path (parquet footers) would otherwise make repetitions after the first
    # measure a warm cache on what is meant to be a cold operation.
    copies = iter(range(1_000_000))

    # Copies are kept until the end of the run, not removed before the next one (see discard.py: a removal
    # would charge the timed operation's new files, the deletion vectors, for the benchmark's own churn).
    def fresh(kind: str) -> Path:
        path = root / f"{kind}-{next(copies)}"
        shutil.copytree(root / f"{kind}-base", path)
        # Flush the copy now: otherwise its dirty pages are written back during the timed operation, and
        # the kernel charges that to whoever writes next (the operation's own few small files).
        os.sync()
        last[kind] = path
        return path

    last: dict[str, Path] = {}

    def fresh_mvcc() -> mvcc.Table:
        return mvcc.open_table(str(fresh("mvcc")))

    def fresh_lance() -> lance.LanceDataset:
        return lance.dataset(str(fresh("lance")))

    def fresh_mvcc_indexed() -> mvcc.Table:
        return mvcc.open_table(str(fresh("mvcc_indexed")))

    def fresh_lance_indexed() -> lance.LanceDataset:
        return lance.dataset(str(fresh("lance_indexed")))

    workloads: list[tuple[str, Callable[[Any], Any], Callable[[Any], Any], int]] = [
        ("delete 10% of rows", lambda t: t.delete("id % 10 = 3"), lambda d: d.delete("id % 10 = 3"), rows * 9 // 10),
        (
            "update 1% of rows",
            lambda t: t.update({"value": "value + 1"}, where="id % 100 = 7"),
            lambda d: d.update({"value": "value + 1"}, where="id % 100 = 7"),
            rows,
        ),
        (
            "merge_insert 10k rows",
            lambda t: t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(upsert),
            lambda d: d.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(upsert),
            rows + 5_000,
        ),
        (
            "merge_insert 10k (spread)",
            lambda t: t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(spread),
            lambda d: d.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(spread),
            rows + 5_000,
        ),
        (
            "merge_insert 10k (spread, BTREE on id)",
            lambda t: t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(spread),
            lambda d: d.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(spread),
            rows + 5_000,
        ),
    ]
    indexed = {"merge_insert 10k (spread, BTREE on id)"}
    # The floor: plain pyarrow reading the column every workload must scan (the key / filter column) from
    # the same 200 Parquet files, without any table format on top.
    files = [str(p) for p in sorted((root / "mvcc-base" / "data").glob("*.parquet"))]
    floor_ms, _ = timed(lambda: None, lambda _: pq.ParquetDataset(files).read(columns=["c0"]), max(repeat, 3))
    results = []
    print(f"{rows:,} rows in 200 fragments; median of {repeat}, mvcc and pylance alternating")
    print(f"floor: plain pyarrow reading the id column of the 200 files: {floor_ms:.1f} ms")
    header = f"{'workload':<28}{'mvcc ms':>10}{'pylance ms':>12}{'ratio':>8}"
    print(header + f"{'mvcc cpu':>10}{'pylance cpu':>13}{'ratio':>8}")
    for name, mvcc_op, lance_op, expected in workloads:
        if args.only and args.only not in name:
            continue
        mvcc_runs, lance_runs = [], []
        kinds = ("mvcc_indexed", "lance_indexed") if name in indexed else ("mvcc", "lance")
        setups = (fresh_mvcc_indexed, fresh_lance_indexed) if name in indexed else (fresh_mvcc, fresh_lance)
        for _ in range(repeat):
            mvcc_runs.append(one_run(setups[0], mvcc_op))
            lance_runs.append(one_run(setups[1], lance_op))
        mvcc_rows = mvcc.open_table(str(last[kinds[0]])).count_rows()
        lance_rows = lance.dataset(str(last[kinds[1]])).count_rows()
        if not mvcc_rows == lance_rows == expected:
            print(f"  WARNING: row counts differ: mvcc {mvcc_rows}, pylance {lance_rows}, expected {expected}")
        mvcc_ms, lance_ms = (statistics.median(r[0] for r in runs) for runs in (mvcc_runs, lance_runs))
        mvcc_cpu, lance_cpu = (statistics.median(r[1] for r in runs) for runs in (mvcc_runs, lance_runs))
        ratio, cpu_ratio = mvcc_ms / lance_ms, mvcc_cpu / lance_cpu
        print(
            f"{name:<28}{mvcc_ms:>10.1f}{lance_ms:>12.1f}{ratio:>7.2f}x"
            f"{mvcc_cpu:>10.1f}{lance_cpu:>13.1f}{cpu_ratio:>7.2f}x"
        )
        results.append(
            {
                "workload": name,
                "mvcc_ms": mvcc_ms,
                "pylance_ms": lance_ms,
                "ratio": ratio,
                "mvcc_cpu_ms": mvcc_cpu,
                "pylance_cpu_ms": lance_cpu,
                "repeat": repeat,
            }
        )
    discard(root)
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows, "floor_ms": floor_ms, "results": results}, indent=2))


if __name__ == "__main__":
    main()
