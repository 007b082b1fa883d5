"""`spark.read.format("mvcc")` against the Python Data Source API's floor, alternating in one `local[2]` session.

The table and the floor's Parquet files are written as `bench_spark.py` writes them (5M rows from 4 Spark
tasks: the mvcc table by `mvcc_core.spark.write`, files of at most 1 Mi rows; the floor's files by Spark's
Parquet writer, one per task). Each round runs `sum(x)` over: the data source with its default partitions,
the data source with `rows_per_partition=131072` (the partitions of one task per file
of at least 128 Ki rows), the floor source over its files, and the floor source over the mvcc table's own
data files (same files as the data source: what the files cost, apart from the source). The order rotates
round by round; medians are printed with the load average. Not a test.

    python -m benchmarks.studies.spark_source_floor [--rows N] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    from benchmarks.suite.bench_spark import local_session

    spark = local_session(spark__ui__showConsoleProgress="false")
    from mvcc_core.spark import write

    work = Path(tempfile.mkdtemp(prefix="mvcc-spark-floor-"))
    try:
        df = spark.range(0, args.rows, numPartitions=4).selectExpr(
            "id", "id % 1000 AS grp", "cast(id * 1.5 AS double) AS x", "concat('s', id % 97) AS s"
        )
        mvcc_uri, parquet_uri, same_files = str(work / "mvcc"), str(work / "parquet"), work / "mvcc-files"
        df.write.parquet(parquet_uri)
        write(df, mvcc_uri)
        same_files.mkdir()
        for data in Path(mvcc_uri, "data").glob("*.parquet"):
            os.link(data, same_files / data.name)
        reads = {
            "mvcc": lambda: spark.read.format("mvcc").load(mvcc_uri),
            "mvcc, a task per file (before)": lambda: (
                spark.read.format("mvcc").option("rows_per_partition", "131072").load(mvcc_uri)
            ),
            "floor": lambda: spark.read.format("parquet_floor").load(parquet_uri),
            "floor over the mvcc files": lambda: spark.read.format("parquet_floor").load(str(same_files)),
        }
        for name, read in reads.items():  # warm-up; every read sums the same column
            print(f"{name}: {read().rdd.getNumPartitions()} partitions, sum {read().agg({'x': 'sum'}).collect()[0][0]}")
        times: dict[str, list[float]] = {name: [] for name in reads}
        load_before = os.getloadavg()
        names = list(reads)
        for round_ in range(args.rounds):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                start = time.perf_counter()
                reads[name]().agg({"x": "sum"}).collect()
                times[name].append((time.perf_counter() - start) * 1000)
        load_after = os.getloadavg()
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    floor = statistics.median(times["floor"])
    load = f"load average {load_before[0]:.1f} -> {load_after[0]:.1f}"
    print(f"{args.rows:,} rows, median of {args.rounds} rounds, {load}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:32s} {median:7.0f} ms  {median / floor:.2f}x the floor  {[round(v) for v in values]}")


if __name__ == "__main__":
    main()
