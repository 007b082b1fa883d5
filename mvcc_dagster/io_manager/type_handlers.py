"""Type handlers: how `MvccIOManager` turns an output of a Python type into Arrow and a read back into that type.

A handler names the types it stores and loads (`MvccTypeHandler.handled_types`); the IO manager picks the first
of its `MvccIOManager.type_handlers` whose types the output is an instance of, and for an input the first whose
types the input's annotation is a subclass of (an input without a handled annotation gets a pyarrow Table).
The handlers here cover pyarrow, pandas, polars and pyspark. A handler never imports its library: a type is
looked up only in a library the program has imported already (an object of a library that is not imported
cannot exist, and neither can an annotation naming it).

To store another type, subclass `MvccTypeHandler` and return it from `MvccIOManager.type_handlers` of a subclass
of the IO manager (docs/integrations/dagster/io_manager.md, "Other output types").
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

__all__ = [
    "MvccTypeHandler",
    "PandasTypeHandler",
    "PolarsTypeHandler",
    "PyArrowTypeHandler",
    "SparkTypeHandler",
    "default_type_handlers",
    "handler_for_input",
    "handler_for_output",
    "loaded_type",
]


def loaded_type(module: str, name: str) -> tuple[type, ...]:
    """The class `name` of `module` if the program has imported `module`, else nothing; never imports it.

    Args:
        module: The module's full name (``pandas``, ``pyspark.sql``).
        name: The class's name in it (``DataFrame``).

    Returns:
        A one-class tuple, or an empty one when `module` is not imported (or has no such class).
    """
    found = sys.modules.get(module)
    cls = getattr(found, name, None) if found is not None else None
    return (cls,) if isinstance(cls, type) else ()


class MvccTypeHandler(ABC):
    """How `MvccIOManager` writes outputs of some Python types to a table and reads inputs back as one of them.

    Subclass it to store another type: `handled_types` names the classes, `to_arrow` converts an output
    (a pyarrow Table, or a RecordBatchReader for data that should not be held at once), `from_arrow`
    converts what a read returned. `load_input`'s column projection and partition filter are applied to the
    scan before `from_arrow` sees the rows.
    """

    @property
    @abstractmethod
    def handled_types(self) -> tuple[type, ...]:
        """The classes this handler stores and loads (an output is an instance of one, an input's annotation
        a subclass of one); empty when their library is not imported."""

    @abstractmethod
    def to_arrow(self, obj: Any) -> pa.Table | pa.RecordBatchReader:
        """`obj` as Arrow data, as it is written to the table.

        Args:
            obj: An output that is an instance of one of `handled_types`.

        Returns:
            A pyarrow Table or RecordBatchReader.
        """

    @abstractmethod
    def from_arrow(self, table: pa.Table) -> Any:
        """The rows read for an input, as the input's type.

        Args:
            table: The rows (already projected to the input's ``columns`` and filtered to its partitions).

        Returns:
            The object handed to the asset.
        """

    def handles_output(self, obj: Any) -> bool:
        """Whether this handler writes `obj` (an instance of one of `handled_types`).

        Args:
            obj: The asset's output.

        Returns:
            True when it does.
        """
        types = self.handled_types
        return bool(types) and isinstance(obj, types)

    def handles_input(self, annotation: Any) -> bool:
        """Whether this handler loads an input annotated with `annotation` (a subclass of one of `handled_types`).

        Args:
            annotation: The input's Python type (Dagster's ``typing_type``).

        Returns:
            True when it does.
        """
        types = self.handled_types
        return bool(types) and isinstance(annotation, type) and issubclass(annotation, types)


class PyArrowTypeHandler(MvccTypeHandler):
    """pyarrow Tables, RecordBatches and RecordBatchReaders (a reader is written batch by batch); loads Tables."""

    @property
    def handled_types(self) -> tuple[type, ...]:
        """`pa.Table`, `pa.RecordBatch` and `pa.RecordBatchReader`."""
        return (pa.Table, pa.RecordBatch, pa.RecordBatchReader)

    def to_arrow(self, obj: Any) -> pa.Table | pa.RecordBatchReader:
        """The Table or reader itself (nothing copied); a RecordBatch as a one-batch Table.

        Args:
            obj: The output.
        """
        return pa.Table.from_batches([obj]) if isinstance(obj, pa.RecordBatch) else obj

    def from_arrow(self, table: pa.Table) -> Any:
        """The Table itself.

        Args:
            table: The rows read.
        """
        return table


class PandasTypeHandler(MvccTypeHandler):
    """pandas DataFrames, written without their index."""

    @property
    def handled_types(self) -> tuple[type, ...]:
        """`pandas.DataFrame` (when pandas is imported)."""
        return loaded_type("pandas", "DataFrame")

    def to_arrow(self, obj: Any) -> pa.Table | pa.RecordBatchReader:
        """The DataFrame's columns (its index left out).

        Args:
            obj: The output.
        """
        return pa.Table.from_pandas(obj, preserve_index=False)

    def from_arrow(self, table: pa.Table) -> Any:
        """`table.to_pandas()`.

        Args:
            table: The rows read.
        """
        return table.to_pandas()


class PolarsTypeHandler(MvccTypeHandler):
    """polars DataFrames (eager; a LazyFrame is collected by the asset before it returns it)."""

    @property
    def handled_types(self) -> tuple[type, ...]:
        """`polars.DataFrame` (when polars is imported)."""
        return loaded_type("polars", "DataFrame")

    def to_arrow(self, obj: Any) -> pa.Table | pa.RecordBatchReader:
        """`obj.to_arrow()` (zero-copy where polars allows it).

        Args:
            obj: The output.
        """
        arrow: pa.Table = obj.to_arrow()
        return arrow

    def from_arrow(self, table: pa.Table) -> Any:
        """`polars.from_arrow(table)`.

        Args:
            table: The rows read.
        """
        polars = sys.modules["polars"]  # an input annotated with polars' DataFrame: polars is imported
        return polars.from_arrow(table)


class SparkTypeHandler(MvccTypeHandler):
    """pyspark DataFrames (classic and Spark Connect): written by Spark and read by Spark, not through Arrow.

    `MvccIOManager` gives an output this handler takes to ``mvcc_core.spark.write`` and reads an input with
    ``mvcc_core.spark.read`` (Spark's own Parquet reader over the pinned version's files). `to_arrow` is used
    only where the write happens in the step's process (a merge, write-audit-publish).
    """

    @property
    def handled_types(self) -> tuple[type, ...]:
        """`pyspark.sql.DataFrame` and Spark Connect's DataFrame (when pyspark is imported)."""
        return loaded_type("pyspark.sql", "DataFrame") + loaded_type("pyspark.sql.connect.dataframe", "DataFrame")

    def to_arrow(self, obj: Any) -> pa.Table | pa.RecordBatchReader:
        """`obj.toArrow()`: the DataFrame collected into this process.

        Args:
            obj: The output.
        """
        arrow: pa.Table = obj.toArrow()
        return arrow

    def from_arrow(self, table: pa.Table) -> Any:
        """A DataFrame of the active SparkSession over `table` (the IO manager itself reads with Spark).

        Args:
            table: The rows read.

        Raises:
            ValueError: No SparkSession is active.
        """
        session = sys.modules["pyspark.sql"].SparkSession.getActiveSession()
        if session is None:
            raise ValueError("a Spark DataFrame input needs an active SparkSession")
        return session.createDataFrame(table)


def default_type_handlers() -> list[MvccTypeHandler]:
    """The handlers `MvccIOManager` uses unless a subclass says otherwise: pyarrow, pandas, polars, pyspark.

    Returns:
        A new list (a subclass may extend it).
    """
    return [PyArrowTypeHandler(), PandasTypeHandler(), PolarsTypeHandler(), SparkTypeHandler()]


def _type_names(handlers: Sequence[MvccTypeHandler]) -> str:
    names = {
        type(handler).__name__: ", ".join(f"{t.__module__}.{t.__qualname__}" for t in handler.handled_types)
        for handler in handlers
    }
    return "; ".join(f"{name} ({types or 'its library is not imported'})" for name, types in names.items())


def handler_for_output(obj: Any, handlers: Sequence[MvccTypeHandler], *, writer: str) -> MvccTypeHandler:
    """The first of `handlers` that writes `obj`.

    Args:
        obj: The output.
        handlers: The handlers, in order of preference.
        writer: Who stores it, for the message (``MvccIOManager``).

    Returns:
        The handler.

    Raises:
        TypeError: None of them writes `obj`; the message names its type and the handlers' types.
    """
    for handler in handlers:
        if handler.handles_output(obj):
            return handler
    raise TypeError(
        f"{writer} stores what its type handlers take: {_type_names(handlers)}; got "
        f"{type(obj).__module__}.{type(obj).__qualname__} (add an MvccTypeHandler for it)"
    )


def handler_for_input(annotation: Any, handlers: Sequence[MvccTypeHandler]) -> MvccTypeHandler:
    """The first of `handlers` that loads an input annotated with `annotation`; pyarrow for any other annotation.

    Args:
        annotation: The input's Python type (Dagster's ``typing_type``; ``Any`` when it has none).
        handlers: The handlers, in order of preference.

    Returns:
        The handler.
    """
    for handler in handlers:
        if handler.handles_input(annotation):
            return handler
    return next((h for h in handlers if isinstance(h, PyArrowTypeHandler)), PyArrowTypeHandler())
