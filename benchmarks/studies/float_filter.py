"""A filter on a float column against its file statistics: 1M sorted floats in 200 files, one filtered
`to_table` timed per round (median). `x > c` is `x > c OR isnan(x)` in pylance's NaN order; the files' NaN
counts let statistics skip files by it. Not a test: run it by hand, alternating code versions with PYTHONPATH.

    python -m benchmarks.studies.float_filter --write /tmp/float-filter     # once
    python -m benchmarks.studies.float_filter /tmp/float-filter "x > 0.9" --rounds 7
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time

import numpy as np
import pyarrow as pa

import mvcc_core as mvcc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("uri")
    parser.add_argument("filter", nargs="?", default="x > 0.9")
    parser.add_argument("--write", action="store_true", help="write the table at uri (replacing it)")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    if args.write:
        shutil.rmtree(args.uri, ignore_errors=True)
        n = 1_000_000
        table = pa.table({"x": np.linspace(0, 1, n), "id": np.arange(n), "name": [f"n{i % 1000}" for i in range(n)]})
        mvcc.write_table(table, args.uri, max_rows_per_file=5_000)
        return
    t = mvcc.open_table(args.uri)
    walls, cpus, rows = [], [], 0
    for _ in range(args.rounds):
        wall, cpu = time.perf_counter(), time.process_time()
        rows = t.to_table(filter=args.filter).num_rows
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    print(
        f"{args.filter!r}: {rows:,} rows, wall {statistics.median(walls) * 1e3:.1f} ms, "
        f"CPU {statistics.median(cpus) * 1e3:.1f} ms (median of {args.rounds}; {mvcc.__file__})"
    )


if __name__ == "__main__":
    main()
