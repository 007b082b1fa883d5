"""Mixed multi-table catalog transactions in their own process (run as a script, not collected).

usage:
  catalog_mixed_worker.py mixed ROOT WORKER COUNT   COUNT transactions, one JSON line per published one
  catalog_mixed_worker.py kill ROOT FAILPOINT        one transaction, FAILPOINT armed "exit" just before commit

Transaction i of worker w (`plan`): append id w*1000+i to s.a and s.b; every odd one also deletes the id the
previous one appended from both (the delete first, so the chain can be rebased); every fourth creates
s.w{w}_{i} with one row and the next one drops it. The first also deletes the worker's seeded row, drops the
table s.pre{w} and creates view s.v{w} (the test makes the row and the table), so one transaction per worker
covers every kind. A retryable
conflict re-runs the transaction, as orchestration would. Storage options (S3) come as JSON in
CATALOG_WORKER_OPTIONS.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pyarrow as pa

from mvcc_core import RetryableConflictError
from mvcc_core.catalog import Catalog, CatalogTransaction
from mvcc_core.failpoints import arm

IDS = pa.schema([("id", pa.int64())])


def seeded(worker: int) -> int:
    """The row the test puts into s.a and s.b for each worker before the run (its first transaction deletes it)."""
    return worker * 1000 + 999


def plan(worker: int, i: int) -> dict[str, Any]:
    """What transaction i of `worker` does (the test replays these records independently)."""
    ident = worker * 1000 + i
    return {
        "worker": worker,
        "i": i,
        "appended": ident,
        "deleted": [ident - 1] if i % 2 == 1 else [seeded(worker)] if i == 0 else [],
        "created": [f"s.w{worker}_{i}"] if i % 4 == 0 else [],
        "dropped": [f"s.w{worker}_{i - 1}"] if i % 4 == 1 else [f"s.pre{worker}"] if i == 0 else [],
        "views": [f"s.v{worker}"] if i == 0 else [],
    }


def stage(tx: CatalogTransaction, step: dict[str, Any]) -> None:
    for name in ("s.a", "s.b"):
        for gone in step["deleted"]:
            tx.table(name).delete(f"id = {gone}")
        tx.table(name).append(pa.table({"id": [step["appended"]]}))
    for name in step["created"]:
        tx.create_table(name, IDS)
        tx.table(name).append(pa.table({"id": [step["appended"]]}))
    for name in step["dropped"]:
        tx.drop_table(name)
    for name in step["views"]:
        tx.create_view(name, f"SELECT id FROM s.a WHERE id >= {step['worker'] * 1000}")


def main() -> None:
    mode, root = sys.argv[1], sys.argv[2]
    cat = Catalog.open(root, storage_options=json.loads(os.environ.get("CATALOG_WORKER_OPTIONS", "null")))
    if mode == "kill":
        tx = cat.transaction()
        stage(tx, plan(9, 4))  # appends to s.a/s.b, creates s.w9_4, plus the chains below
        tx.table("s.a").delete("id = 1")
        tx.table("s.b").delete("id = 1")
        tx.drop_table("s.old")
        arm(sys.argv[3], "exit")
        tx.commit()
        return
    worker, count = int(sys.argv[3]), int(sys.argv[4])
    retries = 0
    for i in range(count):
        step = plan(worker, i)
        while True:
            try:
                with cat.transaction() as tx:
                    stage(tx, step)
                break
            except RetryableConflictError:
                retries += 1
        print(json.dumps({**step, "version": tx.published_version}), flush=True)
    print(json.dumps({"retries": retries}), flush=True)


if __name__ == "__main__":
    main()
