"""Several real processes writing one catalog, and writers killed at the catalog's failpoints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from mvcc_core import IncompatibleConflictError, open_table
from mvcc_core.catalog import Catalog, CatalogConflictError

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


def run_writers(cat: Catalog, writers: int, count: int) -> None:
    """`writers` processes, each transaction appending one id to two tables; a reader polling snapshots
    during the run must see both tables with the same ids at every catalog version (no transaction
    half-visible), and the end state is the replay of all transactions."""
    start = cat.latest_version
    procs = [spawn(cat.root, w, count, options=cat.options or None) for w in range(writers)]
    seen = 0
    while any(p.poll() is None for p in procs):
        snap = cat.snapshot()
        assert ids(snap.table("s.a")) == ids(snap.table("s.b")), f"half-visible at catalog version {snap.version}"
        seen += 1
    for p in procs:
        _, err = p.communicate()
        assert p.returncode == 0, err
    expected = sorted(w * 1000 + i for w in range(writers) for i in range(count))
    assert ids(cat.table("s.a")) == expected and ids(cat.table("s.b")) == expected
    assert cat.latest_version == start + writers * count
    for version in range(start, cat.latest_version + 1):  # every snapshot consistent, after the fact too
        snap = cat.snapshot(version)
        assert ids(snap.table("s.a")) == ids(snap.table("s.b"))
    assert sorted(t for t in cat.tables("s") if t.startswith("s.w0_")) == [f"s.w0_{i}" for i in range(count)]
    assert seen > 0


def test_four_processes_no_transaction_is_half_visible(cat: Catalog) -> None:
    run_writers(cat, 4, 6)


@pytest.mark.s3
def test_four_processes_on_s3(s3_uri: str, s3_options: dict[str, Any]) -> None:
    run_writers(make(s3_uri, s3_options), 4, 3)


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
