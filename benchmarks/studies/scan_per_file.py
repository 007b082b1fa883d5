"""Per-file cost of a full scan, this checkout against another one (before / after a read-path change).

Tables of N small fragments (a few KB each: `--shape NxROWS`, the week's events columns) are written once:
`frag` (as appended), `deleted` (1 % of the rows deleted by one spread `delete`: a deletion vector per
fragment), and the same rows in one fragment each (`one`, `deleted_one`). A worker process scans them in
interleaved rounds (`open_table(uri).to_table()`, CPU time, medians) beside the plain-pyarrow floor (each
data file opened with its cached footer and decoded whole on one thread). Workers of this checkout and of
`--peer` alternate, `--repeats` times each; the figures are the medians of the workers' medians.

With `--own-tables` each checkout writes its own tables (a worker process builds them), so a change of the writer
(a file's codec, encodings, layout) is measured too; otherwise both read the tables this checkout wrote.

Per file: `(frag - one) / (N - 1)` is what a fragment costs a scan in all; less pyarrow's own
`(raw_frag - raw_one) / (N - 1)` it is mvcc's overhead. Not a test: run it by hand.

    python -m benchmarks.studies.scan_per_file --peer /work/main --shape 12x500 --shape 50x300 --shape 12x23000
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


def build(root: Path, fragments: int, rows: int) -> dict[str, str]:
    """The four tables of a shape under `root` (`bench_scan_shapes.build`'s, 1 % deleted): uri by name."""
    from benchmarks.suite.bench_scan_shapes import build as build_shapes

    uris = build_shapes(root, fragments, rows, deleted_percent=1)
    return {
        "frag": uris["fragmented"],
        "deleted": uris["deleted"],
        "one": uris["compacted"],
        "deleted_one": uris["deleted_compacted"],
    }


def read_files_floor(fs: Any, footers: dict[str, Any], paths: list[str]) -> Any:
    """pyarrow's cheapest read of whole files, the floor a scan is compared with: one thread, the footers read
    beforehand (`footers`, by path), no pre-buffering; the files' tables concatenated."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = []
    for path in paths:
        with fs.open_input_file(path) as source:
            reader = pq.ParquetReader()
            reader.open(source, metadata=footers[path], pre_buffer=False)
            tables.append(reader.read_all(use_threads=False))
    return pa.concat_tables(tables)


def worker(uris: dict[str, str], rounds: int) -> dict[str, float]:
    """Medians (CPU ms) of interleaved scans of `uris` and of plain-pyarrow reads of `frag` and `one`'s files."""
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    import mvcc_core as mvcc

    fs = pafs.LocalFileSystem()
    files = {name: sorted(str(p) for p in Path(uris[name], "data").glob("*.parquet")) for name in ("frag", "one")}
    footers = {path: pq.ParquetFile(path).metadata for paths in files.values() for path in paths}

    def raw(paths: list[str]) -> None:
        read_files_floor(fs, footers, paths)

    jobs = {name: (lambda u=uri: mvcc.open_table(u).to_table()) for name, uri in uris.items()}
    jobs |= {f"raw_{name}": (lambda p=paths: raw(p)) for name, paths in files.items()}
    times: dict[str, list[float]] = {name: [] for name in jobs}
    for round_number in range(rounds + 1):  # round 0 warms the caches
        for name, job in jobs.items():
            start = time.process_time()
            job()
            if round_number:
                times[name].append((time.process_time() - start) * 1e3)
    return {name: statistics.median(values) for name, values in times.items()}


def derived(m: dict[str, float], fragments: int) -> dict[str, float]:
    """Per-file figures and ratios of one shape's medians."""
    per_file = (m["frag"] - m["one"]) / (fragments - 1)
    pyarrow_per_file = (m["raw_frag"] - m["raw_one"]) / (fragments - 1)
    return {
        **{k: round(v, 3) for k, v in m.items()},
        "per_file_ms": round(per_file, 4),
        "pyarrow_per_file_ms": round(pyarrow_per_file, 4),
        "mvcc_per_file_ms": round(per_file - pyarrow_per_file, 4),
        "deleted_per_file_ms": round((m["deleted"] - m["deleted_one"]) / (fragments - 1), 4),
        "frag/one": round(m["frag"] / m["one"], 3),
        "deleted/deleted_one": round(m["deleted"] / m["deleted_one"], 3),
        "deleted/one": round(m["deleted"] / m["one"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", help="another checkout's root to interleave with (e.g. /work/main)")
    parser.add_argument("--shape", action="append", help="FRAGMENTSxROWS (repeatable; default 12x500 50x300)")
    parser.add_argument("--rounds", type=int, default=15, help="scans of each table per worker")
    parser.add_argument("--repeats", type=int, default=3, help="workers per checkout (alternating)")
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--own-tables", action="store_true", help="each checkout reads tables its own code wrote")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--build", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker), args.rounds)))
        return
    if args.build:
        root, shape = args.build.split("::")
        fragments, rows = (int(x) for x in shape.split("x"))
        print(json.dumps(build(Path(root), fragments, rows)))
        return
    checkouts = {"this": str(HERE.parent)} | ({"peer": args.peer} if args.peer else {})
    results: dict[str, Any] = {}
    for shape in args.shape or ["12x500", "50x300"]:
        fragments, rows = (int(x) for x in shape.split("x"))
        root = Path(tempfile.mkdtemp(prefix="mvcc-scan-per-file-"))
        try:
            if not args.own_tables:
                shared = build(root, fragments, rows)
                tables = {name: shared for name in checkouts}
            else:
                tables = {}
                for name, checkout in checkouts.items():
                    env = {**os.environ, "PYTHONPATH": checkout}
                    command = [sys.executable, __file__, "--build", f"{root / name}::{shape}"]
                    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
                    tables[name] = json.loads(out.strip().splitlines()[-1])
            runs: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
            for _ in range(args.repeats):
                for name, checkout in checkouts.items():
                    env = {**os.environ, "PYTHONPATH": checkout}
                    uris = json.dumps(tables[name])
                    command = [sys.executable, __file__, "--worker", uris, "--rounds", str(args.rounds)]
                    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
                    runs[name].append(json.loads(out.strip().splitlines()[-1]))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        results[shape] = {}
        for name, medians in runs.items():
            merged = {key: statistics.median(m[key] for m in medians) for key in medians[0]}
            results[shape][name] = derived(merged, fragments)
        print(f"{shape} ({args.repeats} workers per checkout x {args.rounds} rounds, medians, CPU ms)")
        for name, figures in results[shape].items():
            print(f"  {name}: " + ", ".join(f"{k} {v}" for k, v in figures.items()))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
