"""Filters naming pylance's system columns (`_rowid = 37`, `_rowaddr > 4294967296`, `_rowoffset < 10`).

A scan cannot push such a filter into Parquet (the columns are not stored), so `SystemFilteredScan` reads the
columns the output and the filter need together with the system columns, applies the filter to each batch,
and then shapes the rows as the caller's scan would (its projection, its system columns, their order).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.io import ObjectStore
from mvcc_core.read.bound_filter import BoundFilter
from mvcc_core.read.scan import DEFAULT_BATCH_SIZE, Scan, ScanPlan
from mvcc_core.read.system_columns import SYSTEM_COLUMNS

_SYSTEM_NAME = re.compile(r"(?<![\w.])\"?(" + "|".join(SYSTEM_COLUMNS) + r")\b")


def filter_system_columns(filter: str | pc.Expression | None, table_names: Sequence[str]) -> list[str]:  # noqa: A002
    """The system columns `filter` names that no table column shadows, in `SYSTEM_COLUMNS` order.

    Args:
        filter: the caller's filter (SQL or an Arrow Expression), or None
        table_names: the table's column names

    Returns:
        The system column names the filter reads (empty for most filters).
    """
    if filter is None:
        return []
    named = set(_SYSTEM_NAME.findall(filter if isinstance(filter, str) else str(filter)))
    return [c for c in SYSTEM_COLUMNS if c in named and c not in table_names]


class SystemFilteredScan:
    """A scan whose filter names system columns; the same reading surface as `Scan`."""

    def __init__(
        self,
        store: ObjectStore,
        manifest: pb.Manifest,
        columns: Sequence[str] | Mapping[str, str] | None,
        filter: str | pc.Expression,  # noqa: A002 - pylance's name
        with_row_address: bool = False,
        batch_size: int = DEFAULT_BATCH_SIZE,
        with_row_id: bool = False,
    ) -> None:
        """A read of `manifest`'s version keeping the rows for which `filter` holds.

        Args:
            store: the table's store
            manifest: the version to read
            columns: what the caller's scan returns (see `Scan`)
            filter: a filter naming `_rowid`, `_rowaddr` or `_rowoffset` (uint64, as pylance types them)
            with_row_address: add the `_rowaddr` column
            batch_size: rows at most per output batch
            with_row_id: add the `_rowid` column

        Raises:
            PredicateError: the filter is not valid SQL over the table's and the system columns
        """
        self._shape = Scan(store, manifest, columns, None, with_row_address, batch_size, with_row_id=with_row_id)
        schema = self._shape.table_schema
        system = [c for c in SYSTEM_COLUMNS if c not in schema.names]
        extended = pa.schema(list(schema) + [pa.field(c, pa.uint64()) for c in system])
        self._bound = BoundFilter.bind(filter, extended)
        self._filter_columns = [c for c in schema.names if c in self._bound.columns]
        self._store, self._manifest, self._system = store, manifest, system

    def _rows(self, columns: Sequence[str]) -> Iterator[pa.Table]:
        """Batches of the table `columns` and every system column, filtered (batches of no row dropped)."""
        wanted = set(columns) | set(self._filter_columns)
        names = [c for c in self._shape.table_schema.names if c in wanted] + self._system
        scan = Scan(self._store, self._manifest, names, None, batch_size=self._shape.batch_size)
        for batch in scan.to_batches():
            kept = pa.Table.from_batches([batch]).filter(self._bound.arrow)
            if kept.num_rows:
                yield kept

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

    def explain(self) -> ScanPlan:
        """The plan of the unfiltered read (the filter is applied to its rows)."""
        return self._shape.explain()

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Stream the matching rows in table order, shaped as the caller's scan shapes them."""
        schema = self.output_schema
        for rows in self._rows(self._shape.columns):
            out = self._shape._output(rows)  # the caller's projection and system columns, applied to our rows
            for batch in out.to_batches(max_chunksize=self._shape.batch_size):
                yield pa.RecordBatch.from_arrays(batch.columns, schema=schema) if batch.num_columns else batch

    def to_reader(self) -> pa.RecordBatchReader:
        """The matching rows as a `pyarrow.RecordBatchReader`."""
        return pa.RecordBatchReader.from_batches(self.output_schema, self.to_batches())

    def to_table(self) -> pa.Table:
        """The matching rows as one Arrow table."""
        return pa.Table.from_batches(list(self.to_batches()), schema=self.output_schema)

    def count_rows(self) -> int:
        """How many rows match (reading only the columns the filter names)."""
        return sum(rows.num_rows for rows in self._rows([]))
