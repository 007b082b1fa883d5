"""pylance's system columns named in a scan's `columns=`: `_rowid`, `_rowaddr` and `_rowoffset` (the row's
position among the version's live rows), in the order the caller names them (docs/reference/pylance_compat.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.format.row_ids import ROW_ID
from mvcc_core.io.parquet import ROW_ADDRESS

ROW_OFFSET = "_rowoffset"
SYSTEM_COLUMNS = (ROW_ID, ROW_ADDRESS, ROW_OFFSET)


@dataclass(frozen=True)
class SystemColumns:
    """What a `columns=` list asks of the system columns.

    `order`: every output column in the caller's order (None when the list names no system column);
    `with_row_id` / `with_row_address`: the scan must produce those columns (a `_rowoffset` is computed from
    the row address); `flagged`: the system columns asked for by `with_row_id=True` / `with_row_address=True`,
    which follow the named columns when the list does not name them (pylance's order).
    """

    order: tuple[str, ...] | None
    with_row_id: bool
    with_row_address: bool
    flagged: tuple[str, ...] = ()


def split_system_columns(
    columns: Sequence[str], table_names: Sequence[str], with_row_id: bool, with_row_address: bool
) -> tuple[list[str], SystemColumns]:
    """The table columns of `columns`, and what it asks of the system columns a table column does not shadow.

    Args:
        columns: The caller's `columns=` list.
        table_names: The table's column names.
        with_row_id: The caller's `with_row_id`.
        with_row_address: The caller's `with_row_address`.

    Returns:
        (the table columns in order, the system columns asked for).
    """
    system = [c for c in columns if c in SYSTEM_COLUMNS and c not in table_names]
    flagged = tuple([ROW_ID] * with_row_id + [ROW_ADDRESS] * with_row_address)
    if not system:
        return list(columns), SystemColumns(None, with_row_id, with_row_address, flagged)
    plain = [c for c in columns if c not in system]
    asked = SystemColumns(
        tuple(columns),
        with_row_id or ROW_ID in system,
        with_row_address or ROW_ADDRESS in system or ROW_OFFSET in system,
        flagged,
    )
    return plain, asked


def row_offsets(
    fragments: Sequence[pb.DataFragment],
    addresses: np.ndarray,
    live_mask: Callable[[pb.DataFragment], np.ndarray | None],
) -> pa.Array:
    """Each row address's position among the live rows of the version whose fragments are `fragments`.

    Args:
        fragments: The version's fragments, in table order.
        addresses: Row addresses (fragment id << 32 | offset) of live rows.
        live_mask: A fragment's live mask (False at deleted offsets), or None when it has no deletions.

    Returns:
        uint64 offsets, one per address.
    """
    starts: dict[int, int] = {}
    before: dict[int, np.ndarray | None] = {}
    total = 0
    for frag in fragments:
        starts[frag.id] = total
        mask = live_mask(frag)
        before[frag.id] = None if mask is None else np.concatenate([[0], np.cumsum(mask)])
        total += int(frag.physical_rows if mask is None else mask.sum())
    addresses = np.asarray(addresses, dtype=np.uint64)
    frag_ids = (addresses >> np.uint64(32)).astype(np.int64)
    offsets = (addresses & np.uint64(0xFFFFFFFF)).astype(np.int64)
    out = np.empty(len(addresses), dtype=np.uint64)
    for frag_id in np.unique(frag_ids):
        at = frag_ids == frag_id
        counts = before[int(frag_id)]
        local = offsets[at] if counts is None else counts[offsets[at]]
        out[at] = starts[int(frag_id)] + local
    return pa.array(out, pa.uint64())


def arrange(table: pa.Table, asked: SystemColumns, offsets: Callable[[np.ndarray], pa.Array]) -> pa.Table:
    """The scan's output in the caller's order: `asked.order`, then the flagged system columns it does not name.

    Args:
        table: The scan's output: the table columns, then `_rowid` / `_rowaddr` as the scan produced them.
        asked: What `columns=` asked of the system columns.
        offsets: Row addresses -> `_rowoffset` values.

    Returns:
        The table with exactly the columns asked for.
    """
    if asked.order is None:
        return table
    if ROW_OFFSET in asked.order:
        addresses = table.column(ROW_ADDRESS).to_numpy(zero_copy_only=False)
        table = table.append_column(pa.field(ROW_OFFSET, pa.uint64()), offsets(addresses))
    return table.select(output_names(asked))


def output_names(asked: SystemColumns) -> list[str]:
    """The output column names when `columns=` names a system column: the caller's order, then the system
    columns flagged by `with_row_id` / `with_row_address` (named in the list or not).

    Args:
        asked: What `columns=` asked of the system columns (`order` set).

    Returns:
        The names, in output order.
    """
    # a system column both named and flagged goes where the flag puts it, after the named columns (pylance's)
    return [c for c in asked.order or () if c not in asked.flagged] + list(asked.flagged)
