"""Static registration of the `mvcc` Spark data source.

PySpark registers a data source by itself when a top-level module named `pyspark_*` that
`pkgutil.iter_modules()` lists exposes `DefaultSource` (pyspark/sql/worker/lookup_data_sources.py). This
module is that hook, found after a regular install. After an editable install setuptools serves it through
an import hook on `sys.meta_path`, which that listing does not see; `mvcc_core.spark.register(spark)`
registers the source explicitly and always works (docs/guide/spark.md, "Registration").
"""

from mvcc_core.spark import MvccDataSource as DefaultSource

__all__ = ["DefaultSource"]
