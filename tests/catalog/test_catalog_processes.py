"""Several real processes writing one catalog, and writers killed at the catalog's failpoints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from mvcc_core import open_table
from mvcc_core.catalog import Catalog

WORKER = Path(__file__).with_name("catalog_worker.py")
REPO = Path(__file__).resolve().parents[2]
IDS = pa.schema([("id", pa.int64())])


def spawn(root: str, worker: int, count: int, failpoint: str | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    args = [sys.executable, str(WORKER), root, str(worker), str(count)] + ([failpoint] if failpoint else [])
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def ids(table: object) -> list[int]:
    return sorted(table.to_table()["id"].to_pylist())  # type: ignore[attr-defined]


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    c = Catalog.create(str(tmp_path / "cat"))
    c.create_schema("s")
    c.create_table("s.a", IDS)
    c.create_table("s.b", IDS)
    return c


def test_four_processes_no_transaction_is_half_visible(cat: Catalog) -> None:
    """4 writers, each transaction appending one id to two tables; a reader polling snapshots during the
    run must see both tables with the same ids at every catalog version, and the end state is the replay."""
    start = cat.latest_version
    procs = [spawn(cat.root, w, 6) for w in range(4)]
    seen = 0
    while any(p.poll() is None for p in procs):
        snap = cat.snapshot()
        assert ids(snap.table("s.a")) == ids(snap.table("s.b")), f"half-visible at catalog version {snap.version}"
        seen += 1
    for p in procs:
        out, err = p.communicate()
        assert p.returncode == 0, err
    expected = sorted(w * 1000 + i for w in range(4) for i in range(6))
    assert ids(cat.table("s.a")) == expected and ids(cat.table("s.b")) == expected
    assert cat.latest_version == start + 24
    for version in range(start, cat.latest_version + 1):  # every snapshot consistent, after the fact too
        snap = cat.snapshot(version)
        assert ids(snap.table("s.a")) == ids(snap.table("s.b"))
    assert sorted(t for t in cat.tables("s") if t.startswith("s.w0_")) == [f"s.w0_{i}" for i in range(6)]
    assert seen > 0


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
