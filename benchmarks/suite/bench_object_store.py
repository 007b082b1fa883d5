"""Object-store latency and growth: mvcc against pylance on the same data, in the same run, as ratios.

Latency: a moto server on 127.0.0.1 behind a proxy (`benchmarks/latency_proxy.py`) that holds each request 0, 20
or 50 ms and counts the requests of each operation by method and kind. Tables are built with the proxy at 0 ms;
each operation is then timed at the proxy's delay, mvcc and pylance alternately: the first write of a fresh
process (a subprocess: import, client start-up, write), append, open latest, open an old version, count_rows,
full scan, a point filter, versions(), compaction of 20 one-batch fragments, cleanup of old versions.

Growth: on the local disk, tables of 100 and 1,000 fragments and versions (10,000 with `--huge`), each built by
one-batch appends: open latest, open an old version, append, count_rows, versions(), compaction planning (no
commit) and a cleanup that finds nothing old enough to remove; each cost beside pylance's, and how it grows
from the smallest size.

    python -m benchmarks.suite.bench_object_store --quick             # 0 / 20 / 50 ms, 100 / 1,000 fragments
    python -m benchmarks.suite.bench_object_store --quick --only growth
    python -m benchmarks.suite.bench_object_store --huge --out r.json  # adds 10,000 fragments
    python -m benchmarks.suite.bench_object_store --only startup --delays 20 --rounds 7 [--compare old=/tmp/old-tree]

Start-up: `import mvcc_core` plus the first write of a small table to s3:// against `import lance` plus
`lance.write_dataset`, each in a fresh process, the sides interleaved (the order rotates every round) behind the
proxy at `--delays`' first delay; the ratio of the medians of import + write, and of the whole process (interpreter
start to exit). `--compare LABEL=PATH` adds another mvcc source tree as a side. The processes run with bytecode
caching on (PYTHONDONTWRITEBYTECODE unset, after one discarded warm-up round), as an installed package runs.
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
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
from lance.optimize import Compaction, CompactionOptions

import mvcc_core as mvcc
from benchmarks.discard import discard
from benchmarks.harness import MotoServer, median_ms
from benchmarks.latency_proxy import LatencyProxy
from mvcc_core import compaction as mvcc_compaction

ROOT = Path(__file__).resolve().parents[2]
FAR_FUTURE = timedelta(days=36500)


def rows(n: int, start: int = 0) -> pa.Table:
    ids = pa.array(range(start, start + n), pa.int64())
    return pa.table({"id": ids, "value": pa.array([i * 0.5 for i in range(n)]), "name": [f"row-{i}" for i in range(n)]})


# ---- latency --------------------------------------------------------------------------------------------

_FIRST_WRITE = """
import json, sys, time
start, start_cpu = time.perf_counter(), time.process_time()
import pyarrow as pa
side, uri, opts = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
data = pa.table({"id": pa.array(range(1000), pa.int64())})
if side == "mvcc":
    import mvcc_core as mvcc
    imported = time.perf_counter()
    mvcc.write_table(data, uri, storage_options=opts)
else:
    import lance
    imported = time.perf_counter()
    lance.write_dataset(data, uri, storage_options=opts)
done, cpu = time.perf_counter(), time.process_time() - start_cpu
print(json.dumps({"import_ms": (imported - start) * 1e3, "write_ms": (done - imported) * 1e3, "cpu_ms": cpu * 1e3}))
"""


class Sides:
    """The two peers' calls on one S3 endpoint (the proxy's)."""

    def __init__(self, proxy: LatencyProxy, s3: MotoServer) -> None:
        self.proxy = proxy
        self.mopts = {**s3.mvcc_options, "aws_endpoint": proxy.url}
        self.lopts = {**s3.lance_options, "endpoint": proxy.url}

    def uris(self, name: str) -> tuple[str, str]:
        base = f"s3://bench/{name}-{uuid.uuid4().hex[:8]}"
        return f"{base}-mvcc", f"{base}-lance"

    def build(self, name: str, fragments: int, batch: int = 1000) -> tuple[str, str]:
        """Two tables of `fragments` one-batch fragments (and as many versions), built at no delay."""
        um, ul = self.uris(name)
        delay, self.proxy.delay_ms = self.proxy.delay_ms, 0
        t = mvcc.write_table(rows(batch), um, storage_options=self.mopts)
        lance.write_dataset(rows(batch), ul, storage_options=self.lopts)
        for i in range(1, fragments):
            t.append(rows(batch, i * batch))
            lance.write_dataset(rows(batch, i * batch), ul, mode="append", storage_options=self.lopts)
        self.proxy.delay_ms = delay
        return um, ul


def _measure(
    sides: Sides, mvcc_fn: Callable[[], Any], lance_fn: Callable[[], Any], repeat: int, setup: Callable | None = None
) -> dict[str, Any]:
    """Median ms of each side's call, alternating mvcc and pylance; requests of the first call of each
    ("requests") and of the second ("requests_again": what a handle's caches save)."""
    out: dict[str, Any] = {"mvcc": [], "lance": [], "requests": {}, "requests_again": {}}
    for i in range(repeat + 1):  # the first round (warm-up) is the one whose requests are counted
        for side, fn in (
            (("mvcc", mvcc_fn), ("lance", lance_fn)) if i % 2 == 0 else (("lance", lance_fn), ("mvcc", mvcc_fn))
        ):
            arg = setup(side) if setup else None
            sides.proxy.reset()
            start = time.perf_counter()
            fn(arg) if setup else fn()
            elapsed = (time.perf_counter() - start) * 1e3
            if i < 2:
                out["requests" if i == 0 else "requests_again"][side] = sides.proxy.counts()
            if i > 0 or repeat == 0:
                out[side].append(elapsed)
    out["mvcc"], out["lance"] = statistics.median(out["mvcc"]), statistics.median(out["lance"])
    return out


def _first_write(sides: Sides, repeat: int) -> dict[str, Any]:
    env = _fresh_process_env(str(ROOT))
    walls: dict[str, list[float]] = {"mvcc": [], "lance": []}
    imports: dict[str, list[float]] = {"mvcc": [], "lance": []}
    requests: dict[str, dict[str, int]] = {}
    for i in range(repeat):
        for side, opts in (("mvcc", sides.mopts), ("lance", sides.lopts)):
            uri = f"s3://bench/first-{uuid.uuid4().hex[:8]}"
            sides.proxy.reset()
            done = subprocess.run(
                [sys.executable, "-c", _FIRST_WRITE, side, uri, json.dumps(opts)],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            r = json.loads(done.stdout.strip().splitlines()[-1])
            walls[side].append(r["write_ms"])
            imports[side].append(r["import_ms"])
            if i == 0:
                requests[side] = sides.proxy.counts()
    return {
        "mvcc": statistics.median(walls["mvcc"]),
        "lance": statistics.median(walls["lance"]),
        "import_ms": {side: statistics.median(v) for side, v in imports.items()},
        "requests": requests,
    }


def _fresh_process_env(mvcc_path: str) -> dict[str, str]:
    """The environment of a fresh benchmark process: `mvcc_path` first on PYTHONPATH, bytecode caching on (the
    test environment's PYTHONDONTWRITEBYTECODE would have every process compile mvcc's source again)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [mvcc_path, str(ROOT), os.environ.get("PYTHONPATH")]))
    return env


def startup(s3: MotoServer, delay: int, rounds: int, trees: dict[str, str]) -> dict[str, Any]:
    """Import + first write of a fresh process for each mvcc tree and pylance, interleaved (the order rotates
    every round), `rounds` rounds after a discarded warm-up; each side's medians and its ratios to pylance's.

    Args:
        s3: the moto server
        delay: the proxy's delay in ms
        rounds: measured rounds (each runs every side once)
        trees: label -> the mvcc source tree that side's processes import ("mvcc": this one)
    """
    sides_run = [*trees, "lance"]
    cwd = tempfile.mkdtemp(prefix="mvcc-bench-startup-")  # `-c` puts the working directory first on sys.path
    totals: dict[str, list[float]] = {side: [] for side in sides_run}
    imports: dict[str, list[float]] = {side: [] for side in sides_run}
    processes: dict[str, list[float]] = {side: [] for side in sides_run}
    cpus: dict[str, list[float]] = {side: [] for side in sides_run}
    with LatencyProxy(s3.url) as proxy:
        sides = Sides(proxy, s3)
        proxy.delay_ms = delay
        for i in range(rounds + 1):  # round 0 warms the bytecode caches and the page cache
            shift = i % len(sides_run)
            for side in sides_run[shift:] + sides_run[:shift]:
                kind, opts = ("lance", sides.lopts) if side == "lance" else ("mvcc", sides.mopts)
                env = _fresh_process_env(trees.get(side, str(ROOT)))
                uri = f"s3://bench/start-{uuid.uuid4().hex[:8]}"
                start = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, "-c", _FIRST_WRITE, kind, uri, json.dumps(opts)],
                    env=env, cwd=cwd, capture_output=True, text=True, check=True,
                )  # fmt: skip
                wall = (time.perf_counter() - start) * 1e3
                r = json.loads(done.stdout.strip().splitlines()[-1])
                if i > 0:
                    totals[side].append(r["import_ms"] + r["write_ms"])
                    imports[side].append(r["import_ms"])
                    processes[side].append(wall)
                    cpus[side].append(r["cpu_ms"])
                    print(f"round {i} {side:12} import {r['import_ms']:7.0f} ms  write {r['write_ms']:6.0f} ms  "
                          f"cpu {r['cpu_ms']:6.0f} ms  process {wall:7.0f} ms", file=sys.stderr)  # fmt: skip
    out: dict[str, Any] = {"delay_ms": delay, "rounds": rounds, "sides": {}}
    for side in sides_run:
        out["sides"][side] = {
            "import_plus_write_ms": statistics.median(totals[side]),
            "import_ms": statistics.median(imports[side]),
            "process_ms": statistics.median(processes[side]),
            "ratio": statistics.median(totals[side]) / statistics.median(totals["lance"]),
            "round_ratios": [m / p for m, p in zip(totals[side], totals["lance"], strict=True)],
            "process_ratio": statistics.median(processes[side]) / statistics.median(processes["lance"]),
            "cpu_ms": statistics.median(cpus[side]),
            "cpu_ratio": statistics.median(cpus[side]) / statistics.median(cpus["lance"]),
            "totals_ms": totals[side],
        }
    return out


def _print_startup(r: dict[str, Any]) -> None:
    print(f"import + first write of a fresh process, proxy at {r['delay_ms']} ms, {r['rounds']} rounds (medians)")
    print(
        f"{'side':14} {'import+write':>13} {'ratio':>7} {'its CPU':>10} {'ratio':>7} {'whole process':>14} {'ratio':>7}"
        "  per-round ratios of import+write"
    )
    for side, v in r["sides"].items():
        rounds = ", ".join(f"{x:.2f}" for x in v["round_ratios"])
        print(
            f"{side:14} {v['import_plus_write_ms']:10.0f} ms {v['ratio']:6.2f}x "
            f"{v['cpu_ms']:7.0f} ms {v['cpu_ratio']:6.2f}x "
            f"{v['process_ms']:11.0f} ms {v['process_ratio']:6.2f}x  {rounds}"
        )


def latency(s3: MotoServer, delays: list[int], repeat: int, fragments: int) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    with LatencyProxy(s3.url) as proxy:
        sides = Sides(proxy, s3)
        read = sides.build("read", fragments)
        cm, cl = sides.build("append", 1)
        tm = mvcc.open_table(cm, storage_options=sides.mopts)
        for delay in delays:
            proxy.delay_ms = delay
            for name, r in _latency_at(sides, read, (tm, cl), repeat, fragments).items():
                results[f"{name}, {delay} ms"] = r
    return results


def _latency_at(
    sides: Sides, read: tuple[str, str], append: tuple[Any, str], repeat: int, fragments: int
) -> dict[str, dict[str, Any]]:
    """Every operation at the proxy's current delay."""
    (um, ul), (tm, cl) = read, append
    results: dict[str, dict[str, Any]] = {}

    def put(name: str, r: dict[str, Any]) -> None:
        results[name] = r

    put("first write of a process", _first_write(sides, max(1, repeat // 3)))
    batch = rows(1000)
    put(
        "append 1,000 rows",
        _measure(
            sides,
            lambda b=batch: tm.append(b),
            lambda b=batch: lance.write_dataset(b, cl, mode="append", storage_options=sides.lopts),
            repeat,
        ),
    )
    mo = {"storage_options": sides.mopts}
    lo = {"storage_options": sides.lopts}
    put(
        "open latest",
        _measure(sides, lambda: mvcc.open_table(um, **mo).version, lambda: lance.dataset(ul, **lo).version, repeat),
    )
    put(
        "open version 2",
        _measure(
            sides,
            lambda: mvcc.open_table(um, version=2, **mo).version,
            lambda: lance.dataset(ul, version=2, **lo).version,
            repeat,
        ),
    )
    om, ol = mvcc.open_table(um, **mo), lance.dataset(ul, **lo)
    put(f"count_rows ({fragments} fragments)", _measure(sides, om.count_rows, ol.count_rows, repeat))
    put(f"full scan ({fragments} fragments)", _measure(sides, om.to_table, ol.to_table, repeat))
    point = f"id = {fragments * 500}"
    put(
        "point filter",
        _measure(sides, lambda: om.to_table(filter=point), lambda: ol.to_table(filter=point), repeat),
    )
    put(f"versions() ({fragments} versions)", _measure(sides, om.versions, ol.versions, repeat))

    def compaction_setup(side: str) -> Any:
        a, b = sides.build("compact", 20, batch=500)
        return mvcc.open_table(a, **mo) if side == "mvcc" else lance.dataset(b, **lo)

    put(
        "compaction of 20 fragments",
        _measure(
            sides,
            lambda t: t.optimize.compact_files(),
            lambda d: d.optimize.compact_files(),
            max(1, repeat // 3),
            setup=compaction_setup,
        ),
    )

    def cleanup_setup(side: str) -> Any:
        a, b = sides.build("cleanup", 10, batch=100)
        time.sleep(0.01)
        return mvcc.open_table(a, **mo) if side == "mvcc" else lance.dataset(b, **lo)

    put(
        "cleanup of 9 old versions",
        _measure(
            sides,
            lambda t: t.cleanup_old_versions(older_than=timedelta(0)),
            lambda d: d.cleanup_old_versions(older_than=timedelta(0)),
            max(1, repeat // 3),
            setup=cleanup_setup,
        ),
    )
    return results


# ---- growth ---------------------------------------------------------------------------------------------


def _grow(um: str, ul: str, have: int, want: int) -> None:
    t = mvcc.open_table(um)
    for i in range(have, want):
        t.append(rows(10, i * 10))
        lance.write_dataset(rows(10, i * 10), ul, mode="append")


def growth(root: str, sizes: list[int], repeat: int) -> dict[str, dict[str, Any]]:
    """Costs at each size (the same two tables, grown by one-batch appends between the sizes)."""
    um, ul = f"{root}/grow-mvcc", f"{root}/grow-lance"
    mvcc.write_table(rows(10), um)
    lance.write_dataset(rows(10), ul)
    have, results = 1, {}
    for size in sizes:
        _grow(um, ul, have, size)
        have = size + _growth_at(um, ul, size, repeat, results)
    return results


def _growth_at(um: str, ul: str, size: int, repeat: int, results: dict[str, dict[str, Any]]) -> int:
    """Each cost at one size, into `results`; returns how many versions its appends added."""
    old = size // 2
    tm, tl = mvcc.open_table(um), lance.dataset(ul)
    assert len(tm.get_fragments()) == len(tl.get_fragments()), (len(tm.get_fragments()), len(tl.get_fragments()))
    fragments = len(tm.get_fragments())
    ops: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
        "open latest": (lambda: mvcc.open_table(um).version, lambda: lance.dataset(ul).version),
        "open an old version": (
            lambda: mvcc.open_table(um, version=old).version,
            lambda: lance.dataset(ul, version=old).version,
        ),
        "open latest + count_rows": (
            lambda: mvcc.open_table(um).count_rows(),
            lambda: lance.dataset(ul).count_rows(),
        ),
        "count_rows (open handle)": (tm.count_rows, tl.count_rows),
        "versions()": (tm.versions, tl.versions),
        "compaction planning": (
            lambda: mvcc_compaction.plan_unreserved(tm),
            lambda: Compaction.plan(tl, CompactionOptions()),
        ),
        "cleanup finding nothing to remove": (
            lambda: mvcc.open_table(um).cleanup_old_versions(older_than=FAR_FUTURE),
            lambda: lance.dataset(ul).cleanup_old_versions(older_than=FAR_FUTURE),
        ),
    }
    for name, (mf, lf) in ops.items():
        mf(), lf()  # warm-up
        m, lt = [], []
        for _ in range(repeat):
            m.append(median_ms(mf, 1, warm_up=False))
            lt.append(median_ms(lf, 1, warm_up=False))
        results[f"{name}, {size:,} versions / {fragments:,} fragments"] = {
            "op": name, "size": size, "mvcc": statistics.median(m), "lance": statistics.median(lt),
        }  # fmt: skip
    batch = rows(10)
    appends = max(3, repeat)
    am = median_ms(lambda: mvcc.open_table(um).append(batch), appends, warm_up=False)
    al = median_ms(lambda: lance.write_dataset(batch, ul, mode="append"), appends, warm_up=False)
    results[f"open + append, {size:,} versions / {fragments:,} fragments"] = {
        "op": "open + append", "size": size, "mvcc": am, "lance": al,
    }  # fmt: skip
    return appends


def _print_latency(results: dict[str, dict[str, Any]]) -> None:
    print(
        f"{'operation (S3 behind the proxy)':44} {'mvcc ms':>9} {'pylance ms':>11} {'ratio':>7} "
        f"{'requests m/p':>13} {'again m/p':>10} {'at once m/p':>12}"
    )
    for name, r in results.items():
        reqs, again = r["requests"], r.get("requests_again") or {}
        counts = f"{reqs['mvcc']['total']}/{reqs['lance']['total']}"
        counts_again = f"{again['mvcc']['total']}/{again['lance']['total']}" if again else ""
        at_once = f"{reqs['mvcc'].get('in flight', '')}/{reqs['lance'].get('in flight', '')}"
        ratio = r["mvcc"] / r["lance"] if r["lance"] else float("nan")
        print(
            f"{name:44} {r['mvcc']:9.1f} {r['lance']:11.1f} {ratio:6.2f}x {counts:>13} {counts_again:>10} {at_once:>12}"
        )


def _print_growth(results: dict[str, dict[str, Any]]) -> None:
    print(f"{'operation (local disk)':58} {'mvcc ms':>9} {'pylance ms':>11} {'ratio':>7} {'growth m / p':>14}")
    first: dict[str, dict[str, Any]] = {}
    for name, r in results.items():
        base = first.setdefault(r["op"], r)
        grow = f"{r['mvcc'] / base['mvcc']:.1f}x / {r['lance'] / base['lance']:.1f}x"
        print(f"{name:58} {r['mvcc']:9.2f} {r['lance']:11.2f} {r['mvcc'] / r['lance']:6.2f}x {grow:>14}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--huge", action="store_true", help="growth also at 10,000 fragments and versions")
    parser.add_argument("--only", choices=("latency", "growth", "startup"), help="one workload")
    parser.add_argument("--rounds", type=int, default=7, help="start-up: measured rounds")
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="LABEL=PATH",
        help="start-up: also time the mvcc source tree at PATH (e.g. an older commit's `git archive`) as LABEL",
    )
    parser.add_argument("--delays", default="0,20,50", help="the proxy's delays in ms, comma-separated")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()
    repeat = 3 if args.quick else 9
    results: dict[str, Any] = {}
    if args.only in (None, "latency"):
        with MotoServer() as s3:
            results["latency"] = latency(s3, [int(d) for d in args.delays.split(",")], repeat, fragments=20)
        _print_latency(results["latency"])
    if args.only == "startup":
        with MotoServer() as s3:
            trees = {"mvcc": str(ROOT), **dict(c.split("=", 1) for c in args.compare)}
            results["startup"] = startup(s3, int(args.delays.split(",")[0]), args.rounds, trees)
        _print_startup(results["startup"])
    if args.only in (None, "growth"):
        root = tempfile.mkdtemp(prefix="mvcc-bench-growth-")
        try:
            sizes = [100, 1000] + ([10_000] if args.huge else [])
            results["growth"] = growth(root, sizes, repeat)
        finally:
            discard(root)
        _print_growth(results["growth"])
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
