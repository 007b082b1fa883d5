"""The Parquet layout levers for the key column of row-level changes: 200 files x 5,000 rows (`c0`
int64 ids, `c1` double, `c2` 1,000 distinct strings), written with each layout, then the `c0` column of the 200
files read with `pyarrow.parquet.ParquetFile` (as a row-address scan reads), on 1 thread (CPU) and on 2 threads
(wall). Not a test and not part of `run.py` (no peer): run it by hand.

    python -m benchmarks.studies.key_column_encodings [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

LAYOUTS = {
    "zstd plain (the earlier default)": {"compression": "zstd", "use_dictionary": ["c2"]},
    "none plain": {"compression": "none", "use_dictionary": ["c2"]},
    "lz4 plain": {"compression": "lz4", "use_dictionary": ["c2"]},
    "snappy plain": {"compression": "snappy", "use_dictionary": ["c2"]},
    "zstd dictionary": {"compression": "zstd", "use_dictionary": True},
    "zstd delta_binary_packed (now)": {
        "compression": "zstd",
        "use_dictionary": ["c2"],
        "column_encoding": {"c0": "DELTA_BINARY_PACKED", "c1": "BYTE_STREAM_SPLIT"},
    },
    "none delta_binary_packed": {
        "compression": "none",
        "use_dictionary": ["c2"],
        "column_encoding": {"c0": "DELTA_BINARY_PACKED"},
    },
    "zstd byte_stream_split": {
        "compression": "zstd",
        "use_dictionary": ["c2"],
        "column_encoding": {"c0": "BYTE_STREAM_SPLIT"},
    },
    "zstd page index": {"compression": "zstd", "use_dictionary": ["c2"], "write_page_index": True},
    "zstd 8 KiB pages": {"compression": "zstd", "use_dictionary": ["c2"], "data_page_size": 8192},
    "zstd no statistics": {"compression": "zstd", "use_dictionary": ["c2"], "write_statistics": False},
}


def rows(start: int, n: int = 5_000) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"c0": ids, "c1": ids * 0.5, "c2": pa.array([f"n{i % 1000}" for i in range(start, start + n)])})


def read_ids(files: list[Path], threads: int) -> None:
    def one(path: Path) -> pa.Table:
        return pq.ParquetFile(path, pre_buffer=False).read(columns=["c0"], use_threads=False)

    if threads == 1:
        [one(f) for f in files]
        return
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, files))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mvcc-key-encodings-"))
    tables = [rows(i * 5_000) for i in range(200)]
    files: dict[str, list[Path]] = {}
    for name, options in LAYOUTS.items():
        directory = root / str(len(files))
        directory.mkdir()
        files[name] = [directory / f"{i}.parquet" for i in range(200)]
        for table, path in zip(tables, files[name], strict=True):
            pq.write_table(table, path, **options)
    cpu: dict[str, list[float]] = {n: [] for n in LAYOUTS}
    wall: dict[str, list[float]] = {n: [] for n in LAYOUTS}
    for _ in range(args.rounds):  # layouts interleaved, so a busy spell hits all of them
        for name in LAYOUTS:
            start = time.process_time()
            read_ids(files[name], 1)
            cpu[name].append((time.process_time() - start) * 1e3)
            start = time.perf_counter()
            read_ids(files[name], 2)
            wall[name].append((time.perf_counter() - start) * 1e3)
    print(f"{'layout':<34}{'size KB':>9}{'1 thread CPU ms':>17}{'2 threads wall ms':>19}")
    for name in LAYOUTS:
        size = sum(p.stat().st_size for p in files[name]) / 1024
        print(f"{name:<34}{size:>9.0f}{statistics.median(cpu[name]):>17.1f}{statistics.median(wall[name]):>19.1f}")


if __name__ == "__main__":
    main()
