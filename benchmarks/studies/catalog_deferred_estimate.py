"""What a deferred-finalize catalog protocol would gain on the commit path: an estimate, not the protocol.

The current code is run twice on two catalogs, interleaved commit by commit with a single-table commit:
once as it is ("tx5 eager"), once with the per-table steps a deferred protocol (docs/guide/catalog.md, "Not done
yet") would move off the writer's path patched out for the duration of that commit ("tx5 deferred"): each
table's transaction file (the catalog version would carry it), the check that the table's next version is
free (a HEAD on S3, a stat locally) and finalizing (each table's final manifest; the writer's next
transaction reads the table from its in-process state). What remains is exactly what such a protocol writes
per commit: the tables' data files and the catalog's own version. Whoever finalizes later (a reader through
the catalog, `Catalog.cleanup`) pays the rest; this script does not measure that. "tx5 data files only" stages
the five appends and publishes nothing: the floor of any protocol that writes each table's rows to its own data
file. Not a test, not in run.py.

Also counts the files each commit adds (local) and the requests it makes (a moto server of its own whose
request log is read), per commit.

    python -m benchmarks.studies.catalog_deferred_estimate --commits 12
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mvcc_core as mvcc  # noqa: E402
from benchmarks.discard import discard  # noqa: E402
from benchmarks.harness import MotoServer  # noqa: E402
from benchmarks.suite.bench_catalog import SCHEMA, batch  # noqa: E402
from mvcc_core.catalog import Catalog, multi_table  # noqa: E402
from mvcc_core.catalog.entries import live  # noqa: E402
from mvcc_core.io.store import ObjectStore  # noqa: E402

DEFERRED = {"on": False}
_put_new, _exists = ObjectStore.put_new, ObjectStore.exists
_after_publish, _finalize = multi_table.CatalogTransaction._after_publish, Catalog.finalize


def _table_file(store: ObjectStore, rel: str, directory: str) -> bool:
    return DEFERRED["on"] and rel.startswith(directory) and "__manifest" not in store.uri


def _put_new_deferred(self: ObjectStore, rel: str, data: bytes) -> None:
    if not _table_file(self, rel, "_transactions/"):  # a table's transaction file: carried by the catalog
        _put_new(self, rel, data)


def _exists_deferred(self: ObjectStore, rel: str) -> bool:
    return False if _table_file(self, rel, "_versions/") else _exists(self, rel)


def _finalize_deferred(self: Catalog, entry: Any, known: Any = None) -> None:
    if not DEFERRED["on"]:
        _finalize(self, entry, known)


def _after_publish_deferred(self: multi_table.CatalogTransaction, rows: list[Any], version: int) -> None:
    if not DEFERRED["on"]:
        _after_publish(self, rows, version)
        return
    published = [e for e in live(rows).values() if e.catalog_version == version and e.staged_manifests]
    for w in self.writes.values():
        for txn in w.chain:
            txn.files = []
        entry = next((e for e in published if e.path == w.path), None)
        if entry is not None and w.published is not None:
            self.catalog.remember(entry, w.published)


ObjectStore.put_new, ObjectStore.exists = _put_new_deferred, _exists_deferred  # type: ignore[method-assign]
Catalog.finalize = _finalize_deferred  # type: ignore[method-assign]
multi_table.CatalogTransaction._after_publish = _after_publish_deferred  # type: ignore[method-assign]


def steps(root: str, opts: dict[str, Any] | None) -> dict[str, Callable[[], None]]:
    data = batch()
    table = mvcc.write_table(data, f"{root}/single", storage_options=opts)
    cats = {}
    for kind in ("eager", "deferred"):
        cats[kind] = Catalog.create(f"{root}/{kind}", storage_options=opts)
        with cats[kind].transaction() as tx:
            for i in range(5):
                tx.create_table(f"t{i}", SCHEMA)

    def tx5(kind: str) -> None:
        DEFERRED["on"] = kind == "deferred"
        try:
            with cats[kind].transaction() as tx:
                for i in range(5):
                    tx.table(f"t{i}").append(data)
        finally:
            DEFERRED["on"] = False

    def staged_only() -> None:  # the floor of any protocol: the five tables' data files, nothing published
        tx = cats["eager"].transaction()
        for i in range(5):
            tx.table(f"t{i}").append(data)
        unpublished.append(tx)

    unpublished: list[Any] = []  # aborted after the measurements (their data files are removed then)
    return {
        "single-table commit": lambda: table.append(data),
        "tx5 eager": lambda: tx5("eager"),
        "tx5 deferred": lambda: tx5("deferred"),
        "tx5 data files only": staged_only,
        "abort": lambda: [unpublished.pop().abort() for _ in list(unpublished)],
    }


def latencies(todo: dict[str, Callable[[], None]], commits: int) -> None:
    walls: dict[str, list[float]] = {name: [] for name in todo if name != "abort"}
    cpus: dict[str, list[float]] = {name: [] for name in walls}
    for step in todo.values():
        step()
    cleanup = todo.pop("abort")
    for _ in range(commits):
        cleanup()
        for name, step in todo.items():
            wall, cpu = time.perf_counter(), time.process_time()
            step()
            walls[name].append(time.perf_counter() - wall)
            cpus[name].append(time.process_time() - cpu)
    wall1, cpu1 = statistics.median(walls["single-table commit"]), statistics.median(cpus["single-table commit"])
    for name in todo:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        ratios = f"{wall * 1e3:7.1f} ms wall ({wall / wall1:.2f}x) {cpu * 1e3:6.1f} ms CPU ({cpu / cpu1:.2f}x)"
        print(f"  {name:20} {ratios}")


def files_added(root: Path, todo: dict[str, Callable[[], None]], rounds: int = 4) -> None:
    def count() -> int:
        return sum(len(names) for _, _, names in os.walk(root))

    for name, step in todo.items():
        if name in ("tx5 data files only", "abort"):
            continue
        before = count()
        for _ in range(rounds):
            step()
        print(f"  {name:20} {(count() - before) / rounds:5.1f} files added per commit")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=12)
    args = parser.parse_args()
    local = Path(tempfile.mkdtemp(prefix="mvcc-deferred-"))
    try:
        print("local")
        latencies(steps(str(local / "lat"), None), args.commits)
        files_added(local / "files", steps(str(local / "files"), None))
    finally:
        discard(local)
    with MotoServer(log_requests=True) as s3:
        print("s3 (moto)")
        latencies(steps(f"s3://bench/{uuid.uuid4().hex}", s3.mvcc_options), args.commits)
        for name, step in steps(f"s3://bench/{uuid.uuid4().hex}", s3.mvcc_options).items():
            if name in ("tx5 data files only", "abort"):
                continue
            step()
            before = s3.requests()
            for _ in range(4):
                step()
            print(f"  {name:20} {(s3.requests() - before) / 4:5.1f} requests per commit")


if __name__ == "__main__":
    main()
