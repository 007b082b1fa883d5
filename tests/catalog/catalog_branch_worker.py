"""Catalog branch steps in their own process, for the crash and concurrency tests (run as a script, not collected).

usage:
  catalog_branch_worker.py write ROOT WORKER COUNT   COUNT transactions on branch `dev`, each appending id
                                                     WORKER*1000+i to s.a and s.b (a retryable conflict re-runs
                                                     it, as orchestration would); prints the retries
  catalog_branch_worker.py kill ROOT FAILPOINT STEP  STEP (write, publish, rerun, delete, cleanup) with FAILPOINT
                                                     armed "exit" (the process ends there, no cleanup)
  catalog_branch_worker.py publish-when-told ROOT    opens the catalog, prints "ready", waits for a line on stdin,
                                                     publishes branch `dev` and prints the seconds it took (the
                                                     random-kill tests SIGKILL it at a random moment after "go")
"""

from __future__ import annotations

import sys
import time

import pyarrow as pa

from mvcc_core import RetryableConflictError
from mvcc_core.catalog import Catalog
from mvcc_core.failpoints import arm


def write(cat: Catalog, ident: int) -> int:
    retries = 0
    while True:
        try:
            with cat.transaction(branch="dev") as tx:
                tx.table("s.a").append(pa.table({"id": [ident]}))
                tx.table("s.b").append(pa.table({"id": [ident]}))
            return retries
        except RetryableConflictError:
            retries += 1


def main() -> None:
    mode, root = sys.argv[1], sys.argv[2]
    cat = Catalog.open(root)
    if mode == "write":
        worker, count = int(sys.argv[3]), int(sys.argv[4])
        print(sum(write(cat, worker * 1000 + i) for i in range(count)))
        return
    if mode == "publish-when-told":
        cat.snapshot(branch="dev")  # warm: the imports and first reads are done before "go"
        print("ready", flush=True)
        sys.stdin.readline()
        began = time.monotonic()
        cat.publish_branch("dev")
        print(time.monotonic() - began, flush=True)
        return
    arm(sys.argv[3], "exit")
    step = sys.argv[4]
    if step == "write":
        write(cat, 9004)
    elif step in ("publish", "rerun"):
        cat.publish_branch("dev")
    elif step == "delete":
        cat.delete_branch("dev")
    else:
        cat.cleanup(delete_unverified=True)


if __name__ == "__main__":
    main()
