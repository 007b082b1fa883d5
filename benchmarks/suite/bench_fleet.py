"""Planning a fleet's maintenance: `plan_fleet` over 200 tables, one thread against a pool, as ratios.

The fleet: 190 idle tables (one fragment, nothing to do) and 10 hot ones (small appends below the target, a
delete), the shape the fleet issue describes. The plan reads each table's latest manifest and lists its versions
(no data file). Measured on the local disk and on S3 (a moto server behind `benchmarks/latency_proxy.py`, which
holds each request 0 or 20 ms and counts them): the median wall time of a plan with `max_workers=1` (one table
after another) beside the same plan with a pool of 4, 8 and 16 threads; the ratio pool / serial (below 1: the
pool is faster); requests per table; and the plans compared (the pool must choose what one thread chooses).
Target: a nightly plan of 200 tables in under 2 s. Not a test.

    python -m benchmarks.suite.bench_fleet --quick                 # 200 tables, local and S3 at 0 / 20 ms
    python -m benchmarks.suite.bench_fleet --quick --only local
    python -m benchmarks.suite.bench_fleet --tables 500 --out r.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from typing import Any

import pyarrow as pa

import mvcc_core as mvcc
from benchmarks.discard import discard
from benchmarks.harness import MotoServer
from benchmarks.latency_proxy import LatencyProxy
from mvcc_core import compaction

HOT = 10
WORKERS = (4, 8, 16)
BUDGET = 64 * 2**20


def rows(n: int, start: int = 0) -> pa.Table:
    ids = pa.array(range(start, start + n), pa.int64())
    return pa.table({"id": ids, "value": pa.array([i * 0.5 for i in range(n)]), "name": [f"row-{i}" for i in range(n)]})


def build(base: str, tables: int, options: dict[str, Any] | None) -> dict[str, str]:
    """`tables` tables under `base`: the first HOT with small appends and a delete, the rest one fragment each."""
    uris = {}
    for i in range(tables):
        name = f"t{i:04d}"
        uri = f"{base}/{name}"
        t = mvcc.write_table(rows(1000), uri, storage_options=options)
        if i < HOT:
            t.update_config({"mvcc.compaction.target_rows_per_fragment": "2000"})
            for j in range(2 + i % 4):
                t.append(rows(50, 10_000 + 100 * j))
            t.delete("id < 150")
        uris[name] = uri
    return uris


def measure(uris: dict[str, str], options: dict[str, Any] | None, repeat: int, proxy: LatencyProxy | None) -> dict:
    """Median ms of a serial plan and of each pool size, interleaved round by round; the plans compared."""
    plans: dict[int, compaction.FleetPlan] = {}
    times: dict[int, list[float]] = {w: [] for w in (1, *WORKERS)}
    requests: dict[str, Any] = {}
    for round_ in range(repeat + 1):  # round 0: warm-up (the proxy counts its requests)
        for workers in (1, *WORKERS) if round_ % 2 == 0 else (*WORKERS, 1):
            if proxy is not None:
                proxy.reset()
            start = time.perf_counter()
            plan = compaction.plan_fleet(uris, max_bytes=BUDGET, storage_options=options, max_workers=workers)
            elapsed = (time.perf_counter() - start) * 1e3
            if round_ == 0:
                plans[workers] = plan
                if proxy is not None:
                    requests[str(workers)] = proxy.counts()
            else:
                times[workers].append(elapsed)
    medians = {w: statistics.median(v) for w, v in times.items()}
    serial = medians[1]
    serial_plan = plans[1]
    return {
        "tables": len(uris),
        "serial_ms": serial,
        "pool_ms": {str(w): medians[w] for w in WORKERS},
        "pool_over_serial": {str(w): medians[w] / serial for w in WORKERS},
        "per_table_ms_serial": serial / len(uris),
        "same_plan": all((p.chosen, p.left) == (serial_plan.chosen, serial_plan.left) for p in plans.values()),
        "chosen": len(serial_plan.chosen),
        "summary": serial_plan.summary(),
        "requests": requests,
        "requests_per_table": None if not requests else requests["1"]["total"] / len(uris),
    }


def _print(label: str, m: dict[str, Any]) -> None:
    pools = ", ".join(f"{w} threads {m['pool_ms'][w]:.0f} ms ({m['pool_over_serial'][w]:.2f}x)" for w in m["pool_ms"])
    per = "" if m["requests_per_table"] is None else f", {m['requests_per_table']:.1f} requests a table"
    print(f"{label}: {m['tables']} tables, serial {m['serial_ms']:.0f} ms; {pools}{per}; same plan: {m['same_plan']}")
    print(f"    {m['summary']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--tables", type=int, default=200, help="tables in the fleet (default 200)")
    parser.add_argument("--only", choices=("local", "s3"), help="one of the two stores")
    parser.add_argument("--delays", default="0,20", help="the proxy's delays in ms for S3, comma-separated")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()
    repeat = 3 if args.quick else 7
    results: dict[str, Any] = {}
    if args.only in (None, "local"):
        root = tempfile.mkdtemp(prefix="mvcc-bench-fleet-")
        try:
            uris = build(root, args.tables, None)
            results["local"] = measure(uris, None, repeat, None)
            _print("local disk", results["local"])
        finally:
            discard(root)
    if args.only in (None, "s3"):
        with MotoServer() as s3, LatencyProxy(s3.url) as proxy:
            options = {**s3.mvcc_options, "aws_endpoint": proxy.url}
            uris = build(f"s3://bench/fleet-{uuid.uuid4().hex[:8]}", args.tables, options)
            for delay in (int(d) for d in args.delays.split(",")):
                proxy.delay_ms = delay
                key = f"s3_{delay}ms"
                results[key] = measure(uris, options, repeat, proxy)
                _print(f"S3, {delay} ms a request", results[key])
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
