"""`SparkExecutor`: the core's `Executor` (`map(fn, tasks)`) on Spark, one Spark task per item.

Design notes: docs/guide/spark.md, "SparkExecutor, as implemented".
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa
from pyspark import cloudpickle

METHODS = ("auto", "rdd", "dataframe")


def _run_one(fn: Callable[[Any], Any], item: Any) -> tuple[bool, bytes]:
    try:
        return True, cloudpickle.dumps(fn(item))
    except Exception as exc:  # noqa: BLE001 - carried back to the driver with its type
        try:
            return False, cloudpickle.dumps(exc)
        except Exception:  # noqa: BLE001 - an unpicklable exception: its text
            return False, cloudpickle.dumps(RuntimeError(f"{type(exc).__name__}: {exc}"))


def _unwrap(results: list[tuple[bool, bytes]]) -> list[Any]:
    out = []
    for ok, payload in results:
        value = pickle.loads(payload)
        if not ok:
            raise value
        out.append(value)
    return out


def is_connect(spark: Any) -> bool:
    """Whether `spark` is a Spark Connect session (no `sparkContext`, no RDDs).

    Args:
        spark: a SparkSession
    """
    return type(spark).__module__.startswith("pyspark.sql.connect")


class SparkExecutor:
    """Runs each task of `map(fn, tasks)` as one Spark task and returns the results in order.

    `method`: "rdd" (classic sessions), "dataframe" (classic and Spark Connect) or "auto" (rdd unless the
    session is a Connect session). `fn` and the tasks must pickle (cloudpickle): the core's compaction and
    index tasks do, carrying a `TableState`.

    Args:
        spark: the SparkSession (classic or Spark Connect)
        method: "rdd", "dataframe" or "auto"

    Raises:
        ValueError: an unknown method, or "rdd" on a Spark Connect session
    """

    def __init__(self, spark: Any, *, method: str = "auto") -> None:
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        if method == "rdd" and is_connect(spark):
            raise ValueError("SparkExecutor method 'rdd' needs a classic session (Spark Connect has no RDDs)")
        self.spark = spark
        self.method = ("dataframe" if is_connect(spark) else "rdd") if method == "auto" else method

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[Any]:
        """Run `fn` on each task as one Spark task; the results in task order.

        Args:
            fn: the function to run (it must pickle)
            tasks: its arguments, one per Spark task (they must pickle)
        """
        items = list(tasks)
        if not items:
            return iter(())
        results = self._rdd(fn, items) if self.method == "rdd" else self._dataframe(fn, items)
        return iter(_unwrap(results))

    def _rdd(self, fn: Callable[[Any], Any], items: list[Any]) -> list[tuple[bool, bytes]]:
        rdd = self.spark.sparkContext.parallelize(items, len(items))
        return rdd.map(lambda item: _run_one(fn, item)).collect()

    def _dataframe(self, fn: Callable[[Any], Any], items: list[Any]) -> list[tuple[bool, bytes]]:
        payload = cloudpickle.dumps(items)

        def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            tasks = pickle.loads(payload)
            for batch in batches:
                indices = batch.column(0).to_pylist()
                done = [_run_one(fn, tasks[i]) for i in indices]
                yield pa.RecordBatch.from_arrays(
                    [pa.array(indices, pa.int64()), pa.array([d[0] for d in done]), pa.array([d[1] for d in done])],
                    names=["i", "ok", "result"],
                )

        frame = self.spark.range(0, len(items), numPartitions=len(items))
        rows = frame.mapInArrow(run, "i long, ok boolean, result binary").collect()
        rows = sorted(rows, key=lambda r: r["i"])
        return [(r["ok"], bytes(r["result"])) for r in rows]
