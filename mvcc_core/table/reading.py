"""Reading a version: scans, tables, batches, takes and counts (a mixin of `Table`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mvcc_core.format.deletion import live_rows
from mvcc_core.read.deleted_rows_scan import DeletedRowsScan
from mvcc_core.read.scan import DEFAULT_BATCH_SIZE, Scan
from mvcc_core.read.sql_filter import struct_field_projection
from mvcc_core.read.system_columns import SYSTEM_COLUMNS
from mvcc_core.read.system_filter import SystemFilteredScan, filter_system_columns
from mvcc_core.table.host import TableHost

if TYPE_CHECKING:
    from mvcc_core.table.arrow_dataset import ArrowDataset


class ReadingMethods(TableHost):
    """Reading a version: scans, tables, batches, takes and counts (mixed into `Table`)."""

    def scanner(
        self,
        columns: Sequence[str] | Mapping[str, str] | None = None,
        filter: str | pc.Expression | None = None,  # noqa: A002 - pylance's name
        *,
        with_row_address: bool = False,
        batch_size: int | None = DEFAULT_BATCH_SIZE,
        with_row_id: bool = False,
        batch_readahead: int | None = None,
        scan_in_order: bool | None = None,
        prefilter: bool | None = None,
        late_materialization: bool | Sequence[str] | None = None,
        include_deleted_rows: bool | None = None,
    ) -> Scan | SystemFilteredScan | DeletedRowsScan:
        """A scan of this version: `to_batches()`, `to_table()`, `count_rows()`, `explain()`.

        SQL `columns` use pylance's shape (`{"total": "price * qty"}`, the SQL filters accept); `filter` is
        pushed down and answered from scalar indices alike. A name `struct.field` in a list of columns is that
        struct field, as a column of that name (pylance's nested projection). A filter may name the system
        columns `_rowid`, `_rowaddr` and `_rowoffset` (then it is applied to the rows read, not pushed down).

        Args:
            columns: column names, or a dict of output name -> SQL expression over the table's columns (None: every
                column)
            filter: a SQL predicate or a pyarrow Expression over the table's columns (None: every row)
            with_row_address: add a `_rowaddr` column
            batch_size: rows at most per batch (None: the default)
            with_row_id: add a `_rowid` column (stable ids if the table keeps them, else the row address)
            batch_readahead: pylance's read-ahead depth, accepted (checked for type) and without effect: mvcc reads
                Parquet with its own read-ahead
            scan_in_order: accepted and without effect: rows always come in table order
            prefilter: accepted and without effect: the filter always applies before `limit`/`offset`
            late_materialization: accepted and without effect: columns are projected per row group
            include_deleted_rows: also return the rows deletion vectors remove, with their stored values and
                `_rowid` / `_rowaddr` / `_rowoffset` null (pylance's; needs `_rowid`: `with_row_id=True` or
                `_rowid` in `columns`); no index is used then
        """
        _check_tuning(batch_readahead, scan_in_order, prefilter, late_materialization)
        if include_deleted_rows is not None and not isinstance(include_deleted_rows, bool):
            raise TypeError(
                f"include_deleted_rows must be True or False, got {type(include_deleted_rows).__name__} "
                f"{include_deleted_rows!r}"
            )
        if include_deleted_rows:
            return DeletedRowsScan(
                self._state.store,
                self.manifest,
                _nested_paths(columns, self.schema),
                filter,
                with_row_id,
                with_row_address,
                DEFAULT_BATCH_SIZE if batch_size is None else batch_size,
            )
        system = filter_system_columns(filter, self.schema.names)
        scan = Scan(
            self._state.store,
            self.manifest,
            _nested_paths(columns, self.schema),
            None if system else filter,
            with_row_address,
            DEFAULT_BATCH_SIZE if batch_size is None else batch_size,
            with_row_id=with_row_id,
        )
        return SystemFilteredScan(scan, filter) if system else scan

    def to_table(
        self,
        columns: Sequence[str] | Mapping[str, str] | None = None,
        filter: str | pc.Expression | None = None,  # noqa: A002
        *,
        limit: int | None = None,
        offset: int | None = None,
        with_row_address: bool = False,
        with_row_id: bool = False,
        batch_size: int | None = None,
        batch_readahead: int | None = None,
        scan_in_order: bool | None = None,
        prefilter: bool | None = None,
        late_materialization: bool | Sequence[str] | None = None,
        include_deleted_rows: bool | None = None,
    ) -> pa.Table:
        """The rows of this version (matching `filter`), as one Arrow table; `offset` rows skipped and at
        most `limit` returned, in table order.

        Args:
            columns: column names, or a dict of output name -> SQL expression over the table's columns (None: every
                column)
            filter: a SQL predicate or a pyarrow Expression over the table's columns (None: every row)
            with_row_address: add a `_rowaddr` column
            with_row_id: add a `_rowid` column (stable ids if the table keeps them, else the row address)
            batch_size: rows at most per batch read (None: the default)
            batch_readahead: pylance's read-ahead depth, accepted (checked for type) and without effect: mvcc reads
                Parquet with its own read-ahead
            scan_in_order: accepted and without effect: rows always come in table order
            prefilter: accepted and without effect: the filter always applies before `limit`/`offset`
            late_materialization: accepted and without effect: columns are projected per row group
            include_deleted_rows: also return the rows deletion vectors remove, with their stored values and
                `_rowid` / `_rowaddr` / `_rowoffset` null (pylance's; needs `_rowid`: `with_row_id=True` or
                `_rowid` in `columns`); no index is used then
            limit: rows at most in the result (None: all)
            offset: matching rows skipped first (None: none)
        """
        scan = self.scanner(
            columns,
            filter,
            with_row_address=with_row_address,
            with_row_id=with_row_id,
            batch_size=batch_size,
            batch_readahead=batch_readahead,
            scan_in_order=scan_in_order,
            prefilter=prefilter,
            late_materialization=late_materialization,
            include_deleted_rows=include_deleted_rows,
        )
        if limit is None and not offset:
            return scan.to_table()
        return _sliced(scan, limit, offset)

    def to_batches(
        self,
        columns: Sequence[str] | Mapping[str, str] | None = None,
        filter: str | pc.Expression | None = None,  # noqa: A002
        *,
        with_row_address: bool = False,
        batch_size: int | None = DEFAULT_BATCH_SIZE,
        with_row_id: bool = False,
        batch_readahead: int | None = None,
        scan_in_order: bool | None = None,
        prefilter: bool | None = None,
        late_materialization: bool | Sequence[str] | None = None,
        include_deleted_rows: bool | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Stream the rows of this version as record batches (memory bounded by a few batches).

        Args:
            columns: column names, or a dict of output name -> SQL expression over the table's columns (None: every
                column)
            filter: a SQL predicate or a pyarrow Expression over the table's columns (None: every row)
            with_row_address: add a `_rowaddr` column
            batch_size: rows at most per batch
            with_row_id: add a `_rowid` column (stable ids if the table keeps them, else the row address)
            batch_readahead: pylance's read-ahead depth, accepted (checked for type) and without effect: mvcc reads
                Parquet with its own read-ahead
            scan_in_order: accepted and without effect: rows always come in table order
            prefilter: accepted and without effect: the filter always applies before `limit`/`offset`
            late_materialization: accepted and without effect: columns are projected per row group
            include_deleted_rows: also return the rows deletion vectors remove, with their stored values and
                `_rowid` / `_rowaddr` / `_rowoffset` null (pylance's; needs `_rowid`: `with_row_id=True` or
                `_rowid` in `columns`); no index is used then
        """
        return self.scanner(
            columns,
            filter,
            with_row_address=with_row_address,
            batch_size=batch_size,
            with_row_id=with_row_id,
            batch_readahead=batch_readahead,
            scan_in_order=scan_in_order,
            prefilter=prefilter,
            late_materialization=late_materialization,
            include_deleted_rows=include_deleted_rows,
        ).to_batches()

    def to_reader(self) -> pa.RecordBatchReader:
        """All rows of this version as a `pyarrow.RecordBatchReader` (what Arrow consumers take)."""
        return self.scanner().to_reader()

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """Every row of this version as an Arrow C stream (the Arrow PyCapsule interface), so that DuckDB,
        Polars and DataFusion read the handle without the caller materializing it (no pushdown: use
        :meth:`to_pyarrow_dataset` for that).

        Args:
            requested_schema: a schema capsule the consumer asks for (cast to where Arrow can)
        """
        return self.to_reader().__arrow_c_stream__(requested_schema)

    def to_pyarrow_dataset(self) -> ArrowDataset:
        """This version as a `pyarrow.dataset.Dataset`, which DuckDB and Polars scan with their projection and
        filter pushed into this table's scan (deletion vectors applied; `table/arrow_dataset.py`). It keeps
        reading this version when the handle moves on.
        """
        from mvcc_core.table.arrow_dataset import ArrowDataset  # it imports pyarrow.dataset, and that pandas

        return ArrowDataset(self)

    def head(self, num_rows: int = 5, columns: Sequence[str] | Mapping[str, str] | None = None) -> pa.Table:
        """The first `num_rows` rows (pylance's `head`).

        Args:
            num_rows: how many rows
            columns: column names, or a dict of output name -> SQL expression over the table's columns (None: every
                column)
        """
        return self.to_table(columns, limit=num_rows)

    def take(
        self, indices: Sequence[int] | np.ndarray, columns: Sequence[str] | Mapping[str, str] | None = None
    ) -> pa.Table:
        """The rows at these positions of this version (0 is the first live row), in the order given.

        Only the fragments holding a requested row are read. IndexError names a position past the end.

        Args:
            indices: positions among the live rows of this version (0 is the first)
            columns: column names, or a dict of output name -> SQL expression over the table's columns (None: every
                column)

        Raises:
            IndexError: a position past the end
        """
        positions = np.asarray(indices, dtype=np.int64)
        total = self.count_rows()
        bad = positions[(positions < 0) | (positions >= total)]
        if len(bad):
            raise IndexError(f"take: position {int(bad[0])} is out of range for {total} rows")
        fragments = self.manifest.fragments
        starts = np.cumsum([0] + [live_rows(f) for f in fragments])
        owner = np.searchsorted(starts, positions, side="right") - 1
        parts, order = [], []
        for frag_index in np.unique(owner):
            wanted = np.flatnonzero(owner == frag_index)
            frag = fragments[int(frag_index)]
            rows = Scan(
                self._state.store, self.manifest, _nested_paths(columns, self.schema), fragments=[frag]
            ).to_table()
            parts.append(rows.take(pa.array(positions[wanted] - starts[frag_index])))
            order.append(wanted)
        if not parts:
            return self.scanner(columns).output_schema.empty_table()
        combined = pa.concat_tables(parts)
        return combined.take(pa.array(np.argsort(np.concatenate(order), kind="stable")))

    def count_rows(self, filter: str | pc.Expression | None = None) -> int:  # noqa: A002
        """Without a filter: from the manifest alone, no data file is opened.

        Args:
            filter: a SQL predicate or a pyarrow Expression over the table's columns (None: every row)
        """
        if filter is None:  # the manifest's totals, found when it was read: nothing to sum or scan
            return self._state.row_totals.live_rows
        return self.scanner(filter=filter, columns=[]).count_rows()


def _check_tuning(
    batch_readahead: object, scan_in_order: object, prefilter: object, late_materialization: object
) -> None:
    """TypeError for a pylance scan-tuning option of the wrong type (they have no effect here)."""
    if batch_readahead is not None and (not isinstance(batch_readahead, int) or isinstance(batch_readahead, bool)):
        raise TypeError(f"batch_readahead must be an int, got {type(batch_readahead).__name__} {batch_readahead!r}")
    for name, value in (("scan_in_order", scan_in_order), ("prefilter", prefilter)):
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    if not (
        late_materialization is None
        or isinstance(late_materialization, bool)
        or (isinstance(late_materialization, list) and all(isinstance(c, str) for c in late_materialization))
    ):
        raise TypeError(
            "late_materialization must be True, False or a list of column names, "
            f"got {type(late_materialization).__name__} {late_materialization!r}"
        )


def _nested_paths(
    columns: Sequence[str] | Mapping[str, str] | None, schema: pa.Schema
) -> Sequence[str] | Mapping[str, str] | None:
    """A list naming struct fields (`["a", "meta.lang"]`) as the projection that computes them; else as given
    (a list that also names system columns goes to the scan as it is: it keeps the caller's order)."""
    if columns is None or isinstance(columns, str | Mapping) or any(c in SYSTEM_COLUMNS for c in columns):
        return columns
    return struct_field_projection(list(columns), schema.names) or columns


def _sliced(scan: Scan | SystemFilteredScan | DeletedRowsScan, limit: int | None, offset: int | None) -> pa.Table:
    """`offset` rows skipped, then at most `limit`, reading no further than needed."""
    for name, value in (("limit", limit), ("offset", offset)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ValueError(f"{name.capitalize()} must be non-negative (an int), got {value!r}")
    skip, left = offset or 0, limit
    batches = []
    for batch in scan.to_batches():
        if left is not None and left <= 0:
            break
        if skip >= batch.num_rows:
            skip -= batch.num_rows
            continue
        batch = batch.slice(skip)
        skip = 0
        if left is not None:
            batch = batch.slice(0, left)
            left -= batch.num_rows
        batches.append(batch)
    return pa.Table.from_batches(batches, schema=scan.output_schema)
