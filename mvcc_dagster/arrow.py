"""Arrow data from what an asset gives the plugin to write, through the IO manager's default type handlers."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from .io_manager.type_handlers import PandasTypeHandler, PolarsTypeHandler, PyArrowTypeHandler, handler_for_output


def to_arrow_table(obj: Any, *, accepts: str) -> pa.Table:
    """`obj` (a pyarrow Table, RecordBatch or RecordBatchReader, a pandas or polars DataFrame) as one Table.

    Args:
        obj: The data.
        accepts: The start of the error message, naming the writer (the user's words).

    Returns:
        The table; a RecordBatchReader is read to its end (for a write that needs every row).

    Raises:
        TypeError: Not a table; the message names the type given.
    """
    handlers = [PyArrowTypeHandler(), PandasTypeHandler(), PolarsTypeHandler()]
    try:
        data = handler_for_output(obj, handlers, writer=accepts).to_arrow(obj)
    except TypeError:
        raise TypeError(f"{accepts}, got {type(obj).__module__}.{type(obj).__qualname__}") from None
    return data.read_all() if isinstance(data, pa.RecordBatchReader) else data
