"""A writer of the contention test, in its own process (run as a script, not collected).

usage: catalog_contention_worker.py ROOT WORKER COUNT
Each of COUNT catalog transactions appends two new ids to s.a and s.b; every fourth one then deletes, from
both, one id it just appended (a fragment of its own chain) and its oldest id still present (a fragment
published earlier; the first time, its seeded row in the fragment every writer shares). A retryable conflict
re-runs the transaction. Prints a JSON record: what each published transaction appended and deleted, and
every retryable conflict's rule code and message. Storage options come as JSON in CATALOG_WORKER_OPTIONS.
"""

from __future__ import annotations

import json
import os
import sys

import pyarrow as pa

from mvcc_core import RetryableConflictError
from mvcc_core.catalog import Catalog


def main() -> None:
    root, worker, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    cat = Catalog.open(root, storage_options=json.loads(os.environ.get("CATALOG_WORKER_OPTIONS", "null")))
    present = [worker * 1_000_000 + 999_999]  # the seeded row, in the fragment shared by every writer
    published, conflicts = [], []
    for i in range(count):
        new = [worker * 1_000_000 + 2 * i, worker * 1_000_000 + 2 * i + 1]
        gone = [new[1], present[0]] if i % 4 == 3 else []
        while True:
            try:
                with cat.transaction(commit_message=f"w{worker} t{i}") as tx:
                    for name in ("s.a", "s.b"):
                        tx.table(name).append(pa.table({"id": new}))
                        if gone:
                            tx.table(name).delete(f"id IN ({gone[0]}, {gone[1]})")
                break
            except RetryableConflictError as exc:
                conflicts.append({"rule_code": getattr(exc, "rule_code", ""), "message": str(exc)})
        published.append({"version": tx.published_version, "appended": new, "deleted": gone})
        present = [p for p in present + new if p not in gone]
    print(json.dumps({"published": published, "conflicts": conflicts}))


if __name__ == "__main__":
    main()
