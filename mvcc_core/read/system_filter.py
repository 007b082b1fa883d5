"""Filters naming pylance's system columns (`_rowid = 37`, `_rowaddr > 4294967296`, `_rowoffset < 10`).

A scan cannot push such a filter into Parquet (the columns are not stored), so `SystemFilteredScan` reads the
columns the output and the filter need together with the system columns, applies the filter to each batch,
and then shapes the rows as the caller's scan would (its projection, its system columns, their order).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from mvcc_core.read.batch_results import ShapedResults
from mvcc_core.read.bound_filter import BoundFilter
from mvcc_core.read.scan import Scan, ScanPlan
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


class SystemFilteredScan(ShapedResults):
    """A scan whose filter names system columns; the same reading surface as `Scan`.

    Args:
        shape: the caller's scan without its filter: the version, the columns and system columns returned,
            the batch size
        filter: a filter naming `_rowid`, `_rowaddr` or `_rowoffset` (uint64, as pylance types them)

    Raises:
        PredicateError: the filter is not valid SQL over the table's and the system columns
    """

    def __init__(self, shape: Scan, filter: str | pc.Expression) -> None:  # noqa: A002 - pylance's name
        """A read of `shape`'s version keeping the rows for which `filter` holds, shaped as `shape` shapes them."""
        self._shape = shape
        schema = shape.table_schema
        system = [c for c in SYSTEM_COLUMNS if c not in schema.names]
        extended = pa.schema(list(schema) + [pa.field(c, pa.uint64()) for c in system])
        self._bound = BoundFilter.bind(filter, extended)
        self._filter_columns = [c for c in schema.names if c in self._bound.columns]
        self._store, self._manifest, self._system = shape.store, shape.manifest, system

    def _rows(self, columns: Sequence[str]) -> Iterator[pa.Table]:
        """Batches of the table `columns` and every system column, filtered (batches of no row dropped)."""
        wanted = set(columns) | set(self._filter_columns)
        names = [c for c in self._shape.table_schema.names if c in wanted] + self._system
        scan = Scan(self._store, self._manifest, names, None, batch_size=self._shape.batch_size)
        for batch in scan.to_batches():
            kept = pa.Table.from_batches([batch]).filter(self._bound.arrow)
            if kept.num_rows:
                yield kept

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

    def count_rows(self) -> int:
        """How many rows match (reading only the columns the filter names)."""
        return sum(rows.num_rows for rows in self._rows([]))
