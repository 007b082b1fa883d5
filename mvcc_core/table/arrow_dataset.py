"""One version of a table as a `pyarrow.dataset.Dataset`, so that engines push their projection and filter into
mvcc's own scan (docs/guide/reading_from_other_engines.md).

DuckDB's replacement scan and Polars' `scan_pyarrow_dataset` read a `pyarrow.dataset.Dataset` by calling its
`scanner(columns=..., filter=<pyarrow Expression>, ...)` and streaming the result (`to_reader()` or
`to_batches()`), as they do for pylance's `LanceDataset`. `ArrowDataset.scanner` is `Table.scanner`: the
filter is pruned by file statistics and indices and the deletion vectors are applied, so the engine sees exactly
the version's live rows. The Dataset methods that would have pyarrow read the table's files itself
(`get_fragments`, `join`, `replace_schema`, ...) are refused: those files alone are not the version.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds

from mvcc_core.errors import InvalidOperationError
from mvcc_core.read.scan import DEFAULT_BATCH_SIZE

if TYPE_CHECKING:
    from mvcc_core.read.deleted_rows_scan import DeletedRowsScan
    from mvcc_core.read.scan import Scan
    from mvcc_core.read.system_filter import SystemFilteredScan
    from mvcc_core.table.reading import ReadingMethods

#: Keywords of `pyarrow.dataset.Dataset.scanner` that tune pyarrow's own reader: they mean nothing for mvcc's
#: scan, which reads ahead with its own bounded pools, and are accepted and ignored.
IGNORED_SCANNER_OPTIONS = frozenset(
    {"batch_readahead", "fragment_readahead", "fragment_scan_options", "use_threads", "cache_metadata", "memory_pool"}
)


class ArrowDataset(pds.Dataset):
    """A table version as a `pyarrow.dataset.Dataset` (see the module docstring).

    Args:
        table: The table handle whose current version this dataset reads; the dataset keeps reading that
            version when the handle moves on.
    """

    def __init__(self, table: ReadingMethods) -> None:  # noqa: D107 - documented on the class
        # pyarrow's Dataset is a C++-backed class: no super().__init__; every method a reader calls is here.
        # A handle of its own on the same immutable state: no read, and the table's later commits move only it.
        self._table = type(table)(table.state)

    @property
    def schema(self) -> pa.Schema:
        """The version's schema (pyarrow's `Dataset.schema`)."""
        return self._table.schema

    @property
    def partition_expression(self) -> pc.Expression:
        """Always true: the version is one unpartitioned dataset."""
        return pc.scalar(True)

    def scanner(
        self,
        columns: Sequence[str] | None = None,
        filter: pc.Expression | None = None,  # noqa: A002 - pyarrow's name
        batch_size: int | None = None,
        **options: Any,
    ) -> Scan | SystemFilteredScan | DeletedRowsScan:
        """A scan of the version with the engine's projection and filter pushed down.

        Args:
            columns: the columns to read (None: all)
            filter: a pyarrow Expression the rows must satisfy (None: every row)
            batch_size: rows at most per batch (None: mvcc's default)
            **options: pyarrow's reader tuning (`IGNORED_SCANNER_OPTIONS`), accepted and ignored

        Returns:
            The scan: `to_reader()`, `to_batches()`, `to_table()`, `count_rows()`, `__arrow_c_stream__`.

        Raises:
            InvalidOperationError: an option pyarrow's scanner has and this dataset cannot honour.
        """
        unknown = sorted(set(options) - IGNORED_SCANNER_OPTIONS)
        if unknown:
            raise InvalidOperationError(f"ArrowDataset.scanner does not take {', '.join(unknown)}")
        return self._table.scanner(
            list(columns) if columns is not None else None,
            filter,
            batch_size=DEFAULT_BATCH_SIZE if batch_size is None else batch_size,
        )

    def to_table(
        self,
        columns: Sequence[str] | None = None,
        filter: pc.Expression | None = None,  # noqa: A002
        **options: Any,
    ) -> pa.Table:
        """The version's rows as one Arrow table (see :meth:`scanner`).

        Args:
            columns: the columns to read (None: all)
            filter: a pyarrow Expression the rows must satisfy (None: every row)
            **options: pyarrow's reader options, as :meth:`scanner` takes them (`batch_size` and tuning accepted and
                ignored)
        """
        return self.scanner(columns, filter, **options).to_table()

    def to_batches(
        self,
        columns: Sequence[str] | None = None,
        filter: pc.Expression | None = None,  # noqa: A002
        **options: Any,
    ) -> Iterator[pa.RecordBatch]:
        """The version's rows as record batches (see :meth:`scanner`).

        Args:
            columns: the columns to read (None: all)
            filter: a pyarrow Expression the rows must satisfy (None: every row)
            **options: pyarrow's reader options, as :meth:`scanner` takes them (`batch_size` sets the rows per batch)
        """
        return self.scanner(columns, filter, **options).to_batches()

    def head(
        self,
        num_rows: int,
        columns: Sequence[str] | None = None,
        filter: pc.Expression | None = None,  # noqa: A002
        **options: Any,
    ) -> pa.Table:
        """The first `num_rows` rows (matching `filter`), in table order (see :meth:`scanner`).

        Args:
            num_rows: how many rows at most
            columns: the columns to read (None: all)
            filter: a pyarrow Expression the rows must satisfy (None: every row)
            **options: pyarrow's reader tuning, accepted and ignored
        """
        return self._table.to_table(list(columns) if columns is not None else None, filter, limit=num_rows)

    def count_rows(self, filter: pc.Expression | None = None, **options: Any) -> int:  # noqa: A002
        """Rows of the version (matching `filter`): from the manifest when there is no filter.

        Args:
            filter: a pyarrow Expression (None: every row)
            **options: pyarrow's reader tuning, accepted and ignored
        """
        return self._table.count_rows(filter)

    def take(self, indices: Sequence[int] | pa.Array, columns: Sequence[str] | None = None, **options: Any) -> pa.Table:
        """Rows by position in the version (pylance's `take`).

        Args:
            indices: row positions
            columns: the columns to read (None: all)
            **options: pyarrow's reader tuning, accepted and ignored
        """
        return self._table.take(list(indices.to_pylist() if isinstance(indices, pa.Array) else indices), columns)

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """Every row of the version as an Arrow C stream (the Arrow PyCapsule interface).

        Args:
            requested_schema: a schema capsule the consumer asks for (cast to where Arrow can)
        """
        return self.scanner().to_reader().__arrow_c_stream__(requested_schema)

    def _refused(self, *args: Any, **kwargs: Any) -> Any:
        raise InvalidOperationError(
            "an mvcc table version is read through its scanner (columns, filter); pyarrow cannot read its "
            "files on its own: they hold deleted rows and other versions' data"
        )

    get_fragments = _refused
    join = _refused
    join_asof = _refused
    replace_schema = _refused
    filter = _refused  # pyarrow's Dataset.filter returns a lazily filtered Dataset over its own fragments
    sort_by = _refused

    def __repr__(self) -> str:
        return f"ArrowDataset({self._table!r})"
