"""Full scans of fragmented tables with and without deletion vectors, against the same rows compacted.

The scan target (a full scan at most 1.2x a freshly compacted copy) measured on the shapes the week
leaves (benchmarks/week/simulation.py, day 7): N fragments of R rows, as written (`fragmented`), with 1% of the rows
(`--deleted-percent`) deleted by one `delete` spread over every fragment (`deleted`: one packed deletion file, a
vector per fragment), and the live rows of each rewritten into one fragment (`compacted`, `deleted_compacted`). Each
scan is `open_table(uri).to_table()`, as the week measures it. The shapes alternate round by round, so a
burst of load hits all of them; medians of wall and CPU time (`time.process_time`, all threads) per shape and
the ratios to the compacted copy. Not a test: run it by hand, or through `benchmarks/run.py`.

    python -m benchmarks.suite.bench_scan_shapes                # 12 x 23,000 rows and 200 x 5,000 rows, 15 rounds
    python -m benchmarks.suite.bench_scan_shapes --quick        # 12 x 23,000 rows, 7 rounds
    python -m benchmarks.suite.bench_scan_shapes --shape 13x21500 --rounds 21
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import mvcc_core as mvcc


def events(n: int, start: int) -> pa.Table:
    """Rows shaped like the week's raw_events: an id, a timestamp, a user, an event kind and a value."""
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "ts": pa.array(ids * 1_000_000, pa.timestamp("us")),
            "user": pa.array([f"user-{i % 5000}" for i in range(start, start + n)]),
            "kind": pa.array(["view", "click", "buy", "leave"] * (n // 4) + ["view"] * (n % 4)),
            "value": ids * 0.25,
        }
    )


def build(root: Path, fragments: int, rows: int, deleted_percent: int = 1) -> dict[str, str]:
    """The four tables of one shape under `root` (`deleted_percent` of the rows deleted): uri by shape name."""
    uris = {name: str(root / name) for name in ("fragmented", "compacted", "deleted", "deleted_compacted")}
    for i in range(fragments):
        part = events(rows, i * rows)
        for name in ("fragmented", "deleted"):
            if i == 0:
                mvcc.write_table(part, uris[name])
            else:
                mvcc.open_table(uris[name]).insert(part)
    mvcc.open_table(uris["deleted"]).delete(f"id % 100 < {deleted_percent}")
    mvcc.write_table(mvcc.open_table(uris["fragmented"]).to_table(), uris["compacted"])
    mvcc.write_table(mvcc.open_table(uris["deleted"]).to_table(), uris["deleted_compacted"])
    return uris


def scan(uri: str) -> tuple[float, float, int]:
    """(wall ms, CPU ms, rows) of one full scan of the table at `uri`."""
    wall, cpu = time.perf_counter(), time.process_time()
    rows = mvcc.open_table(uri).to_table().num_rows
    return (time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3, rows


def measure(uris: dict[str, str], rounds: int) -> dict[str, Any]:
    """Interleaved rounds over the shape's tables: medians per table and ratios to the compacted copies."""
    for uri in uris.values():  # warm the caches and the page cache once
        scan(uri)
    walls: dict[str, list[float]] = {name: [] for name in uris}
    cpus: dict[str, list[float]] = {name: [] for name in uris}
    for _ in range(rounds):
        for name, uri in uris.items():
            wall, cpu, _rows = scan(uri)
            walls[name].append(wall)
            cpus[name].append(cpu)
    out: dict[str, Any] = {
        name: {"wall_ms": round(statistics.median(walls[name]), 3), "cpu_ms": round(statistics.median(cpus[name]), 3)}
        for name in uris
    }
    for name, peer in (("fragmented", "compacted"), ("deleted", "deleted_compacted"), ("deleted", "compacted")):
        for unit in ("wall_ms", "cpu_ms"):
            out[f"{name}/{peer} {unit[:-3]}"] = round(out[name][unit] / out[peer][unit], 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 15, 7 with --quick)")
    parser.add_argument("--shape", action="append", help="FRAGMENTSxROWS (repeatable; default 12x23000 200x5000)")
    parser.add_argument("--deleted-percent", type=int, default=1, help="rows deleted of every 100 ids (default 1)")
    args = parser.parse_args()
    rounds = args.rounds or (7 if args.quick else 15)
    shapes = args.shape or (["12x23000"] if args.quick else ["12x23000", "200x5000"])
    results: dict[str, Any] = {}
    for shape in shapes:
        fragments, rows = (int(x) for x in shape.split("x"))
        root = Path(tempfile.mkdtemp(prefix="mvcc-bench-scan-shapes-"))
        try:
            results[shape] = measure(build(root, fragments, rows, args.deleted_percent), rounds)
            results[shape]["deleted_percent"] = args.deleted_percent
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(f"{shape} ({rounds} interleaved rounds, medians)")
        for key, value in results[shape].items():
            print(f"  {key:32} {value}")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
