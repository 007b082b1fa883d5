"""`BatchResults`: the result forms every scan derives from its own batches (a reader, an Arrow C stream, a
table), so a scan defines `to_batches()` and `output_schema` only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from mvcc_core.read.scan import Scan

__all__ = ["BatchResults", "ShapedResults"]


class BatchResults:
    """The reader, stream and table forms of a scan's `to_batches()` under its `output_schema`."""

    @property
    def output_schema(self) -> pa.Schema:
        """The schema of the batches the scan yields."""
        raise NotImplementedError

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """The scan's rows as record batches, in the scan's order."""
        raise NotImplementedError

    def to_reader(self) -> pa.RecordBatchReader:
        """The rows as a `pyarrow.RecordBatchReader`."""
        return pa.RecordBatchReader.from_batches(self.output_schema, self.to_batches())

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The result as an Arrow C stream (the Arrow PyCapsule interface: DuckDB, Polars, DataFusion).

        Args:
            requested_schema: a schema capsule the consumer asks for (cast to where Arrow can)
        """
        return self.to_reader().__arrow_c_stream__(requested_schema)

    def to_table(self) -> pa.Table:
        """The rows as one Arrow table."""
        return pa.Table.from_batches(list(self.to_batches()), schema=self.output_schema)


class ShapedResults(BatchResults):
    """A scan that reads through others and returns the rows of `_shape`, the `Scan` of the caller's columns
    (the system-column and deleted-rows scans): its schemas are the shape's."""

    _shape: Scan

    @property
    def dataset_schema(self) -> pa.Schema:
        """pylance's `dataset_schema`: the schema of the table version scanned."""
        return self._shape.dataset_schema

    @property
    def projected_schema(self) -> pa.Schema:
        """pylance's `projected_schema`: the schema of the rows the scan returns."""
        return self._shape.output_schema

    @property
    def output_schema(self) -> pa.Schema:
        """The schema of the rows the scan returns."""
        return self._shape.output_schema
