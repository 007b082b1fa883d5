"""What a fragment and a deleted row cost a full scan, against a compacted copy and pyarrow's floor.

Two shapes of the simulated week (benchmarks/results.md, "The week"), written once by this checkout:

- `partner`: the outside writer's table, 280,000 rows of two narrow columns (`feed_id`, `value`) as one
  250,000-row fragment and six appends of 5,000 rows; `partner_one` the same rows in one fragment.
- `events_del`: the week's events (benchmarks/week/simulation.py's rows), 7 fragments of 120,000 rows with 1 % of every
  fragment deleted (a deletion vector on every file, as the week's daily GDPR delete leaves them);
  `events_one` a compacted copy of the live rows.

A worker process scans them in interleaved rounds (`open_table(uri).to_table()`, process CPU ms) beside the
floors: pyarrow reading the same data files whole on one thread with their footers cached (`raw_*`), and for
`events_del` the same read followed by the cheapest Arrow call found that drops the same rows
(`raw_events_del`: `Table.filter` of each file by its precomputed live mask). Workers of this
checkout and of `--peer` alternate, `--repeats` times each; the figures are the median of the workers' best
(best of `--rounds` each) and the median of their medians. Not a test: run it by hand.

    python -m benchmarks.studies.scan_fragment_cost --peer /work/wt/lead --rounds 15 --repeats 3
    python -m benchmarks.studies.scan_fragment_cost --profile events_del   # cProfile of this checkout's scan
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PARTNER_APPENDS = 6
PARTNER_APPEND_ROWS = 5_000
PARTNER_FIRST_ROWS = 250_000
EVENT_FRAGMENTS = 7
EVENT_FRAGMENT_ROWS = 120_000
DELETE = "event_id % 100 = 7"


def build(root: Path) -> dict[str, str]:
    """The four tables under `root`: uri by name."""
    import pyarrow as pa

    import mvcc_core as mvcc

    os.environ.setdefault("MVCC_WEEK_SETTINGS", json.dumps({"rows_per_hour": 20000}))
    from benchmarks.week import simulation as week

    uris = {name: str(root / name) for name in ("partner", "partner_one", "events_del", "events_one")}

    def partner_rows(first: int, n: int) -> pa.Table:
        return pa.table(
            {"feed_id": pa.array(range(first, first + n), pa.int64()), "value": [float(i) for i in range(n)]}
        )

    sizes = [PARTNER_FIRST_ROWS] + [PARTNER_APPEND_ROWS] * PARTNER_APPENDS
    first = 0
    for i, n in enumerate(sizes):
        rows = partner_rows(first, n)
        first += n
        mvcc.write_table(rows, uris["partner"]) if i == 0 else mvcc.open_table(uris["partner"]).append(rows)
    mvcc.write_table(mvcc.open_table(uris["partner"]).to_table(), uris["partner_one"])

    per_hour = EVENT_FRAGMENT_ROWS // 6
    for i in range(EVENT_FRAGMENTS):
        rows = pa.concat_tables([week.event_rows(hour, per_hour) for hour in range(i * 24, i * 24 + 24, 4)])
        if i == 0:
            mvcc.write_table(rows, uris["events_del"])
        else:
            mvcc.open_table(uris["events_del"]).append(rows)
    mvcc.open_table(uris["events_del"]).delete(DELETE)
    mvcc.write_table(mvcc.open_table(uris["events_del"]).to_table(), uris["events_one"])
    return uris


def data_files(uri: str) -> list[str]:
    """The table's data files in fragment order (local tables only)."""
    import mvcc_core as mvcc

    return [str(Path(uri, "data", f.data_files()[0].path)) for f in mvcc.open_table(uri).get_fragments()]


def jobs(uris: dict[str, str]) -> dict[str, Any]:
    """The timed calls: the four scans and their pyarrow floors (footers and live masks prepared untimed)."""
    import pyarrow as pa
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    import mvcc_core as mvcc

    fs = pafs.LocalFileSystem()
    files = {name: data_files(uri) for name, uri in uris.items()}
    footers = {path: pq.ParquetFile(path).metadata for paths in files.values() for path in paths}

    from benchmarks.studies.scan_per_file import read_files_floor

    def read(paths: list[str]) -> pa.Table:
        return read_files_floor(fs, footers, paths)

    # the rows `DELETE` leaves, per file (column 0: event_id)
    live = {path: pa.array(read([path]).column(0).to_numpy() % 100 != 7) for path in files["events_del"]}

    def read_live(paths: list[str]) -> pa.Table:
        # per file: `Table.filter` over one chunk per column is Arrow's cheapest (over a concatenation it takes
        # chunk by chunk, slower)
        return pa.concat_tables([read([path]).filter(live[path]) for path in paths])

    out = {name: (lambda u=uri: mvcc.open_table(u).to_table()) for name, uri in uris.items()}
    out |= {f"raw_{name}": (lambda p=paths: read(p)) for name, paths in files.items()}
    out["raw_events_del"] = lambda: read_live(files["events_del"])
    out["raw_events_all"] = lambda: read(files["events_del"])
    return out


def worker(uris: dict[str, str], rounds: int) -> dict[str, dict[str, float]]:
    """Best and median CPU ms of each job, interleaved over `rounds` rounds (round 0 warms the caches)."""
    calls = jobs(uris)
    times: dict[str, list[float]] = {name: [] for name in calls}
    for round_number in range(rounds + 1):
        for name, call in calls.items():
            start = time.process_time()
            call()
            if round_number:
                times[name].append((time.process_time() - start) * 1e3)
    return {name: {"best": min(v), "median": statistics.median(v)} for name, v in times.items()}


def profile(uris: dict[str, str], name: str, scans: int) -> None:
    """Print a cProfile of `scans` scans of table `name` (after a warm-up scan)."""
    import cProfile
    import pstats

    import mvcc_core as mvcc

    mvcc.open_table(uris[name]).to_table()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(scans):
        mvcc.open_table(uris[name]).to_table()
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def ratios(figures: dict[str, dict[str, float]], stat: str) -> dict[str, float]:
    """The scan / compacted-copy ratios of mvcc and of the pyarrow floor."""
    f = {name: v[stat] for name, v in figures.items()}
    return {
        "partner/partner_one": round(f["partner"] / f["partner_one"], 3),
        "raw_partner/raw_partner_one": round(f["raw_partner"] / f["raw_partner_one"], 3),
        "events_del/events_one": round(f["events_del"] / f["events_one"], 3),
        "raw_events_del/raw_events_one": round(f["raw_events_del"] / f["raw_events_one"], 3),
        "partner - raw_partner ms": round(f["partner"] - f["raw_partner"], 3),
        "events_del - raw_events_del ms": round(f["events_del"] - f["raw_events_del"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", help="another checkout's root to interleave with (e.g. /work/wt/lead)")
    parser.add_argument("--rounds", type=int, default=15, help="scans of each table per worker")
    parser.add_argument("--repeats", type=int, default=3, help="workers per checkout (alternating)")
    parser.add_argument("--profile", choices=["partner", "events_del"], help="cProfile this checkout's scan")
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker), args.rounds)))
        return
    root = Path(tempfile.mkdtemp(prefix="mvcc-scan-fragment-cost-"))
    try:
        uris = build(root)
        if args.profile:
            profile(uris, args.profile, args.rounds)
            return
        checkouts = {"this": str(HERE.parent)} | ({"peer": args.peer} if args.peer else {})
        runs: dict[str, list[dict[str, dict[str, float]]]] = {name: [] for name in checkouts}
        for _ in range(args.repeats):
            for name, checkout in checkouts.items():
                env = {**os.environ, "PYTHONPATH": checkout}
                command = [sys.executable, __file__, "--worker", json.dumps(uris), "--rounds", str(args.rounds)]
                out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
                runs[name].append(json.loads(out.strip().splitlines()[-1]))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    results: dict[str, Any] = {"load_average": os.getloadavg()}
    for name, workers in runs.items():
        merged = {
            job: {stat: round(statistics.median(w[job][stat] for w in workers), 3) for stat in ("best", "median")}
            for job in workers[0]
        }
        results[name] = {"ms": merged, "ratios_best": ratios(merged, "best"), "ratios_median": ratios(merged, "median")}
        print(f"{name} ({args.repeats} workers x {args.rounds} rounds; CPU ms, median of the workers' best / median)")
        for job, v in merged.items():
            print(f"  {job:16s} {v['best']:8.3f} {v['median']:8.3f}")
        print("  ratios (best):  ", json.dumps(results[name]["ratios_best"]))
        print("  ratios (median):", json.dumps(results[name]["ratios_median"]))
    print("load average", results["load_average"])
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
