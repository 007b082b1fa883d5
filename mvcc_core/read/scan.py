"""Reading a version: projection, filters pushed into Parquet, deletion vectors and row addresses.

Design notes: docs/design/architecture.md, "The three read paths of a scan".
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import CorruptManifestError, DataFileMismatchError, SchemaError
from mvcc_core.format import row_ids
from mvcc_core.format import schema as schema_mod
from mvcc_core.format.bases import data_file_location
from mvcc_core.format.data_file_checks import check_data_file
from mvcc_core.format.deletion import live_rows
from mvcc_core.format.row_ids import ROW_ID
from mvcc_core.io import ObjectStore
from mvcc_core.io.parquet import (
    MISSING,
    ROW_ADDRESS,
    LruCache,
    field_owners,
    filter_table,
    is_remote,
    parquet_format,
    read_errors,
    read_file,
    row_address,
)
from mvcc_core.io.read_ahead import (
    OBJECT_STORE_READS,
    PHYSICAL_ROWS,
    read_ahead,
    read_whole_file,
    read_whole_object,
    runs,
    small_object,
)
from mvcc_core.read.batch_results import BatchResults
from mvcc_core.read.bound_filter import BoundFilter, filter_cache_key
from mvcc_core.read.deleted_rows import drop_deleted, drop_deleted_runs, live_mask, selection
from mvcc_core.read.filter_messages import unknown_column_problem
from mvcc_core.read.index_lookup import covered
from mvcc_core.read.index_planner import IndexChoice
from mvcc_core.read.missing_files import missing_files
from mvcc_core.read.row_group_stats import StatisticsCheck, Verdict, statistics_check
from mvcc_core.read.scan_index import IndexedReads
from mvcc_core.read.scan_row_addresses import RowAddressReads
from mvcc_core.read.sql_filter import Projection, struct_field_projection
from mvcc_core.read.system_columns import (
    ROW_OFFSET,
    SystemColumns,
    arrange,
    output_names,
    row_offsets,
    split_system_columns,
)

if TYPE_CHECKING:
    import pyarrow.dataset as ds

__all__ = ["DEFAULT_BATCH_SIZE", "ROW_ADDRESS", "IndexUse", "Scan", "ScanPlan", "missing_files", "read_fragment"]

# Threads reading multi-file fragments one by one (each is several small reads; I/O bound on S3).
_FRAGMENT_THREADS = max(4, 2 * (os.cpu_count() or 2))
DEFAULT_BATCH_SIZE = 131_072
# How many rows the reader pool (`file_reads`) may decode ahead of an unfiltered scan's consumer.
_WHOLE_FILE_AHEAD_ROWS = 4 * DEFAULT_BATCH_SIZE
_WHOLE_FILE_PART_ROWS = 16_384


# ---- per-process caches
#
# Scans are built per call, so what does not depend on the data is cached here: the schemas and the
# bound filter of a filter (keyed by the manifest's fields, which fix both) and the index choice (also
# keyed by the manifest's indices). Parquet footers and fragments are cached in `io.parquet`.

_SCHEMAS = LruCache(64)
_FILTERS = LruCache(256)


def _schemas(manifest: pb.Manifest) -> tuple[Any, pa.Schema, pa.Schema, dict[str, int]]:
    """(cache key, table schema, physical schema, field ids by name) of a manifest's fields."""
    fields = list(manifest.fields)
    metadata = dict(manifest.schema_metadata)
    key = (tuple(f.SerializeToString(deterministic=True) for f in fields), tuple(sorted(metadata.items())))
    found = _SCHEMAS.get(key)
    if found is MISSING:
        found = (
            schema_mod.schema_from_fields(fields, metadata),
            schema_mod.schema_from_fields(fields, metadata, physical=True),
            schema_mod.field_ids_by_name(fields),
        )
        _SCHEMAS.put(key, found)
    return (key, *found)


@dataclass(frozen=True)
class IndexUse:
    """The scalar index a scan answers its filter with."""

    name: str
    type: str  # "BTREE" or "BITMAP"
    column: str
    fragments: tuple[int, ...]  # fragments whose rows the index picks; the scan's others are read in full


@dataclass(frozen=True)
class ScanPlan:
    """What a scan will read and how (`Scan.explain()`), decided without reading any data."""

    fragments: tuple[int, ...]  # ids of the fragments read, in output order
    columns: tuple[str, ...]  # table columns read: the output's and the filter's
    filter_columns: tuple[str, ...]  # table columns the filter reads
    filter_pushed_down: bool  # the filter runs inside the Parquet scan (statistics prune), not after it
    index: IndexUse | None


class Scan(RowAddressReads, IndexedReads, BatchResults):
    """One read of one version. Build it, then iterate `to_batches()` or call `to_table()`.

    Args:
        store: the table's store
        manifest: the version to read
        columns: table column names, or (pylance's shape) a dict of output column name -> SQL expression over the
            table's columns (`{"total": "price * qty", "id": "id"}`), evaluated per batch; None: every column
        filter: rows to keep, as SQL or an Arrow Expression (None: every row)
        with_row_address: add the `_rowaddr` column (fragment id << 32 | offset)
        batch_size: rows at most per output batch
        fragments: read only these fragments (None: the version's all)
        with_row_id: add the `_rowid` column (stable row ids where the table keeps them)
        use_index: let a scalar index answer part of the filter
    """

    def __init__(
        self,
        store: ObjectStore,
        manifest: pb.Manifest,
        columns: Sequence[str] | Mapping[str, str] | Projection | None = None,
        filter: str | pc.Expression | None = None,  # noqa: A002 - pylance's name
        with_row_address: bool = False,
        batch_size: int = DEFAULT_BATCH_SIZE,
        fragments: Sequence[pb.DataFragment] | None = None,
        with_row_id: bool = False,
        use_index: bool = True,
    ) -> None:
        """A read of `manifest`'s version; nothing is read before `to_batches()` or `to_table()`."""
        self.store = store
        self.manifest = manifest
        self._schema_key, self.table_schema, self.physical_schema, self._field_ids = _schemas(manifest)
        # the extra columns after the table's, in output order
        self._extra = ([ROW_ID] if with_row_id else []) + ([ROW_ADDRESS] if with_row_address else [])
        self._projection: Projection | None = None
        # `_check_file`'s per-scan cache: physical names read -> (expected schema, physical -> logical names)
        self._expected_schemas: dict[tuple[str, ...], tuple[pa.Schema, dict[str, str]]] = {}
        if isinstance(columns, str):
            raise TypeError(f"columns must be a list of column names or a dict of name -> SQL, not the str {columns!r}")
        if isinstance(columns, Mapping):
            columns = Projection.bind(columns, self.table_schema)
        if isinstance(columns, Projection):
            clash = [n for n in columns.schema.names if n in self._extra]
            if clash:
                raise ValueError(f"columns: {clash[0]!r} is the name of the row id / row address column asked for")
            self._projection = columns
            columns = list(columns.columns)
        self._system = SystemColumns(None, with_row_id, with_row_address)
        if columns is not None and self._projection is None:  # pylance's system columns named in `columns`
            columns, self._system = split_system_columns(
                columns, self.table_schema.names, with_row_id, with_row_address
            )
            with_row_id, with_row_address = self._system.with_row_id, self._system.with_row_address
            self._extra = ([ROW_ID] if with_row_id else []) + ([ROW_ADDRESS] if with_row_address else [])
            struct_fields = struct_field_projection(columns, self.table_schema.names)
            if struct_fields is not None:  # `["meta.lang", "_rowid"]`: the fields computed, in the caller's order
                self._projection = Projection.bind(struct_fields, self.table_schema)
                columns = list(self._projection.columns)
        if columns is not None:
            columns = list(columns)
            unknown = [c for c in columns if c not in self.table_schema.names]
            if unknown:
                raise SchemaError(
                    f"table {store.uri} version {manifest.version}: "
                    f"{unknown_column_problem(unknown[0], self.table_schema.names)}"
                )
        self.columns = columns if columns is not None else list(self.table_schema.names)
        # The filter (SQL or Expression) is bound once: pushed into Parquet on physical columns, its
        # conjuncts read by statistics pruning and the index planner. One that cannot be analysed (an
        # Expression naming a field by position) is applied after relabelling, reading every column.
        self._filter_input = filter
        self._filter_key = None if filter is None else filter_cache_key(filter)
        self.bound: BoundFilter | None = None
        if filter is not None:
            key = None if self._filter_key is None else (self._filter_key, self._schema_key)
            cached = None if key is None else _FILTERS.get(key)
            if isinstance(cached, BoundFilter):
                self.bound = cached
            else:
                self.bound = BoundFilter.bind(filter, self.table_schema, self.physical_schema)
                if key is not None:
                    _FILTERS.put(key, self.bound)
        self.filter: pc.Expression | None = None  # over physical columns: pushed into the scan
        self._post_filter: pc.Expression | None = None  # over table columns: applied to relabelled rows
        if self.bound is not None and self.bound.physical:
            self.filter = self.bound.arrow
        elif self.bound is not None:
            self._post_filter = self.bound.arrow
        self._filter_columns: list[str] = list(self.bound.columns) if self.bound is not None else []
        # Whether Arrow may prune row groups by their statistics for this filter: not when it reads a float
        # column. Parquet's min/max leave NaN out and Arrow takes them as bounds of every value, so it drops row
        # groups whose NaN rows match (`isnan(x)`, `x = NaN`, a NaN-ordered `x > c`); mvcc's own check
        # (`row_group_stats`) knows each file's NaN count and prunes those scans instead
        # (`_pruned_by_nan_aware_statistics`).
        self._arrow_prunes = not any(_holds_float(self.table_schema.field(c).type) for c in self._filter_columns)
        self._use_index = use_index
        self.with_row_address = with_row_address
        self.with_row_id = with_row_id
        self._stable_ids = row_ids.enabled(manifest)
        self.batch_size = batch_size
        self.fragments = list(manifest.fragments if fragments is None else fragments)
        self._local_disk = store.scheme == "file"  # the Parquet format's options (`parquet_format`)
        self._live: dict[int, np.ndarray | None] = {}  # per-fragment live masks, read once
        self._ids: dict[int, np.ndarray] = {}  # per-fragment stable row ids, decoded once
        self._index: IndexChoice | None | Literal[False] = False  # False: not chosen yet
        self._addresses: np.ndarray | None = None  # what the chosen index names, looked up once

    @property
    def dataset_schema(self) -> pa.Schema:
        """pylance's `dataset_schema`: the schema of the table version scanned."""
        return self.table_schema

    @property
    def projected_schema(self) -> pa.Schema:
        """pylance's `projected_schema`: the schema of the rows the scan returns (`output_schema`)."""
        return self.output_schema

    @property
    def output_schema(self) -> pa.Schema:
        if self._projection is not None:
            out = self._projection.schema.with_metadata(self.table_schema.metadata)
        else:
            out = pa.schema([self.table_schema.field(c) for c in self.columns], metadata=self.table_schema.metadata)
        for name in self._extra:
            out = out.append(pa.field(name, pa.uint64()))  # nullable, as pylance types it
        if self._system.order is not None:
            out = out.append(pa.field(ROW_OFFSET, pa.uint64()))
            out = pa.schema([out.field(n) for n in output_names(self._system)], metadata=out.metadata)
        return out

    def explain(self) -> ScanPlan:
        """The plan of this scan: fragments, columns read, whether the filter is pushed into Parquet and
        the index used (if any). Reads index metadata from the manifest only, no data."""
        choice = self._index_choice()
        index = None
        if choice is not None:
            cover = covered(choice.index)
            picked = tuple(f.id for f in self.fragments if f.id in cover and len(f.files) == 1)
            index = IndexUse(choice.index.name, choice.index.index_type, choice.column, picked)
        return ScanPlan(
            fragments=tuple(f.id for f in self.fragments),
            columns=tuple(self._read_names()),
            filter_columns=tuple(self._filter_columns),
            filter_pushed_down=self.filter is not None,
            index=index,
        )

    def candidate_fragments(self) -> list[pb.DataFragment]:
        """The fragments of this scan that may hold a matching row, in manifest order.

        For planners that split a scan into tasks (the Spark data source): a fragment the index answers is
        kept only if the index names a row in it; a one-file fragment whose row-group statistics rule the
        filter out is dropped (its footer is read); anything else is kept. Without a filter: every fragment.
        """
        if self.bound is None:
            return list(self.fragments)
        choice = self._index_choice()
        keep: set[int] | None = None
        if choice is not None:
            cover = covered(choice.index)
            hit = {int(f) for f in np.unique(self._index_addresses(choice) >> np.uint64(32))}
            keep = {f.id for f in self.fragments if f.id not in cover or len(f.files) != 1 or f.id in hit}
        fragments = [f for f in self.fragments if keep is None or f.id in keep]
        single = [f for f in fragments if len(f.files) == 1]
        with missing_files(self.store):
            kept, _ = self._prune(single)
        survivors = {f.id for f in kept} | {f.id for f in fragments if len(f.files) != 1}
        return [f for f in fragments if f.id in survivors]

    # ---- what to read

    def _read_names(self) -> list[str]:
        """Table columns to read: the output columns and what the filter needs, in schema order."""
        wanted = set(self.columns) | set(self._filter_columns)
        # Reading nothing would lose the row count: read the first column then (and drop it).
        return [n for n in self.table_schema.names if n in wanted] or self.table_schema.names[:1]

    def _physical(self, names: Sequence[str]) -> list[str]:
        return [schema_mod.physical_name(self._field_ids[n]) for n in names]

    def _file_fragment(self, data_file: pb.DataFile) -> ds.ParquetFileFragment:
        store, rel = data_file_location(self.store, self.manifest.base_paths, data_file)
        return parquet_format(local=self._local_disk).make_fragment(
            store.arrow_path(rel), filesystem=store.arrow_filesystem(), file_size=data_file.file_size_bytes or None
        )

    @property
    def _arrow_filter(self) -> pc.Expression | None:
        """The filter handed to Arrow's dataset scan (see `_arrow_prunes`); None: applied after the read."""
        return self.filter if self._arrow_prunes else None

    def _dataset(
        self, fragments: list[pb.DataFragment], files: list[ds.ParquetFileFragment] | None = None
    ) -> ds.FileSystemDataset:
        """One dataset over one-file fragments that live in one store (see `_runs`)."""
        store, _ = data_file_location(self.store, self.manifest.base_paths, fragments[0].files[0])
        if files is None:
            files = [self._file_fragment(f.files[0]) for f in fragments]
        self._check_footers(fragments, files)
        import pyarrow.dataset as ds  # imported on first use: it imports pandas

        file_format = parquet_format(local=self._local_disk)
        return ds.FileSystemDataset(files, self.physical_schema, file_format, store.arrow_filesystem())

    def _check_file(
        self,
        frag: pb.DataFragment,
        data_file: pb.DataFile,
        file_schema: pa.Schema,
        num_rows: int | None,
        names: list[str] | None = None,
    ) -> None:
        """`data_file_checks.check_data_file` for the columns this scan reads (`names`: physical; default the
        scan's read columns)."""
        physical = tuple(self._physical(self._read_names()) if names is None else names)
        cache = self._expected_schemas
        if physical not in cache:
            expected = pa.schema([self.physical_schema.field(n) for n in physical])
            cache[physical] = expected, dict(zip(self.physical_schema.names, self.table_schema.names, strict=True))
        expected, logical = cache[physical]
        check_data_file(file_schema, num_rows, expected, frag, data_file, self.store.uri, logical)

    def _check_footers(self, fragments: list[pb.DataFragment], files: list[ds.ParquetFileFragment]) -> None:
        """Load the footers of one-file fragments a dataset scan reads (the scan reuses them) and check each file
        against the manifest: its row count and the columns read. The dataset scanner would fill a missing
        column with nulls, raise Arrow's untyped errors for another type, and a filtered scan never counts."""

        def load(pair: tuple[pb.DataFragment, ds.ParquetFileFragment]) -> None:
            frag, file = pair
            with read_errors(frag.files[0].path):
                file.ensure_complete_metadata()
            self._check_file(frag, frag.files[0], file.physical_schema, file.metadata.num_rows)

        pairs = list(zip(fragments, files, strict=True))
        if self.store.scheme in ("file", "memory") or len(pairs) < 2:
            for pair in pairs:
                load(pair)
        else:  # a round trip per footer: overlap them
            with ThreadPoolExecutor(max_workers=OBJECT_STORE_READS) as pool:
                list(pool.map(load, pairs))

    def _prune(self, fragments: list[pb.DataFragment]) -> tuple[list[pb.DataFragment], list[ds.ParquetFileFragment]]:
        """Drop files whose row-group statistics rule out the filter, for scans that cannot push it down.

        Whole files only (offsets must stay whole-file); the footers read here are kept by the file
        fragments and reused by the scan.
        """
        files = [self._file_fragment(f.files[0]) for f in fragments]
        if self.filter is None or self.bound is None or not self.bound.prunable or not self._arrow_prunes:
            return fragments, files

        self._check_footers(fragments, files)  # loads each footer (overlapped on object stores)
        kept = [
            (frag, file)
            for frag, file in zip(fragments, files, strict=True)
            if file.subset(self.filter, schema=self.physical_schema).num_row_groups
        ]
        return [k[0] for k in kept], [k[1] for k in kept]

    def _pruned_by_nan_aware_statistics(
        self, fragments: list[pb.DataFragment]
    ) -> tuple[list[pb.DataFragment], list[ds.ParquetFileFragment] | None]:
        """Drop files a NaN-ordered float `x > c` rules out by statistics and NaN counts (Arrow's pruning cannot:
        it sees `x > c OR is_nan(x)`); for any filter on a float column, which Arrow does not prune
        (`_arrow_prunes`), keep only the row groups the check does not rule out. Other filters keep every file
        (the dataset scan prunes them itself)."""
        check = self._statistics_check()
        if check is None or (self._arrow_prunes and not check.reads_nan_counts):
            return fragments, None
        files = [self._file_fragment(f.files[0]) for f in fragments]
        self._check_footers(fragments, files)  # loads each footer, which the scan then reuses
        if self._arrow_prunes:
            kept = [
                (frag, file)
                for frag, file in zip(fragments, files, strict=True)
                if check.verdict(file.metadata) is not Verdict.NONE
            ]
            return [k[0] for k in kept], [k[1] for k in kept]
        # Arrow gets no filter (`_arrow_prunes`): the row groups the check keeps are the ones read
        kept = []
        for frag, file in zip(fragments, files, strict=True):
            groups = check.matching_row_groups(file.metadata)
            if groups is None or len(groups) == file.metadata.num_row_groups:
                kept.append((frag, file))
            elif groups:
                kept.append((frag, file.subset(row_group_ids=groups)))
        return [k[0] for k in kept], [k[1] for k in kept]

    def _path_of(self, frag: pb.DataFragment) -> str:
        if len(frag.files) > 1:
            return "multi"
        if self._extra or (frag.HasField("deletion_file") and not self._whole_files_apply()):
            return "offsets"
        return "bulk"  # deletion vectors of a whole-file read are applied to each file's rows (`_whole_files`)

    # ---- turning physical tables into results

    def _finish(self, data: pa.Table | pa.RecordBatch, names: list[str]) -> Iterator[pa.RecordBatch]:
        """Relabel physical columns `names` (plus `_rowaddr`), apply a caller's filter, project."""
        logical = pa.schema([self.table_schema.field(n) for n in names])
        for name in self._extra:
            logical = logical.append(pa.field(name, pa.uint64()))
        table = schema_mod.relabel(data, logical)
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        if self._post_filter is not None:
            table = table.filter(self._post_filter)
        table = self._output(table)
        out_schema = self.output_schema
        for batch in table.to_batches(max_chunksize=self.batch_size):
            if batch.num_rows:
                yield pa.RecordBatch.from_arrays(batch.columns, schema=out_schema) if batch.num_columns else batch

    def _output(self, table: pa.Table) -> pa.Table:
        """The output columns of relabelled rows: the columns asked for (or the projection's expressions,
        computed), then `_rowid` / `_rowaddr`; system columns named in `columns` in the order named."""
        if self._projection is None:
            out = table.select(self.columns + self._extra)
            return arrange(out, self._system, lambda a: row_offsets(self.manifest.fragments, a, self._live_mask))
        source = table.select(list(self._projection.columns))
        if not source.num_columns:  # constant expressions: a column of nulls carries the row count
            source = pa.table({"__mvcc_rows": pa.nulls(table.num_rows)})
        out = self._projection.evaluate(source)
        for name in self._extra:
            out = out.append_column(name, table.column(name))
        return arrange(out, self._system, lambda a: row_offsets(self.manifest.fragments, a, self._live_mask))

    def _keep(self, table: pa.Table, frag: pb.DataFragment, offsets: np.ndarray) -> pa.Table:
        """Add row ids / addresses, drop deleted rows, apply the pushed-down filter."""
        table = self._with_ids(table, frag, offsets)
        live = self._live_mask(frag)
        if live is not None:
            table = table.filter(selection(live[offsets.astype(np.int64)]))
        if self.filter is not None:
            table = filter_table(table, self.filter)
        return table

    # ---- the three paths

    def _bulk(self, fragments: list[pb.DataFragment]) -> Iterator[pa.RecordBatch]:
        names = self._read_names()
        if self._whole_files_apply(fragments):
            remote = is_remote(self.store.scheme)  # there every file is small in bytes: read whole
            start = 0
            while start < len(fragments):  # small files read whole (ahead, on the reader pool); large ones streamed
                end = start
                while end < len(fragments) and (remote or fragments[end].physical_rows <= self.batch_size):
                    end += 1
                tables = self._whole_files(fragments[start:end], names) if end > start else iter(())
                if end == start:
                    tables, end = self._streamed_file(fragments[start], names), start + 1
                for table in tables:
                    if table.num_rows:
                        yield from self._finish(table, names)
                start = end
            return
        fragments, files = self._pruned_by_nan_aware_statistics(fragments)
        if not fragments:
            return
        scanner = self._dataset(fragments, files).scanner(
            columns=self._physical(names), filter=self._arrow_filter, batch_size=self.batch_size, use_threads=True
        )
        for batch in scanner.to_batches():
            if batch.num_rows and self._arrow_filter is not self.filter:
                batch = filter_table(pa.Table.from_batches([batch]), self.filter)
            if batch.num_rows:
                yield from self._finish(batch, names)

    def _streamed_file(self, frag: pb.DataFragment, names: list[str]) -> Iterator[pa.Table]:
        """Columns `names` (physical) of a one-file fragment larger than a batch, a batch at a time: the consumer
        (a Spark task sending Arrow to the JVM) works on the first batch while the next is decoded, instead of
        waiting for the whole file. A file whose columns differ from the version's is read as `_whole_files`
        reads it."""
        physical = pa.schema([self.physical_schema.field(self.table_schema.get_field_index(n)) for n in names])
        data_file = frag.files[0]
        store, rel = data_file_location(self.store, self.manifest.base_paths, data_file)
        rows = 0
        with read_errors(data_file.path), store.arrow_filesystem().open_input_file(store.arrow_path(rel)) as source:
            parquet = pq.ParquetFile(source)
            file_schema = parquet.schema_arrow
            held = {f.name: f for f in file_schema}
            if any(f.name not in held or not held[f.name].equals(f) for f in physical):
                yield from self._whole_files([frag], names)  # fills and casts
                return
            live = self._live_mask(frag)
            for batch in parquet.iter_batches(batch_size=self.batch_size, columns=physical.names):
                start, rows = rows, rows + batch.num_rows
                if rows > frag.physical_rows:
                    self._rows_mismatch(frag, f"more than {frag.physical_rows}")
                table = pa.Table.from_batches([batch])
                yield table if live is None else drop_deleted(table, live[start:rows])
        if rows != frag.physical_rows:
            self._rows_mismatch(frag, str(rows))

    def _whole_files_apply(self, fragments: Sequence[pb.DataFragment] | None = None) -> bool:
        """Whether bulk fragments are read file by file (`_whole_files`) rather than by a dataset scan: without a
        filter (nothing to push down or prune by statistics) on a local disk or in memory, and on an object store
        when every file of `fragments` is small (one GET each; larger ones keep the scanner's buffered reads)."""
        if self.filter is not None or self._post_filter is not None:
            return False
        return self.store.scheme in ("file", "memory") or (
            bool(fragments) and all(small_object(f.files[0]) for f in fragments or ())
        )

    def _whole_files(self, fragments: list[pb.DataFragment], names: list[str]) -> Iterator[pa.Table]:
        """Columns `names` (physical) of one-file fragments, a table per file in order, read on a few threads.

        Arrow's dataset scanner costs ~25% more CPU per file than decoding each file on one thread
        (`parquet_io.read_file`; measured on 200 files of 5,000 rows). A file whose columns differ from the
        version's (a dropped struct field, an altered nullability) is read through a dataset fragment, which
        fills and casts as the scanner does. At most `_WHOLE_FILE_AHEAD_ROWS` rows are read ahead.
        """
        physical = pa.schema([self.physical_schema.field(self.table_schema.get_field_index(n)) for n in names])
        # every column (a full scan): the whole file, without a projection's bookkeeping per file
        reader = read_whole_file if physical.names == self.physical_schema.names else read_file
        remote = is_remote(self.store.scheme)

        def read(frag: pb.DataFragment) -> tuple[pa.Table, np.ndarray | None]:
            data_file = frag.files[0]
            store, rel = data_file_location(self.store, self.manifest.base_paths, data_file)
            if remote and small_object(data_file):
                table = read_whole_object(store, rel, data_file.path, physical)
            else:
                key = (store.scheme, store.arrow_path(rel), data_file.file_size_bytes)
                table = reader(store.arrow_filesystem(), key, physical)
            if table is None:
                file = self._file_fragment(data_file)
                with read_errors(data_file.path):
                    file_schema = file.physical_schema
                self._check_file(frag, data_file, file_schema, None)
                table = file.to_table(schema=self.physical_schema, columns=physical.names)
            if table.num_rows != frag.physical_rows:
                self._rows_mismatch(frag, str(table.num_rows))
            return table, self._live_mask(frag)

        def read_part(part: list[pb.DataFragment]) -> list[pa.Table]:
            return drop_deleted_runs([read(frag) for frag in part])

        # a thread reads a run of small files per hand-off (a hand-off per file costs more than it saves; on an object
        # store a file is a round trip: one each, `OBJECT_STORE_READS` in flight); the first run is read on the calling
        # thread, which would only wait for it (a hand-off costs ~0.15-0.2 ms CPU)
        io = {"ahead_parts": OBJECT_STORE_READS, "threads": OBJECT_STORE_READS} if remote else {}
        cuts = runs(fragments, PHYSICAL_ROWS, 1 if remote else _WHOLE_FILE_PART_ROWS)
        parts = ((rows, partial(read_part, run)) for rows, run in cuts)
        for tables in read_ahead(parts, _WHOLE_FILE_AHEAD_ROWS, first_on_caller=True, **io):
            yield from tables

    def _statistics_check(self) -> StatisticsCheck | None:
        """The row-group statistics test `_read_local` applies on its reader threads, when the filter is
        pushed down and every comparison in it is one `row_group_stats` decides (else `_prune` runs)."""
        if self.filter is None or self.bound is None or not self.bound.comparisons:
            return None
        names = {c.column: schema_mod.physical_name(self._field_ids[c.column]) for c in self.bound.comparisons}
        return statistics_check(self.bound.conjuncts, self.table_schema, names)

    def _flush(self, tables: list[pa.Table], names: list[str]) -> Iterator[pa.RecordBatch]:
        table = pa.concat_tables(tables)
        if self.filter is not None:
            table = table.filter(self.filter)
        yield from self._finish(table, names)

    def _live_mask(self, frag: pb.DataFragment) -> np.ndarray | None:
        """False at deleted offsets (read-only); None when the fragment has no deletions. Read once per scan."""
        if frag.id not in self._live:
            self._live[frag.id] = live_mask(self.store, frag, self.manifest.base_paths)
        return self._live[frag.id]

    def _row_ids(self, frag: pb.DataFragment) -> np.ndarray:
        """The fragment's stable row ids, decoded once per scan."""
        if frag.id not in self._ids:
            self._ids[frag.id] = row_ids.decode(frag)
        return self._ids[frag.id]

    def _with_ids(self, table: pa.Table, frag: pb.DataFragment, offsets: np.ndarray) -> pa.Table:
        """Append `_rowid` / `_rowaddr` for rows at `offsets` of `frag`, as asked."""
        if self.with_row_id:  # stable ids, or the row address for tables without them (as Lance)
            ids = self._row_ids(frag)[offsets] if self._stable_ids else row_address(frag.id, offsets)
            table = table.append_column(ROW_ID, pa.array(ids, pa.uint64()))
        if self.with_row_address:
            table = table.append_column(ROW_ADDRESS, row_address(frag.id, offsets))
        return table

    def _multi(self, frag: pb.DataFragment) -> Iterator[pa.RecordBatch]:
        names = self._read_names()
        owners = field_owners(frag)
        by_file: dict[int, list[str]] = {}
        for name in names:
            owner = owners.get(self._field_ids[name])
            if owner is not None:
                by_file.setdefault(owner, []).append(name)
        columns: dict[str, pa.ChunkedArray | pa.Array] = {}
        for index, file_names in by_file.items():
            file = self._file_fragment(frag.files[index])
            with read_errors(frag.files[index].path):
                file_schema = file.physical_schema
            physical = self._physical(file_names)
            self._check_file(frag, frag.files[index], file_schema, None, physical)
            part = file.to_table(schema=self.physical_schema, columns=physical)
            if part.num_rows != frag.physical_rows:
                raise DataFileMismatchError(
                    f"fragment {frag.id} of {self.store.uri}: data file {frag.files[index].path} has "
                    f"{part.num_rows} rows, the manifest's field physical_rows says {frag.physical_rows}",
                    path=frag.files[index].path,
                )
            columns.update(zip(file_names, part.columns, strict=True))
        fields = [self.physical_schema.field(self.table_schema.get_field_index(n)) for n in names]
        table = pa.Table.from_arrays(
            [
                columns[n] if n in columns else pa.nulls(frag.physical_rows, f.type)
                for n, f in zip(names, fields, strict=True)
            ],
            schema=pa.schema(fields),
        )
        offsets = np.arange(frag.physical_rows, dtype=np.uint64)
        yield from self._finish(self._keep(table, frag, offsets), names)

    # ---- results

    def _runs(self) -> Iterator[tuple[str, list[pb.DataFragment]]]:
        """Fragments in manifest order, grouped: consecutive one-file fragments of one path ("bulk" or
        "offsets") in one store form a run; a multi-file fragment is a run of its own."""
        run: list[pb.DataFragment] = []
        kind = ""
        for frag in self.fragments:
            path = self._path_of(frag)
            if run and (path != kind or path == "multi" or _base_of(run[0]) != _base_of(frag)):
                yield kind, run
                run = []
            run.append(frag)
            kind = path
        if run:
            yield kind, run

    def _run_batches(self, path: str, fragments: list[pb.DataFragment]) -> Iterator[pa.RecordBatch]:
        if path == "bulk":
            return self._bulk(fragments)
        return self._offsets(fragments) if path == "offsets" else self._multi(fragments[0])

    # ---- index-assisted reads

    def _sub_scan(self, fragments: list[pb.DataFragment]) -> Scan:
        return Scan(
            self.store,
            self.manifest,
            self._projection if self._projection is not None else self.columns,
            self._filter_input,
            self.with_row_address,
            self.batch_size,
            fragments=fragments,
            with_row_id=self.with_row_id,
            use_index=False,
        )

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Stream the result in manifest order; memory is bounded by a few batches (a fragment's
        projected columns for multi-file fragments, which are read a few ahead by a thread pool)."""
        choice = self._index_choice()
        if choice is not None:
            with missing_files(self.store):
                yield from self._indexed(choice)
            return
        with missing_files(self.store), ThreadPoolExecutor(max_workers=_FRAGMENT_THREADS) as pool:
            pending: deque[Future[list[pa.RecordBatch]]] = deque()
            for path, fragments in self._runs():
                if path != "multi":
                    while pending:
                        yield from pending.popleft().result()
                    yield from self._run_batches(path, fragments)
                    continue
                pending.append(pool.submit(list, self._multi(fragments[0])))  # the generator runs on the pool
                while len(pending) > 2 * _FRAGMENT_THREADS:
                    yield from pending.popleft().result()
            while pending:
                yield from pending.popleft().result()

    def to_table(self) -> pa.Table:
        choice = self._index_choice()
        if choice is not None and self._index_pays(choice):
            return pa.Table.from_batches(list(self.to_batches()), schema=self.output_schema)
        if choice is not None:  # the same filter over every fragment, read whole on the reader threads
            return self._sub_scan(self.fragments).to_table()
        runs = list(self._runs())
        if len(runs) == 1 and runs[0][0] == "offsets":
            with missing_files(self.store):
                return self._offsets_table(runs[0][1])
        if self._post_filter is None and len(runs) == 1 and runs[0][0] == "bulk":
            names = self._read_names()
            schema = pa.schema([self.physical_schema.field(self.table_schema.get_field_index(n)) for n in names])
            with missing_files(self.store):
                if self._whole_files_apply(runs[0][1]):
                    parts = list(self._whole_files(runs[0][1], names))
                    table = pa.concat_tables(parts) if parts else schema.empty_table()
                else:
                    fragments, files = self._pruned_by_nan_aware_statistics(runs[0][1])
                    table = schema.empty_table()
                    if fragments:
                        table = self._dataset(fragments, files).to_table(
                            columns=self._physical(names), filter=self._arrow_filter, use_threads=True
                        )
                        if self._arrow_filter is not self.filter:
                            table = filter_table(table, self.filter)
            table = schema_mod.relabel(table, pa.schema([self.table_schema.field(n) for n in names]))
            out = self._output(table)
            return pa.Table.from_arrays(out.columns, schema=self.output_schema) if out.num_columns else out
        if not runs:
            return self.output_schema.empty_table()
        return pa.Table.from_batches(list(self.to_batches()), schema=self.output_schema)

    def count_rows(self) -> int:
        if self.filter is None and self._post_filter is None:
            return sum(live_rows(f) for f in self.fragments)
        saved, projection = self.columns, self._projection
        self.columns, self._projection = [], None
        try:
            if self._index_choice() is not None:
                return sum(b.num_rows for b in self.to_batches())
            total = 0
            with missing_files(self.store):
                # Arrow counts a row group whose statistics satisfy the filter without reading it, but Parquet's
                # float min/max leave NaN out (`x < 1` would count NaN rows): floats are counted by reading
                metadata_count = self._arrow_prunes
                for path, fragments in self._runs():
                    if path == "bulk" and self._post_filter is None and metadata_count:
                        total += self._dataset(fragments).count_rows(filter=self.filter)
                    else:
                        total += sum(b.num_rows for b in self._run_batches(path, fragments))
            return total
        finally:
            self.columns, self._projection = saved, projection


def _holds_float(data_type: pa.DataType) -> bool:
    """Whether a column of this type is or holds floating-point values."""
    if pa.types.is_floating(data_type):
        return True
    return any(_holds_float(data_type.field(i).type) for i in range(data_type.num_fields))


def _base_of(fragment: pb.DataFragment) -> int:
    data_file = fragment.files[0]
    return data_file.base_id if data_file.HasField("base_id") else -1


def read_fragment(store: ObjectStore, manifest: pb.Manifest, fragment: pb.DataFragment, columns: list[str]) -> pa.Table:
    """All physical rows of one fragment, deleted ones included, in offset order.

    Column rewrites (add_columns, REWRITE_COLUMNS) write files as long as the fragment, so they must
    see every row, not only the live ones.

    Args:
        store: the table's store
        manifest: the version the fragment belongs to
        fragment: the fragment to read
        columns: the table columns to read
    """
    whole = pb.DataFragment()
    whole.CopyFrom(fragment)
    whole.ClearField("deletion_file")
    table = Scan(store, manifest, columns=columns, with_row_address=True, fragments=[whole]).to_table()
    if table.num_rows != fragment.physical_rows:
        raise CorruptManifestError(
            f"fragment {fragment.id} of {store.uri} read {table.num_rows} rows, "
            f"the manifest says {fragment.physical_rows}"
        )
    return table.drop_columns([ROW_ADDRESS])
