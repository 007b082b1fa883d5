"""Several real processes writing one catalog, and writers killed at the catalog's failpoints."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from mvcc_core import IncompatibleConflictError, open_table
from mvcc_core.catalog import Catalog, CatalogConflictError
from mvcc_core.io import ObjectStore, open_store
from mvcc_core.txn.external_store import final_of

WORKER = Path(__file__).with_name("catalog_worker.py")
REPO = Path(__file__).resolve().parents[2]
IDS = pa.schema([("id", pa.int64())])


def spawn(
    root: str, worker: int, count: int, failpoint: str | None = None, options: dict[str, Any] | None = None
) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    env["CATALOG_WORKER_OPTIONS"] = json.dumps(options)
    args = [sys.executable, str(WORKER), root, str(worker), str(count)] + ([failpoint] if failpoint else [])
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def ids(table: object) -> list[int]:
    return sorted(table.to_table()["id"].to_pylist())  # type: ignore[attr-defined]


def make(uri: str, options: dict[str, Any] | None = None) -> Catalog:
    c = Catalog.create(uri, storage_options=options)
    c.create_schema("s")
    c.create_table("s.a", IDS)
    c.create_table("s.b", IDS)
    return c


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    return make(str(tmp_path / "cat"))


MIXED = Path(__file__).with_name("catalog_mixed_worker.py")


def spawn_mixed(cat: Catalog, worker: int, count: int) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    env["CATALOG_WORKER_OPTIONS"] = json.dumps(cat.options or None)
    args = [sys.executable, str(MIXED), "mixed", cat.root, str(worker), str(count)]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def seed(cat: Catalog, writers: int) -> tuple[set[int], dict[str, list[int]]]:
    """Each worker's seeded row in s.a and s.b and its table s.pre{w} (its first transaction removes both)."""
    rows = {w * 1000 + 999 for w in range(writers)}
    with cat.transaction() as tx:
        for name in ("s.a", "s.b"):
            tx.table(name).append(pa.table({"id": sorted(rows)}))
        for w in range(writers):
            tx.create_table(f"s.pre{w}", IDS)
    return rows, {f"s.pre{w}": [] for w in range(writers)}


def replay(records: list[dict[str, Any]], rows: set[int], tables: dict[str, list[int]]) -> dict[int, dict[str, Any]]:
    """The catalog each published transaction should leave, computed without the catalog: version -> state."""
    rows, tables = set(rows), dict(tables)
    views: set[str] = set()
    out = {}
    for rec in sorted(records, key=lambda r: r["version"]):
        rows -= set(rec["deleted"])
        rows.add(rec["appended"])
        for name in rec["created"]:
            tables[name] = [rec["appended"]]
        for name in rec["dropped"]:
            del tables[name]
        views |= set(rec["views"])
        out[rec["version"]] = {"ids": sorted(rows), "tables": dict(tables), "views": sorted(views)}
    return out


def run_mixed(cat: Catalog, writers: int, count: int, poll_every: float) -> None:
    """`writers` processes of mixed multi-table transactions (appends, deletes, creates, drops, views); a
    reader polls snapshots during the run; the end state and every catalog version equal an independent
    replay of the published transactions in catalog-version order."""
    seeded_rows, seeded_tables = seed(cat, writers)
    start = cat.latest_version
    began = time.monotonic()
    procs = [spawn_mixed(cat, w, count) for w in range(writers)]
    polled: list[tuple[int, list[int]]] = []
    while any(p.poll() is None for p in procs):
        snap = cat.snapshot()
        a, b = ids(snap.table("s.a")), ids(snap.table("s.b"))
        assert a == b, f"half-visible at catalog version {snap.version}"
        polled.append((snap.version, a))
        time.sleep(poll_every)  # a reader, not a load generator: moto serves one request at a time
    records, retries = [], 0
    for p in procs:
        out, err = p.communicate()
        assert p.returncode == 0, err
        lines = [json.loads(line) for line in out.splitlines()]
        records += [r for r in lines if "version" in r]
        retries += sum(r.get("retries", 0) for r in lines)
    print(f"{writers} writers x {count}: {retries} transactions re-run after a retryable conflict")
    print(f"writers done after {time.monotonic() - began:.1f} s, {len(polled)} polls")
    assert len(records) == writers * count
    assert sorted(r["version"] for r in records) == list(range(start + 1, start + 1 + writers * count))
    expected = replay(records, seeded_rows, seeded_tables)
    for version, state in expected.items():  # every snapshot, after the fact
        snap = cat.snapshot(version)
        assert ids(snap.table("s.a")) == ids(snap.table("s.b")) == state["ids"], version
        assert sorted(t for t in snap.tables() if t not in ("s.a", "s.b")) == sorted(state["tables"]), version
        assert snap.views() == state["views"], version
    final = expected[cat.latest_version]
    for name, rows in final["tables"].items():
        assert ids(cat.table(name)) == rows
    for version, seen in polled:
        if version > start:
            assert seen == expected[version]["ids"], version
    assert polled
    print(f"checked after {time.monotonic() - began:.1f} s")


@pytest.mark.slow
def test_eight_processes_mixed_transactions(cat: Catalog) -> None:
    run_mixed(cat, 8, 2, poll_every=0.02)


@pytest.mark.s3
@pytest.mark.slow
def test_eight_processes_mixed_transactions_on_s3(s3_uri: str, s3_options: dict[str, Any]) -> None:
    run_mixed(make(s3_uri, s3_options), 8, 1, poll_every=0.25)


def test_a_table_written_outside_the_catalog_is_refused(cat: Catalog) -> None:
    open_table(cat.table("s.a").uri).append(pa.table({"id": [1]}))  # a direct commit: version 2
    with pytest.raises(CatalogConflictError) as info, cat.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": [2]}))
    assert isinstance(info.value, IncompatibleConflictError) and info.value.object_name == "s.a"
    assert ids(cat.table("s.a")) == []  # the catalog still publishes version 1


def test_killed_before_the_publish_leaves_nothing_visible(cat: Catalog) -> None:
    version = cat.latest_version
    proc = spawn(cat.root, 1, 1, "catalog.after_stage")
    _, err = proc.communicate()
    assert proc.returncode == 77, err
    reopened = Catalog.open(cat.root)
    assert reopened.latest_version == version
    assert ids(reopened.table("s.a")) == [] and reopened.table("s.a").latest_version == 1
    with reopened.transaction() as tx:  # the dead writer's staged manifests do not block anyone
        tx.table("s.a").append(pa.table({"id": [5]}))
        tx.table("s.b").append(pa.table({"id": [5]}))
    assert ids(reopened.table("s.a")) == [5] and ids(reopened.table("s.b")) == [5]


def test_killed_after_the_publish_rolls_forward(cat: Catalog) -> None:
    version = cat.latest_version
    proc = spawn(cat.root, 1, 1, "catalog.after_publish")
    _, err = proc.communicate()
    assert proc.returncode == 77, err
    reopened = Catalog.open(cat.root)
    assert reopened.latest_version == version + 1  # the commit point was passed: the write stands
    a_uri = reopened.snapshot().entry("s.a").path
    assert open_table(f"{cat.root}/{a_uri}").version == 1  # not finalized yet
    assert ids(reopened.table("s.a")) == [1000] and ids(reopened.table("s.b")) == [1000]  # readers finalize
    assert open_table(f"{cat.root}/{a_uri}").version == 2
    with reopened.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": [7]}))
    assert ids(reopened.table("s.a")) == [7, 1000]


def test_a_finalizer_that_lost_the_race_to_another_one_succeeds(cat: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader that looked for the final manifest just before another finalizer made it (from the bytes the
    catalog version carries) finds the final name made with the same bytes, not an error."""
    proc = spawn(cat.root, 1, 1, "catalog.after_publish")
    _, err = proc.communicate()
    assert proc.returncode == 77, err
    first, late = Catalog.open(cat.root), Catalog.open(cat.root)
    entry = first.snapshot().entry("s.a")
    assert entry.manifests and all(final_of(s) == s for s in entry.staged_manifests)  # format 4: final names
    first.finalize(entry)
    first.reclaim_staged([entry])
    store = open_store(first.table_uri(entry))
    assert all(store.exists(s) for s in entry.staged_manifests)  # finalized; the tidy-up leaves final names
    looked: list[str] = []
    real_exists = ObjectStore.exists

    def looked_before(self: ObjectStore, rel: str) -> bool:  # its first looks (the last, this one): not yet
        looked.append(rel)
        return False if len(looked) <= 2 else real_exists(self, rel)

    monkeypatch.setattr(ObjectStore, "exists", looked_before)
    late.finalize(entry)
    monkeypatch.undo()
    assert looked == [entry.staged_manifests[-1]] * 2  # it did try to make the final name and found it made
    assert ids(late.table("s.a")) == [1000]


def test_a_forked_child_publishes(cat: Catalog) -> None:
    """A child forked after the parent published (its thread pool is inherited without threads) makes its own
    pool: Dagster and multiprocessing may fork a process that has used the catalog."""
    with cat.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": [1]}))
        tx.table("s.b").append(pa.table({"id": [1]}))
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        signal.alarm(60)  # a hang would kill the child, and the assertion below fails
        code = 1
        try:
            with cat.transaction() as tx:
                tx.table("s.a").append(pa.table({"id": [2]}))
                tx.table("s.b").append(pa.table({"id": [2]}))
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert ids(cat.table("s.a")) == ids(cat.table("s.b")) == [1, 2]


CONTENTION = Path(__file__).with_name("catalog_contention_worker.py")


@pytest.mark.slow
@pytest.mark.parametrize("writers", [2, 4])
def test_contending_append_and_delete_chains_are_rebased_not_failed(tmp_path: Path, writers: int) -> None:
    """Processes publishing transactions that append to two tables and, every fourth time, delete from both
    (a row of their own chain and an older one; the first time a row of the fragment all writers share).
    No transaction fails because its chain names fragments by old ids, and both tables hold exactly the rows
    a plain record of what each writer published says (each once)."""
    cat = make(str(tmp_path / "cat"))
    seeded = [w * 1_000_000 + 999_999 for w in range(writers)]
    with cat.transaction() as tx:
        for name in ("s.a", "s.b"):
            tx.table(name).append(pa.table({"id": seeded}))
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    env["CATALOG_WORKER_OPTIONS"] = "null"
    procs = [
        subprocess.Popen(
            [sys.executable, str(CONTENTION), cat.root, str(w), "24"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(writers)
    ]
    records = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        records.append(json.loads(out))
    conflicts = [c for r in records for c in r["conflicts"]]
    assert not [c for c in conflicts if "old ids" in c["message"]], conflicts
    expected = set(seeded)
    published = sorted((p for r in records for p in r["published"]), key=lambda p: p["version"])
    assert len({p["version"] for p in published}) == len(published) == 24 * writers
    for p in published:
        expected |= set(p["appended"])
        expected -= set(p["deleted"])
    fresh = Catalog.open(cat.root)
    for name in ("s.a", "s.b"):
        assert ids(fresh.table(name)) == sorted(expected), name
        assert ids(open_table(fresh.table(name).uri)) == sorted(expected), name
