"""Reading Parquet data and index files through a store, with per-process caches.

Design notes: docs/reference/format.md, "Reading Parquet files through a store".
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import DataFileMismatchError, MvccError, ObjectNotFoundError, StorageError

if TYPE_CHECKING:
    import pyarrow.dataset as ds

ROW_ADDRESS = "_rowaddr"


@cache
def parquet_format(local: bool = False) -> ds.ParquetFileFormat:
    """The Parquet format scans read through, made on first use (`pyarrow.dataset` imports pandas: a quarter of
    a second that opening a table or `mvcc --version` need not pay).

    Args:
        local: for a local disk or memory, without pre-buffering (it coalesces reads into few large requests: a
            win on S3, a small loss on a local disk)
    """
    import pyarrow.dataset as ds

    if local:
        return ds.ParquetFileFormat(default_fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=False))
    return ds.ParquetFileFormat()


# A file key: (store scheme, path for the store's Arrow filesystem, size in bytes or 0 when unknown).
FileKey = tuple[str, str, int]


def row_address(fragment_id: int, offsets: np.ndarray) -> pa.Array:
    """Row addresses (fragment id in the high 32 bits, offset in the low 32) of `offsets` in a fragment.

    Args:
        fragment_id: the fragment the rows belong to
        offsets: the rows' offsets within it
    """
    return pa.array((np.uint64(fragment_id) << np.uint64(32)) | offsets.astype(np.uint64), type=pa.uint64())


def field_owners(fragment: pb.DataFragment) -> dict[int, int]:
    """Field id -> index of the data file that holds its current data (the last one listing it).

    Args:
        fragment: the fragment's manifest entry
    """
    owners: dict[int, int] = {}
    for index, data_file in enumerate(fragment.files):
        for field_id in data_file.fields:
            if field_id >= 0:
                owners[field_id] = index
    return owners


class LruCache:
    """A small thread-safe LRU map; `get` returns `MISSING` for an absent key (None is a valid value).

    Args:
        entries: how many values it keeps before dropping the least recently used
    """

    def __init__(self, entries: int) -> None:
        """An empty cache."""
        self._entries = entries
        self._data: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        """The cached value of `key` (now the most recently used), or MISSING.

        Args:
            key: the cache key
        """
        with self._lock:
            value = self._data.get(key, MISSING)
            if value is not MISSING:
                self._data.move_to_end(key)
            return value

    def put(self, key: Any, value: Any) -> None:
        """Cache `value` under `key`, dropping the least recently used values beyond the limit.

        Args:
            key: the cache key
            value: the value to keep
        """
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self._entries:
                self._data.popitem(last=False)

    def get_or_build(self, key: Any, build: Callable[[], Any]) -> Any:
        """The cached value, or `build()` cached (two threads may both build; either result is right).

        Args:
            key: the cache key
            build: computes the value when it is not cached
        """
        value = self.get(key)
        if value is MISSING:
            value = build()
            self.put(key, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


MISSING = object()
_FOOTERS = LruCache(512)
_FRAGMENTS = LruCache(512)
# Footer metadata of files read whole on a local disk, kept so that the next scan skips parsing it (a file's
# path is unique and it is never rewritten; the key holds its size too).
_METADATA = LruCache(4096)


@dataclass(frozen=True)
class Footer:
    """A Parquet file's footer, its Arrow schema, each row group's first row and each leaf column's index."""

    metadata: pq.FileMetaData
    schema: pa.Schema
    starts: np.ndarray  # row group i holds rows starts[i] .. starts[i + 1] - 1
    leaves: dict[str, int]


#: What an object store's error says of a key that is not there (S3 through Arrow, s3fs, fsspec).
_NOT_FOUND_WORDS = ("does not exist", "NoSuchKey", "Not Found", "No such file", "RESOURCE_NOT_FOUND")


def is_not_found(exc: OSError) -> bool:
    """True when `exc`, an OSError of a read, says the file is not there (local or on an object store).

    Args:
        exc: the error of the read
    """
    return isinstance(exc, FileNotFoundError) or any(word in str(exc) for word in _NOT_FOUND_WORDS)


@contextlib.contextmanager
def read_errors(path: str) -> Iterator[None]:
    """The read of the file at `path` raises `ObjectNotFoundError` when the file is not there and
    `StorageError` for any other failure of the store (a directory in its place, a refused or failed request),
    and `DataFileMismatchError` when the bytes are no Parquet file Arrow can read, all naming the file; errors of
    mvcc pass through.

    Args:
        path: the file's path, for the error
    """
    try:
        yield
    except MvccError:
        raise
    except OSError as exc:
        if is_not_found(exc):
            raise ObjectNotFoundError(f"cannot read {path}: it is missing ({exc})") from exc
        raise StorageError(f"cannot read {path}: {exc}") from exc
    except pa.ArrowInvalid as exc:  # a zero-byte or truncated file, no Parquet magic, a corrupt footer
        raise DataFileMismatchError(
            f"cannot read {path}: it is not a readable Parquet file ({exc})", path=path
        ) from exc


def is_remote(scheme: str) -> bool:
    """Object stores, where opening a file by path costs a HEAD request (local disk and memory: nothing).

    Args:
        scheme: the store's uri scheme (`s3`, `file`, `memory`, ...)
    """
    return scheme not in ("file", "memory")


def parquet_fragment(fs: pafs.FileSystem, key: FileKey) -> ds.ParquetFileFragment:
    """A dataset fragment of the file at `key` with its footer loaded, once per process and filesystem.

    Reads through it need no HEAD request (the size is known) and no footer read; the cache key holds the
    filesystem's id since the fragment keeps the filesystem alive.

    Args:
        fs: the Arrow filesystem the file is read through (the store's `arrow_filesystem()`)
        key: the file's (scheme, path, size) cache key; a size of 0 means unknown
    """

    def load() -> ds.ParquetFileFragment:
        with read_errors(key[1]):
            fragment = parquet_format().make_fragment(key[1], filesystem=fs, file_size=key[2] or None)
            fragment.ensure_complete_metadata()
        return fragment

    return _FRAGMENTS.get_or_build((*key, id(fs)), load)


def parquet_footer(fs: pafs.FileSystem, key: FileKey) -> Footer:
    """The footer of the file at `key`, read once per process.

    Args:
        fs: the Arrow filesystem the file is read through (the store's `arrow_filesystem()`)
        key: the file's (scheme, path, size) cache key; a size of 0 means unknown
    """
    footer = _FOOTERS.get(key)
    if footer is MISSING:
        if is_remote(key[0]):
            metadata = parquet_fragment(fs, key).metadata
        else:
            with read_errors(key[1]), fs.open_input_file(key[1]) as source:
                metadata = pq.ParquetFile(source).metadata
        sizes = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
        leaves = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
        footer = Footer(metadata, metadata.schema.to_arrow_schema(), np.cumsum([0, *sizes]), leaves)
        _FOOTERS.put(key, footer)
    return footer


def cached_footer(key: FileKey) -> Footer | None:
    """The footer of the file at `key` if this process has read it already (nothing is read).

    Args:
        key: the file's (scheme, path, size) cache key; a size of 0 means unknown
    """
    footer = _FOOTERS.get(key)
    return None if footer is MISSING else footer


def known_metadata(key: FileKey) -> pq.FileMetaData | None:
    """The footer metadata of the file at `key` if this process has read it already (nothing is read).

    Args:
        key: the file's (scheme, path, size) cache key; a size of 0 means unknown

    Returns:
        The metadata of a cached footer or of an earlier whole-file read, else None.
    """
    footer = _FOOTERS.get(key)
    if footer is not MISSING:
        return footer.metadata
    metadata = _METADATA.get(key)
    return None if metadata is MISSING else metadata


def remember_metadata(key: FileKey, metadata: pq.FileMetaData) -> None:
    """Keep the footer metadata a read of the file at `key` parsed, for `known_metadata` (not when the size is
    unknown: the key would not pin the file's contents).

    Args:
        key: the file's (scheme, path, size) cache key
        metadata: the metadata of the file's footer
    """
    if key[2]:
        _METADATA.put(key, metadata)


def parquet_metadata(fs: pafs.FileSystem, key: FileKey) -> pq.FileMetaData:
    """The Parquet footer metadata of the file at `key` (cached, see `parquet_footer`).

    Args:
        fs: the Arrow filesystem the file is read through (the store's `arrow_filesystem()`)
        key: the file's (scheme, path, size) cache key; a size of 0 means unknown
    """
    return parquet_footer(fs, key).metadata


def read_row_groups(
    fs: pafs.FileSystem, key: FileKey, groups: list[int], columns: list[str], dictionaries: list[str]
) -> pa.Table:
    """Row groups `groups` (ascending) of the file at `key`, columns `columns`; `dictionaries`: string columns
    to read as dictionaries (local files only, where decoding dominates; on object stores requests do).

    Args:
        fs: the Arrow filesystem the file is read through (the store's `arrow_filesystem()`)
        key: the file's (scheme, path, size) cache key; a size of 0 means unknown
        groups: the row groups to read, ascending
        columns: the physical column names to read
        dictionaries: string columns to read dictionary-encoded (honoured for local files only)
    """
    if is_remote(key[0]):
        fragment = parquet_fragment(fs, key)
        with read_errors(key[1]):
            return fragment.subset(row_group_ids=groups).to_table(columns=columns)
    footer = parquet_footer(fs, key)
    with read_errors(key[1]), fs.open_input_file(key[1]) as source:
        parquet = pq.ParquetFile(
            source, metadata=footer.metadata, read_dictionary=dictionaries or None, pre_buffer=False
        )
        return parquet.read_row_groups(groups, columns=columns)


def read_file(fs: pafs.FileSystem, key: FileKey, schema: pa.Schema) -> pa.Table | None:
    """Every row of the file at `key`, columns `schema.names` (physical), decoded on the calling thread; None
    when the file does not hold exactly those columns with those types (the caller then reads it through a
    dataset, which fills missing columns with nulls and casts).

    For many small files (compaction): a dataset scan, or `ParquetFile.read` with threads, hands each file's
    columns to Arrow's thread pool, which costs more than decoding a few thousand rows (measured: 1,000 files of
    1,000 rows, ~400 ms CPU through a dataset scanner, ~195 ms this way). Callers overlap files on threads of
    their own (decoding releases the GIL). A footer already cached by a scan is reused.

    Args:
        fs: the Arrow filesystem the file is read through (the store's `arrow_filesystem()`)
        key: the file's (scheme, path, size) cache key; a size of 0 means unknown
        schema: the columns to read, with physical names and the types expected
    """
    if is_remote(key[0]):  # the size is known: no HEAD request; buffered reads coalesce the column chunks
        with read_errors(key[1]):
            fragment = parquet_format().make_fragment(key[1], filesystem=fs, file_size=key[2] or None)
            if not set(schema.names) <= set(fragment.physical_schema.names):
                return None
            table = fragment.to_table(columns=schema.names, use_threads=False)
    else:
        metadata = known_metadata(key)
        with read_errors(key[1]), fs.open_input_file(key[1]) as source:
            parquet = pq.ParquetFile(source, metadata=metadata, pre_buffer=False)
            table = parquet.read(columns=schema.names, use_threads=False)  # a column it lacks is left out
        if metadata is None:
            remember_metadata(key, parquet.metadata)
    # names, types and nullability (field metadata aside)
    return table if table.schema.equals(schema) else None


# Below this many rows an Expression filter runs on the calling thread: `Table.filter` hands even one row
# to Acero's thread pool, a fixed cost of a few hundred microseconds (most of an indexed point lookup's
# filtering).
_SERIAL_FILTER_ROWS = 65_536


def filter_table(table: pa.Table, expr: pc.Expression) -> pa.Table:
    """`table.filter(expr)`, without the thread pool for small tables (same rows, same order).

    Args:
        table: the rows to filter
        expr: the filter, on the table's column names
    """
    if table.num_rows >= _SERIAL_FILTER_ROWS:
        return table.filter(expr)
    import pyarrow.acero as acero

    plan = acero.Declaration.from_sequence(
        [
            acero.Declaration("table_source", acero.TableSourceNodeOptions(table)),
            acero.Declaration("filter", acero.FilterNodeOptions(expr)),
        ]
    )
    return plan.to_table(use_threads=False)


# Reading a dictionary-encoded string column as a dictionary and decoding only the taken rows is several
# times faster than decoding the whole row group; a column chunk that fell back to plain encoding (its
# dictionary page outgrew the writer's 1 MiB limit) is much slower to read that way, so only chunks too
# small to have fallen back are read as dictionaries.
_DICTIONARY_PAGE_LIMIT = 1 << 20


def dictionary_columns(footer: Footer, columns: list[str], groups: list[int]) -> list[str]:
    """String columns of `columns` worth reading as dictionaries from row groups `groups` (see above).

    Args:
        footer: the file's cached footer
        columns: the physical columns about to be read
        groups: the row groups about to be read
    """
    out = []
    for name in columns:
        if name not in footer.schema.names or name not in footer.leaves:
            continue
        kind = footer.schema.field(name).type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind)):
            continue
        chunks = [footer.metadata.row_group(g).column(footer.leaves[name]) for g in groups]
        if all(c.has_dictionary_page and c.total_uncompressed_size < _DICTIONARY_PAGE_LIMIT for c in chunks):
            out.append(name)
    return out
