"""Catalog commit cost: a 1-table and a 5-table catalog transaction against a single-table commit,
and catalog commits per second with 2 and 4 contending processes, on a local disk and on S3 (a moto server on 127.0.0.1
started here). Target: a 5-table transaction <= 3x a single-table commit. Not a test.

Each latency is the median over `--commits` commits of a 1,000-row append (wall clock, and the CPU time of
this process, which the shared machine's load inflates less); the measurements take turns commit by commit,
so their ratios compare like with like on a machine whose load drifts. The 2- and 4-process runs count
published transactions (each appends to the same two tables and every fourth one also deletes from both; a
retryable conflict re-runs the transaction, counted by reason).

    python -m benchmarks.suite.bench_catalog            # 20 commits each, local and S3
    python -m benchmarks.suite.bench_catalog --quick    # 8 commits each, local and S3
    python -m benchmarks.suite.bench_catalog --contention-only --commits 24   # only the 2- and 4-process runs
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa

import mvcc_core as mvcc  # noqa: E402
from benchmarks.discard import discard  # noqa: E402
from benchmarks.harness import MotoServer, timed_processes  # noqa: E402
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
    """Each transaction appends two rows to tables a and b; every fourth one then deletes, from both, a row
    it just appended and its oldest row still present (the issue's contention shape)."""
    from mvcc_core import RetryableConflictError

    cat = Catalog.open(root, storage_options=opts)
    present = [writer * 1_000_000 + 999_999]  # seeded in the fragment every writer shares
    barrier.wait()
    for i in range(commits):
        new = [writer * 1_000_000 + 2 * i, writer * 1_000_000 + 2 * i + 1]
        gone = [new[1], present[0]] if i % 4 == 3 else []
        rows = pa.table({"id": new, "value": [0.0, 0.0]})
        while True:
            try:
                with cat.transaction() as tx:
                    for name in ("a", "b"):
                        tx.table(name).append(rows)
                        if gone:
                            tx.table(name).delete(f"id IN ({gone[0]}, {gone[1]})")
                break
            except RetryableConflictError as exc:
                budget = getattr(exc, "rule_code", "") == "publish_retry_budget"
                slot = 2 if "old ids" in str(exc) else 3 if budget else 1
                with stats.get_lock():
                    stats[slot] += 1
        present = [p for p in present + new if p not in gone]
        with stats.get_lock():
            stats[0] += 1


def throughput(root: str, opts: dict[str, Any] | None, writers: int, commits: int) -> dict[str, float]:
    """Commits per second of `writers` processes each publishing `commits` contending transactions."""
    cat = Catalog.create(root, storage_options=opts)
    seeded = pa.table({"id": [w * 1_000_000 + 999_999 for w in range(writers)], "value": [0.0] * writers})
    with cat.transaction() as tx:
        for name in ("a", "b"):
            tx.create_table(name, SCHEMA)
            tx.table(name).append(seeded)
    ctx = mp.get_context("spawn")
    stats = ctx.Array("i", [0, 0, 0, 0])  # published, re-runs: other retryable, old fragment ids, retry budget
    elapsed = timed_processes(ctx, _writer, (root, opts, commits), writers, stats)
    deletes = writers * (commits // 4) * 2
    assert len(Catalog.open(root, storage_options=opts).table("a").to_table()) == writers + 2 * stats[0] - deletes
    return {
        "commits_per_s": stats[0] / elapsed,
        "published": stats[0],
        "reruns": stats[1] + stats[2] + stats[3],
        "reruns_old_ids": stats[2],
        "reruns_retry_budget": stats[3],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    parser.add_argument("--commits", type=int)
    parser.add_argument("--contention-only", action="store_true", help="only the 2- and 4-process runs")
    parser.add_argument("--latency-only", action="store_true", help="only the latency measurements")
    args = parser.parse_args()
    commits = args.commits or (8 if args.quick else 20)
    results: dict[str, Any] = {}
    local = Path(tempfile.mkdtemp(prefix="mvcc-bench-cat-"))
    try:
        results["local"] = {} if args.contention_only else {"latency": latencies(str(local / "lat"), None, commits)}
        for writers in () if args.latency_only else (2, 4):
            results["local"][f"{writers} processes"] = throughput(
                str(local / f"thr{writers}"), None, writers, max(4, commits)
            )
        with MotoServer() as s3:
            base = f"s3://bench/{uuid.uuid4().hex}"
            results["s3"] = {}
            if not args.contention_only:
                results["s3"]["latency"] = latencies(f"{base}/lat", s3.mvcc_options, commits)
            for writers in () if args.latency_only else (2, 4):
                results["s3"][f"{writers} processes"] = throughput(
                    f"{base}/thr{writers}", s3.mvcc_options, writers, max(4, commits // 2)
                )
    finally:
        discard(local)
    for backend, r in results.items():
        for name, m in r.get("latency", {}).items():
            single = r["latency"]["single-table commit" + (" step" if name.endswith(" step") else "")]
            ratio = m["wall_ms"] / single["wall_ms"]
            cpu_ratio = m["cpu_ms"] / single["cpu_ms"]
            print(f"{backend:5} {name:30} {m['wall_ms']:8.1f} ms wall ({ratio:.2f}x)  {m['cpu_ms']:8.1f} ms CPU "
                  f"({cpu_ratio:.2f}x)")  # fmt: skip
        for writers in [w for w in (2, 4) if f"{w} processes" in r]:
            t = r[f"{writers} processes"]
            print(f"{backend:5} {writers} processes, 2-table append(+delete) transactions: "
                  f"{t['commits_per_s']:.1f} commits/s ({t['published']} published, {t['reruns']} re-run after a "
                  f"conflict: {t['reruns_old_ids']} on old fragment ids, {t['reruns_retry_budget']} out of publish "
                  f"retries)")  # fmt: skip
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
