"""A catalog writer in its own process, for the concurrency and crash tests (run as a script, not collected).

usage: catalog_worker.py ROOT WORKER COUNT [FAILPOINT]
Each of COUNT transactions appends the same id to s.a and s.b in one catalog transaction (re-run on a
retryable conflict, as orchestration would); worker 0 also creates a table s.w0_<i> per transaction. With
FAILPOINT the worker arms it as "exit" (the process ends at that point, no cleanup) before its one transaction.
Storage options (for S3) come as JSON in CATALOG_WORKER_OPTIONS.
"""

from __future__ import annotations

import json
import os
import sys

import pyarrow as pa

from mvcc_core import RetryableConflictError
from mvcc_core.catalog import Catalog
from mvcc_core.failpoints import arm


def main() -> None:
    root, worker, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if len(sys.argv) > 4:
        arm(sys.argv[4], "exit")
    cat = Catalog.open(root, storage_options=json.loads(os.environ.get("CATALOG_WORKER_OPTIONS", "null")))
    retries = 0
    for i in range(count):
        row = pa.table({"id": [worker * 1000 + i]})
        while True:
            try:
                with cat.transaction() as tx:
                    tx.table("s.a").append(row)
                    tx.table("s.b").append(row)
                    if worker == 0:
                        tx.create_table(f"s.w0_{i}", pa.schema([("id", pa.int64())]))
                break
            except RetryableConflictError:
                retries += 1
    print(retries)


if __name__ == "__main__":
    main()
