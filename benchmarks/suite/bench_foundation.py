"""Foundation benchmarks: mvcc against pylance on the same data, in the same run, reported as ratios.

Workloads: append of 1,000 rows (200 commits); open the latest version of a table with 10 and
with 1,000 versions, on a local disk and on S3 (a moto server on 127.0.0.1 started here); full scan and
count_rows of a 200-fragment table (wall and CPU time: the machine may be shared). Not a test: run it by hand.

    python -m benchmarks.suite.bench_foundation            # full
    python -m benchmarks.suite.bench_foundation --quick    # fewer commits and versions, ~1 minute
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid

import lance
import pyarrow as pa
import pyarrow.parquet as pq

import mvcc_core as mvcc
from benchmarks.discard import discard
from benchmarks.harness import MotoServer, median_ms, medians_ms, timed_processes  # noqa: F401 - re-exported


def rows(n: int, start: int = 0) -> pa.Table:
    ids = pa.array(range(start, start + n), pa.int64())
    return pa.table({"id": ids, "value": pa.array([i * 0.5 for i in range(n)]), "name": [f"row-{i}" for i in range(n)]})


def bench_append(root: str, commits: int) -> dict[str, float]:
    batch = rows(1000)
    t = mvcc.write_table(batch, f"{root}/append-mvcc")
    lance.write_dataset(batch, f"{root}/append-lance")

    def mvcc_appends() -> list[float]:
        out = []
        for _ in range(commits):
            start = time.perf_counter()
            t.append(batch)
            out.append(time.perf_counter() - start)
        return out

    def lance_appends() -> list[float]:
        out = []
        for _ in range(commits):
            start = time.perf_counter()
            lance.write_dataset(batch, f"{root}/append-lance", mode="append")
            out.append(time.perf_counter() - start)
        return out

    m, lt = statistics.median(mvcc_appends()) * 1e3, statistics.median(lance_appends()) * 1e3
    floor = median_ms(lambda: pq.write_table(batch, f"{root}/floor-{uuid.uuid4().hex}.parquet"), 50)
    return {"mvcc": m, "lance": lt, "floor": floor}


def build_versions(uri_m: str, uri_l: str, versions: int, mopts: dict | None, lopts: dict | None) -> None:
    """`versions` versions each, built with one-row appends (the same kind of commit for both)."""
    one = rows(1)
    t = mvcc.write_table(one, uri_m, storage_options=mopts)
    ds = lance.write_dataset(one, uri_l, storage_options=lopts)
    for i in range(versions - 1):
        t.append(rows(1, i + 1))
        ds = lance.write_dataset(rows(1, i + 1), uri_l, mode="append", storage_options=lopts)
    assert t.version == versions and ds.version == versions, (t.version, ds.version)


def bench_open(base: str, versions: int, mopts: dict | None, lopts: dict | None, repeat: int) -> dict[str, float]:
    uri_m, uri_l = f"{base}/open-{versions}-mvcc", f"{base}/open-{versions}-lance"
    build_versions(uri_m, uri_l, versions, mopts, lopts)
    m = median_ms(lambda: mvcc.open_table(uri_m, storage_options=mopts).version, repeat)
    lt = median_ms(lambda: lance.dataset(uri_l, storage_options=lopts).version, repeat)
    return {"mvcc": m, "lance": lt}


def bench_scan(root: str, fragments: int, repeat: int) -> dict[str, dict[str, float]]:
    batch = rows(5000)
    t = mvcc.write_table(batch, f"{root}/scan-mvcc")
    lance.write_dataset(batch, f"{root}/scan-lance")
    pq_dir = f"{root}/scan-parquet"
    os.makedirs(pq_dir)
    pq.write_table(batch, f"{pq_dir}/0.parquet")
    for i in range(fragments - 1):
        t.append(batch)
        lance.write_dataset(batch, f"{root}/scan-lance", mode="append")
        pq.write_table(batch, f"{pq_dir}/{i + 1}.parquet")
    assert len(t.get_fragments()) == fragments
    m_wall, m_cpu = medians_ms(lambda: mvcc.open_table(f"{root}/scan-mvcc").to_table(), repeat)
    l_wall, l_cpu = medians_ms(lambda: lance.dataset(f"{root}/scan-lance").to_table(), repeat)
    f_wall, f_cpu = medians_ms(lambda: pq.read_table(pq_dir), repeat)
    scan = {"mvcc": m_wall, "lance": l_wall, "floor": f_wall}
    scan_cpu = {"mvcc": m_cpu, "lance": l_cpu, "floor": f_cpu}
    count = {
        "mvcc": median_ms(lambda: mvcc.open_table(f"{root}/scan-mvcc").count_rows(), repeat),
        "lance": median_ms(lambda: lance.dataset(f"{root}/scan-lance").count_rows(), repeat),
    }
    return {"scan": scan, "scan_cpu": scan_cpu, "count": count}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()
    commits, many, repeat = (50, 200, 9) if args.quick else (200, 1000, 21)
    results: dict[str, dict[str, float]] = {}
    root = tempfile.mkdtemp(prefix="mvcc-bench-")
    try:
        results[f"append 1k rows (median of {commits} commits)"] = bench_append(root, commits)
        for versions in (10, many):
            results[f"open latest, {versions} versions, local"] = bench_open(root, versions, None, None, repeat)
        with MotoServer() as s3:
            for versions in (10, many):
                results[f"open latest, {versions} versions, S3"] = bench_open(
                    "s3://bench/" + uuid.uuid4().hex, versions, s3.mvcc_options, s3.lance_options, repeat
                )
        scan = bench_scan(root, 200, repeat)
        results["full scan, 200 fragments"] = scan["scan"]
        results["full scan, 200 fragments, CPU time"] = scan["scan_cpu"]
        results["count_rows, 200 fragments"] = scan["count"]
    finally:
        discard(root)

    targets = {"append": 1.0, "open": 2.0, "full scan": 1.5}
    print(f"{'workload':48} {'mvcc ms':>9} {'pylance ms':>11} {'ratio':>7} {'target':>7} {'pyarrow floor':>14}")
    for name, r in results.items():
        target = next((f"<={v}x" for k, v in targets.items() if name.startswith(k)), "")
        floor = f"{r['floor']:.2f}" if "floor" in r else ""
        print(f"{name:48} {r['mvcc']:9.2f} {r['lance']:11.2f} {r['mvcc'] / r['lance']:6.2f}x {target:>7} {floor:>14}")
    for backend in ("local", "S3"):
        few, lots = results[f"open latest, 10 versions, {backend}"], results[f"open latest, {many} versions, {backend}"]
        print(
            f"mvcc open-latest flatness ({backend}): {many} / 10 versions = {lots['mvcc'] / few['mvcc']:.2f}x "
            f"(target <= 1.2x; pylance {lots['lance'] / few['lance']:.2f}x)"
        )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
