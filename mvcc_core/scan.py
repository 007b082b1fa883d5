"""Reading a version: projection, filters pushed into Parquet, deletion vectors and row addresses.

Fragments without deletions, read without row addresses, go through one pyarrow dataset over all
their files, so Parquet row-group statistics prune and the scan runs multi-threaded. Fragments with
deletion vectors (or when `_rowaddr` is asked for) are read row group by row group, so that each
row's offset in its fragment is known; row groups are still pruned by statistics first.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from . import schema as schema_mod
from ._proto import table_pb2 as pb
from .deletion import live_rows, read_deletion_vector
from .errors import SchemaError
from .fragments import fragment_paths
from .naming import data_file_path
from .predicate import to_expression
from .storage import ObjectStore

ROW_ADDRESS = "_rowaddr"
DEFAULT_BATCH_SIZE = 131_072
_PARQUET = ds.ParquetFileFormat()
# Pre-buffering coalesces reads into few large requests: a win on S3, a small loss on a local disk.
_PARQUET_LOCAL = ds.ParquetFileFormat(default_fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=False))


def row_address(fragment_id: int, offsets: np.ndarray) -> pa.Array:
    return pa.array((np.uint64(fragment_id) << np.uint64(32)) | offsets.astype(np.uint64), type=pa.uint64())


class Scan:
    """One read of one version. Build it, then iterate `to_batches()` or call `to_table()`."""

    def __init__(
        self,
        store: ObjectStore,
        manifest: pb.Manifest,
        columns: Sequence[str] | None = None,
        filter: str | pc.Expression | None = None,  # noqa: A002 - pylance's name
        with_row_address: bool = False,
        batch_size: int = DEFAULT_BATCH_SIZE,
        fragments: Sequence[pb.DataFragment] | None = None,
    ) -> None:
        self.store = store
        self.manifest = manifest
        self.table_schema = schema_mod.schema_from_fields(list(manifest.fields), dict(manifest.schema_metadata))
        self.file_schema = schema_mod.schema_from_fields(
            list(manifest.fields), dict(manifest.schema_metadata), with_field_ids=True
        )
        if columns is not None:
            columns = list(columns)
            unknown = [c for c in columns if c not in self.table_schema.names]
            if unknown:
                raise SchemaError(
                    f"table {store.uri} version {manifest.version} has no column(s) {unknown}; "
                    f"columns are {self.table_schema.names}"
                )
        self.columns = columns if columns is not None else list(self.table_schema.names)
        self.filter = to_expression(filter, self.table_schema) if filter is not None else None
        self.with_row_address = with_row_address
        self.batch_size = batch_size
        self.fragments = list(manifest.fragments if fragments is None else fragments)
        self._fs = store.arrow_filesystem()

    @property
    def output_schema(self) -> pa.Schema:
        out = pa.schema([self.table_schema.field(c) for c in self.columns], metadata=self.table_schema.metadata)
        if self.with_row_address:
            out = out.append(pa.field(ROW_ADDRESS, pa.uint64(), nullable=False))
        return out

    def _dataset(self, fragments: Sequence[pb.DataFragment]) -> ds.FileSystemDataset:
        """One dataset over the fragments' files; known file sizes spare a HEAD request per file."""
        fmt = _PARQUET_LOCAL if self.store.scheme == "file" else _PARQUET
        files = [
            fmt.make_fragment(
                self.store.arrow_path(data_file_path(df.path)),
                filesystem=self._fs,
                file_size=df.file_size_bytes or None,
            )
            for f in fragments
            for df in f.files
        ]
        return ds.FileSystemDataset(files, self.file_schema, fmt, self._fs)

    def _needs_offsets(self, frag: pb.DataFragment) -> bool:
        return self.with_row_address or frag.HasField("deletion_file")

    def _plain_fragments(self) -> tuple[list[pb.DataFragment], list[pb.DataFragment]]:
        """Split fragments into those the bulk path can read and those needing row offsets."""
        plain, exact = [], []
        for frag in self.fragments:
            needs_offsets = self._needs_offsets(frag)
            if len(frag.files) != 1:
                raise SchemaError(
                    f"fragment {frag.id} of {self.store.uri} has {len(frag.files)} data files; "
                    "reading multi-file fragments is not supported by this version of mvcc"
                )
            (exact if needs_offsets else plain).append(frag)
        return plain, exact

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Stream the result; memory is bounded by a few batches, not by the table."""
        out_schema = self.output_schema
        self._plain_fragments()  # validates the fragments before the first batch
        # Keep fragment order: walk the fragments in manifest order, reading runs of plain ones in bulk.
        run: list[pb.DataFragment] = []
        for frag in self.fragments:
            if not self._needs_offsets(frag):
                run.append(frag)
                continue
            if run:
                yield from self._bulk(run, out_schema)
                run = []
            yield from self._exact(frag, out_schema)
        if run:
            yield from self._bulk(run, out_schema)

    def _bulk(self, fragments: list[pb.DataFragment], out_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        scanner = self._dataset(fragments).scanner(
            columns=self.columns, filter=self.filter, batch_size=self.batch_size, use_threads=True
        )
        for batch in scanner.to_batches():
            if batch.num_rows:
                yield pa.RecordBatch.from_arrays(batch.columns, schema=out_schema)

    def _exact(self, frag: pb.DataFragment, out_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        (path,) = list(fragment_paths(frag))
        deleted = read_deletion_vector(self.store, frag)
        deleted_offsets = np.array(deleted.to_array(), dtype=np.uint64) if deleted else None
        file_frag = _PARQUET.make_fragment(self.store.arrow_path(path), filesystem=self._fs)
        file_frag.ensure_complete_metadata()
        starts = np.cumsum([0] + [rg.num_rows for rg in file_frag.row_groups])
        wanted = set(self.columns)
        if self.filter is not None:
            wanted |= set(_filter_columns(self.filter, self.table_schema))
        read_cols = [n for n in self.table_schema.names if n in wanted]
        if self.filter is not None:
            pieces = file_frag.split_by_row_group(self.filter, schema=self.file_schema)
        else:
            pieces = file_frag.split_by_row_group(schema=self.file_schema)
        for piece in pieces:
            rg = piece.row_groups[0].id
            start = int(starts[rg])
            table = piece.to_table(schema=self.file_schema, columns=read_cols)
            offsets = np.arange(start, start + table.num_rows, dtype=np.uint64)
            if self.with_row_address:
                table = table.append_column(ROW_ADDRESS, row_address(frag.id, offsets))
            mask = None
            if deleted_offsets is not None:
                mask = pa.array(~np.isin(offsets, deleted_offsets, assume_unique=True))
            if self.filter is not None:
                keep = table.filter(self.filter) if mask is None else table.filter(mask).filter(self.filter)
            else:
                keep = table if mask is None else table.filter(mask)
            keep = keep.select(self.columns + ([ROW_ADDRESS] if self.with_row_address else []))
            for batch in keep.to_batches(max_chunksize=self.batch_size):
                if batch.num_rows:
                    yield pa.RecordBatch.from_arrays(batch.columns, schema=out_schema)

    def to_reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.output_schema, self.to_batches())

    def to_table(self) -> pa.Table:
        plain, exact = self._plain_fragments()
        if not exact:
            if not plain:
                return self.output_schema.empty_table()
            table = self._dataset(plain).to_table(columns=self.columns, filter=self.filter, use_threads=True)
            return pa.Table.from_arrays(table.columns, schema=self.output_schema)
        return pa.Table.from_batches(list(self.to_batches()), schema=self.output_schema)

    def count_rows(self) -> int:
        if self.filter is None:
            return sum(live_rows(f) for f in self.fragments)
        plain, exact = self._plain_fragments()
        total = self._dataset(plain).count_rows(filter=self.filter) if plain else 0
        if exact:
            cols = self.columns
            self.columns = _filter_columns(self.filter, self.table_schema) or self.table_schema.names[:1]
            try:
                total += sum(b.num_rows for f in exact for b in self._exact(f, self.output_schema))
            finally:
                self.columns = cols
        return total


def _filter_columns(expr: pc.Expression, schema: pa.Schema) -> list[str]:
    """Top-level columns an expression reads (pyarrow prints field refs as plain names)."""
    text = str(expr)
    return [name for name in schema.names if name in text]
