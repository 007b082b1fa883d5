"""Reading a scalar index for a filter: which row addresses hold values the filter's conjuncts can match.

Design notes: docs/operations/maintenance.md, "Index lookups, as implemented".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyroaring import BitMap, BitMap64

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.format import schema as schema_mod
from mvcc_core.format.referenced_files import index_directory
from mvcc_core.io import ObjectStore
from mvcc_core.io.parquet import (
    ROW_ADDRESS,
    LruCache,
    filter_table,
    parquet_fragment,
    parquet_metadata,
    read_row_groups,
)

BTREE, BITMAP = "BTREE", "BITMAP"
INDEX_TYPES = (BTREE, BITMAP)
INDEX_FILE = "index.parquet"


def index_dir(index: pb.IndexMetadata) -> str:
    """The directory of an index's files, relative to the table root (`index_directory`, the one definition).

    Args:
        index: the index's metadata entry in the manifest
    """
    return index_directory(index)


def index_file(index: pb.IndexMetadata) -> str:
    """The path of an index's file (`index.parquet` in its directory), relative to the table root.

    Args:
        index: the index's metadata entry in the manifest

    Returns:
        The path, as the table's store names it.
    """
    return f"{index_dir(index)}/{INDEX_FILE}"


@dataclass
class _Statistics:
    """The value column's per-row-group min and max. Numbers as numpy arrays (`known` False where a row
    group has no usable min/max), strings as Arrow arrays with nulls there."""

    value_type: pa.DataType
    mins: np.ndarray | pa.Array
    maxs: np.ndarray | pa.Array
    known: np.ndarray
    all_null: np.ndarray  # row groups holding only nulls: no comparison with a literal matches them


# Per index file (keyed by store scheme, path and size; index files are immutable, their names uuids).
_STATISTICS = LruCache(64)


def _numeric(value_type: pa.DataType) -> bool:
    return pa.types.is_integer(value_type) or pa.types.is_float32(value_type) or pa.types.is_float64(value_type)


def _floating(metadata: pq.FileMetaData, column: str) -> bool:
    """Whether the index file's value column holds floats (whose row-group statistics leave NaN out), also inside
    structs."""
    schema = metadata.schema.to_arrow_schema()
    return column in schema.names and _holds_floats(schema.field(column).type)


def _holds_floats(value_type: pa.DataType) -> bool:
    """A float type, or a struct holding one (the value column of an index on a struct field)."""
    if pa.types.is_floating(value_type):
        return True
    return pa.types.is_struct(value_type) and any(_holds_floats(f.type) for f in value_type)


def _statistics(key: tuple[str, str, int], metadata: pq.FileMetaData, column: str) -> _Statistics | None:
    """Per-row-group statistics of the index file's value column, built once per file and process; None
    when the column's type is not one the planner gives bounds for."""
    return _STATISTICS.get_or_build(key, lambda: _read_statistics(metadata, column))


def _read_statistics(metadata: pq.FileMetaData, column: str) -> _Statistics | None:
    schema = metadata.schema.to_arrow_schema()
    value_type = schema.field(column).type if column in schema.names else pa.null()
    if not (_numeric(value_type) or pa.types.is_string(value_type) or pa.types.is_large_string(value_type)):
        return None
    position = metadata.schema.names.index(column)
    count = metadata.num_row_groups
    mins: list[object] = [None] * count
    maxs: list[object] = [None] * count
    all_null = np.zeros(count, dtype=bool)
    for i in range(count):
        chunk = metadata.row_group(i).column(position)
        found = chunk.statistics if chunk.is_stats_set else None
        if found is not None and found.has_min_max:
            mins[i], maxs[i] = found.min, found.max
        elif found is not None and found.has_null_count:
            all_null[i] = found.null_count == chunk.num_values
    try:
        low, high = pa.array(mins, value_type), pa.array(maxs, value_type)
        if pa.types.is_floating(value_type):  # a NaN bound would compare false: treat it as unknown
            low = pc.if_else(pc.is_nan(low), pa.scalar(None, value_type), low)
            high = pc.if_else(pc.is_nan(high), pa.scalar(None, value_type), high)
        known = pc.and_(pc.is_valid(low), pc.is_valid(high)).to_numpy(zero_copy_only=False)
        if _numeric(value_type):
            dtype = value_type.to_pandas_dtype()
            low = pc.fill_null(low, pa.scalar(0, value_type)).to_numpy().astype(dtype)
            high = pc.fill_null(high, pa.scalar(0, value_type)).to_numpy().astype(dtype)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None
    return _Statistics(value_type, low, high, known, all_null)


def _admits(stats: _Statistics, bound: object, inclusive: bool, upper: bool) -> np.ndarray:
    """Row groups whose max (lower bound) or min (upper bound) lets a value pass the bound."""
    values = stats.mins if upper else stats.maxs
    if isinstance(values, np.ndarray):
        # `bound` is exactly representable in the column's type (the planner checks), so comparing it
        # with the native dtype is exact
        bound = np.array(bound, dtype=values.dtype)
        if upper:
            return (values <= bound) if inclusive else (values < bound)
        return (values >= bound) if inclusive else (values > bound)
    scalar = pa.scalar(bound, stats.value_type)
    compare = (pc.less_equal if inclusive else pc.less) if upper else (pc.greater_equal if inclusive else pc.greater)
    return pc.fill_null(compare(values, scalar), True).to_numpy(zero_copy_only=False)


def _points(stats: _Statistics, ranges: list[tuple]) -> np.ndarray | None:
    """The sorted values of `ranges` when they are many single values of a numeric column (an IN list of
    a merge_insert's keys: one pass per value would cost milliseconds per hundred), else None."""
    if len(ranges) < 16 or not isinstance(stats.mins, np.ndarray):
        return None
    if not all(low is not None and low == high and low_in and high_in for low, low_in, high, high_in in ranges):
        return None
    return np.sort(np.array([r[0] for r in ranges], dtype=stats.mins.dtype))


def _row_groups(stats: _Statistics, bounds: list[list[tuple]]) -> list[int]:
    """Row groups whose min/max admit a value inside every conjunct's ranges (unknown statistics admit)."""
    mask = ~stats.all_null
    unknown = ~stats.known
    for ranges in bounds:
        admitted = unknown.copy()
        points = _points(stats, ranges)
        if points is not None:  # an IN list: which row groups' [min, max] hold one of its values, at once
            admitted |= np.searchsorted(points, stats.maxs, side="right") > np.searchsorted(
                points, stats.mins, side="left"
            )
            mask &= admitted
            continue
        for low, low_inclusive, high, high_inclusive in ranges:
            ok = np.ones(len(mask), dtype=bool)
            if low is not None:
                ok &= _admits(stats, low, low_inclusive, upper=False)
            if high is not None:
                ok &= _admits(stats, high, high_inclusive, upper=True)
            admitted |= ok
        mask &= admitted
    return [int(i) for i in np.flatnonzero(mask)]


def lookup(
    store: ObjectStore,
    index: pb.IndexMetadata,
    expr: pc.Expression,
    bounds: list[list[tuple]] | None = None,
    column: str | None = None,
) -> np.ndarray:
    """Row addresses (sorted) whose indexed value satisfies `expr` (over the physical column name).

    With `bounds` (literal ranges implied by `expr`, from the planner) only the index row groups whose
    statistics admit them are read; `expr` is applied to what is read either way.

    Args:
        store: the table's store
        index: the index's metadata entry
        expr: the conjuncts the index answers, over the physical column name
        bounds: literal ranges `expr` implies, from the planner (None: every index row group is read)
        column: the index file's value column, the physical name of the indexed top-level column (None: that of
            the index's field; an index on a struct field keeps its values under the struct's name)
    """
    path = store.arrow_path(index_file(index))
    size = index.files[0].size_bytes if index.files else 0
    fs = store.arrow_filesystem()
    payload = address_column(index)
    column = column or schema_mod.physical_name(index.fields[0])
    found: pa.Table | None = None
    key = (store.scheme, path, size)
    if bounds:
        metadata = parquet_metadata(fs, key)
        stats = _statistics(key, metadata, column)
        if stats is not None:
            groups = _row_groups(stats, bounds)
            if not groups:
                return np.array([], dtype=np.uint64)
            found = filter_table(read_row_groups(fs, key, groups, [column, payload], []), expr)
    if found is None and _floating(parquet_metadata(fs, key), column):
        # Not Arrow's pruning: Parquet's min/max leave NaN out and Arrow takes them as bounds of every value, so
        # it would drop a row group of [1.5, NaN] for `x > 1.5 OR is_nan(x)` (NaN sorts above every number)
        metadata = parquet_metadata(fs, key)
        groups = list(range(metadata.num_row_groups))
        found = filter_table(read_row_groups(fs, key, groups, [column, payload], []), expr)
    if found is None:  # Arrow prunes the row groups (the fragment keeps the footer between lookups)
        found = parquet_fragment(fs, key).to_table(columns=[column, payload], filter=expr)
    return row_addresses(index, found.column(payload))


def lookup_keys(store: ObjectStore, index: pb.IndexMetadata, keys: pa.Array) -> tuple[pa.Array, np.ndarray] | None:
    """Every (value, row address) pair of a BTREE on an integer or string column whose value is one of `keys`.

    One read of the index row groups whose min/max hold a key, then, for integers, a sorted search of the keys
    in the (sorted) value column, for strings one hash lookup per value: no expression is evaluated (a
    merge_insert's 10k keys as an IN list cost ~35 ms in Acero over 1M index rows). Addresses are as the index
    recorded them (no fragment reuse translation).

    Args:
        store: the table's store
        index: a BTREE index's metadata entry
        keys: the keys to look up, unique, without nulls, of the index column's type

    Returns:
        `(values, addresses)`, aligned (a key the table holds twice gives two pairs), or None when the index is
        not a BTREE over an integer or string column of the keys' type (the caller scans instead).
    """
    if index.index_type != BTREE or not index.files:
        return None
    path = store.arrow_path(index_file(index))
    fs = store.arrow_filesystem()
    key = (store.scheme, path, index.files[0].size_bytes)
    column = schema_mod.physical_name(index.fields[0])
    stats = _statistics(key, parquet_metadata(fs, key), column)
    integer = stats is not None and pa.types.is_integer(stats.value_type)
    if stats is None or stats.value_type != keys.type or not (integer or pa.types.is_string(keys.type)):
        return None
    empty = keys.slice(0, 0), np.array([], dtype=np.uint64)
    sorted_keys = np.sort(keys.to_numpy(zero_copy_only=False))
    if not len(sorted_keys):
        return empty
    groups = _key_groups(stats, sorted_keys)
    if not groups:
        return empty
    found = read_row_groups(fs, key, groups, [column, ROW_ADDRESS], [])
    values, addresses = found.column(column), found.column(ROW_ADDRESS)
    if values.null_count:  # nulls sort last and match no key
        valid = pc.is_valid(values)
        values, addresses = values.filter(valid), addresses.filter(valid)
    if not integer:
        hit = pc.is_in(values, value_set=keys)
        return values.filter(hit).combine_chunks(), addresses.filter(hit).to_numpy().astype(np.uint64, copy=False)
    numbers = values.to_numpy()
    left = np.searchsorted(numbers, sorted_keys, side="left")
    counts = np.searchsorted(numbers, sorted_keys, side="right") - left
    # positions left[i], left[i] + 1, ..., left[i] + counts[i] - 1 of every key, concatenated
    positions = np.repeat(left - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
    taken = addresses.to_numpy().astype(np.uint64, copy=False)[positions]
    return pa.array(numbers[positions], keys.type), taken


def _key_groups(stats: _Statistics, sorted_keys: np.ndarray) -> list[int]:
    """Index row groups whose [min, max] holds one of `sorted_keys` (numbers, or Python strings compared by code
    point, which is UTF-8's byte order and so Parquet's); unknown statistics admit, all-null groups never match."""
    if isinstance(stats.mins, np.ndarray) or isinstance(stats.maxs, np.ndarray):  # both numpy (numbers) or neither
        mins, maxs, known = stats.mins, stats.maxs, stats.known
    else:
        known = stats.known
        mins = np.array([v if k else "" for v, k in zip(stats.mins.to_pylist(), known, strict=True)], dtype=object)
        maxs = np.array([v if k else "" for v, k in zip(stats.maxs.to_pylist(), known, strict=True)], dtype=object)
    admitted = np.searchsorted(sorted_keys, maxs, side="right") > np.searchsorted(sorted_keys, mins, side="left")
    return [int(g) for g in np.flatnonzero((admitted | ~known) & ~stats.all_null)]


def address_column(index: pb.IndexMetadata) -> str:
    """The name of the index file's column that holds row addresses.

    Args:
        index: the index's metadata entry

    Returns:
        `_rowaddr` for a BTREE (one address a row), `bitmap` for a BITMAP (serialized bitmaps of addresses).
    """
    return ROW_ADDRESS if index.index_type == BTREE else "bitmap"


def row_addresses(index: pb.IndexMetadata, column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """The row addresses an index file's address column holds, sorted.

    Args:
        index: the index's metadata entry (its type says how `column` is encoded)
        column: the rows read of the column named by `address_column(index)`

    Returns:
        A BTREE's addresses, or the union of a BITMAP's bitmaps, as a sorted uint64 array.
    """
    if index.index_type == BTREE:
        return np.sort(column.to_numpy().astype(np.uint64))
    out = BitMap64()
    for data in column.to_pylist():
        out |= BitMap64.deserialize(data)
    return np.array(out.to_array(), dtype=np.uint64) if len(out) else np.array([], dtype=np.uint64)


def covered(index: pb.IndexMetadata) -> set[int]:
    """Ids of the fragments the index was built over (its `fragment_bitmap`).

    Args:
        index: the index's metadata entry
    """
    return set(BitMap.deserialize(index.fragment_bitmap)) if index.fragment_bitmap else set()
