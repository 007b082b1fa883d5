"""Compaction of code trees against pylance, each compaction in a fresh process: the `bench_maintenance.py --only
compaction` workload (1,000 one-append fragments of 1,000 rows compacted into one), tables built once, then per
round one process per variant (imports untimed; a fresh copy of the table under a new name; one timed
`compact_files`), the variants and pylance alternating. A tree is any directory holding a `mvcc_core` (this
checkout, or a base commit exported with `git archive BASE mvcc_core | tar -x -C DIR`). Not a test.

    python -m benchmarks.studies.compaction_processes --rounds 15 --tree base=/tmp/base --tree new=.
    python -c "while True: pass" & python -m benchmarks.studies.compaction_processes --tree new=.; kill %1
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

TARGET = 1_000_000


def one_round(kind: str, base: str) -> None:
    """In the child: copy `base` under a new name, time one compaction, print `wall cpu` in ms."""
    work = Path(base).parent / f"{kind}-{uuid.uuid4().hex}"
    shutil.copytree(base, work)
    if kind == "pylance":
        import lance

        handle = lance.dataset(str(work))
    else:
        import mvcc_core as mvcc

        handle = mvcc.open_table(str(work))
    wall, cpu = time.perf_counter(), time.process_time()
    handle.optimize.compact_files(target_rows_per_fragment=TARGET)
    print((time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3)
    if kind != "pylance":
        assert mvcc.open_table(str(work)).count_rows() == TARGET
    shutil.rmtree(work)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--tree", action="append", required=True, help="NAME=DIR of a tree holding mvcc_core")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        one_round(*args.child)
        return
    root = Path(tempfile.mkdtemp(prefix="mvcc-bench-processes-"))
    sys.path.insert(0, str(Path(__file__).parent))
    from compaction_readers import build

    build(root, TARGET // 1_000)  # with this checkout's mvcc_core: every tree reads the same table
    variants = {name: ("mvcc", str(Path(d).resolve())) for name, d in (t.split("=", 1) for t in args.tree)}
    variants["pylance"] = ("pylance", str(Path(__file__).resolve().parent.parent))
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    loads = []
    for _ in range(args.rounds):
        for name, (kind, tree) in variants.items():
            base = root / ("l-base" if kind == "pylance" else "m-base")
            out = subprocess.run(
                [sys.executable, __file__, "--tree", "x=.", "--child", kind, str(base)],
                env={**os.environ, "PYTHONPATH": tree},
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            wall, cpu = map(float, out.split())
            runs[name].append((wall, cpu))
        loads.append(os.getloadavg()[0])
    shutil.rmtree(root, ignore_errors=True)
    peer_wall, peer_cpu = (statistics.median(r[i] for r in runs["pylance"]) for i in (0, 1))
    for name, results in runs.items():
        wall, cpu = (statistics.median(r[i] for r in results) for i in (0, 1))
        print(f"{name:10s} wall {wall:5.0f} ms ({wall / peer_wall:.2f}x), CPU {cpu:5.0f} ms ({cpu / peer_cpu:.2f}x)")
    print(f"median of {args.rounds} rounds, load average {min(loads):.1f}-{max(loads):.1f}")


if __name__ == "__main__":
    main()
