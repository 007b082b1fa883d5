"""Arrow data from what an asset gives the plugin to write: the one conversion of outputs."""

from __future__ import annotations

from typing import Any

import pyarrow as pa


def is_spark_dataframe(obj: Any) -> bool:
    """A classic or Spark Connect DataFrame, told apart without importing pyspark.

    Args:
        obj: Anything.

    Returns:
        Whether it is one.
    """
    module = type(obj).__module__ or ""
    return module.startswith("pyspark.sql") and type(obj).__name__ == "DataFrame"


def is_pandas_dataframe(obj: Any) -> bool:
    """A pandas DataFrame, told apart without importing pandas.

    Args:
        obj: Anything.

    Returns:
        Whether it is one.
    """
    module = type(obj).__module__ or ""
    return module.startswith("pandas") and type(obj).__name__ == "DataFrame"


def to_arrow(obj: Any, *, accepts: str, spark: bool = False) -> pa.Table | pa.RecordBatchReader | None:
    """`obj` as Arrow data (a pandas DataFrame without its index), nothing copied for Arrow input.

    Args:
        obj: A pyarrow Table, RecordBatch or RecordBatchReader, a pandas DataFrame, or (with `spark`) a pyspark
            DataFrame.
        accepts: The start of the error message, naming the writer and what it takes (the user's words).
        spark: Whether a pyspark DataFrame is accepted (it is returned as None: the caller writes it with Spark).

    Returns:
        A Table or a RecordBatchReader; None for an accepted Spark DataFrame.

    Raises:
        TypeError: For anything else, naming the type given.
    """
    if isinstance(obj, pa.Table | pa.RecordBatchReader):
        return obj
    if isinstance(obj, pa.RecordBatch):
        return pa.Table.from_batches([obj])
    if is_pandas_dataframe(obj):
        return pa.Table.from_pandas(obj, preserve_index=False)
    if spark and is_spark_dataframe(obj):
        return None
    raise TypeError(f"{accepts}, got {type(obj).__module__}.{type(obj).__qualname__}")


def to_arrow_table(obj: Any, *, accepts: str) -> pa.Table:
    """`to_arrow` read whole: a RecordBatchReader is read to its end (for a write that needs every row).

    Args:
        obj: As `to_arrow` takes it (no Spark DataFrame).
        accepts: The start of the error message.

    Returns:
        The table.

    Raises:
        TypeError: Not a table.
    """
    data = to_arrow(obj, accepts=accepts)
    return data.read_all() if isinstance(data, pa.RecordBatchReader) else data
