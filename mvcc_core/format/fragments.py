"""Fragments and their data files: turning user data into Parquet files with field ids.

A fragment is one Parquet file of at most `max_rows_per_file` rows (more files per fragment appear
once columns are added or replaced). Fragment ids are not assigned here: the manifest builder
assigns them at commit, as the specification requires for Append and Overwrite.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import SchemaError
from mvcc_core.format import schema as schema_mod
from mvcc_core.format.bases import base_store
from mvcc_core.format.naming import data_file_path, new_data_file_name
from mvcc_core.format.nan_counts import count_nans, float_columns, footer_entry, with_nan_counts
from mvcc_core.io import ObjectStore

DEFAULT_MAX_ROWS_PER_FILE = 1_048_576
ROW_GROUP_ROWS = 64 * 1024  # an indexed lookup reads one: 64Ki reads in half the time of 128Ki; full scans ~5% more CPU
PARQUET_COMPRESSION = "zstd"
# Files of fewer rows than this (small appends, upserts, rewrites of a few rows) are written with LZ4: zstd's set-up
# per page is half of such a file's read (docs/reference/format.md, "Data files"); compaction then rewrites them with
# zstd.
SMALL_FILE_ROWS = 8_192
SMALL_FILE_COMPRESSION = "lz4"
# Dictionary encoding is chosen per column from a sample: on a column of mostly distinct values the
# Parquet writer fills a dictionary page, gives up and falls back, which costs ~3x the write time
# and gives a larger file than plain encoding + zstd (measured: docs/reference/format.md, "Data files").
DICTIONARY_SAMPLE_ROWS = 8_192
DICTIONARY_MAX_DISTINCT_FRACTION = 0.5


def dictionary_columns(sample: pa.Table | pa.RecordBatch) -> list[str]:
    """Parquet column paths worth dictionary-encoding, judged on `sample` (physical names).

    Low-cardinality primitive columns (and columns already dictionary-typed) are; nested columns
    keep the writer's default (all their leaves); columns of mostly distinct values are not.

    Args:
        sample: the data about to be written, with physical column names (only its first rows are looked at)
    """
    sample = sample.slice(0, DICTIONARY_SAMPLE_ROWS)
    chosen = []
    for name, column in zip(sample.schema.names, sample.columns, strict=True):
        kind = column.type
        if pa.types.is_nested(kind):
            chosen.append(name)  # a prefix: the writer matches leaf paths by column path
            continue
        if pa.types.is_dictionary(kind) or pa.types.is_boolean(kind) or pa.types.is_null(kind):
            chosen.append(name)
            continue
        if isinstance(kind, pa.BaseExtensionType):  # `pa.uuid()` and others: their storage's values
            chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
            column = pa.chunked_array([c.storage for c in chunks], kind.storage_type)
        values = len(column) - column.null_count
        if values == 0 or pc.count_distinct(column).as_py() <= DICTIONARY_MAX_DISTINCT_FRACTION * values:
            chosen.append(name)
    return chosen


def _leaf_paths(schema: pa.Schema, columns: list[str]) -> list[str]:
    """Expand nested top-level names in `columns` to their Parquet leaf paths."""
    nested = {n for n in columns if pa.types.is_nested(schema.field(n).type)}
    if not nested:
        return columns
    leaves = _parquet_leaves(schema)
    return [n for n in columns if n not in nested] + [p for p in leaves if p.split(".", 1)[0] in nested]


@functools.lru_cache(maxsize=256)
def _parquet_leaves(schema: pa.Schema) -> tuple[str, ...]:
    """The Parquet leaf column paths of `schema`, learnt by writing an empty file in memory. Cached: a table
    writes many files of one schema, and the catalog's `__manifest` (nested) is rewritten on every publish."""
    sink = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), sink)
    parquet_schema = pq.read_metadata(pa.BufferReader(sink.getvalue())).schema
    return tuple(parquet_schema.column(i).path for i in range(len(parquet_schema)))


def plain_column_encodings(schema: pa.Schema, dictionaries: list[str]) -> dict[str, str]:
    """Encodings of the top-level numeric columns not dictionary-encoded: integers DELTA_BINARY_PACKED,
    floats BYTE_STREAM_SPLIT (standard Parquet encodings every reader decodes; measured on the row-level
    benchmark's files: smaller, and cheaper to decode than PLAIN + zstd; docs/reference/format.md, "Data files").

    Args:
        schema: the data file's schema (physical names).
        dictionaries: the columns written with dictionary encoding (left to it).

    Returns:
        Column name -> Parquet encoding, for `pyarrow.parquet.ParquetWriter(column_encoding=...)`.
    """
    chosen = set(dictionaries)
    out = {}
    for field in schema:
        if field.name in chosen:
            continue
        if pa.types.is_integer(field.type):
            out[field.name] = "DELTA_BINARY_PACKED"
        elif pa.types.is_float32(field.type) or pa.types.is_float64(field.type):
            out[field.name] = "BYTE_STREAM_SPLIT"
    return out


def file_compression(rows: int) -> str:
    """The Parquet codec of a data file of `rows` rows: LZ4 below `SMALL_FILE_ROWS`, zstd from there on.

    Args:
        rows: the rows the file holds

    Returns:
        The codec's name for pyarrow's writer.
    """
    return SMALL_FILE_COMPRESSION if rows < SMALL_FILE_ROWS else PARQUET_COMPRESSION


def parquet_options(sample: pa.Table | pa.RecordBatch) -> dict[str, Any]:
    """Writer options for data files: the codec (`file_compression` of the sample's rows: a file written whole
    passes all its rows), statistics, row groups, dictionaries chosen by `sample`, and the encodings of the other
    numeric columns (`plain_column_encodings`).

    Args:
        sample: the data about to be written, with physical column names

    Returns:
        Keyword arguments for `pyarrow.parquet.ParquetWriter` / `write_table`.
    """
    dictionaries = dictionary_columns(sample)
    # no statistics for extension columns (`pa.uuid()`): Arrow's row-group pruning has no kernels for their type
    plain = [f.name for f in sample.schema if not isinstance(f.type, pa.BaseExtensionType)]
    statistics = True if len(plain) == len(sample.schema) else _leaf_paths(sample.schema, plain)
    return {
        "compression": file_compression(sample.num_rows),
        "write_statistics": statistics,
        "use_dictionary": _leaf_paths(sample.schema, dictionaries),
        "column_encoding": plain_column_encodings(sample.schema, dictionaries) or None,
    }


def to_reader(data: Any, schema: pa.Schema | None = None) -> pa.RecordBatchReader:
    """Accept what pylance accepts: Arrow tables/batches/readers and datasets, pandas and polars DataFrames,
    dicts and lists of rows, iterators of batches (cast to `schema`, as pylance casts them).

    Args:
        data: the rows to write, in any of the accepted forms
        schema: the schema to build the Arrow data with, for dicts, pandas, lists of rows and iterators of
            batches (None: inferred)

    Raises:
        SchemaError: `data` is none of the accepted forms
    """
    if isinstance(data, pa.RecordBatchReader):
        return data
    if isinstance(data, pa.Table):
        return data.to_reader()
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data]).to_reader()
    if isinstance(data, dict):
        return pa.table(data, schema=schema).to_reader()
    pa_dataset = sys.modules.get("pyarrow.dataset")  # a Dataset means the module is imported; else skip it
    if pa_dataset is not None and isinstance(data, pa_dataset.Dataset):
        return data.scanner().to_reader()
    if type(data).__module__.startswith("polars") and hasattr(data, "to_arrow"):
        return data.to_arrow().to_reader()
    if hasattr(data, "to_reader") and hasattr(data, "schema"):  # mvcc tables
        return data.to_reader() if callable(data.to_reader) else data.to_reader
    if type(data).__module__.startswith("pandas"):
        return pa.Table.from_pandas(data, schema=schema, preserve_index=False).to_reader()
    if isinstance(data, list):
        if data and isinstance(data[0], pa.RecordBatch):
            return pa.Table.from_batches(data).to_reader()
        return pa.Table.from_pylist(data, schema=schema).to_reader()
    if isinstance(data, Iterable) and schema is not None:
        return pa.RecordBatchReader.from_batches(schema, _cast_batches(data, schema))
    raise SchemaError(
        f"cannot write data of type {type(data).__name__}: give a pyarrow Table, RecordBatch, RecordBatchReader, "
        "pandas DataFrame, dict of columns or list of rows"
    )


def _cast_batches(batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Each batch with `schema`'s types (int32 into int64, ...); a cast that would change a value raises."""
    for batch in batches:
        if batch.schema.equals(schema) or batch.schema.names != schema.names:
            yield batch  # a different set of columns is named by the schema check of the write
            continue
        try:
            yield batch.cast(schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise SchemaError(f"a batch does not cast to the given schema: {e}") from e


def with_missing_nullable(reader: pa.RecordBatchReader, schema: pa.Schema) -> pa.RecordBatchReader:
    """`reader` with every nullable column of `schema` it lacks added as nulls (pylance's append of a subset of
    the columns); a missing non-nullable column is left for the schema check to name.

    Args:
        reader: the rows being written
        schema: the table's schema
    """
    names = set(reader.schema.names)
    missing = [f for f in schema if f.name not in names and f.nullable]
    if not missing:
        return reader
    out_schema = pa.schema(list(reader.schema) + missing)

    def filled() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            nulls = [pa.nulls(batch.num_rows, f.type) for f in missing]
            yield pa.RecordBatch.from_arrays(batch.columns + nulls, schema=out_schema)

    return pa.RecordBatchReader.from_batches(out_schema, filled())


def _field_ids(fields: list[pb.Field]) -> list[int]:
    return [f.id for f in fields]


def data_file(name: str, field_ids: Sequence[int], size: int, *, base_id: int | None = None) -> pb.DataFile:
    """The manifest's entry for a Parquet data file `name` (under `data/`) of `size` bytes holding the fields
    `field_ids`: one place for what every writer records (the FragmentWriter, small in-memory files, column
    files, Spark's native writer).

    Args:
        name: the file's name under `data/`
        field_ids: the ids of the fields the file holds, in column order
        size: the file's size in bytes
        base_id: the base path the file lives under (None: the table's root)
    """
    return pb.DataFile(path=name, fields=list(field_ids), file_major_version=1, file_size_bytes=size, base_id=base_id)


class FragmentWriter:
    """Writes batches into Parquet files, a new fragment every `max_rows_per_file` rows.

    Args:
        store: the store the data files are written to (the table's, or a base path's)
        fields: the table's fields (the manifest's schema)
        schema: the table's Arrow schema, which every batch must fit
        max_rows_per_file: rows at most in one data file (a fragment); more rows start a new one
        base: the base path the files are written under (None: the table's root)
        file_prefix: data file names start with it (see `naming.new_data_file_name`)
        check: runs on every batch before it is written (a partition-scoped overwrite's predicate); its error aborts
            the write, with every file written so far removed
    """

    def __init__(
        self,
        store: ObjectStore,
        fields: list[pb.Field],
        schema: pa.Schema,
        max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
        base: pb.BasePath | None = None,
        file_prefix: str | None = None,
        check: Callable[[pa.RecordBatch], None] | None = None,
    ) -> None:
        """`file_prefix`: data file names start with it (see `naming.new_data_file_name`). `check(batch)`
        runs on every batch before it is written (a partition-scoped overwrite's predicate); its error
        aborts the write, with every file written so far removed.
        """
        new_data_file_name(file_prefix)  # a bad prefix fails before anything is written
        if max_rows_per_file <= 0:
            raise ValueError(f"max_rows_per_file must be positive, got {max_rows_per_file}")
        # Files go under the table's data/ directory, or under a base path (`{base}/data/` for a
        # dataset root, `{base}/` otherwise) with the base's id recorded in each DataFile.
        self.base = base
        self._prefix = "data/" if base is None or base.is_dataset_root else ""
        if base is not None:
            store = base_store(store, base)
        self.store = store
        self.fields = fields
        self.table_schema = schema
        self.write_schema = schema_mod.schema_from_fields(fields, schema.metadata, physical=True)
        self.max_rows_per_file = max_rows_per_file
        self.file_prefix = file_prefix
        self.check = check
        self.fragments: list[pb.DataFragment] = []
        self.written_paths: list[str] = []
        self._writer: pq.ParquetWriter | None = None
        self._sink: Any = None
        self._path = ""
        self._rows = 0
        self._pending: list[pa.RecordBatch] = []  # rows of the current file not yet in a row group
        self._pending_rows = 0
        self._fs = store.arrow_filesystem()
        self._options: dict[str, Any] | None = None  # chosen from the first rows written
        self._floats = float_columns(self.write_schema)
        self._nans: dict[str, int] = {}  # NaN rows per float column of the current file (its footer records them)

    def _open(self) -> None:
        """Start a new file; its sink and Parquet writer come at the first flush."""
        self._path = self._prefix + new_data_file_name(self.file_prefix)
        self._rows = 0
        self._nans = {name: 0 for name in self._floats}

    def _flush(self, whole_groups_only: bool) -> None:
        """Write buffered rows as row groups of ROW_GROUP_ROWS: a ParquetWriter call per small batch
        would make a row group per batch (tiny groups compress and scan badly)."""
        table = pa.Table.from_batches(self._pending, schema=self.write_schema)
        ready = (self._pending_rows // ROW_GROUP_ROWS) * ROW_GROUP_ROWS if whole_groups_only else self._pending_rows
        if not ready:
            return
        if self._writer is None:
            if self._options is None:
                self._options = parquet_options(table)
            self.written_paths.append(self._path)
            with self.store.translate_errors("write", self._path):
                self._sink = self._fs.open_output_stream(self.store.arrow_path(self._path))
            # the file's codec by its rows: at its first flush they are all pending (a whole-groups flush: >= 64 Ki)
            compression = file_compression(self._pending_rows)
            self._writer = pq.ParquetWriter(
                self._sink, self.write_schema, **{**self._options, "compression": compression}
            )
        # one chunk per column: the encoder handles many small chunks (one per written batch) slowly
        rows = table.slice(0, ready).combine_chunks()
        count_nans(rows, self._floats, self._nans)
        with self.store.translate_errors("write", self._path):  # a multipart upload sends parts as it goes
            self._writer.write_table(rows, row_group_size=ROW_GROUP_ROWS)
        rest = table.slice(ready)
        self._pending = rest.combine_chunks().to_batches() if rest.num_rows else []
        self._pending_rows = rest.num_rows

    def _close(self) -> None:
        if not self._path:
            return
        self._flush(whole_groups_only=False)
        writer = self._writer
        if writer is None:  # an open file holds a row at least (`write`), which the flush has written
            raise RuntimeError(f"data file {self._path} closed before any row was written to it")
        if self._floats:
            writer.add_key_value_metadata(footer_entry(self._nans))
        with self.store.translate_errors("write", self._path):  # the upload happens here (or its last part)
            writer.close()
            size = self._sink.tell()
            self._sink.close()
        self.store.sync(self._path)
        self.fragments.append(
            pb.DataFragment(
                files=[
                    data_file(
                        self._path[len(self._prefix) :],
                        _field_ids(self.fields),
                        size,
                        base_id=self.base.id if self.base is not None else None,
                    )
                ],
                physical_rows=self._rows,
            )
        )
        self._writer, self._sink, self._path = None, None, ""

    def write(self, batch: pa.RecordBatch) -> None:
        """Add a batch to the current data file, starting new files as they fill.

        Args:
            batch: rows fitting the table's schema (conformed first; a SchemaError otherwise)
        """
        batch = schema_mod.conform(batch, self.table_schema)
        if self.check is not None:
            self.check(batch)
        batch = schema_mod.relabel(batch, self.write_schema)
        offset = 0
        while offset < batch.num_rows:
            if not self._path:
                self._open()
            take = min(batch.num_rows - offset, self.max_rows_per_file - self._rows)
            self._pending.append(batch.slice(offset, take))
            self._pending_rows += take
            if self._pending_rows >= ROW_GROUP_ROWS:
                self._flush(whole_groups_only=True)
            self._rows += take
            offset += take
            if self._rows >= self.max_rows_per_file:
                self._close()

    def finish(self) -> list[pb.DataFragment]:
        self._close()
        return self.fragments

    def abort(self) -> None:
        """Remove every file written so far: a failed write leaves nothing behind."""
        if self._writer is not None:
            try:
                self._writer.close()
                self._sink.close()
            except Exception:  # noqa: BLE001 - best effort; the file is removed below anyway
                pass
        self._writer, self._sink, self._path = None, None, ""
        self._pending, self._pending_rows = [], 0
        self.store.delete_many(self.written_paths)


def write_fragments_from_reader(
    store: ObjectStore,
    reader: pa.RecordBatchReader,
    fields: list[pb.Field],
    schema: pa.Schema,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    base: pb.BasePath | None = None,
    *,
    file_prefix: str | None = None,
    check: Callable[[pa.RecordBatch], None] | None = None,
) -> list[pb.DataFragment]:
    """Write all of `reader` as new fragments (ids unassigned); on any error nothing is left behind.

    Args:
        reader: the rows to write
        store: the store the data files are written to (the table's, or a base path's)
        fields: the table's fields (the manifest's schema)
        schema: the table's Arrow schema, which every batch must fit
        max_rows_per_file: rows at most in one data file (a fragment); more rows start a new one
        base: the base path the files are written under (None: the table's root)
        file_prefix: data file names start with it (see `naming.new_data_file_name`)
        check: runs on every batch before it is written (a partition-scoped overwrite's predicate); its error aborts
            the write, with every file written so far removed
    """
    schema_mod.conform(reader.schema.empty_table(), schema)  # fail before writing a byte
    writer = FragmentWriter(store, fields, schema, max_rows_per_file, base, file_prefix=file_prefix, check=check)
    try:
        for batch in reader:
            if batch.num_rows:
                writer.write(batch)
        return writer.finish()
    except BaseException:
        writer.abort()
        raise


def write_small_fragment(
    store: ObjectStore, data: pa.Table, fields: list[pb.Field], schema: pa.Schema
) -> list[pb.DataFragment]:
    """`data`, a small table already whole in memory, as one fragment ([] when it has no rows): the same
    Parquet file `write_fragments_from_reader` writes, but encoded in memory and written with one `put_new`.

    Why: a streaming write opens the file first and writes it piecemeal through pyarrow's filesystem; for a
    file of a few kilobytes rewritten on every commit (the catalog's `__manifest` state) that setup cost more
    than the encoding, and on an object store it is one PutObject either way.

    Args:
        store: the table's store
        data: the rows to write, all in memory
        fields: the table's fields
        schema: the table's Arrow schema, which `data` must fit
    """
    if not data.num_rows:
        return []
    physical = schema_mod.schema_from_fields(fields, schema.metadata, physical=True)
    table = with_nan_counts(schema_mod.relabel(schema_mod.conform(data, schema), physical).combine_chunks())
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=ROW_GROUP_ROWS, **parquet_options(table))
    encoded = sink.getvalue()
    name = new_data_file_name()
    store.put_new(data_file_path(name), encoded.to_pybytes())
    entry = data_file(name, _field_ids(fields), encoded.size)
    return [pb.DataFragment(files=[entry], physical_rows=table.num_rows)]


def fragment_paths(fragment: pb.DataFragment) -> Iterator[str]:
    """The paths (relative to the table root) of a fragment's data files.

    Args:
        fragment: the fragment's manifest entry
    """
    for data_file in fragment.files:
        yield data_file_path(data_file.path)


def field_subtree(fields: list[pb.Field], top_ids: set[int]) -> list[pb.Field]:
    """The fields with ids `top_ids` and all their descendants, in manifest order.

    Args:
        fields: the table's fields, in manifest order
        top_ids: the ids of the fields wanted
    """
    keep = set(top_ids)
    out = []
    for f in fields:  # parents come before their children
        if f.id in keep or f.parent_id in keep:
            keep.add(f.id)
            out.append(f)
    return out


def write_column_file(store: ObjectStore, fields: list[pb.Field], data: pa.Table) -> pb.DataFile:
    """One data file holding only some columns of a fragment (`fields`: their subtree), all its rows.

    Used by add_columns, replace_column and REWRITE_COLUMNS updates: the fragment gets the file as an
    extra entry in `files`.

    Args:
        store: the table's store
        fields: the fields of the columns written, with their children
        data: the columns' values for every physical row of the fragment, in offset order
    """
    logical = schema_mod.schema_from_fields(fields)
    physical = schema_mod.schema_from_fields(fields, physical=True)
    table = with_nan_counts(schema_mod.relabel(schema_mod.conform(data, logical), physical))
    path = data_file_path(new_data_file_name())
    fs = store.arrow_filesystem()
    try:
        with store.translate_errors("write", path), fs.open_output_stream(store.arrow_path(path)) as sink:
            pq.write_table(table, sink, row_group_size=ROW_GROUP_ROWS, **parquet_options(table))
            size = sink.tell()
        store.sync(path)
    except BaseException:
        store.delete_many([path])
        raise
    return data_file(path.split("/", 1)[1], _field_ids(fields), size)


def tombstone(fragment: pb.DataFragment, field_ids: set[int]) -> None:
    """Mark `field_ids` dead (-2) in the fragment's files, before a newer file with them is added.

    A file left with no live field is dropped from the fragment: nothing would read it, and once no
    version references it retention removes it.

    Args:
        fragment: the fragment to change (in place)
        field_ids: the ids of the fields a newer file will hold
    """
    kept = []
    for data_file in fragment.files:
        fields = [i if i not in field_ids else -2 for i in data_file.fields]
        if any(i >= 0 for i in fields):
            del data_file.fields[:]
            data_file.fields.extend(fields)
            kept.append(data_file)
    del fragment.files[:]
    fragment.files.extend(kept)
