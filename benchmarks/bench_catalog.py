"""Catalog commit cost: a 1-table and a 5-table catalog transaction against a single-table commit,
and catalog commits per second with 4 processes, on a local disk and on S3 (a moto server on 127.0.0.1
started here). Target: a 5-table transaction <= 3x a single-table commit. Not a test.

Each latency is the median over `--commits` commits of a 1,000-row append (wall clock, and the CPU time of
this process, which the shared machine's load inflates less); the measurements take turns commit by commit,
so their ratios compare like with like on a machine whose load drifts. The 4-process run counts published
transactions (each appending to the same two tables; a retryable conflict re-runs the transaction).

    python benchmarks/bench_catalog.py            # 20 commits each, local and S3
    python benchmarks/bench_catalog.py --quick    # 8 commits each, local and S3
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
from bench_foundation import MotoServer  # noqa: E402
from discard import discard  # noqa: E402

import mvcc_core as mvcc  # noqa: E402
from mvcc_core.catalog import Catalog  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.float64())])


def batch(n: int = 1000) -> pa.Table:
    return pa.table({"id": pa.array(range(n), pa.int64()), "value": pa.array([i * 0.5 for i in range(n)])})


def interleaved(prepares: dict[str, Any], commits: int) -> dict[str, dict[str, float]]:
    """Median wall and CPU time of each measurement; `prepares[name]()` returns the callable to time (its
    preparation is not timed). The measurements take turns, one commit each per round: on a machine whose
    load drifts (shared with other test runs) a ratio between two of them is then still a fair one, where
    running all commits of one and then all of the next compared different loads."""
    walls: dict[str, list[float]] = {name: [] for name in prepares}
    cpus: dict[str, list[float]] = {name: [] for name in prepares}
    for prepare in prepares.values():
        prepare()()  # warm-up (imports, first listing)
    for _ in range(commits):
        for name, prepare in prepares.items():
            step = prepare()
            wall, cpu = time.perf_counter(), time.process_time()
            step()
            walls[name].append(time.perf_counter() - wall)
            cpus[name].append(time.process_time() - cpu)
    return {
        name: {"wall_ms": statistics.median(walls[name]) * 1e3, "cpu_ms": statistics.median(cpus[name]) * 1e3}
        for name in prepares
    }


def latencies(root: str, opts: dict[str, Any] | None, commits: int) -> dict[str, dict[str, float]]:
    data = batch()
    table = mvcc.write_table(data, f"{root}/single", storage_options=opts)
    cat = Catalog.create(f"{root}/cat", storage_options=opts)
    with cat.transaction() as tx:
        for i in range(5):
            tx.create_table(f"t{i}", SCHEMA)

    def tx_of(n: int) -> None:
        with cat.transaction() as tx:
            for i in range(n):
                tx.table(f"t{i}").append(data)

    def staged_single() -> Any:
        txn = table.append_uncommitted(data)
        return lambda: table.commit(txn)

    def staged_catalog(n: int) -> Any:
        tx = cat.transaction()
        for i in range(n):
            tx.table(f"t{i}").append(data)
        return tx.commit

    return interleaved(
        {
            "single-table commit": lambda: lambda: table.append(data),
            "1-table catalog transaction": lambda: lambda: tx_of(1),
            "5-table catalog transaction": lambda: lambda: tx_of(5),
            # The commit step alone, data already written (staged): what the catalog adds to the data writes.
            "single-table commit step": staged_single,
            "1-table catalog publish step": lambda: staged_catalog(1),
            "5-table catalog publish step": lambda: staged_catalog(5),
        },
        commits,
    )


def _writer(root: str, opts: dict[str, Any] | None, commits: int, writer: int, barrier: Any, stats: Any) -> None:
    from mvcc_core import RetryableConflictError

    cat = Catalog.open(root, storage_options=opts)
    row = pa.table({"id": [writer], "value": [0.0]})
    barrier.wait()
    for _ in range(commits):
        while True:
            try:
                with cat.transaction() as tx:
                    tx.table("a").append(row)
                    tx.table("b").append(row)
                break
            except RetryableConflictError:
                with stats.get_lock():
                    stats[1] += 1
        with stats.get_lock():
            stats[0] += 1


def throughput(root: str, opts: dict[str, Any] | None, writers: int, commits: int) -> dict[str, float]:
    cat = Catalog.create(root, storage_options=opts)
    with cat.transaction() as tx:
        tx.create_table("a", SCHEMA)
        tx.create_table("b", SCHEMA)
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(writers + 1)
    stats = ctx.Array("i", [0, 0])
    procs = [ctx.Process(target=_writer, args=(root, opts, commits, w, barrier, stats)) for w in range(writers)]
    for p in procs:
        p.start()
    barrier.wait()
    start = time.perf_counter()
    for p in procs:
        p.join()
    elapsed = time.perf_counter() - start
    assert len(Catalog.open(root, storage_options=opts).table("a").to_table()) == stats[0]
    return {"commits_per_s": stats[0] / elapsed, "reruns": stats[1], "published": stats[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    parser.add_argument("--commits", type=int)
    args = parser.parse_args()
    commits = args.commits or (8 if args.quick else 20)
    results: dict[str, Any] = {}
    local = Path(tempfile.mkdtemp(prefix="mvcc-bench-cat-"))
    try:
        results["local"] = {
            "latency": latencies(str(local / "lat"), None, commits),
            "4 processes": throughput(str(local / "thr"), None, 4, max(2, commits // 2)),
        }
        with MotoServer() as s3:
            base = f"s3://bench/{uuid.uuid4().hex}"
            results["s3"] = {
                "latency": latencies(f"{base}/lat", s3.mvcc_options, commits),
                "4 processes": throughput(f"{base}/thr", s3.mvcc_options, 4, max(2, commits // 4)),
            }
    finally:
        discard(local)
    for backend, r in results.items():
        for name, m in r["latency"].items():
            single = r["latency"]["single-table commit" + (" step" if name.endswith(" step") else "")]
            ratio = m["wall_ms"] / single["wall_ms"]
            cpu_ratio = m["cpu_ms"] / single["cpu_ms"]
            print(f"{backend:5} {name:30} {m['wall_ms']:8.1f} ms wall ({ratio:.2f}x)  {m['cpu_ms']:8.1f} ms CPU "
                  f"({cpu_ratio:.2f}x)")  # fmt: skip
        t = r["4 processes"]
        print(f"{backend:5} 4 processes, 2-table transactions: {t['commits_per_s']:.1f} commits/s "
              f"({t['published']} published, {t['reruns']} re-run after a conflict)")  # fmt: skip
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
