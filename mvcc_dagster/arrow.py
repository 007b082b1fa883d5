"""Arrow data from what an asset gives the plugin to write: the one conversion of outputs."""

from __future__ import annotations

from typing import Any

import pyarrow as pa


def _is_dataframe_of(obj: Any, package: str) -> bool:
    """Whether `obj` is a class named DataFrame from `package` (pandas, or pyspark's classic and Spark Connect
    ones), told apart without importing `package`."""
    module = type(obj).__module__ or ""
    return module.startswith(package) and type(obj).__name__ == "DataFrame"


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
    if _is_dataframe_of(obj, "pandas"):
        return pa.Table.from_pandas(obj, preserve_index=False)
    if spark and _is_dataframe_of(obj, "pyspark.sql"):
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
