"""Static registration of the `mvcc` Spark data source.

PySpark registers a data source by itself when an importable top-level module named `pyspark_*`
exposes `DefaultSource` (pyspark/sql/worker/lookup_data_sources.py scans the interpreter's path). This
module is that hook; `mvcc_core.spark.register(spark)` does the same explicitly and always works (an
editable install can hide this module from Spark's scan).
"""

from mvcc_core.spark import MvccDataSource as DefaultSource

__all__ = ["DefaultSource"]
