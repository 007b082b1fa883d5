"""CPU of a small append (`Table.insert` of 500 or 5,000 rows of the week's events columns), this checkout against
`--peer`, in alternating worker processes; medians of 35 appends a worker (after 5 warm-up ones). Not a test.

    python -m benchmarks.studies.small_write_cost --peer /tmp/before
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROWS = (500, 5_000)


def worker() -> dict[str, float]:
    """Median CPU ms of an append of each size, on a fresh local table."""
    import mvcc_core as mvcc
    from benchmarks.suite.bench_scan_shapes import events

    out = {}
    for rows in ROWS:
        uri = f"{tempfile.mkdtemp(prefix='mvcc-small-write-')}/t"
        table = mvcc.write_table(events(rows, 0), uri)
        parts = [events(rows, (i + 1) * rows) for i in range(40)]
        times = []
        for part in parts:
            start = time.process_time()
            table.insert(part)
            times.append((time.process_time() - start) * 1e3)
        out[str(rows)] = statistics.median(times[5:])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", help="another checkout's root to alternate with")
    parser.add_argument("--repeats", type=int, default=4, help="workers per checkout")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker()))
        return
    checkouts = {"this": str(HERE.parent)} | ({"peer": args.peer} if args.peer else {})
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
    for _ in range(args.repeats):
        for name, checkout in checkouts.items():
            env = {**os.environ, "PYTHONPATH": checkout}
            out = subprocess.run(
                [sys.executable, __file__, "--worker"], env=env, check=True, capture_output=True, text=True
            ).stdout
            runs[name].append(json.loads(out.strip().splitlines()[-1]))
    for name, results in runs.items():
        medians = {rows: round(statistics.median(r[rows] for r in results), 3) for rows in results[0]}
        print(f"{name}: append CPU ms by rows {medians}")


if __name__ == "__main__":
    main()
