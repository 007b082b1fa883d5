"""Maintenance benchmarks (issue 6): mvcc against pylance and a plain-pyarrow floor, in the same run, as ratios.

- compaction of 1,000 fragments x 1,000 rows (floor: pyarrow reading the same Parquet files and writing one);
- cleanup of 1,000 old versions;
- a point lookup and a 1% range scan on 10M rows, without and with a BTREE index.
deltalake is not installed on this machine, so it is not compared. Not a test: run it by hand.

    python benchmarks/bench_maintenance.py            # full (10M rows for the lookups)
    python benchmarks/bench_maintenance.py --quick    # 200 fragments, 200 versions, 1M rows
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

import mvcc_core as mvcc


def rows(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {"id": ids, "value": ids * 0.5, "name": pa.array([f"n{i % 1000}" for i in range(start, start + n)])}
    )


def timed(setup: Callable[[], Any], op: Callable[[Any], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        handle = setup()
        start = time.perf_counter()
        op(handle)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def fresh(base: Path, work: Path) -> Path:
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(base, work)
    return work


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    args = parser.parse_args()
    fragments, versions, big = (200, 200, 1_000_000) if args.quick else (1_000, 1_000, 10_000_000)
    repeat = 1 if args.quick else 3
    root = Path(tempfile.mkdtemp(prefix="mvcc-bench-maint-"))
    results: dict[str, Any] = {}

    # compaction
    t = mvcc.write_table(rows(1_000), str(root / "m-base"), max_rows_per_file=1_000)
    lance.write_dataset(rows(1_000), str(root / "l-base"))
    for i in range(1, fragments):
        t.append(rows(1_000, i * 1_000))
        lance.write_dataset(rows(1_000, i * 1_000), str(root / "l-base"), mode="append")
    target = fragments * 1_000
    m_ms = timed(
        lambda: mvcc.open_table(str(fresh(root / "m-base", root / "m"))),
        lambda t: t.optimize.compact_files(target_rows_per_fragment=target),
        repeat,
    )
    l_ms = timed(
        lambda: lance.dataset(str(fresh(root / "l-base", root / "l"))),
        lambda d: d.optimize.compact_files(target_rows_per_fragment=target),
        repeat,
    )
    files = sorted(str(p) for p in (root / "m-base" / "data").glob("*.parquet"))
    floor_ms = timed(
        lambda: None, lambda _: pq.write_table(ds.dataset(files).to_table(), str(root / "floor.parquet")), repeat
    )
    assert mvcc.open_table(str(root / "m")).count_rows() == target
    results["compaction"] = {"mvcc_ms": m_ms, "pylance_ms": l_ms, "floor_ms": floor_ms}

    # cleanup of old versions
    t = mvcc.write_table(rows(10), str(root / "cm-base"))
    d = lance.write_dataset(rows(10), str(root / "cl-base"))
    for i in range(versions):
        t.update_config({"k": str(i)})
        d.update_config({"k": str(i)}) if hasattr(d, "update_config") else d.replace_schema_metadata({"k": str(i)})
    cm_ms = timed(
        lambda: mvcc.open_table(str(fresh(root / "cm-base", root / "cm"))),
        lambda t: t.cleanup_old_versions(older_than=timedelta(0)),
        repeat,
    )
    cl_ms = timed(
        lambda: lance.dataset(str(fresh(root / "cl-base", root / "cl"))),
        lambda d: d.cleanup_old_versions(older_than=timedelta(0)),
        repeat,
    )
    assert len(mvcc.open_table(str(root / "cm")).versions()) == 1
    results["cleanup"] = {"mvcc_ms": cm_ms, "pylance_ms": cl_ms}

    # lookups on a big table
    t = mvcc.write_table(rows(big), str(root / "big"), max_rows_per_file=1_048_576)
    point, lo = big // 3, big // 2
    rng = f"id >= {lo} AND id < {lo + big // 100}"
    lookups = {}
    for label in ("without index", "with index"):
        if label == "with index":
            t.create_index("id")
        lookups[label] = {
            "point": timed(lambda: None, lambda _: t.to_table(filter=f"id = {point}"), max(repeat, 5)),
            "range": timed(lambda: None, lambda _: t.to_table(filter=rng), max(repeat, 5)),
        }
    full_ms = timed(lambda: None, lambda _: t.to_table(), repeat)
    results["lookups"] = {**lookups, "full_scan_ms": full_ms}

    print(
        f"compaction of {fragments} x 1,000 rows: mvcc {m_ms:.0f} ms, pylance {l_ms:.0f} ms ({m_ms / l_ms:.2f}x, "
        f"target <= 1.0x), floor {floor_ms:.0f} ms ({m_ms / floor_ms:.2f}x, target <= 1.3x)"
    )
    print(
        f"cleanup of {versions} versions: mvcc {cm_ms:.0f} ms, pylance {cl_ms:.0f} ms "
        f"({cm_ms / cl_ms:.2f}x, target <= 1.0x)"
    )
    without, with_ = lookups["without index"], lookups["with index"]
    print(f"{big:,} rows, full scan {full_ms:.0f} ms")
    print(
        f"  point lookup: {without['point']:.1f} ms without index, {with_['point']:.1f} ms with "
        f"({full_ms / with_['point']:.0f}x faster than the full scan, target >= 50x)"
    )
    print(f"  1% range:     {without['range']:.1f} ms without index, {with_['range']:.1f} ms with")
    shutil.rmtree(root, ignore_errors=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
