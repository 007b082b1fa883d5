"""Catalog branches across processes (slow tier): a real process killed at every failpoint of the fork, publish
(as it is and running the branch's writes again), delete and cleanup steps converges without operator action
beyond re-running the step; two writers forking the same table on the same branch at once both land, on one fork.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from catalog_helpers import make

from mvcc_core import failpoints
from mvcc_core.catalog import Catalog
from mvcc_core.errors import BranchNotFoundError, FailpointError
from mvcc_core.format.branches import list_refs

WORKER = Path(__file__).with_name("catalog_branch_worker.py")
REPO = Path(__file__).resolve().parents[2]

#: (failpoint, the step the killed process runs)
MATRIX = [
    ("catalog.branch.after_fork", "write"),
    ("branch.create.after_ref", "write"),  # the core's fork, inside the first write: a ref without a manifest
    ("branch.create.before_manifest", "write"),
    ("catalog.branch.publish.after_commit", "publish"),
    # a publish that runs the branch's writes again (main deleted a row the branch deleted too): before its
    # commit point, between it and finalizing, after it
    ("catalog.branch.publish.replay.before_commit", "rerun"),
    ("catalog.after_publish", "rerun"),
    ("catalog.branch.publish.after_commit", "rerun"),
    ("branch.delete.after_mark", "delete"),  # the catalog branch (its `__manifest` branch) half deleted
    ("catalog.branch.delete.after_catalog", "delete"),
    ("catalog.cleanup.after_fork_reclaimed", "cleanup"),
]


def spawn(args: list[str], failpoints_spec: str | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    env.pop("MVCC_FAILPOINTS", None)
    if failpoints_spec:
        env["MVCC_FAILPOINTS"] = failpoints_spec
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def ids(table: object) -> list[int]:
    return sorted(table.to_table()["id"].to_pylist())  # type: ignore[attr-defined]


def forks(cat: Catalog, name: str = "dev") -> dict[str, str]:
    """Table name -> the identifier of its table branch `name`, for every table that has one."""
    out = {}
    for table in cat.tables():
        refs = list_refs(cat.table(table).state.store)
        if name in refs:
            out[table] = refs[name].identifier
    return out


def branch_write(cat: Catalog, ident: int) -> None:
    with cat.transaction(branch="dev") as tx:
        tx.table("s.a").append(pa.table({"id": [ident]}))
        tx.table("s.b").append(pa.table({"id": [ident]}))


def prepare(root: str, step: str) -> Catalog:
    cat = make(root)
    cat.create_branch("dev")
    if step == "rerun":
        with cat.transaction(branch="dev") as tx:
            tx.table("s.a").delete("id >= 2")
            tx.table("s.a").append(pa.table({"id": [5]}))
            tx.table("s.b").append(pa.table({"id": [5]}))
        with cat.transaction() as tx:
            tx.table("s.a").delete("id = 2")
            tx.table("s.c").append(pa.table({"id": [6]}))
    elif step != "write":
        branch_write(cat, 5)
    if step == "publish":
        with cat.transaction() as tx:
            tx.table("s.c").append(pa.table({"id": [6]}))
    if step == "cleanup":
        with failpoints.armed("catalog.branch.delete.after_catalog", "raise"), pytest.raises(FailpointError):
            cat.delete_branch("dev")
    return cat


def converges(cat: Catalog, point: str, step: str) -> None:
    main_before = {t: ids(cat.table(t)) for t in ("s.a", "s.b", "s.c")}
    if step == "write":
        assert ids(cat.table("s.a", branch="dev")) == [1, 2, 3], point  # nothing published
        made = forks(cat)
        assert list(made) == ["s.a"], point  # the fork the dead writer made, not recorded
        branch_write(cat, 77)  # not wedged: the fork is adopted
        assert forks(cat)["s.a"] == made["s.a"], point  # and not destroyed
        assert ids(cat.table("s.a", branch="dev")) == ids(cat.table("s.b", branch="dev")) == [1, 2, 3, 77], point
        assert cat.cleanup(delete_unverified=True).forks_removed == (), point
    elif step == "publish":
        assert ids(cat.table("s.a")) == ids(cat.table("s.b")) == [1, 2, 3, 5], point  # past the commit point
        latest = cat.latest_version
        assert cat.publish_branch("dev") == latest, point  # found in main's history: not applied twice
        assert ids(cat.table("s.a")) == [1, 2, 3, 5], point
        branch_write(cat, 7)
        assert cat.publish_branch("dev") == latest + 1, point
        assert ids(cat.table("s.a")) == ids(cat.table("s.b")) == [1, 2, 3, 5, 7], point
        assert ids(cat.table("s.c")) == [1, 2, 3, 6], point
    elif step == "rerun":
        published = {"s.a": [1, 5], "s.b": [1, 2, 3, 5], "s.c": [1, 2, 3, 6]}
        before = {"s.a": [1, 3], "s.b": [1, 2, 3], "s.c": [1, 2, 3, 6]}
        main_now = {t: ids(cat.table(t)) for t in ("s.a", "s.b", "s.c")}
        assert main_now == (before if point.endswith("before_commit") else published), point  # all or nothing
        latest = cat.latest_version
        assert cat.publish_branch("dev") == latest + point.endswith("before_commit"), point  # never twice
        assert {t: ids(cat.table(t)) for t in ("s.a", "s.b", "s.c")} == published, point
        branch_write(cat, 7)  # main holds the re-run's rows under its own fragment ids: runs again
        cat.publish_branch("dev")
        assert ids(cat.table("s.a")) == [1, 5, 7] and ids(cat.table("s.b")) == [1, 2, 3, 5, 7], point
    elif step == "delete":
        assert "dev" not in cat.branches(), point
        # finishes a deletion that stopped inside the catalog branch's; when it was gone, its forks are cleanup's
        with contextlib.suppress(BranchNotFoundError):
            cat.delete_branch("dev")
        cat.cleanup()
        assert forks(cat) == {}, point
        cat.create_branch("dev")
        branch_write(cat, 8)
        assert ids(cat.table("s.a", branch="dev")) == [1, 2, 3, 8], point
    else:
        assert len(forks(cat)) == 1, point  # one of the two reclaimed
        assert len(cat.cleanup(delete_unverified=True).forks_removed) == 1, point
        assert forks(cat) == {}, point
    if step not in ("publish", "rerun"):
        assert {t: ids(cat.table(t)) for t in ("s.a", "s.b", "s.c")} == main_before, point


@pytest.mark.slow
def test_a_branch_step_killed_at_every_failpoint_converges(tmp_path: Path) -> None:
    cats = {case: prepare(str(tmp_path / "_".join(case).replace(".", "_")), case[1]) for case in MATRIX}
    procs = {case: spawn(["kill", cats[case].root, *case]) for case in MATRIX}
    for case, proc in procs.items():
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 77, f"{case}: {err}"
    for point, step in MATRIX:
        converges(Catalog.open(cats[point, step].root), point, step)


@pytest.mark.slow
def test_two_writers_fork_the_same_table_on_the_same_branch_at_once(tmp_path: Path) -> None:
    """Both processes make their first write to s.a and s.b on `dev` at once; the fork's window is widened
    (a sleep after the fork), so the second finds the first's fork unpublished and adopts it, or published
    and retries on it. Every write lands, on one fork per table, and nothing is left to reclaim."""
    cat = prepare(str(tmp_path / "cat"), "write")
    procs = [spawn(["write", cat.root, str(w), "3"], "catalog.branch.after_fork=sleep(0.5)") for w in (1, 2)]
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
    expected = [1, 2, 3, 1000, 1001, 1002, 2000, 2001, 2002]
    assert ids(cat.table("s.a", branch="dev")) == ids(cat.table("s.b", branch="dev")) == expected
    assert sorted(forks(cat)) == ["s.a", "s.b"]
    assert cat.cleanup(delete_unverified=True).forks_removed == ()
    assert {t: ids(cat.table(t)) for t in ("s.a", "s.b")} == {"s.a": [1, 2, 3], "s.b": [1, 2, 3]}
