"""Reading many small Parquet files ahead of their consumer, on thread pools shared by the process.

Compaction, unfiltered scans and row-address scans all read runs of small whole files (what appends leave)
and decode each on one thread (`parquet_io.read_file`: Arrow's own thread pool costs more per file than a
small file's decoding). Decoding releases the GIL, so a few threads overlap each other and the consumer (the
compaction's writer, the scan's caller). One pool per size serves them all (scans one thread per core,
compaction two): starting threads per call costs more than a small scan's reads when the machine is busy, and
concurrent callers then share the cores instead of each starting its own threads. Their tasks never submit to
a pool, so sharing one cannot deadlock.
"""

from __future__ import annotations

import operator
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, NamedTuple, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import ObjectNotFoundError
from mvcc_core.io.parquet import FileKey, is_remote, known_metadata, read_errors, read_file, remember_metadata

if TYPE_CHECKING:
    from mvcc_core.io.store import ObjectStore

T = TypeVar("T")

# Decoding is CPU bound: one thread per core, at least two (one decodes while the other waits on the disk).
READ_THREADS = max(2, os.cpu_count() or 2)
# On an object store each file is a round trip of tens of milliseconds, and a thread waiting on one holds no
# core: files are read this many at a time (pylance overlaps its reads the same way).
OBJECT_STORE_READS = 16
# An object store's data file up to this size is read in one GET, footer and column chunks together (through
# Arrow, a footer read and then a read of the column chunks: two round trips per file).
WHOLE_OBJECT_BYTES = 8 << 20

_POOLS: dict[int, tuple[int, ThreadPoolExecutor]] = {}  # threads -> (the pid that made it, the pool)
_LOCK = threading.Lock()


def pool(threads: int = READ_THREADS) -> ThreadPoolExecutor:
    """The process's reader pool of `threads` threads, made at first use; a fresh one in a forked child (which
    has none of the parent's threads).

    Args:
        threads: the pool's size (scans use `READ_THREADS`; compaction, whose writer waits on its reads, more)

    Returns:
        The pool, shared by every caller asking for that size.
    """
    current = _POOLS.get(threads)
    if current is not None and current[0] == os.getpid():
        return current[1]
    with _LOCK:
        current = _POOLS.get(threads)
        if current is None or current[0] != os.getpid():
            current = _POOLS[threads] = (os.getpid(), ThreadPoolExecutor(threads, thread_name_prefix="mvcc-read"))
        return current[1]


def _after_fork_in_child() -> None:
    global _LOCK
    _POOLS.clear()
    _LOCK = threading.Lock()  # the parent's lock may have been held at the fork


os.register_at_fork(after_in_child=_after_fork_in_child)


# The row count `runs` cuts data fragments by.
PHYSICAL_ROWS: Callable[[pb.DataFragment], int] = operator.attrgetter("physical_rows")


def runs(items: Sequence[T], rows: Callable[[T], int], part_rows: int) -> Iterator[tuple[int, list[T]]]:
    """`items` (files) cut into consecutive runs of at least one item and up to `part_rows` rows, with their
    rows: the parts of `read_ahead`, one hand-off to a pool thread each.

    Args:
        items: the files to read, in order
        rows: the rows a file holds
        part_rows: the rows a run may reach before the next item starts a new run
    """
    start = 0
    while start < len(items):
        end, total = start, 0
        while end < len(items) and (end == start or total < part_rows):
            total += rows(items[end])
            end += 1
        yield total, list(items[start:end])
        start = end


# Parts one consumer keeps in flight at least (its rows bound the rest): more would only hold memory on a big
# machine, the consumer takes one part at a time.
AHEAD_PARTS = min(4, READ_THREADS)


def read_ahead(
    parts: Iterable[tuple[int, Callable[[], T]]],
    ahead_rows: int,
    ahead_parts: int = AHEAD_PARTS,
    threads: int = READ_THREADS,
    first_on_caller: bool = False,
) -> Iterator[T]:
    """The results of `read()` for each `(rows, read)` of `parts`, in order, computed on the pool.

    At least `ahead_parts` parts and up to `ahead_rows` rows are in flight ahead of the consumer (a part is a
    run of files: a hand-off per small file costs more than it saves). Parts already submitted when the
    consumer stops still run to their end; their results are dropped.

    Args:
        parts: (rows, read) pairs in the order their results are wanted; `read` computes one part
        ahead_rows: rows at most in flight ahead of the consumer (beyond `ahead_parts` parts)
        ahead_parts: parts always allowed in flight, whatever their rows
        threads: the size of the reader pool the parts run on (`pool`)
        first_on_caller: read the first part on the calling thread, after handing the next ones to the pool (a
            consumer that would only wait for it saves a hand-off, ~0.15 ms CPU when the caches are cold)

    Returns:
        An iterator of the parts' results, in order.
    """
    executor = pool(threads)
    pending: deque[tuple[int, Future[T]]] = deque()
    ahead = 0
    remaining = iter(parts)
    first = next(remaining, None) if first_on_caller else None
    if first is not None:
        for rows, read in remaining:
            pending.append((rows, executor.submit(read)))
            ahead += rows
            if len(pending) >= ahead_parts and ahead >= ahead_rows:
                break
        yield first[1]()
    for rows, read in remaining:
        while len(pending) >= ahead_parts and ahead >= ahead_rows:
            done, future = pending.popleft()
            ahead -= done
            yield future.result()
        pending.append((rows, executor.submit(read)))
        ahead += rows
    while pending:
        yield pending.popleft()[1].result()


def read_whole_file(fs: pafs.FileSystem, key: FileKey, schema: pa.Schema) -> pa.Table | None:
    """Every column of the file at `key`, decoded on the calling thread, as `schema` (physical names); None
    when the file does not hold those columns with those types (the caller reads it through a dataset, which
    fills and casts). A column the file holds beyond `schema` (a dropped one) is read and left out.

    `parquet_io.read_file` reads a projection through `ParquetFile`, whose Python bookkeeping per file (the
    nested column paths, the column indices) is ~8% of reading a 1,000-row file (measured: 1,000 files, ~165
    ms CPU this way, ~180 ms that way); a whole file needs none of it. A footer already parsed is reused.

    Args:
        fs: the Arrow filesystem the file is read through (the store's `arrow_filesystem()`)
        key: the file's (scheme, path, size) cache key; a size of 0 means unknown
        schema: the columns expected, with physical names and types
    """
    if is_remote(key[0]):
        return read_file(fs, key, schema)
    metadata = known_metadata(key)
    try:
        with fs.open_input_file(key[1]) as source:
            reader = pq.ParquetReader()
            reader.open(source, metadata=metadata, pre_buffer=False)
            table = reader.read_all(use_threads=False)
    except Exception:  # `read_errors` as a context manager costs a few microseconds per file, on every file
        with read_errors(key[1]):
            raise
    if metadata is None:
        remember_metadata(key, reader.metadata)
    return _as_schema(table, schema)


def _as_schema(table: pa.Table, schema: pa.Schema) -> pa.Table | None:
    """`table` (a whole file) as `schema`: its columns in that order, a column beyond them (a dropped one) left out;
    None when it lacks one of them or holds one with another type or nullability."""
    if table.schema.equals(schema):  # the common case, decided in one call
        return table
    if not set(schema.names) <= set(table.schema.names):
        return None
    table = table.select(schema.names)
    return table if table.schema.equals(schema) else None  # names, types and nullability


def small_object(data_file: pb.DataFile) -> bool:
    """Whether a data file of an object store is read in one GET (`read_whole_object`): its size is known and
    at most `WHOLE_OBJECT_BYTES`.

    Args:
        data_file: the file's manifest entry
    """
    return 0 < data_file.file_size_bytes <= WHOLE_OBJECT_BYTES


def read_whole_object(store: ObjectStore, rel: str, path: str, schema: pa.Schema) -> pa.Table | None:
    """Columns `schema.names` (physical) of the data file at `rel` of an object store, read in one GET and
    decoded on the calling thread; None when the file does not hold those columns with those types (the caller
    reads it through a dataset, which fills and casts). For files up to `WHOLE_OBJECT_BYTES`.

    Args:
        store: the store holding the file (the table's, or a base path's)
        rel: the file's path relative to that store's root
        path: the file's path as the manifest names it, for errors
        schema: the columns expected, with physical names and types
    """
    with read_errors(path):
        try:
            data = store.get(rel)
        except ObjectNotFoundError as exc:
            raise ObjectNotFoundError(f"cannot read {path}: it is missing ({exc})") from exc
        parquet = pq.ParquetFile(pa.BufferReader(data), pre_buffer=False)
        if not set(schema.names) <= set(parquet.schema_arrow.names):
            return None
        table = parquet.read(columns=schema.names, use_threads=False)
    return table if table.schema.equals(schema) else None


class FileReads(NamedTuple):
    """How a run of small files is read ahead on a store (`file_reads`): the `runs` cut and `read_ahead`'s sizes."""

    part_rows: int  # rows a hand-off to a pool thread reads (`runs`)
    ahead_parts: int  # parts always in flight (`read_ahead`)
    threads: int  # the reader pool's size (`pool`)


def file_reads(scheme: str, part_rows: int, threads: int) -> FileReads:
    """The read-ahead of a run of small files on a store of `scheme`: on local disk and memory as the caller
    asks (runs of files per hand-off: decoding is the cost); on an object store one file per hand-off and
    `OBJECT_STORE_READS` in flight (each file is a round trip).

    Args:
        scheme: the store's uri scheme
        part_rows: the rows of a part on local disk and memory
        threads: the reader threads on local disk and memory (also the parts kept in flight there)
    """
    if is_remote(scheme):
        return FileReads(1, OBJECT_STORE_READS, OBJECT_STORE_READS)
    return FileReads(part_rows, threads, threads)


def read_data_file(store: ObjectStore, rel: str, data_file: pb.DataFile, schema: pa.Schema) -> pa.Table | None:
    """Every column of a data file as `schema` (physical names), decoded on the calling thread: a small file of an
    object store in one GET (`read_whole_object`), any other through the store's Arrow filesystem
    (`read_whole_file`); None when the file does not hold those columns with those types.

    Args:
        store: the store holding the file (the table's, or a base path's: `data_file_location`)
        rel: the file's path relative to that store's root
        data_file: the file's manifest entry (its size and path)
        schema: the columns expected, with physical names and types
    """
    if is_remote(store.scheme) and small_object(data_file):
        return read_whole_object(store, rel, data_file.path, schema)
    key = (store.scheme, store.arrow_path(rel), data_file.file_size_bytes)
    return read_whole_file(store.arrow_filesystem(), key, schema)


def read_data_files(
    store: ObjectStore, rels: Sequence[str], data_files: Sequence[pb.DataFile], schema: pa.Schema
) -> list[pa.Table | None]:
    """`read_data_file` of each of `data_files` (at `rels` in `store`), in order, on the calling thread, the store's
    filesystem looked up once for the run: decoding a 1,000-row file takes ~0.1 ms CPU, so the Python bookkeeping
    around each file is worth keeping to a few microseconds (measured: 1,000 such files, ~160 ms CPU file by file
    through `read_data_file` before, ~125 ms now, ~105 ms for pyarrow's reader alone).

    Args:
        store: the store holding every one of the files
        rels: each file's path relative to that store's root
        data_files: the files' manifest entries (their sizes and paths), in the order of `rels`
        schema: the columns expected, with physical names and types
    """
    if is_remote(store.scheme):
        return [read_data_file(store, rel, data_file, schema) for rel, data_file in zip(rels, data_files, strict=True)]
    fs, scheme = store.arrow_filesystem(), store.scheme
    return [
        read_whole_file(fs, (scheme, store.arrow_path(rel), data_file.file_size_bytes), schema)
        for rel, data_file in zip(rels, data_files, strict=True)
    ]
