"""Rows for tables whose files are written under older schemas (a column and a struct field dropped later, a
column renamed, nullability changed): imported by the scan and compaction tests (tests/ is not a package)."""

from __future__ import annotations

import pyarrow as pa

POINT = pa.struct([("x", pa.int64()), ("y", pa.string())])
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("gone", pa.string()),
        pa.field("p", POINT),
        pa.field("k", pa.int32()),
    ]
)


def older_schema_rows(start: int, n: int) -> pa.Table:
    """Rows `start .. start + n` with `gone` and `p.y` (dropped later) and `k` (renamed later)."""
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "gone": [f"g{i}" for i in ids],
            "p": pa.array([{"x": i, "y": f"y{i}"} for i in ids], POINT),
            "k": pa.array(ids, pa.int32()),
        },
        schema=SCHEMA,
    )
