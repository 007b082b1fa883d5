"""Catalog branches: the API, lazy per-table forks, the repair of an unpublished fork, the fork
reconciler, and `publish_branch` under DuckLake's rules (docs/guide/branches.md, "Catalog branches")."""

from __future__ import annotations

import random
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from catalog_helpers import IDS, make

from mvcc_core import failpoints, open_table
from mvcc_core.catalog import (
    Catalog,
    CatalogError,
    IncompatibleCatalogConflictError,
    RetryableCatalogConflictError,
    branch_rerun,
)
from mvcc_core.catalog.forks import CATALOG_FORK, ForkStatus, classify, fork_of, fresh_branch_rows
from mvcc_core.errors import BranchExistsError, BranchNotFoundError, FailpointError
from mvcc_core.format.branches import list_refs, read_ref
from mvcc_core.txn import branches as txn_branches


@pytest.fixture(params=["memory", "local"])
def root(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue("memory_uri" if request.param == "memory" else "tmp_uri")


def ids(table: Any) -> list[int]:
    return sorted(table.to_table()["id"].to_pylist())


def refs(cat: Catalog, name: str) -> dict[str, Any]:
    return list_refs(cat.table("s." + name).state.store)


def fork(state: Any, name: str) -> Any:
    """A table branch made as the catalog's writer makes a fork (its ref marked with the catalog branch)."""
    return txn_branches.create_branch(state, name, metadata={CATALOG_FORK: name})


def test_a_users_own_table_branch_on_a_catalog_table_is_never_reclaimed(tmp_uri: str) -> None:
    cat = make(tmp_uri)
    mine = cat.table("s.a").create_branch("experiment")  # a table branch of the user's, no catalog branch
    mine.append(pa.table({"id": [99]}))
    stats = cat.cleanup(delete_unverified=True)
    assert stats.forks_removed == () and list(refs(cat, "a")) == ["experiment"]
    assert 99 in ids(open_table(mine.uri, branch="experiment"))
    cat.create_branch("experiment")  # the user's table branch does not block the name
    with pytest.raises(CatalogError, match="of its own"), cat.transaction(branch="experiment") as tx:
        tx.table("s.a").append(pa.table({"id": [5]}))
    assert 99 in ids(open_table(mine.uri, branch="experiment"))
    with cat.transaction(branch="experiment") as tx:  # the catalog branch still writes its other tables
        tx.table("s.b").append(pa.table({"id": [5]}))
    assert 5 in ids(cat.table("s.b", branch="experiment"))


def test_branch_api_and_lazy_forks(root: str) -> None:
    cat = make(root)
    point = cat.create_branch("dev")
    assert point == cat.latest_version and list(cat.branches()) == ["dev"]
    assert cat.branches()["dev"].parent_version == point
    with pytest.raises(BranchExistsError):
        cat.create_branch("dev")
    with cat.transaction(branch="dev") as tx:
        tx.table("s.a").append(pa.table({"id": [10]}))
        tx.table("s.a").delete("id = 1")
    with cat.transaction() as tx:  # main moves on its own
        tx.table("s.b").append(pa.table({"id": [20]}))
    assert ids(cat.table("s.a", branch="dev")) == [2, 3, 10]
    assert ids(cat.table("s.a")) == [1, 2, 3]
    assert ids(cat.table("s.b", branch="dev")) == [1, 2, 3]  # never written on the branch: main as of the point
    assert ids(cat.table("s.b")) == [1, 2, 3, 20]
    # only the table written was forked, and the catalog branch records the fork
    assert list(refs(cat, "a")) == ["dev"] and refs(cat, "b") == {} and refs(cat, "c") == {}
    snap = cat.snapshot(branch="dev")
    assert fork_of(snap.entry("s.a")) == "dev" and fork_of(snap.entry("s.b")) is None
    assert snap.version == point + 1 and cat.snapshot(point, branch="dev").version == point
    assert ids(open_table(cat.table_uri(snap.entry("s.a")), branch="dev")) == [2, 3, 10]
    assert open_table(cat.table_uri(snap.entry("s.a"))).version == cat.snapshot().entry("s.a").table_version
    with cat.transaction(branch="dev") as tx:  # a second write lands on the fork
        tx.table("s.a").append(pa.table({"id": [11]}))
    assert ids(cat.table("s.a", branch="dev")) == [2, 3, 10, 11]
    cat.delete_branch("dev")
    assert cat.branches() == {} and refs(cat, "a") == {}
    with pytest.raises(BranchNotFoundError):
        cat.snapshot(branch="dev")
    assert ids(cat.table("s.a")) == [1, 2, 3]


def test_ddl_on_a_branch_is_refused_before_anything_is_written(memory_uri: str) -> None:
    cat = make(memory_uri)
    cat.create_branch("dev")
    before = cat.snapshot(branch="dev").version
    with pytest.raises(CatalogError, match="only data changes"), cat.transaction(branch="dev") as tx:
        tx.create_table("s.new", IDS)
    with pytest.raises(CatalogError, match="only data changes"), cat.transaction(branch="dev") as tx:
        tx.drop_table("s.a")
    assert cat.snapshot(branch="dev").version == before and cat.tables() == ["s.a", "s.b", "s.c"]


def test_publish_branch_lands_every_table_in_one_catalog_version(memory_uri: str) -> None:
    cat = make(memory_uri)
    cat.create_branch("dev")
    with cat.transaction(branch="dev") as tx:
        tx.table("s.a").append(pa.table({"id": [10]}))
        tx.table("s.b").delete("id = 2")
    with cat.transaction() as tx:
        tx.table("s.c").append(pa.table({"id": [30]}))
        tx.table("s.a").append(pa.table({"id": [40]}))
    before = cat.latest_version
    version = cat.publish_branch("dev")
    assert version == before + 1
    assert cat.versions()[-1].properties["mvcc.published_branch"] == "dev"
    assert ids(cat.table("s.a")) == [1, 2, 3, 10, 40] and ids(cat.table("s.b")) == [1, 3]
    assert ids(cat.table("s.c")) == [1, 2, 3, 30]
    assert ids(cat.table("s.a", version=before)) == [1, 2, 3, 40]  # the version before saw none of it
    assert cat.publish_branch("dev") == version  # nothing new: nothing published
    with cat.transaction(branch="dev") as tx:
        tx.table("s.b").append(pa.table({"id": [50]}))
    assert cat.publish_branch("dev") == version + 1  # only what is new since the last publish
    assert ids(cat.table("s.b")) == [1, 3, 50] and ids(cat.table("s.a")) == [1, 2, 3, 10, 40]


def test_publish_refused_leaves_main_untouched(memory_uri: str) -> None:
    cat = make(memory_uri)
    cat.create_branch("dev2")
    with cat.transaction(branch="dev2") as tx:
        tx.table("s.c").append(pa.table({"id": [9]}))
    cat.drop_table("s.c")  # DuckLake: an insert into a table another dropped
    before = cat.latest_version
    with pytest.raises(IncompatibleCatalogConflictError):
        cat.publish_branch("dev2")
    assert cat.latest_version == before and cat.tables() == ["s.a", "s.b"]


# seed 1 publishes as it is, seed 0 runs the branch's writes again (the same row deleted on both sides)
@pytest.mark.parametrize("seed", [0, 1, *(pytest.param(s, marks=pytest.mark.slow) for s in range(2, 8))])
def test_publish_matches_a_plain_evaluation(seed: int, memory_uri: str) -> None:
    """Random appends and deletes on the branch and on main; the publish lands exactly the model's rows, as it
    is or (the same row deleted on both sides) by running the branch's writes again."""
    rng = random.Random(seed)
    cat = make(memory_uri)
    cat.create_branch("dev")
    main_rows = {t: {1, 2, 3} for t in "abc"}
    branch_rows = {t: {1, 2, 3} for t in "abc"}
    branch_deleted: dict[str, set[int]] = {t: set() for t in "abc"}
    main_deleted: dict[str, set[int]] = {t: set() for t in "abc"}
    added: dict[str, set[int]] = {t: set() for t in "abc"}
    next_id = 100
    for _ in range(8):
        on_branch = rng.random() < 0.6
        rows = branch_rows if on_branch else main_rows
        with cat.transaction(branch="dev" if on_branch else None) as tx:
            for t in rng.sample("abc", rng.randint(1, 2)):
                if rng.random() < 0.6 or not rows[t]:
                    tx.table(f"s.{t}").append(pa.table({"id": [next_id]}))
                    rows[t].add(next_id)
                    if on_branch:
                        added[t].add(next_id)
                    next_id += 1
                else:
                    gone = rng.choice(sorted(rows[t]))
                    tx.table(f"s.{t}").delete(f"id = {gone}")
                    rows[t].discard(gone)
                    (branch_deleted if on_branch else main_deleted)[t].add(gone)
        for t in "abc":
            assert ids(cat.table(f"s.{t}", branch="dev")) == sorted(branch_rows[t])
            assert ids(cat.table(f"s.{t}")) == sorted(main_rows[t])
    before = cat.latest_version
    cat.publish_branch("dev")  # the same row deleted on both sides: the branch's writes run again
    replayed = cat.versions()[-1].properties.get("mvcc.published_branch_replayed") == "true"
    assert replayed == any(branch_deleted[t] & main_deleted[t] for t in "abc")  # only the same row conflicts
    assert cat.latest_version == before + 1
    expected = {t: (main_rows[t] - branch_deleted[t]) | (added[t] & branch_rows[t]) for t in "abc"}
    for t in "abc":
        assert ids(cat.table(f"s.{t}")) == sorted(expected[t]), t


def test_an_unpublished_fork_is_adopted_by_the_next_write(memory_uri: str) -> None:
    """The fork wedge: a writer killed between the fork and its publish leaves a fork the catalog branch
    does not record. The next write repairs it exactly once, by publishing it, and destroys nothing."""
    cat = make(memory_uri)
    cat.create_branch("dev")
    tx = cat.transaction(branch="dev")
    tx.table("s.a").append(pa.table({"id": [10]}))
    with failpoints.armed("catalog.branch.after_fork", "raise"), pytest.raises(FailpointError):
        tx.commit()
    ref = read_ref(cat.table("s.a").state.store, "dev")
    assert fork_of(cat.snapshot(branch="dev").entry("s.a")) is None  # not recorded
    with cat.transaction(branch="dev") as tx:  # not wedged
        tx.table("s.a").append(pa.table({"id": [11]}))
    assert read_ref(cat.table("s.a").state.store, "dev").identifier == ref.identifier  # adopted, not re-made
    assert ids(cat.table("s.a", branch="dev")) == [1, 2, 3, 11]
    assert fork_of(cat.snapshot(branch="dev").entry("s.a")) == "dev"


def test_a_fork_another_writer_published_is_never_destroyed(memory_uri: str) -> None:
    """Two writers stage the first write of one table on one branch from the same snapshot: the second finds
    the fork recorded on a fresh read, retries on the newer branch version, and lands on top of it."""
    cat = make(memory_uri)
    cat.create_branch("dev")
    other = Catalog.open(cat.root)
    first, second = cat.transaction(branch="dev"), other.transaction(branch="dev")
    first.table("s.a").append(pa.table({"id": [10]}))
    second.table("s.a").append(pa.table({"id": [11]}))
    first.commit()
    ref = read_ref(cat.table("s.a").state.store, "dev")
    second.commit()
    assert read_ref(cat.table("s.a").state.store, "dev").identifier == ref.identifier
    assert ids(cat.table("s.a", branch="dev")) == [1, 2, 3, 10, 11]


def test_classify_decides_from_the_catalog_branch(memory_uri: str) -> None:
    cat = make(memory_uri)
    cat.create_branch("dev")
    with cat.transaction(branch="dev") as tx:
        tx.table("s.a").append(pa.table({"id": [10]}))
    main_b = cat.table("s.b")
    pinned = cat.snapshot(branch="dev").entry("s.b").table_version
    main_b.create_branch("dev")  # what an interrupted first write leaves
    rows = fresh_branch_rows(cat.manifest_uri, "dev", None)
    path_a, path_b = cat.snapshot().entry("s.a").path, cat.snapshot().entry("s.b").path
    ref_a = read_ref(cat.table("s.a").state.store, "dev")
    ref_b = read_ref(main_b.state.store, "dev")
    assert classify(rows, path_a, "dev", ref_a, None).status is ForkStatus.RECORDED
    assert classify(rows, path_b, "dev", ref_b, pinned).status is ForkStatus.ADOPTABLE
    assert classify(rows, path_b, "dev", ref_b, pinned + 1).status is ForkStatus.ORPHAN  # has its own versions
    assert classify(None, path_a, "dev", ref_a, None).status is ForkStatus.ORPHAN  # no such catalog branch


def test_cleanup_reconciles_orphaned_forks_children_first(tmp_uri: str) -> None:
    cat = make(tmp_uri)
    cat.create_branch("dev")
    with cat.transaction(branch="dev") as tx:
        tx.table("s.a").append(pa.table({"id": [10]}))
        tx.table("s.b").append(pa.table({"id": [10]}))
    # a deletion stopped between the catalog branch and its forks
    with failpoints.armed("catalog.branch.delete.after_catalog", "raise"), pytest.raises(FailpointError):
        cat.delete_branch("dev")
    assert cat.branches() == {} and "dev" in refs(cat, "a")
    with pytest.raises(CatalogError, match="cleanup"):
        cat.create_branch("dev")
    # a fork the live catalog branch never placed its table on, with a child of its own (made as the
    # catalog's writer makes forks: marked in the ref)
    cat.create_branch("live")
    stray = fork(cat.table("s.c").checkout(1).state, "live")
    fork(stray, "child")
    young = fork(cat.table("s.b").state, "live")  # looks like a writer between its fork and its publish
    stats = cat.cleanup()
    assert sorted(stats.forks_removed) == sorted(
        [f"{cat.snapshot().entry(n).path}@{b}" for n, b in (("s.a", "dev"), ("s.b", "dev"), ("s.c", "child"))]
        + [f"{cat.snapshot().entry('s.c').path}@live"]
    )
    assert refs(cat, "a") == {} and refs(cat, "c") == {} and list(refs(cat, "b")) == ["live"]
    assert open_table(young.uri, branch="live").branch == "live"
    assert cat.cleanup(delete_unverified=True).forks_removed == (f"{cat.snapshot().entry('s.b').path}@live",)
    cat.create_branch("dev")  # the name is free again
    with cat.transaction(branch="live") as tx:  # the live branch writes as before
        tx.table("s.b").append(pa.table({"id": [5]}))
    assert ids(cat.table("s.b", branch="live")) == [1, 2, 3, 5]


def test_cleanup_reclaims_a_chain_of_orphaned_forks_deepest_first(tmp_uri: str) -> None:
    """Forks three deep under one table (a fork of a fork of a fork): each is reclaimed after its children."""
    cat = make(tmp_uri)
    cat.create_branch("live")
    stray = fork(cat.table("s.c").checkout(1).state, "live")
    child = fork(stray, "a-child")
    fork(child, "b-grandchild")  # sorts after its parent by name: only its depth puts it first
    path = cat.snapshot().entry("s.c").path
    removed = cat.cleanup().forks_removed
    assert sorted(removed) == sorted(f"{path}@{b}" for b in ("live", "a-child", "b-grandchild"))
    assert refs(cat, "c") == {}


def test_retention_keeps_what_a_branch_reads(memory_uri: str) -> None:
    cat = make(memory_uri)
    cat.create_branch("dev")
    with cat.transaction(branch="dev") as tx:
        tx.table("s.a").append(pa.table({"id": [10]}))
    for i in range(3):
        with cat.transaction() as tx:
            tx.table("s.b").append(pa.table({"id": [20 + i]}))
            tx.table("s.a").append(pa.table({"id": [20 + i]}))
    cat.drop_table("s.c")
    cat.cleanup(older_than=timedelta(0), delete_unverified=True)
    assert ids(cat.table("s.b", branch="dev")) == [1, 2, 3]  # main's version as of the branch point
    assert ids(cat.table("s.c", branch="dev")) == [1, 2, 3]  # dropped on main, still the branch's
    assert ids(cat.table("s.a", branch="dev")) == [1, 2, 3, 10]


@pytest.mark.s3
@pytest.mark.slow
def test_catalog_branch_on_s3(s3_uri: str, s3_options: dict[str, Any]) -> None:
    cat = make(s3_uri, s3_options)
    cat.create_branch("dev")
    with cat.transaction(branch="dev") as tx:
        tx.table("s.a").append(pa.table({"id": [10]}))
        tx.table("s.b").delete("id = 3")
    with cat.transaction() as tx:
        tx.table("s.c").append(pa.table({"id": [30]}))
    assert ids(cat.table("s.a", branch="dev")) == [1, 2, 3, 10] and ids(cat.table("s.a")) == [1, 2, 3]
    cat.publish_branch("dev")
    reopened = Catalog.open(cat.root, storage_options=s3_options)
    assert ids(reopened.table("s.a")) == [1, 2, 3, 10] and ids(reopened.table("s.b")) == [1, 2]
    reopened.delete_branch("dev")
    assert reopened.branches() == {} and reopened.cleanup().forks_removed == ()


def test_a_branch_publish_stopped_after_its_commit_point_is_rolled_forward(memory_uri: str) -> None:
    """The fork's new version is published (the branch's `__manifest` version carries its manifest) but not
    finalized: readers of the branch and main's cleanup roll it forward from the branch's catalog version."""
    cat = make(memory_uri)
    cat.create_branch("dev")
    tx = cat.transaction(branch="dev")
    tx.table("s.a").append(pa.table({"id": [10]}))
    with failpoints.armed("catalog.after_publish", "raise"), pytest.raises(FailpointError):
        tx.commit()
    entry = cat.snapshot(branch="dev").entry("s.a")
    assert fork_of(entry) == "dev" and open_table(cat.table_uri(entry), branch="dev").version < entry.table_version
    cat.cleanup(older_than=timedelta(0))
    assert open_table(cat.table_uri(entry), branch="dev").version == entry.table_version
    assert ids(Catalog.open(cat.root).table("s.a", branch="dev")) == [1, 2, 3, 10]


def test_a_stray_fork_is_refused_by_the_write_and_reclaimed_by_cleanup(memory_uri: str) -> None:
    """A fork of the catalog branch that is not the fork it would make (here: forked from an older version) is
    never adopted: the write names cleanup, which reclaims it at once (no writer makes one)."""
    cat = make(memory_uri)
    cat.create_branch("dev")
    fork(cat.table("s.c").checkout(1).state, "dev")
    before = cat.snapshot(branch="dev").version
    with pytest.raises(CatalogError, match="cleanup"), cat.transaction(branch="dev") as tx:
        tx.table("s.c").append(pa.table({"id": [10]}))
    assert cat.snapshot(branch="dev").version == before
    assert cat.cleanup().forks_removed == (f"{cat.snapshot().entry('s.c').path}@dev",)
    with cat.transaction(branch="dev") as tx:
        tx.table("s.c").append(pa.table({"id": [10]}))
    assert ids(cat.table("s.c", branch="dev")) == [1, 2, 3, 10] and ids(cat.table("s.c")) == [1, 2, 3]


@pytest.mark.slow
def test_two_concurrent_publishes_of_one_branch_land_it_once(tmp_uri: str) -> None:
    """Both publishes read the same base and stage the same changes; the second to commit finds the first's
    catalog version carrying the branch's publish and is refused, so no row lands twice."""
    cat = make(tmp_uri)
    cat.create_branch("dev")
    with cat.transaction(branch="dev") as tx:
        tx.table("s.a").append(pa.table({"id": [10]}))
    outcomes: list[object] = []

    def publish() -> None:
        try:
            outcomes.append(Catalog.open(cat.root).publish_branch("dev"))
        except IncompatibleCatalogConflictError as exc:
            outcomes.append(exc.rule_code)

    with failpoints.armed("catalog.after_stage", "sleep(1)"):
        threads = [threading.Thread(target=publish) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert sorted(outcomes, key=str) == sorted([cat.latest_version, "branch_published"], key=str)
    assert ids(cat.table("s.a")) == [1, 2, 3, 10]


def test_a_republish_after_main_moved_runs_the_writes_again_rather_than_misapplying_them(memory_uri: str) -> None:
    """After a publish while main had moved, main holds the branch's rows under other fragment ids: a second
    publish of a change to them as it is would land on main's own fragments (before the check: id 10 stayed, 20
    and 21 were deleted, 11 doubled). The branch's writes since run again on main's rows instead; a
    fast-forwarded table publishes again as it is."""
    cat = make(memory_uri)
    cat.create_branch("dev")
    with cat.transaction(branch="dev") as tx:
        tx.table("s.a").append(pa.table({"id": [10, 11]}))
        tx.table("s.b").append(pa.table({"id": [10]}))
    with cat.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": [20, 21]}))
    cat.publish_branch("dev")
    with cat.transaction(branch="dev") as tx:
        tx.table("s.a").delete("id = 10")
    before = cat.latest_version
    assert cat.publish_branch("dev") == before + 1
    assert cat.versions()[-1].properties["mvcc.published_branch_replayed"] == "true"
    assert ids(cat.table("s.a")) == [1, 2, 3, 11, 20, 21] and ids(cat.table("s.b")) == [1, 2, 3, 10]
    cat.create_branch("dev2")
    with cat.transaction(branch="dev2") as tx:
        tx.table("s.b").append(pa.table({"id": [12]}))
    cat.publish_branch("dev2")  # main did not move: fork and main stay aligned
    with cat.transaction(branch="dev2") as tx:
        tx.table("s.b").delete("id = 12")
    cat.publish_branch("dev2")
    assert "mvcc.published_branch_replayed" not in cat.versions()[-1].properties
    assert ids(cat.table("s.b")) == [1, 2, 3, 10]


VALUES = pa.schema([("id", pa.int64()), ("v", pa.int64())])


def random_write(rng: random.Random, next_id: int) -> tuple[str, Any]:
    """A random write: (its SQL-ish description, (kind, argument)) that `apply_write` and `stage_write` run."""
    kind = rng.choice(["delete_range", "delete_v", "upsert", "upsert", "append"])
    if kind == "delete_range":
        lo = rng.randint(0, 12)
        return kind, (lo, lo + rng.randint(1, 3))
    if kind == "delete_v":
        return kind, rng.randint(60, 160)
    if kind == "upsert":
        return kind, {key: rng.randint(0, 150) for key in rng.sample(range(14), 2)}
    return kind, {next_id: rng.randint(0, 150)}


def apply_write(rows: dict[int, int], kind: str, arg: Any) -> bool:
    """The plain evaluation of a write on `rows` (id -> v); whether it changed anything (a delete that matches
    nothing commits nothing, so a publish has nothing to run again: as `Table.publish_branch`)."""
    if kind == "delete_range":
        gone = [k for k in rows if arg[0] <= k < arg[1]]
    elif kind == "delete_v":
        gone = [k for k, v in rows.items() if v > arg]
    else:  # upsert, append
        rows.update(arg)
        return True
    for key in gone:
        del rows[key]
    return bool(gone)


def stage_write(tx: Any, table: str, kind: str, arg: Any) -> None:
    """The same write staged in a catalog transaction."""
    t = tx.table(table)
    if kind == "delete_range":
        t.delete(f"id >= {arg[0]} AND id < {arg[1]}")
    elif kind == "delete_v":
        t.delete(f"v > {arg}")
    else:
        data = pa.table({"id": list(arg), "v": list(arg.values())}, schema=VALUES)
        if kind == "append":
            t.append(data)
        else:
            t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(data)


def rows_of(table: Any) -> list[tuple[int, int]]:
    return sorted((r["id"], r["v"]) for r in table.to_table().to_pylist())


@pytest.mark.parametrize("seed", [0, 1, *(pytest.param(s, marks=pytest.mark.slow) for s in range(2, 12))])
def test_a_publish_after_main_changed_the_same_rows_runs_the_branch_writes_again(seed: int, memory_uri: str) -> None:
    """Main and the branch both delete row 0 of s.x (the table's rules: retryable), then random range and value
    deletes, upserts and appends on both sides: the publish runs the branch's writes again on main's latest rows,
    and each table equals, row by row, a plain evaluation of the branch's writes applied after main's."""
    rng = random.Random(seed)
    cat = Catalog.create(memory_uri)
    cat.create_schema("s")
    with cat.transaction() as tx:
        for name in ("s.x", "s.y"):
            tx.create_table(name, VALUES)
            tx.table(name).append(pa.table({"id": list(range(10)), "v": [i * 10 for i in range(10)]}))
    cat.create_branch("dev")
    main_writes: dict[str, list[tuple[str, Any]]] = {"s.x": [("delete_range", (0, 1))], "s.y": []}
    branch_writes: dict[str, list[tuple[str, Any]]] = {"s.x": [("delete_range", (0, 1))], "s.y": []}
    next_id = 100
    for _ in range(4):
        for writes in rng.sample([main_writes, branch_writes], 2):
            for table in rng.sample(["s.x", "s.y"], rng.randint(1, 2)):
                writes[table].append(random_write(rng, next_id))
                next_id += 1
    for branch, writes in ((None, main_writes), ("dev", branch_writes)):
        with cat.transaction(branch=branch) as tx:
            for table, done in writes.items():
                for kind, arg in done:
                    stage_write(tx, table, kind, arg)
    before = cat.latest_version
    assert cat.publish_branch("dev") == before + 1
    assert cat.versions()[-1].properties["mvcc.published_branch_replayed"] == "true"
    for table in ("s.x", "s.y"):
        on_branch = {i: i * 10 for i in range(10)}
        committed = [(kind, arg) for kind, arg in branch_writes[table] if apply_write(on_branch, kind, arg)]
        assert rows_of(cat.table(table, branch="dev")) == sorted(on_branch.items()), table
        expected = {i: i * 10 for i in range(10)}
        for kind, arg in main_writes[table] + committed:
            apply_write(expected, kind, arg)
        assert rows_of(cat.table(table)) == sorted(expected.items()), table
    assert cat.publish_branch("dev") == before + 1  # published once


def files_under(root: str) -> set[str]:
    return {str(p.relative_to(root)) for p in Path(root).rglob("*") if p.is_file()}


@pytest.mark.parametrize("write", ["expression", "overwrite"])
def test_a_write_that_cannot_run_again_is_incompatible_and_leaves_main_untouched(write: str, tmp_uri: str) -> None:
    """The same row changed on both sides, and the branch's write on s.a is not recorded in a form that can run
    again (a pyarrow Expression filter; an overwrite): IncompatibleCatalogConflictError saying what to do, never
    the retryable conflict that would come back on every run; main and its files untouched, the branch kept."""
    cat = make(tmp_uri)
    cat.create_branch("dev")
    with cat.transaction(branch="dev") as tx:
        if write == "expression":
            tx.table("s.a").delete(pc.field("id") == 1)
        else:
            tx.table("s.a").overwrite(pa.table({"id": [0]}), where="id <= 1")
        tx.table("s.b").delete("id = 3")
    with cat.transaction() as tx:
        tx.table("s.a").delete("id = 1")
    before, files = cat.latest_version, files_under(tmp_uri)
    for _ in range(2):
        with pytest.raises(IncompatibleCatalogConflictError, match="delete the branch") as refused:
            cat.publish_branch("dev")
        assert refused.value.rule_code == "branch_write_not_replayable" and refused.value.object_name == "s.a"
    assert cat.latest_version == before and files_under(tmp_uri) == files
    assert ids(cat.table("s.a")) == [2, 3] and ids(cat.table("s.b")) == [1, 2, 3] and "dev" in cat.branches()


@pytest.mark.parametrize("moves", [1, 3])
def test_main_moving_while_the_writes_run_again_runs_them_again_then_is_retryable(
    moves: int, memory_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Main commits, at the re-run's commit point, a delete of a row the re-run deletes too (and a new row): the
    transaction's own checks find it (retryable) and the writes run again on the newer version. When main moves
    at every attempt (three), the publish gives up with the retryable conflict (exit 75: main kept moving)."""
    cat = make(memory_uri)
    cat.create_branch("dev")
    with cat.transaction(branch="dev") as tx:
        tx.table("s.a").delete("id >= 1")
        tx.table("s.b").append(pa.table({"id": [9]}))
    with cat.transaction() as tx:
        tx.table("s.a").delete("id = 2")
    victims = iter([3, 21, 22])
    moved: list[int] = []

    def main_moves(point: str) -> None:
        if point == "catalog.branch.publish.replay.before_commit" and len(moved) < moves:
            moved.append(1)
            with Catalog.open(cat.root).transaction() as tx:
                tx.table("s.a").delete(f"id = {next(victims)}")
                tx.table("s.a").append(pa.table({"id": [20 + len(moved)]}))

    monkeypatch.setattr(branch_rerun, "failpoint", main_moves)
    before = cat.latest_version
    if moves == 1:
        assert cat.publish_branch("dev") == before + 2
        assert ids(cat.table("s.a")) == [] and ids(cat.table("s.b")) == [1, 2, 3, 9]
    else:
        with pytest.raises(RetryableCatalogConflictError):
            cat.publish_branch("dev")
        assert cat.latest_version == before + 3 and ids(cat.table("s.b")) == [1, 2, 3]
        assert ids(cat.table("s.a")) == [1, 23]
