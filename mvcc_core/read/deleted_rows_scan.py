"""A scan that returns the rows deletion vectors remove too (pylance's `include_deleted_rows=True`).

The fragments are read as if they had no deletion file (their data files still hold every row), and a deleted
row keeps its stored values with `_rowid`, `_rowaddr` and `_rowoffset` set to null: that null is how a caller
tells it apart, so the scan needs `_rowid` (pylance's rule). The filter is applied to the stored values; one
naming a system column sees the nulls (`_rowid IS NULL` keeps exactly the deleted rows). No scalar index is
asked: an index holds only the rows live when it was built, and the answer must not depend on one existing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.format.row_ids import ROW_ID
from mvcc_core.io import ObjectStore
from mvcc_core.io.parquet import ROW_ADDRESS
from mvcc_core.read.batch_results import ShapedResults
from mvcc_core.read.bound_filter import BoundFilter
from mvcc_core.read.deleted_rows import live_mask
from mvcc_core.read.scan import Scan, ScanPlan
from mvcc_core.read.sql_filter import Projection
from mvcc_core.read.system_columns import ROW_OFFSET, SYSTEM_COLUMNS, row_offsets
from mvcc_core.read.system_filter import filter_system_columns

__all__ = ["DeletedRowsScan"]


class DeletedRowsScan(ShapedResults):
    """A read of a version's live and deleted rows; the same reading surface as `Scan`.

    Args:
        store: the table's store
        manifest: the version to read
        columns: table column names (system columns among them), a dict of output name -> SQL expression, or
            None for every column
        filter: a SQL predicate or a pyarrow Expression over the stored values (and the system columns)
        with_row_id: add the `_rowid` column
        with_row_address: add the `_rowaddr` column
        batch_size: rows at most per output batch

    Raises:
        ValueError: no `_rowid` column is asked for
    """

    def __init__(
        self,
        store: ObjectStore,
        manifest: pb.Manifest,
        columns: Sequence[str] | Mapping[str, str] | None,
        filter: str | pc.Expression | None,  # noqa: A002 - pylance's name
        with_row_id: bool,
        with_row_address: bool,
        batch_size: int,
    ) -> None:
        """A read of `manifest`'s rows, deleted ones included; nothing is read before `to_batches()`."""
        schema = Scan(store, manifest, columns=[]).table_schema
        self._projection = Projection.bind(columns, schema) if isinstance(columns, Mapping) else None
        # the caller's scan without a filter: checks the columns and gives the output's shape
        self._shape = Scan(
            store,
            manifest,
            self._projection if self._projection is not None else columns,
            None,
            with_row_address,
            batch_size,
            with_row_id=with_row_id,
        )
        if not self._shape.with_row_id:
            raise ValueError(
                "include_deleted_rows=True needs the _rowid column and with_row_id is false: pass with_row_id=True "
                "or name '_rowid' in columns (a deleted row is one whose _rowid is null)"
            )
        self._store, self._manifest, self._batch_size = store, manifest, batch_size
        self._masks: dict[int, np.ndarray | None] = {}
        self._fragments = {f.id: f for f in manifest.fragments}
        system = [c for c in SYSTEM_COLUMNS if c not in schema.names]
        self._bound: BoundFilter | None = None
        pushed = filter
        filter_columns: list[str] = []
        if filter_system_columns(filter, schema.names):  # applied here, after the deleted rows' nulls are set
            extended = pa.schema(list(schema) + [pa.field(c, pa.uint64()) for c in system])
            self._bound = BoundFilter.bind(filter, extended)
            filter_columns = [c for c in schema.names if c in self._bound.columns]
            pushed = None
        self._offsets_needed = ROW_OFFSET in system and (
            ROW_OFFSET in self._shape.output_schema.names
            or (self._bound is not None and ROW_OFFSET in self._bound.columns)
        )
        wanted = set(self._shape.columns) | set(filter_columns)
        names = [c for c in schema.names if c in wanted]
        self._read = Scan(
            store,
            _without_deletions(manifest),
            [*names, ROW_ID, ROW_ADDRESS],
            pushed,
            batch_size=batch_size,
            use_index=False,
        )

    def explain(self) -> ScanPlan:
        """The plan of the read (every fragment as if it had no deletion file; no index)."""
        return self._read.explain()

    def _live(self, addresses: np.ndarray) -> np.ndarray:
        """Whether each row address is a live row of the version (False: removed by a deletion vector)."""
        frag_ids = (addresses >> np.uint64(32)).astype(np.int64)
        offsets = (addresses & np.uint64(0xFFFFFFFF)).astype(np.int64)
        live = np.ones(len(addresses), dtype=bool)
        for frag_id in np.unique(frag_ids):
            mask = self._mask(self._fragments[int(frag_id)])
            if mask is not None:
                at = frag_ids == frag_id
                live[at] = mask[offsets[at]]
        return live

    def _mask(self, frag: pb.DataFragment) -> np.ndarray | None:
        if frag.id not in self._masks:
            self._masks[frag.id] = live_mask(self._store, frag, self._manifest.base_paths)
        return self._masks[frag.id]

    def _rows(self) -> Iterator[pa.Table]:
        """The rows read, `_rowid` / `_rowaddr` (and `_rowoffset` when asked) null on deleted rows, filtered."""
        for batch in self._read.to_batches():
            table = pa.Table.from_batches([batch])
            addresses = table.column(ROW_ADDRESS).to_numpy()
            live = self._live(addresses)
            if self._offsets_needed:
                offsets = row_offsets(self._manifest.fragments, addresses, self._mask)
                table = table.append_column(pa.field(ROW_OFFSET, pa.uint64()), offsets)
            if not live.all():
                keep = pa.array(live)
                for name in [n for n in SYSTEM_COLUMNS if n in table.column_names]:
                    column = table.column(name)
                    nulled = pc.if_else(keep, column, pa.scalar(None, column.type))
                    table = table.set_column(table.schema.get_field_index(name), name, nulled)
            if self._bound is not None:
                table = table.filter(self._bound.arrow)
            if table.num_rows:
                yield table

    def _output(self, rows: pa.Table) -> pa.Table:
        """The caller's columns of `rows`: the projection's expressions or the columns named, in output order."""
        schema = self.output_schema
        if self._projection is None:
            return pa.Table.from_arrays(rows.select(schema.names).columns, schema=schema)
        source = rows.select(list(self._projection.columns))
        if not source.num_columns:  # constant expressions: a column of nulls carries the row count
            source = pa.table({"__mvcc_rows": pa.nulls(rows.num_rows)})
        computed = self._projection.evaluate(source)
        columns = [
            computed.column(n) if n in computed.column_names else rows.column(n)
            for n in schema.names  # the projection's outputs, then `_rowid` / `_rowaddr`
        ]
        return pa.Table.from_arrays(columns, schema=schema)

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Stream the rows in table order, deleted ones included."""
        for rows in self._rows():
            out = self._output(rows)
            yield from (b for b in out.to_batches(max_chunksize=self._batch_size) if b.num_rows)

    def count_rows(self) -> int:
        """How many rows the scan returns, deleted ones included."""
        return sum(rows.num_rows for rows in self._rows())


def _without_deletions(manifest: pb.Manifest) -> pb.Manifest:
    """A copy of `manifest` whose fragments have no deletion file: a scan of it reads every stored row."""
    whole = pb.Manifest()
    whole.CopyFrom(manifest)
    for frag in whole.fragments:
        frag.ClearField("deletion_file")
    return whole
