"""CPU of `open_table` on local tables of 13, 31 and 40 versions (the latest-version hint is rewritten every 32
versions: these start their search 12, 30 and 8 versions behind), this checkout against `--peer`, in
alternating worker processes; medians. Not a test.

    python -m benchmarks.studies.open_table_cost --peer /tmp/before
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


def worker(uris: list[str], rounds: int) -> dict[str, float]:
    """Median CPU ms of one `open_table` of each table (20 opens a round)."""
    import mvcc_core as mvcc

    for uri in uris:
        mvcc.open_table(uri)
    times: dict[str, list[float]] = {uri: [] for uri in uris}
    for _ in range(rounds):
        for uri in uris:
            start = time.process_time()
            for _ in range(20):
                mvcc.open_table(uri)
            times[uri].append((time.process_time() - start) / 20 * 1e3)
    return {uri: statistics.median(values) for uri, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", help="another checkout's root to alternate with")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--repeats", type=int, default=5, help="workers per checkout")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker), args.rounds)))
        return
    import pyarrow as pa

    import mvcc_core as mvcc

    root = tempfile.mkdtemp(prefix="mvcc-open-cost-")
    uris = []
    for versions in (13, 31, 40):
        uri = f"{root}/v{versions}"
        table = mvcc.write_table(pa.table({"id": [0]}), uri)
        for i in range(1, versions):
            table.append(pa.table({"id": [i]}))
        uris.append(uri)
    checkouts = {"this": str(HERE.parent)} | ({"peer": args.peer} if args.peer else {})
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
    for _ in range(args.repeats):
        for name, checkout in checkouts.items():
            command = [sys.executable, __file__, "--worker", json.dumps(uris), "--rounds", str(args.rounds)]
            env = {**os.environ, "PYTHONPATH": checkout}
            out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
            runs[name].append(json.loads(out.strip().splitlines()[-1]))
    for name, results in runs.items():
        medians = {Path(u).name: round(statistics.median(r[u] for r in results), 3) for u in uris}
        print(f"{name}: open_table CPU ms by versions {medians}")


if __name__ == "__main__":
    main()
