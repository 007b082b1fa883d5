"""The crash matrix: a real process killed (os._exit at a failpoint, no cleanup) at every catalog failpoint
and at every core failpoint a publish reaches; after each, a later open converges without operator action:
nothing published is lost, nothing unpublished is visible, every snapshot is consistent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from catalog_helpers import make as make_catalog

from mvcc_core import open_table
from mvcc_core.catalog import Catalog
from mvcc_core.io import open_store
from mvcc_core.txn.external_store import is_staged

WORKER = Path(__file__).with_name("catalog_mixed_worker.py")
REPO = Path(__file__).resolve().parents[2]

#: failpoint -> whether the killed transaction passed its commit point (the `__manifest` commit)
MATRIX = {
    "catalog.after_table_staged": False,
    "catalog.after_stage": False,
    "commit.after_transaction_file": False,  # inside the `__manifest` commit, before its manifest is put
    "commit.before_manifest_put": False,
    "catalog.after_publish": True,
    "catalog.after_finalize_copy": True,  # one staged manifest of a two-change chain copied, not the other
    "catalog.after_finalize": True,
}


def spawn(args: list[str], options: dict[str, Any] | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    env["CATALOG_WORKER_OPTIONS"] = json.dumps(options)
    env.pop("MVCC_FAILPOINTS", None)
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def ids(table: Any) -> list[int]:
    return sorted(table.to_table()["id"].to_pylist())


def make(root: str) -> Catalog:
    return make_catalog(root, tables=("s.a", "s.b", "s.old"))


def unpublished_debris(cat: Catalog) -> list[str]:
    """Transaction files of table versions no manifest has (a dead writer's staging; format 4 stages no
    manifest, its catalog version would have carried them), and staged manifests of older formats."""
    store = open_store(cat.root)
    out = [m.path for m in store.list("") if is_staged(m.path)]
    for entry in cat.snapshot().entries.values():
        if entry.path:
            table = open_table(cat.table_uri(entry))
            referenced = {table.checkout_version(v).manifest.transaction_file for v in range(1, table.version + 1)}
            txns = open_store(table.uri).list("_transactions")
            out += [m.path for m in txns if m.path.rsplit("/", 1)[-1] not in referenced]
    return out


def check_consistent(cat: Catalog) -> None:
    """Every catalog version: s.a and s.b changed together, so they hold the same ids."""
    for version in range(1, cat.latest_version + 1):
        snap = cat.snapshot(version)
        if {"s.a", "s.b"} <= set(snap.tables()):
            assert ids(snap.table("s.a")) == ids(snap.table("s.b")), f"catalog version {version}"


@pytest.mark.slow
def test_a_writer_killed_at_every_failpoint_converges(tmp_path: Path) -> None:
    cats = {point: make(str(tmp_path / point.replace(".", "_"))) for point in MATRIX}
    before = {point: (cat.latest_version, cat.snapshot()) for point, cat in cats.items()}
    procs = {point: spawn(["kill", cat.root, point]) for point, cat in cats.items()}
    for point, proc in procs.items():
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 77, f"{point}: {err}"
    for point, published in MATRIX.items():
        cat = Catalog.open(cats[point].root)
        version, snap = before[point]
        direct = {name: snap.entry(name) for name in ("s.a", "s.b", "s.old")}
        if not published:
            assert cat.latest_version == version, point
            assert cat.tables() == ["s.a", "s.b", "s.old"], point
            assert ids(cat.table("s.a")) == ids(cat.table("s.b")) == [1, 2, 3], point
            for name, entry in direct.items():  # no table moved: only final manifest names count
                assert open_table(cat.table_uri(entry)).version == entry.table_version, (point, name)
        else:
            assert cat.latest_version == version + 1, point
            assert cat.tables() == ["s.a", "s.b", "s.w9_4"], point
            assert ids(cat.table("s.a")) == ids(cat.table("s.b")) == [2, 3, 9004], point
            assert ids(cat.table("s.w9_4")) == [9004], point
            published_a = cat.snapshot().entry("s.a")
            assert open_table(cat.table_uri(published_a)).version == published_a.table_version, point
            assert ids(cat.table("s.old", version=version)) == [1, 2, 3], point  # time travel past the drop
        check_consistent(cat)
        with cat.transaction() as tx:  # the next writer is not blocked by anything the dead one left
            tx.table("s.a").append(pa.table({"id": [77]}))
            tx.table("s.b").append(pa.table({"id": [77]}))
            tx.table("s.a").delete("id = 2")
            tx.table("s.b").delete("id = 2")
        assert ids(cat.table("s.a")) == ids(cat.table("s.b")), point
        assert 77 in ids(cat.table("s.a")) and 2 not in ids(cat.table("s.a")), point
        check_consistent(cat)
        if point in ("catalog.after_table_staged", "catalog.after_stage", "commit.before_manifest_put"):
            assert unpublished_debris(cat), point  # what retention reclaims (`Catalog.cleanup`)


def test_an_error_after_the_commit_point_removes_nothing(tmp_path: Path) -> None:
    """An exception after `__manifest` is committed (here a failpoint raising) leaves the transaction
    committed: its staged manifests and data are named by a catalog version, so nothing is cleaned up and
    the next reader rolls it forward."""
    from mvcc_core import failpoints
    from mvcc_core.errors import FailpointError

    cat = make(str(tmp_path / "cat"))
    tx = cat.transaction()
    tx.table("s.a").append(pa.table({"id": [10]}))
    tx.table("s.b").append(pa.table({"id": [10]}))
    with failpoints.armed("catalog.after_publish", "raise"), pytest.raises(FailpointError):
        tx.commit()
    assert tx.published_version == cat.latest_version
    with pytest.raises(ValueError):
        tx.commit()  # committed: not again
    fresh = Catalog.open(cat.root)
    assert ids(fresh.table("s.a")) == ids(fresh.table("s.b")) == [1, 2, 3, 10]


# ---- catalog branch publishes killed: at every failpoint a publish crosses, and at random moments --------------

BRANCH_WORKER = Path(__file__).with_name("catalog_branch_worker.py")
TABLES = ("s.a", "s.b", "s.c")

#: (failpoint, the publish's kind) -> whether the killed publish passed its commit point (main's `__manifest`)
PUBLISH_MATRIX = {
    ("catalog.after_table_staged", "publish"): False,
    ("catalog.after_stage", "publish"): False,
    ("commit.after_transaction_file", "publish"): False,
    ("commit.before_manifest_put", "publish"): False,
    ("catalog.after_publish", "publish"): True,
    ("catalog.after_finalize_copy", "publish"): True,
    ("catalog.after_finalize", "publish"): True,
    ("catalog.branch.publish.after_commit", "publish"): True,
    # the branch's writes run again on main's latest (main deleted a row the branch deleted too)
    ("catalog.branch.publish.replay.before_commit", "rerun"): False,
    ("catalog.after_stage", "rerun"): False,
    ("catalog.after_publish", "rerun"): True,
    ("catalog.branch.publish.after_commit", "rerun"): True,
}


def branch_spawn(args: list[str], **popen: Any) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    env.pop("MVCC_FAILPOINTS", None)
    return subprocess.Popen(
        [sys.executable, str(BRANCH_WORKER), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def rows_of(cat: Catalog, branch: str | None = None) -> dict[str, list[int]]:
    return {t: ids(cat.table(t, branch=branch)) for t in TABLES}


def publish_case(root: str, kind: str) -> tuple[Catalog, dict[str, list[int]], dict[str, list[int]]]:
    """A catalog whose branch `dev` changed s.a and s.b (s.c only on main); (catalog, main's rows before the
    publish, main's rows after it): the model every killed publish is checked against."""
    cat = make_catalog(root, tables=TABLES)
    cat.create_branch("dev")
    with cat.transaction(branch="dev") as tx:
        tx.table("s.a").append(pa.table({"id": [10, 11]}))
        tx.table("s.b").delete("id = 1")
        tx.table("s.b").append(pa.table({"id": [20]}))
    if kind == "rerun":
        with cat.transaction(branch="dev") as tx:
            tx.table("s.a").delete("id = 2")
        with cat.transaction() as tx:  # main deletes the same row: the publish runs the branch's writes again
            tx.table("s.a").delete("id = 2")
            tx.table("s.c").append(pa.table({"id": [6]}))
        after = {"s.a": [1, 3, 10, 11], "s.b": [2, 3, 20], "s.c": [1, 2, 3, 6]}
    else:
        with cat.transaction() as tx:  # main moved: the publish lands on a newer catalog version
            tx.table("s.c").append(pa.table({"id": [6]}))
        after = {"s.a": [1, 2, 3, 10, 11], "s.b": [2, 3, 20], "s.c": [1, 2, 3, 6]}
    return cat, rows_of(cat), after


def recovers(root: str, before: dict[str, list[int]], after: dict[str, list[int]], case: object) -> bool:
    """After a killed publish: main is `before` or `after` as a whole (never some tables of the publish, never
    a row twice), every catalog version too; the publish run again lands it exactly once; cleanup, a later
    branch write and its publish work. Returns whether the killed publish had landed."""
    cat = Catalog.open(root)
    found = rows_of(cat)
    assert found in (before, after), (case, found)
    landed = found == after
    for version in range(1, cat.latest_version + 1):  # no catalog version shows part of the publish
        snap = cat.snapshot(version)
        if set(TABLES) <= set(snap.tables()):
            seen = {t: ids(snap.table(t)) for t in TABLES}
            assert seen["s.b"] in ([1, 2, 3], [2, 3, 20]) and (seen["s.b"] == [2, 3, 20]) == (10 in seen["s.a"]), case
    latest = cat.latest_version
    published = cat.publish_branch("dev")
    assert published == latest + (not landed), case  # the dead publish's version is found: never twice
    assert rows_of(cat) == after, case
    assert cat.publish_branch("dev") == published, case  # nothing new: nothing published
    cat.cleanup(delete_unverified=True)
    assert rows_of(Catalog.open(root)) == after, case
    with cat.transaction(branch="dev") as tx:
        tx.table("s.a").append(pa.table({"id": [99]}))
        tx.table("s.b").append(pa.table({"id": [99]}))
    cat.publish_branch("dev")
    final = rows_of(Catalog.open(root))
    assert final == {**after, "s.a": sorted([*after["s.a"], 99]), "s.b": sorted([*after["s.b"], 99])}, case
    return landed


@pytest.mark.slow
def test_a_branch_publish_killed_at_every_failpoint_is_all_or_nothing_and_recovers(tmp_path: Path) -> None:
    cases = {case: publish_case(str(tmp_path / "_".join(case).replace(".", "_")), case[1]) for case in PUBLISH_MATRIX}
    for case, (cat, before, after) in cases.items():
        proc = branch_spawn(["kill", cat.root, *case])
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 77, f"{case}: {err}"
        assert recovers(cat.root, before, after, case) is PUBLISH_MATRIX[case], case


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["publish", "rerun"])
def test_a_branch_publish_killed_at_random_moments_is_all_or_nothing_and_recovers(tmp_path: Path, kind: str) -> None:
    """SIGKILL (no failpoint, no cleanup) at moments spread over a publish's run, measured first on a copy."""
    import random
    import signal

    cat, before, after = publish_case(str(tmp_path / "calibrate"), kind)
    proc = branch_spawn(["publish-when-told", cat.root], stdin=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    out, err = proc.communicate("go\n", timeout=180)
    assert proc.returncode == 0, err
    took = float(out.strip())
    assert rows_of(Catalog.open(cat.root)) == after

    rng = random.Random(f"catalog-branch-publish-{kind}")
    runs = 8
    outcomes = []
    for i in range(runs):
        root = str(tmp_path / f"run{i}")
        cat, before, after = publish_case(root, kind)
        proc = branch_spawn(["publish-when-told", root], stdin=subprocess.PIPE)
        assert proc.stdin is not None and proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        delay = took * (i + rng.random()) / runs * 1.2  # spread over the publish, and a little past it
        proc.stdin.write("go\n")
        proc.stdin.flush()
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        outcomes.append(recovers(root, before, after, (kind, i, round(delay, 3))))
    print(f"{kind}: publish {took:.3f} s; landed before the kill: {outcomes}")
