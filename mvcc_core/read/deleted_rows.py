"""Dropping a file's deleted rows after it is decoded (the scan's whole-file and streamed reads)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def drop_deleted(table: pa.Table, live: np.ndarray) -> pa.Table:
    """The rows of `table` where `live` is True, in order.

    Arrow's filter kernel copies a run of 64 live rows at once and goes row by row through a word holding a
    deleted row; `Table.filter` and `Table.take` first turn the mask into row indices, then take them from each
    column. Measured on files read from Parquet (pyarrow 26): 23,000 rows of 5 columns with 1 % deleted, filtering
    each column 0.38 ms against taking 0.48 ms; 118,800 rows of 6 columns with 5 % deleted (the week's
    raw_events), 1.9 ms against 1.4 ms. Hence filtering column by column below `TAKE_DELETED_SHARE`, taking
    indices above it.

    Args:
        table: the rows of one file (or a slice of them), in offset order
        live: one bool per row of `table`, False at a deleted row

    Returns:
        The live rows, in the same order and schema.
    """
    kept = int(np.count_nonzero(live))
    if kept == len(live):
        return table
    if len(live) - kept >= TAKE_DELETED_SHARE * len(live):
        return table.take(np.flatnonzero(live))
    selection = pa.array(live, pa.bool_())
    return pa.Table.from_arrays([pc.filter(column, selection) for column in table.columns], schema=table.schema)


# The share of deleted rows above which `drop_deleted` takes row indices rather than filtering each column.
TAKE_DELETED_SHARE = 0.025
