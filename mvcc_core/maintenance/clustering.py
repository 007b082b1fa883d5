"""Clustering: the row order a sorted or z-ordered compaction writes (`CompactionOptions.sort_by` / `zorder_by`).

A clustering task reads every row of its fragments, computes one permutation here and writes the rows in that
order, cut into fragments of the row target (row groups follow the same order), so each new fragment and row
group covers a narrow range of the clustering columns and the scan's statistics pruning skips the others.

- sort: `pyarrow.compute.sort_indices` on the columns, ascending, nulls last (a stable sort: ties keep the order
  they were read in).
- z-order: each column's value becomes its dense rank among the rows rewritten (nulls after every value), scaled
  to the whole range of `64 // k` bits for `k` columns (so every column's highest bit halves its rows); the bits
  of the k scaled ranks are interleaved (Morton code) and the rows stably sorted by the code. Ranks and not
  min/max scaling: a skewed column (a few huge values) keeps all its bits for the values that are common, and
  strings, dates and numbers are handled alike (by their order).

Rules and costs: docs/operations/maintenance.md, "Clustering".
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["check_columns", "order", "zorder_codes"]

_ORDERABLE = (pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal, pa.types.is_temporal)


def _orderable(type_: pa.DataType) -> bool:
    return (
        any(check(type_) for check in _ORDERABLE)
        or pa.types.is_string(type_)
        or pa.types.is_large_string(type_)
        or pa.types.is_binary(type_)
        or pa.types.is_large_binary(type_)
        or pa.types.is_boolean(type_)
        or pa.types.is_dictionary(type_)
    )


def check_columns(schema: pa.Schema, name: str, columns: tuple[str, ...]) -> None:
    """Refuse a clustering column the table does not have, or one whose values have no order (a list, a struct).

    Args:
        schema: the table's schema
        name: what the caller called the option (`sort_by`, `zorder_by` or a policy key), for the message
        columns: the columns given

    Raises:
        ValueError: naming the option, the column and the table's columns
    """
    for column in columns:
        index = schema.get_field_index(column)
        if index < 0:
            raise ValueError(
                f"{name} names column {column!r}, which the table does not have; its columns are {schema.names}"
            )
        type_ = schema.field(index).type
        if not _orderable(type_):
            raise ValueError(f"{name} names column {column!r} of type {type_}, which has no order to cluster by")


def _dense_rank(values: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Each value's dense rank from 0 (equal values share one), nulls ranked after every value."""
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    ranks = pc.rank(values, sort_keys="ascending", tiebreaker="dense")  # nulls at the end, Arrow's default
    return np.asarray(ranks.to_numpy(zero_copy_only=False), dtype=np.uint64) - np.uint64(1)


def zorder_codes(table: pa.Table, columns: tuple[str, ...]) -> np.ndarray:
    """The z-order (Morton) code of each row: the bits of each column's scaled dense rank interleaved, the first
    column's bit highest at each level.

    Args:
        table: the rows
        columns: 2 to 4 columns of `table`
    """
    k = len(columns)
    bits = 64 // k
    top = np.uint64((1 << bits) - 1)
    scaled = []
    for column in columns:
        rank = _dense_rank(table.column(column))
        most = int(rank.max()) if len(rank) else 0
        if most > 0:  # spread over the whole bit width, so each column's high bits split the rows alike
            rank = np.minimum(rank.astype(np.float64) * (float(top) / most), float(top)).astype(np.uint64)
        scaled.append(rank)
    codes = np.zeros(table.num_rows, dtype=np.uint64)
    one = np.uint64(1)
    for bit in range(bits - 1, -1, -1):
        shift = np.uint64(bit)
        for j, rank in enumerate(scaled):
            position = np.uint64(bit * k + (k - 1 - j))
            codes |= ((rank >> shift) & one) << position
    return codes


def order(table: pa.Table, how: str, columns: tuple[str, ...]) -> np.ndarray:
    """The permutation that puts `table`'s rows in clustering order (`table.take(order(...))`).

    Args:
        table: the rows read by one clustering task
        how: "sort" or "zorder"
        columns: the clustering columns
    """
    if how == "sort":
        keys = [(c, "ascending", "at_end") for c in columns]
        return np.asarray(pc.sort_indices(table, sort_keys=keys).to_numpy(), np.int64)
    if how == "zorder":
        return np.argsort(zorder_codes(table, columns), kind="stable")
    raise ValueError(f"clustering is 'sort' or 'zorder', got {how!r}")
