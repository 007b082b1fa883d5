"""What a small data file costs to decode whole, by codec: mvcc's writer options (zstd) against the same
options with another codec, the week's events columns, interleaved rounds, medians. Not a test.

    python benchmarks/small_file_codecs.py --rows 500 --rows 23000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.fs as pafs
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scan_shapes import events  # noqa: E402 - a sibling script module

from mvcc_core.format.fragments import parquet_options  # noqa: E402

CODECS = ("zstd", "lz4", "snappy", "none")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, action="append", help="rows per file (repeatable; default 500)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--reads", type=int, default=100, help="reads of each file per round")
    args = parser.parse_args()
    fs = pafs.LocalFileSystem()
    root = tempfile.mkdtemp(prefix="mvcc-small-file-codecs-")
    for rows in args.rows or [500]:
        table = events(rows, 0)
        options = parquet_options(table)
        files = {}
        for codec in CODECS:
            path = os.path.join(root, f"{rows}-{codec}.parquet")
            pq.write_table(table, path, **{**options, "compression": codec})
            files[codec] = (path, pq.ParquetFile(path).metadata)
        times: dict[str, list[float]] = {codec: [] for codec in CODECS}
        for _ in range(args.rounds):
            for codec, (path, metadata) in files.items():
                start = time.process_time()
                for _ in range(args.reads):  # as the scan reads a file: cached footer, one thread
                    with fs.open_input_file(path) as source:
                        reader = pq.ParquetReader()
                        reader.open(source, metadata=metadata, pre_buffer=False)
                        reader.read_all(use_threads=False)
                times[codec].append((time.process_time() - start) / args.reads * 1e6)
        print(f"{rows} rows ({args.rounds} interleaved rounds, medians)")
        for codec, (path, _) in files.items():
            print(f"  {codec:7} {os.path.getsize(path):9,} bytes  {statistics.median(times[codec]):8.1f} us CPU a read")


if __name__ == "__main__":
    main()
