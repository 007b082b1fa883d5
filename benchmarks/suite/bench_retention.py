"""Retention on S3 at thousands of versions: mvcc's `cleanup_old_versions` against pylance's on the same history.

Both tables get the same history, built through their own writers at no delay on a moto server: one write, then
one-batch appends with a compaction every `COMPACT_EVERY` versions (an ingestion table under maintenance: each
manifest stays small, and the compacted files are referenced only by old versions), N versions in all. Each timed
cleanup runs on a fresh server-side copy of that history (copied directly on moto, not through the proxy), behind
`benchmarks/latency_proxy.py` at each delay (0 and 20 ms by default), mvcc and pylance alternately, and removes
every version but the newest `KEEP` (`older_than=0`, `retain_versions=KEEP`). The proxy counts each side's
requests by method and kind, and the most held at once. After each cleanup both tables are opened and checked:
`KEEP` versions left, every row of the latest there.

    python -m benchmarks.suite.bench_retention --quick             # 200 versions, three rounds
    python -m benchmarks.suite.bench_retention                     # 2,000 versions, three rounds
    python -m benchmarks.suite.bench_retention --huge --out r.json # 20,000 versions
    python -m benchmarks.suite.bench_retention --versions 500 --delays 20
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import boto3  # type: ignore[import-untyped]
import lance
import pyarrow as pa

import mvcc_core as mvcc
from benchmarks.harness import MotoServer
from benchmarks.latency_proxy import LatencyProxy

#: Versions each cleanup keeps (the newest ones).
KEEP = 5
#: Rows per version.
BATCH = 10
#: Every this many versions, one is a compaction instead of an append.
COMPACT_EVERY = 50


def rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "name": [f"row-{i}" for i in range(n)]})


class History:
    """The two tables' history, built once on moto, and server-side copies of it for each timed cleanup."""

    def __init__(self, s3: MotoServer, versions: int) -> None:
        self.s3 = s3
        self.versions = versions
        self.client = boto3.client(
            "s3", endpoint_url=s3.url, aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1"
        )
        tag = uuid.uuid4().hex[:8]
        self.template = {"mvcc": f"retention-{tag}/mvcc", "lance": f"retention-{tag}/lance"}
        self.rows = 0  # rows of the latest version, once built

    def build(self) -> dict[str, float]:
        """Both histories, directly on moto; seconds each side took."""
        took = {}
        um, ul = (f"s3://bench/{self.template[s]}" for s in ("mvcc", "lance"))
        start = time.perf_counter()
        t = mvcc.write_table(rows(BATCH), um, storage_options=self.s3.mvcc_options)
        appended = BATCH
        while t.version < self.versions:
            if (t.version + 1) % COMPACT_EVERY == 0:
                t.optimize.compact_files()
            else:
                t.append(rows(BATCH, appended))
                appended += BATCH
        took["mvcc"] = time.perf_counter() - start
        self.rows = appended
        start = time.perf_counter()
        d = lance.write_dataset(rows(BATCH), ul, storage_options=self.s3.lance_options)
        appended = BATCH
        while d.version < self.versions:
            if (d.version + 1) % COMPACT_EVERY == 0:
                d.optimize.compact_files()
            else:
                d = lance.write_dataset(rows(BATCH, appended), d, mode="append")
                appended += BATCH
        took["lance"] = time.perf_counter() - start
        assert t.version == d.version >= self.versions, (t.version, d.version)  # a compaction may pass N by one
        self.versions = t.version
        assert t.count_rows() == d.count_rows() == self.rows, (t.count_rows(), d.count_rows(), self.rows)
        return took

    def keys(self, prefix: str) -> list[str]:
        out: list[str] = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket="bench", Prefix=prefix + "/"):
            out.extend(o["Key"] for o in page.get("Contents", []))
        return out

    def copy(self, side: str) -> str:
        """A fresh copy of `side`'s history; its path in the bucket."""
        src = self.template[side]
        dst = f"{src}-{uuid.uuid4().hex[:8]}"

        def one(key: str) -> None:
            self.client.copy_object(
                Bucket="bench", Key=dst + key[len(src) :], CopySource={"Bucket": "bench", "Key": key}
            )

        with ThreadPoolExecutor(max_workers=16) as pool:
            list(pool.map(one, self.keys(src)))
        return dst

    def discard(self, prefix: str) -> None:
        keys = self.keys(prefix)
        for start in range(0, len(keys), 1000):
            chunk = keys[start : start + 1000]
            self.client.delete_objects(Bucket="bench", Delete={"Objects": [{"Key": k} for k in chunk]})


def _cleanup(side: str, uri: str, mopts: dict[str, Any], lopts: dict[str, Any], proxy: LatencyProxy) -> dict:
    """Open `uri` (not counted), then time and count its cleanup."""
    handle: Any = (
        mvcc.open_table(uri, storage_options=mopts) if side == "mvcc" else lance.dataset(uri, storage_options=lopts)
    )
    proxy.reset()
    start = time.perf_counter()
    stats = handle.cleanup_old_versions(older_than=timedelta(0), retain_versions=KEEP)
    elapsed = (time.perf_counter() - start) * 1e3
    counts = proxy.counts()
    removed = stats.old_versions
    return {"ms": elapsed, "requests": counts, "old_versions": removed, "bytes_removed": stats.bytes_removed}


def _check(side: str, uri: str, mopts: dict[str, Any], lopts: dict[str, Any], expected_rows: int) -> None:
    """KEEP versions left and every row of the latest readable."""
    if side == "mvcc":
        t = mvcc.open_table(uri, storage_options=mopts)
        left, count = len(t.versions()), t.count_rows()
    else:
        d = lance.dataset(uri, storage_options=lopts)
        left, count = len(d.versions()), d.count_rows()
    assert left == KEEP, (side, left)
    assert count == expected_rows, (side, count, expected_rows)


def measure(s3: MotoServer, history: History, delays: list[int], repeat: int) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    with LatencyProxy(s3.url) as proxy:
        mopts = {**s3.mvcc_options, "aws_endpoint": proxy.url}
        lopts = {**s3.lance_options, "endpoint": proxy.url}
        for delay in delays:
            runs: dict[str, list[dict[str, Any]]] = {"mvcc": [], "lance": []}
            for i in range(repeat):
                for side in ("mvcc", "lance") if i % 2 == 0 else ("lance", "mvcc"):
                    prefix = history.copy(side)
                    uri = f"s3://bench/{prefix}"
                    proxy.delay_ms = delay
                    runs[side].append(_cleanup(side, uri, mopts, lopts, proxy))
                    proxy.delay_ms = 0
                    got = runs[side][-1]
                    total = got["requests"]["total"]
                    print(f"  {delay} ms, round {i + 1}, {side}: {got['ms']:.0f} ms, {total} requests", flush=True)
                    _check(side, uri, mopts, lopts, history.rows)
                    history.discard(prefix)
            m, lt = (statistics.median(r["ms"] for r in runs[s]) for s in ("mvcc", "lance"))
            results[f"cleanup of {history.versions - KEEP:,} of {history.versions:,} versions, {delay} ms"] = {
                "versions": history.versions,
                "delay_ms": delay,
                "mvcc": m,
                "lance": lt,
                "requests": {s: runs[s][0]["requests"] for s in runs},
                "old_versions": {s: runs[s][0]["old_versions"] for s in runs},
                "bytes_removed": {s: runs[s][0]["bytes_removed"] for s in runs},
                "runs_ms": {s: [r["ms"] for r in runs[s]] for s in runs},
            }
    return results


def _print(results: dict[str, dict[str, Any]]) -> None:
    print(f"{'operation (S3 behind the proxy)':44} {'mvcc ms':>9} {'pylance ms':>11} {'ratio':>7} "
          f"{'requests m/p':>13} {'at once m/p':>12}")  # fmt: skip
    for name, r in results.items():
        reqs = r["requests"]
        counts = f"{reqs['mvcc']['total']}/{reqs['lance']['total']}"
        at_once = f"{reqs['mvcc']['in flight']}/{reqs['lance']['in flight']}"
        ratio = r["mvcc"] / r["lance"] if r["lance"] else float("nan")
        print(f"{name:44} {r['mvcc']:9.0f} {r['lance']:11.0f} {ratio:6.2f}x {counts:>13} {at_once:>12}")
    for name, r in results.items():
        for side in ("mvcc", "lance"):
            kinds = {k: v for k, v in r["requests"][side].items() if k not in ("total", "in flight")}
            print(f"  {name}, {side}: {kinds}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="200 versions")
    parser.add_argument("--huge", action="store_true", help="20,000 versions")
    parser.add_argument("--versions", type=int, help="the history's length (default 2,000)")
    parser.add_argument("--repeat", type=int, help="rounds at each delay (default 3)")
    parser.add_argument("--delays", default="0,20", help="the proxy's delays in ms, comma-separated")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()
    versions = args.versions or (200 if args.quick else 20_000 if args.huge else 2_000)
    if versions <= KEEP:
        parser.error(f"--versions must be more than {KEEP} (the versions each cleanup keeps), got {versions}")
    repeat = args.repeat or 3
    if repeat < 1:
        parser.error(f"--repeat must be at least 1, got {repeat}")
    with MotoServer() as s3:
        history = History(s3, versions)
        built = history.build()
        print(
            f"built {history.versions:,} versions: mvcc {built['mvcc']:.0f} s, pylance {built['lance']:.0f} s",
            flush=True,
        )
        results = measure(s3, history, [int(d) for d in args.delays.split(",")], repeat)
    _print(results)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
