"""mvcc on Spark (PySpark 4.3, the `spark` extra): the `mvcc` data source, `write`, `SparkExecutor`.

- `register(spark)`: makes `spark.read.format("mvcc")` and `df.write.format("mvcc")` available in a
  session (always works; the top-level `pyspark_mvcc` module also registers it statically after a
  regular install, not after an editable one: docs/guide/spark.md, "Registration").
- `read(spark, uri, version=, columns=, filter=) -> DataFrame`: a version read by Spark's own Parquet
  reader (fast; local tables), the data source otherwise.
- `write(df, uri, mode=, where=, ...) -> Table`: a write committed here, raising the core's error types.
- `SparkExecutor(spark)`: runs compaction and index-build tasks as Spark tasks.

This package is the only one that imports pyspark (import-linter checks it).
"""

from __future__ import annotations

from typing import Any

try:
    import pyspark  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("mvcc_core.spark needs PySpark 4.3: pip install 'mvcc[spark]'") from exc

from mvcc_core.spark.api import write
from mvcc_core.spark.executor import SparkExecutor
from mvcc_core.spark.native import read
from mvcc_core.spark.options import READ_OPTIONS, STORAGE_OPTIONS, WRITE_OPTIONS
from mvcc_core.spark.source import NAME, MvccDataSource, MvccReader, MvccWriter
from mvcc_core.spark.writes import WRITE_ID_PROPERTY, WRITE_PATH_PROPERTY

__all__ = [
    "NAME",
    "READ_OPTIONS",
    "STORAGE_OPTIONS",
    "WRITE_ID_PROPERTY",
    "WRITE_OPTIONS",
    "WRITE_PATH_PROPERTY",
    "MvccDataSource",
    "MvccReader",
    "MvccWriter",
    "SparkExecutor",
    "read",
    "register",
    "write",
]


def register(spark: Any) -> None:
    """Register the `mvcc` data source in `spark` (a classic or a Spark Connect session); idempotent.

    Args:
        spark: the SparkSession (classic or Spark Connect)
    """
    if not _registered(spark):
        spark.dataSource.register(MvccDataSource)


def _registered(spark: Any) -> bool:
    """Whether `spark` already knows the `mvcc` source (the static registration after a regular install, or an
    earlier `register`): registering it again makes Spark warn that it replaced a data source. A Spark Connect
    session has no way to ask; registering there again is silent on the client."""
    from py4j.protocol import Py4JError

    session = getattr(spark, "_jsparkSession", None)
    if session is None:
        return False
    try:
        return bool(session.sessionState().dataSourceManager().dataSourceExists(NAME))
    except Py4JError:  # a Spark without the lookup: register, as before
        return False
