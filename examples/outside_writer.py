"""A writer outside Dagster: appends a batch of partner rows to the table ``partner_feed`` of the example
warehouse, with `mvcc_core` alone (no Dagster, no run id on the commit).

    python examples/outside_writer.py            # one batch of 100 rows
    python examples/outside_writer.py --rows 5 --batches 3

The example deployment's version sensor (``mvcc_version_sensor`` in definitions.py, turn it on in the UI)
watches this table: each commit made here becomes a runless materialization of the asset ``partner_feed``
with the version's metadata and data version (docs/integrations/dagster/sensors_and_health.md, "Version sensor").

The warehouse is ``$MVCC_WAREHOUSE`` or ``warehouse/`` at the repository root, as in definitions.py.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

import mvcc_core as mvcc

TABLE = "partner_feed"
WAREHOUSE_ENV = "MVCC_WAREHOUSE"


def table_uri(root: str | None = None) -> str:
    """``{warehouse}/partner_feed``: the root given, else ``$MVCC_WAREHOUSE``, else ``warehouse/`` at the
    repository root (what definitions.py uses)."""
    base = root or os.environ.get(WAREHOUSE_ENV) or str(Path(__file__).resolve().parents[1] / "warehouse")
    return f"{base.rstrip('/')}/{TABLE}"


def batch(rows: int, start: int, now: datetime) -> pa.Table:
    """`rows` partner records numbered from `start`, received at `now`."""
    return pa.table(
        {
            "record_id": pa.array(range(start, start + rows), pa.int64()),
            "partner": pa.array([f"partner-{i % 7}" for i in range(start, start + rows)]),
            "received_at": pa.array([now] * rows, pa.timestamp("us", "UTC")),
            "amount": pa.array([float(i % 100) for i in range(start, start + rows)]),
        }
    )


def write_batch(root: str | None = None, rows: int = 100) -> mvcc.Table:
    """Append one batch (create the table on the first call); one commit, no Dagster properties."""
    if rows < 1:
        raise ValueError(f"rows must be positive, got {rows}")
    uri = table_uri(root)
    now = datetime.now(UTC)
    try:
        table = mvcc.open_table(uri)
    except mvcc.TableNotFoundError:
        return mvcc.write_table(batch(rows, 0, now), uri, commit_message="partner feed: first batch")
    return table.append(batch(rows, table.count_rows(), now), commit_message=f"partner feed: {rows} rows")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100, help="rows per batch (default 100)")
    parser.add_argument("--batches", type=int, default=1, help="commits to make (default 1)")
    parser.add_argument("--warehouse", default=None, help="warehouse root (default $MVCC_WAREHOUSE or warehouse/)")
    args = parser.parse_args(argv)
    for _ in range(args.batches):
        table = write_batch(args.warehouse, args.rows)
        print(f"{table.uri}: version {table.version}, {table.count_rows()} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
