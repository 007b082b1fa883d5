"""Catalog-level retention: old catalog versions, table versions no kept catalog version publishes, dropped
tables' directories and a dead writer's debris; every kept snapshot stays readable."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from mvcc_core import VersionNotFoundError, open_table
from mvcc_core.catalog import Catalog
from mvcc_core.io import open_store

IDS = pa.schema([("id", pa.int64())])
WORKER = Path(__file__).with_name("catalog_mixed_worker.py")
REPO = Path(__file__).resolve().parents[2]


def ids(table: Any) -> list[int]:
    return sorted(table.to_table()["id"].to_pylist())


@pytest.fixture
def cat(any_uri: tuple[str, dict[str, Any] | None]) -> Catalog:
    uri, options = any_uri
    c = Catalog.create(uri, storage_options=options)
    c.create_schema("s")
    with c.transaction() as tx:
        for name in ("s.a", "s.b", "s.old"):
            tx.create_table(name, IDS)
    return c


def directories(cat: Catalog) -> set[str]:
    store = open_store(cat.root, cat.options or None)
    return {"/".join(m.path.split("/")[:2]) for m in store.list("") if not m.path.startswith("__manifest/")}


def test_kept_snapshots_keep_their_table_versions(cat: Catalog) -> None:
    old_dir = cat.snapshot().entry("s.old").path
    cat.drop_table("s.old")
    for i in range(4):
        with cat.transaction() as tx:
            tx.table("s.a").append(pa.table({"id": [i]}))
            if i == 1:
                tx.table("s.b").append(pa.table({"id": [i]}))  # s.b stops moving: its version stays old
    latest = cat.latest_version
    stats = cat.cleanup(timedelta(0), retain_versions=3)  # kept: latest - 2 .. latest
    kept = range(latest - 2, latest + 1)
    assert stats.catalog_versions_removed == tuple(range(1, latest - 2))
    assert old_dir in stats.directories_removed and old_dir not in directories(cat)  # dropped, unpublished
    for version in kept:  # every kept snapshot reads whole
        snap = cat.snapshot(version)
        for name in snap.tables():
            snap.table(name).to_table()
    oldest = cat.snapshot(latest - 2)
    a = cat.table("s.a")
    assert ids(oldest.table("s.a")) == [0, 1]
    with pytest.raises(VersionNotFoundError):
        a.checkout_version(oldest.table_version("s.a") - 1)  # no kept snapshot publishes it
    assert ids(cat.table("s.b")) == [1]  # published by every kept version, though old
    with pytest.raises(VersionNotFoundError):
        cat.snapshot(1)
    assert cat.cleanup(timedelta(0), retain_versions=3).catalog_versions_removed == ()  # idempotent


def test_dry_run_removes_nothing(cat: Catalog) -> None:
    cat.drop_table("s.old")
    before = directories(cat)
    stats = cat.cleanup(timedelta(0), retain_versions=1, dry_run=True)
    assert stats.directories_removed and stats.catalog_versions_removed
    assert directories(cat) == before and cat.snapshot(1).schemas() == ["main"]


def test_a_dead_writers_debris_is_reclaimed_after_the_window(tmp_path: Path) -> None:
    cat = Catalog.create(str(tmp_path / "cat"))
    cat.create_schema("s")
    with cat.transaction() as tx:
        for name in ("s.a", "s.b", "s.old"):
            tx.create_table(name, IDS)
            tx.table(name).append(pa.table({"id": [1, 2, 3]}))
    before = {m.path for m in open_store(cat.root).list("")}
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    proc = subprocess.run(
        [sys.executable, str(WORKER), "kill", cat.root, "catalog.after_stage"], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 77, proc.stderr
    store = open_store(cat.root)
    orphan = directories(cat) - {e.path for e in cat.snapshot().entries.values() if e.path}
    live = {e.path for e in cat.snapshot().entries.values() if e.path}

    def debris() -> list[str]:  # the dead writer's data and transaction files in live tables
        return sorted(m.path for m in store.list("") if m.path not in before)

    dead = [p for p in debris() if "/".join(p.split("/")[:2]) in live]
    assert dead and len(orphan) == 1  # s.w9_4, created by the dead writer, never published
    kept = cat.cleanup()  # inside the window: a live writer could still publish them
    assert not kept.directories_removed and all(store.exists(p) for p in dead)
    stats = cat.cleanup(delete_unverified=True)
    assert set(stats.directories_removed) == orphan and not (directories(cat) & orphan)
    assert not [p for p in dead if store.exists(p)]
    assert ids(cat.table("s.a")) == ids(cat.table("s.b")) == [1, 2, 3]
    with cat.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": [4]}))
    assert ids(cat.table("s.a")) == [1, 2, 3, 4]


def test_cleanup_finalizes_what_is_published_first(tmp_path: Path) -> None:
    cat = Catalog.create(str(tmp_path / "cat"))
    cat.create_schema("s")
    with cat.transaction() as tx:
        for name in ("s.a", "s.b", "s.old"):
            tx.create_table(name, IDS)
            tx.table(name).append(pa.table({"id": [1, 2, 3]}))
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    proc = subprocess.run(
        [sys.executable, str(WORKER), "kill", cat.root, "catalog.after_publish"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 77, proc.stderr
    entry = Catalog.open(cat.root).snapshot().entry("s.a")
    assert open_table(cat.table_uri(entry)).version < entry.table_version  # published, not finalized
    Catalog.open(cat.root).cleanup(timedelta(0), retain_versions=1, delete_unverified=True)
    assert open_table(cat.table_uri(entry)).version == entry.table_version
    fresh = Catalog.open(cat.root)
    assert ids(fresh.table("s.a")) == ids(fresh.table("s.b")) == [2, 3, 9004]
