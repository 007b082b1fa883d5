"""What a small data file costs to decode whole and to write, by codec: mvcc's writer options with each codec
(mvcc writes LZ4 below `SMALL_FILE_ROWS` rows, zstd from there on), the week's events columns, interleaved rounds,
medians. Not a test.

    python -m benchmarks.studies.small_file_codecs --rows 500 --rows 23000
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from benchmarks.suite.bench_scan_shapes import events  # noqa: E402 - a sibling script module
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
        writes: dict[str, list[float]] = {codec: [] for codec in CODECS}
        for _ in range(args.rounds):
            for codec in CODECS:
                start = time.process_time()
                for _ in range(max(1, args.reads // 10)):  # encoded in memory: the codec, not the disk
                    pq.write_table(table, pa.BufferOutputStream(), **{**options, "compression": codec})
                writes[codec].append((time.process_time() - start) / max(1, args.reads // 10) * 1e6)
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
            read, write = statistics.median(times[codec]), statistics.median(writes[codec])
            print(f"  {codec:7} {os.path.getsize(path):9,} bytes  {read:8.1f} us CPU a read  {write:8.1f} us a write")


if __name__ == "__main__":
    main()
