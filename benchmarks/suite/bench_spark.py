"""Spark benchmark: the mvcc data source against Spark's own Parquet source, on one local[2] session.

Same data, same session, one run: write N rows through `mvcc` vs `parquet` (the floor), a full read
(sum of a column) and a selective filtered read vs Spark's Parquet reader, each read both through the `mvcc`
data source (which takes no pushed filter: Spark filters every row it reads, docs/guide/spark.md "Filters") and
through `mvcc_core.spark.read` (Spark's Parquet reader over the version's files, "native", whose `filter=`
prunes files on the driver), and compaction
of many small fragments with `SparkExecutor` vs the in-process executor. No delta-spark: its jars come
from Maven, which this environment does not reach. Not a test.

Two reference reads explain the full-read ratio: the Python Data Source API's own floor (a minimal
source whose reader yields the Parquet files' batches through pyarrow, nothing else), and a read of
every column (a `noop` write), where Spark's reader cannot skip the columns a Python source must
return (Python sources get no column pruning).

    python -m benchmarks.suite.bench_spark [--quick] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[2]
FLOOR_SCHEMA = "id long, grp long, x double, s string"


def floor_source() -> Any:
    """The Python Data Source API's floor: a source reading Parquet files with pyarrow, one task per file."""
    import pyarrow.parquet as pq
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    target = pa.schema([("id", pa.int64()), ("grp", pa.int64()), ("x", pa.float64()), ("s", pa.string())])

    class FilesReader(DataSourceReader):
        def __init__(self, files: list[str]) -> None:
            self.files = files

        def partitions(self) -> list[InputPartition]:
            return [InputPartition(f) for f in self.files]

        def read(self, partition: InputPartition) -> Any:
            for batch in pq.ParquetFile(partition.value).iter_batches(131_072):
                yield pa.RecordBatch.from_arrays(batch.columns, schema=target)  # Spark's nullability

    class ParquetFloor(DataSource):
        @classmethod
        def name(cls) -> str:
            return "parquet_floor"

        def schema(self) -> str:
            return FLOOR_SCHEMA

        def reader(self, schema: Any) -> FilesReader:
            root = Path(self.options["path"])
            return FilesReader(sorted(str(p) for p in root.glob("*.parquet")))

    return ParquetFloor


def best_ms(op: Callable[[], Any], repeat: int, before: Callable[[], Any] | None = None) -> float:
    best = float("inf")
    for _ in range(repeat):
        if before is not None:
            before()
        start = time.perf_counter()
        op()
        best = min(best, time.perf_counter() - start)
    return best * 1000


def local_session(**conf: str) -> Any:
    """A `local[2]` SparkSession for the benchmarks, its Python workers on this interpreter and checkout, with
    the mvcc data source and the floor source registered.

    Args:
        conf: Spark settings besides the UI off and the UTC session time zone (dots written as ``__``)

    Returns:
        The session.
    """
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    from pyspark.sql import SparkSession

    from mvcc_core.spark import register

    builder = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
    builder = builder.config("spark.sql.session.timeZone", "UTC")
    for key, value in conf.items():
        builder = builder.config(key.replace("__", "."), value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    spark.dataSource.register(floor_source())
    return spark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    args = parser.parse_args()
    rows = 500_000 if args.quick else 5_000_000
    fragments = 100 if args.quick else 1_000
    repeat = 2 if args.quick else 3

    spark = local_session(spark__sql__python__filterPushdown__enabled="true")
    import mvcc_core
    from mvcc_core.spark import SparkExecutor, read, write

    work = Path(tempfile.mkdtemp(prefix="mvcc-bench-spark-"))
    results: dict[str, Any] = {"rows": rows, "fragments": fragments}
    try:
        df = spark.range(0, rows, numPartitions=4).selectExpr(
            "id", "id % 1000 AS grp", "cast(id * 1.5 AS double) AS x", "concat('s', id % 97) AS s"
        )
        df.cache().count()
        mvcc_uri, parquet_uri = str(work / "mvcc"), str(work / "parquet")

        def clear() -> None:
            shutil.rmtree(mvcc_uri, ignore_errors=True)
            shutil.rmtree(parquet_uri, ignore_errors=True)

        results["write"] = {
            "mvcc_ms": best_ms(lambda: df.write.format("mvcc").mode("append").save(mvcc_uri), repeat, clear),
            "parquet_ms": best_ms(lambda: df.write.mode("overwrite").parquet(parquet_uri), repeat),
            # mvcc_core.spark.write: Spark's Parquet writer into the table's files, one commit here
            "native_ms": best_ms(lambda: write(df, mvcc_uri), repeat, lambda: shutil.rmtree(mvcc_uri, True)),
        }

        def full(reader: Any) -> None:
            reader().agg({"x": "sum"}).collect()

        def mvcc_read() -> Any:
            return spark.read.format("mvcc").load(mvcc_uri)

        def parquet_read() -> Any:
            return spark.read.parquet(parquet_uri)

        def native_read() -> Any:  # mvcc_core.spark.read: Spark's Parquet reader over the version's files
            return read(spark, mvcc_uri)

        def floor_read() -> Any:
            return spark.read.format("parquet_floor").load(parquet_uri)

        def every_column(reader: Any) -> None:
            reader().write.format("noop").mode("overwrite").save()

        results["full_read"] = {
            "mvcc_ms": best_ms(lambda: full(mvcc_read), repeat),
            "parquet_ms": best_ms(lambda: full(parquet_read), repeat),
            "api_floor_ms": best_ms(lambda: full(floor_read), repeat),
            "native_ms": best_ms(lambda: full(native_read), repeat),
        }
        results["every_column_read"] = {
            "mvcc_ms": best_ms(lambda: every_column(mvcc_read), repeat),
            "parquet_ms": best_ms(lambda: every_column(parquet_read), repeat),
            "native_ms": best_ms(lambda: every_column(native_read), repeat),
        }
        lo, hi = rows // 2, rows // 2 + 1000
        predicate = f"id >= {lo} AND id < {hi}"
        results["filtered_read"] = {
            "mvcc_ms": best_ms(lambda: mvcc_read().where(predicate).count(), repeat),
            "parquet_ms": best_ms(lambda: parquet_read().where(predicate).count(), repeat),
            "native_ms": best_ms(lambda: read(spark, mvcc_uri, filter=predicate).count(), repeat),
        }
        assert mvcc_read().where(predicate).count() == 1000
        assert read(spark, mvcc_uri, filter=predicate).count() == 1000

        small = pa.table({"id": pa.array(range(fragments * 1000), pa.int64())})

        def compact(executor: Any) -> float:
            uri = str(work / f"small-{time.monotonic_ns()}")
            t = mvcc_core.write_table(small, uri, max_rows_per_file=1000)
            start = time.perf_counter()
            t.optimize.compact_files(executor=executor, max_rows_per_task=100_000)
            took = (time.perf_counter() - start) * 1000
            shutil.rmtree(uri)
            return took

        results["compaction"] = {
            "spark_ms": min(compact(SparkExecutor(spark)) for _ in range(repeat)),
            "in_process_ms": min(compact(None) for _ in range(repeat)),
        }
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(results, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(results))


if __name__ == "__main__":
    main()
