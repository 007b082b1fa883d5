"""Branches: create, write, check out, list, tag and delete, on every store; publish."""

from __future__ import annotations

import pickle
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mvcc_core as mvcc
from mvcc_core import failpoints
from mvcc_core.durations import parse_duration
from mvcc_core.errors import (
    BranchError,
    BranchExistsError,
    BranchNotFoundError,
    IncompatibleConflictError,
    RetryableConflictError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from mvcc_core.format.branches import list_refs
from mvcc_core.format.naming import ManifestNaming, manifest_path
from mvcc_core.format.referenced_files import referenced_files
from mvcc_core.txn.external_store import open_external_store
from mvcc_core.verify import verify


@pytest.fixture(params=["local", "memory", pytest.param("s3", marks=[pytest.mark.s3, pytest.mark.slow])])
def store_uri(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any] | None]:
    """A table location on each store; S3 (a couple of seconds a test on moto) in the slow tier."""
    if request.param == "local":
        return request.getfixturevalue("tmp_uri"), None
    if request.param == "memory":
        return request.getfixturevalue("memory_uri"), None
    return request.getfixturevalue("s3_uri"), request.getfixturevalue("s3_options")


def ids(t: mvcc.Table) -> list[int]:
    return sorted(t.to_table(columns=["id"])["id"].to_pylist())


def data_files(t: mvcc.Table) -> set[str]:
    return {m.path for m in t.state.store.list("data")}


def make(uri: str, options: dict[str, Any] | None = None) -> mvcc.Table:
    t = mvcc.write_table(pa.table({"id": [1, 2, 3]}), uri, storage_options=options)
    t.append(pa.table({"id": [4]}))
    return t


def test_a_branch_is_written_checked_out_listed_tagged_and_deleted(store_uri: tuple[str, Any]) -> None:
    uri, options = store_uri
    t = make(uri, options)
    files_before = data_files(t)
    b = t.create_branch("feat", 1)
    assert (b.branch, b.version, ids(b)) == ("feat", 1, [1, 2, 3])
    assert data_files(t) == files_before  # nothing copied
    b.append(pa.table({"id": [10]}))
    b.delete("id = 2")
    assert (b.version, ids(b)) == (3, [1, 3, 10])
    assert (t.version, ids(mvcc.open_table(uri, storage_options=options))) == (2, [1, 2, 3, 4])  # main untouched
    info = t.branches.list()["feat"]
    assert (info.parent_branch, info.parent_version, info["parent_version"]) == (None, 1, 1)
    assert info.manifest_size > 0 and info.create_at > 0
    assert [name for name, _ in t.branches.list_ordered("desc")] == ["feat"]
    assert ids(t.checkout_version(("feat", 2))) == [1, 2, 3, 10]
    assert mvcc.open_table(uri, branch="feat", storage_options=options).version == 3
    assert mvcc.open_table(uri, version=2, branch="feat", storage_options=options).version == 2
    assert t.checkout_branch("feat").version == 3 and t.checkout_branch("feat").checkout_branch("main").branch is None
    assert [(v.version, v.operation) for v in b.versions()] == [(1, "Clone"), (2, "Append"), (3, "Delete")]
    b.tags.create("audited", 2)
    t.tags.create("main-two", 2)
    assert t.tags.list()["audited"] == {"version": 2, "branch": "feat"}
    assert t.tags.list()["main-two"] == {"version": 2}
    tagged = t.checkout_version("audited")
    assert (tagged.branch, tagged.version, ids(tagged)) == ("feat", 2, [1, 2, 3, 10])
    with pytest.raises(VersionNotFoundError, match="names version 2 of branch 'feat'"):
        t.restore("audited")  # a tag of another branch never silently means main's version 2
    t.branches.delete("feat")
    assert t.branches.list() == {}
    assert data_files(t) == files_before  # the branch's own file is gone, main's stay
    assert ids(mvcc.open_table(uri, storage_options=options)) == [1, 2, 3, 4]
    with pytest.raises(BranchNotFoundError):
        t.checkout_branch("feat")


def test_branch_names_and_existence_are_checked(tmp_uri: str) -> None:
    t = make(tmp_uri)
    t.create_branch("feat")
    with pytest.raises(BranchExistsError):
        t.create_branch("feat", 1)
    for bad in ["main", "", "a/b", "..x", "-x", "x."]:
        with pytest.raises(BranchError):
            t.create_branch(bad)
    with pytest.raises(BranchNotFoundError):
        t.branches.delete("nope")
    with pytest.raises(BranchNotFoundError):
        mvcc.open_table(tmp_uri, branch="nope")
    with pytest.raises(VersionNotFoundError):
        t.create_branch("x", 9)
    assert sorted(t.branches.list()) == ["feat"]


def test_a_branch_of_a_branch_and_deletion_order(tmp_uri: str) -> None:
    t = make(tmp_uri)
    feat = t.create_branch("feat")
    feat.append(pa.table({"id": [5]}))
    sub = feat.create_branch("sub")
    sub.append(pa.table({"id": [6]}))
    assert t.branches.list()["sub"].parent_branch == "feat"
    assert ids(mvcc.open_table(tmp_uri, branch="sub")) == [1, 2, 3, 4, 5, 6]
    with pytest.raises(BranchError, match="fork from it"):
        t.branches.delete("feat")
    with pytest.raises(BranchError, match="forked from feat"):
        t.publish_branch("sub")  # sub lands on feat, not main
    assert feat.publish_branch("sub") == 4
    assert ids(feat) == [1, 2, 3, 4, 5, 6]
    t.branches.delete("sub")
    t.branches.delete("feat")
    assert ids(mvcc.open_table(tmp_uri)) == [1, 2, 3, 4]


def test_writes_of_every_kind_commit_to_the_branch_only(tmp_uri: str) -> None:
    t = make(tmp_uri)
    b = t.create_branch("feat")
    b.update({"id": "id + 100"}, where="id = 1")
    b.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(pa.table({"id": [4, 7]}))
    b.optimize.compact_files()
    b.overwrite(pa.table({"id": [8, 9]}))
    assert ids(b) == [8, 9]
    assert ids(mvcc.open_table(tmp_uri)) == [1, 2, 3, 4] and mvcc.open_table(tmp_uri).version == 2


def test_publish_fast_forwards_when_main_has_not_moved(store_uri: tuple[str, Any]) -> None:
    uri, options = store_uri
    t = make(uri, options)
    b = t.create_branch("feat")
    b.append(pa.table({"id": [10, 11]}))
    b.delete("id = 1 or id = 10")  # a deletion on an inherited and on a new fragment
    version = t.publish_branch("feat", commit_message="audited", transaction_properties={"run": "7"})
    assert (version, t.version, ids(t)) == (3, 3, ids(b))
    assert ids(mvcc.open_table(uri, storage_options=options)) == [2, 3, 4, 11]
    txn = t.transaction()
    assert (txn.message, txn.transaction_properties["run"], txn.transaction_properties["mvcc.published_branch"]) == (
        "audited",
        "7",
        "feat",
    )
    assert t.publish_branch("feat") == 3  # nothing new: no version
    b.append(pa.table({"id": [12]}))
    assert t.publish_branch("feat", delete_branch=True) == 4  # only what is new since the last publish
    assert ids(t) == [2, 3, 4, 11, 12] and t.branches.list() == {}
    assert ids(mvcc.open_table(uri, storage_options=options)) == [2, 3, 4, 11, 12]  # files survive the delete


def test_publish_after_main_moved_checks_the_conflict_rules(tmp_uri: str) -> None:
    t = make(tmp_uri)
    b = t.create_branch("feat")
    b.append(pa.table({"id": [10]}))
    b.delete("id = 1")
    t.append(pa.table({"id": [20]}))
    t.delete("id = 3")  # same fragment as the branch's delete, other rows: rebased
    assert t.publish_branch("feat") == 5
    assert ids(t) == [2, 4, 10, 20]

    c = t.create_branch("conflicting")
    c.update({"id": "id + 100"}, where="id < 5")
    t.delete("id = 2")  # the same row: the branch's update is run again on main's rows
    assert t.publish_branch("conflicting") == 7
    assert ids(t) == [10, 20, 104]
    assert t.versions()[-1].transaction_properties["mvcc.published_branch_replayed"] == "true"

    e = t.create_branch("unrecorded")
    e.commit(e.delete_uncommitted(pc.field("id") == 10))  # an Arrow Expression: not recorded in words
    t.delete("id = 10")
    before = t.version
    with pytest.raises(mvcc.errors.BranchNotReplayableError, match="can run again"):
        t.publish_branch("unrecorded")
    assert mvcc.open_table(tmp_uri).version == before and ids(mvcc.open_table(tmp_uri)) == [20, 104]
    assert sorted(t.branches.list()) == ["conflicting", "feat", "unrecorded"]  # no scratch branch left

    g = t.create_branch("nothing-left")
    g.update({"id": "id + 1"}, where="id = 20")
    t.delete("id = 20")  # the update runs again and matches nothing: the publish changes no row
    assert t.publish_branch("nothing-left", delete_branch=True) == before + 2
    assert ids(t) == [104] and sorted(t.branches.list()) == ["conflicting", "feat", "unrecorded"]

    d = t.create_branch("after-overwrite")
    d.append(pa.table({"id": [30]}))
    t.overwrite(pa.table({"id": [0]}))
    with pytest.raises((RetryableConflictError, IncompatibleConflictError)):
        t.publish_branch("after-overwrite")
    assert ids(mvcc.open_table(tmp_uri)) == [0]


def test_a_schema_change_fast_forwards_or_runs_again_on_the_moved_main(tmp_uri: str) -> None:
    t = make(tmp_uri)
    b = t.create_branch("feat")
    b.add_columns({"x": "id * 2"})
    b.delete("id = 4")
    late = t.create_branch("late")
    late.add_columns({"y": "id + 1"})
    late.alter_columns({"path": "y", "name": "z"})
    t.append(pa.table({"id": [7]}))
    assert t.publish_branch("late") == 4  # main moved: the schema changes run again on its rows, one version
    assert t.schema.names == ["id", "z"] and t.to_table().sort_by("id")["z"].to_pylist() == [2, 3, 4, 5, 8]
    t.restore(2)  # main's latest is a Restore now: still moved since the fork
    assert t.publish_branch("feat") == 6
    assert t.schema.names == ["id", "x"] and t.to_table().sort_by("id")["x"].to_pylist() == [2, 4, 6]
    c = mvcc.open_table(tmp_uri).create_branch("fresh")
    c.add_columns({"w": "id * 3"})
    c.drop_columns("x")
    c.update_config({"owner": "fresh"})  # carried by the Merge too
    t = mvcc.open_table(tmp_uri)
    assert t.publish_branch("fresh") == 7  # a fast-forward: the branch's fragments and schema as they are
    assert t.schema.names == ["id", "w"] and t.to_table().sort_by("id")["w"].to_pylist() == [3, 6, 9]
    assert t.manifest.config["owner"] == "fresh"
    typed = t.create_branch("typed")
    typed.alter_columns({"path": "w", "data_type": pa.int32()})  # a type is not recorded: cannot run again
    t.append(pa.table({"id": [9], "w": [27]}))
    with pytest.raises(mvcc.errors.BranchNotReplayableError, match="can run again"):
        t.publish_branch("typed")
    assert mvcc.open_table(tmp_uri).version == 8


def test_retention_keeps_what_branches_use_and_their_publish_bases(tmp_uri: str) -> None:
    t = make(tmp_uri)
    b = t.create_branch("feat", 1)
    b.append(pa.table({"id": [10]}))
    t.overwrite(pa.table({"id": [0]}))
    t.append(pa.table({"id": [5]}))
    stats = t.cleanup_old_versions(older_than=parse_duration("0s"), delete_unverified=True)
    assert stats.removed_versions == (1, 2, 3)  # main keeps no version for the branch, only its files
    b.cleanup_old_versions(older_than=parse_duration("0s"), delete_unverified=True)
    assert ids(mvcc.open_table(tmp_uri, branch="feat")) == [1, 2, 3, 10]  # main's old files are the branch's too
    assert [v.version for v in b.versions()] == [1, 2]  # the fork is the branch's base
    assert verify(mvcc.open_table(tmp_uri, branch="feat")).ok
    t.branches.delete("feat")
    stats = t.cleanup_old_versions(older_than=parse_duration("0s"), delete_unverified=True)
    assert stats.removed_versions == () and ids(mvcc.open_table(tmp_uri)) == [0, 5]
    assert len(data_files(t)) == 2


def test_retention_keeps_only_the_forks_files_and_a_publish_over_removed_history_reruns_the_writes(
    tmp_uri: str,
) -> None:
    t = mvcc.write_table(pa.table({"id": [1, 2, 3], "v": [1, 2, 3]}), tmp_uri)
    b = t.create_branch("feat")  # forks main's version 1
    b.update({"v": "v * 10"}, where="id >= 2")
    for _ in range(3):
        t.update({"v": "v + 1"}, where="id = 3")  # rewrites id 3's fragment each time: new files, old ones unused
    t.append(pa.table({"id": [4], "v": [4]}))
    stats = t.cleanup_old_versions(older_than=parse_duration("0s"), delete_unverified=True)
    assert stats.removed_versions == (1, 2, 3, 4)  # not every main version after the fork: only the latest stays
    needed = set().union(
        *(
            referenced_files(v.manifest)
            for v in [mvcc.open_table(tmp_uri), *(b.checkout_version(("feat", n)) for n in (1, 2))]
        )
    )
    assert data_files(t) == {p for p in needed if p.startswith("data/")}  # exactly: main's, the fork's, the branch's
    assert verify(mvcc.open_table(tmp_uri, branch="feat")).ok
    assert sorted(mvcc.open_table(tmp_uri, branch="feat").to_table().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "v": 1},
        {"id": 2, "v": 20},
        {"id": 3, "v": 30},
    ]
    t.publish_branch("feat", delete_branch=True)  # main's base is gone: the update runs again on main's rows
    rows = sorted(mvcc.open_table(tmp_uri).to_table().to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 1, "v": 1}, {"id": 2, "v": 20}, {"id": 3, "v": 60}, {"id": 4, "v": 40}]
    assert verify(mvcc.open_table(tmp_uri)).ok


def test_a_column_rewrite_on_the_branch_survives_a_rebase_over_another_fragment(tmp_uri: str) -> None:
    t = mvcc.write_table(pa.table({"id": [1, 2], "v": [10, 20]}), tmp_uri)
    t.append(pa.table({"id": [3, 4], "v": [30, 40]}))
    b = t.create_branch("feat")
    b.update({"v": "v + 1000"}, where="id = 3", mode="rewrite_columns")  # new column files for fragment 1
    b.delete("id = 1")  # and a deletion in fragment 0
    t.delete("id = 2")  # main: another row of fragment 0: the publish is rebased
    t.publish_branch("feat")
    got = mvcc.open_table(tmp_uri).to_table().sort_by("id")
    assert got["id"].to_pylist() == [3, 4] and got["v"].to_pylist() == [1030, 40]


def test_racing_creators_of_one_name_and_racing_writers_on_one_branch(tmp_uri: str) -> None:
    t = make(tmp_uri)
    outcomes: list[str] = []

    def create(version: int) -> None:
        try:
            mvcc.open_table(tmp_uri).create_branch("race", version)
            outcomes.append("created")
        except BranchExistsError:
            outcomes.append("exists")

    threads = [threading.Thread(target=create, args=(1 + i % 2,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["created", "exists", "exists", "exists"]
    first = mvcc.open_table(tmp_uri, branch="race")
    second = mvcc.open_table(tmp_uri, branch="race")
    first.append(pa.table({"id": [100]}))
    second.append(pa.table({"id": [200]}))  # read an older version: the usual conflict rules pass it
    assert ids(mvcc.open_table(tmp_uri, branch="race"))[-2:] == [100, 200]
    assert ids(t) == [1, 2, 3, 4]


def test_a_branch_state_pickles_as_the_branch_for_executor_tasks(tmp_uri: str) -> None:
    b = make(tmp_uri).create_branch("feat")
    b.append(pa.table({"id": [10]}))
    state = pickle.loads(pickle.dumps(b.state))  # what a compaction or index task receives
    assert mvcc.Table(state).branch == "feat" and ids(mvcc.Table(state)) == [1, 2, 3, 4, 10]
    plan = mvcc.compaction.plan(b)
    results = [mvcc.compaction.run_task(task, pickle.loads(pickle.dumps(b.state))) for task in plan.tasks]
    mvcc.compaction.commit(b.state, results)
    assert len(mvcc.open_table(tmp_uri, branch="feat").manifest.fragments) == 1
    assert mvcc.open_table(tmp_uri).version == 2  # main untouched


def test_a_new_key_upserted_on_the_branch_and_on_main_lands_once(tmp_uri: str) -> None:
    # the publish used to carry the branch's upsert as a plain insert: both rows of key 500 survived
    t = mvcc.write_table(pa.table({"id": [0, 1], "v": [0, 1]}), tmp_uri)
    b = t.create_branch("feat")
    b.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
        pa.table({"id": [500], "v": [1]})
    )
    t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
        pa.table({"id": [500], "v": [2]})
    )
    t.publish_branch("feat")
    rows = sorted(t.to_table().to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 0, "v": 0}, {"id": 1, "v": 1}, {"id": 500, "v": 1}]  # the branch's upsert ran last


def test_a_publish_runs_the_branchs_writes_again_on_every_store(store_uri: tuple[str, Any]) -> None:
    uri, options = store_uri
    t = mvcc.write_table(pa.table({"id": [1, 2, 3], "v": [1, 2, 3]}), uri, storage_options=options)
    b = t.create_branch("feat")
    b.update({"v": "v * 10"}, where="id >= 2")
    b.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
        pa.table({"id": [3, 9], "v": [33, 99]})
    )
    b.delete("v = 20")
    t.update({"v": "v + 1"}, where="id = 3")  # a row the branch changed too
    t.append(pa.table({"id": [4], "v": [2]}))
    version = t.publish_branch("feat", delete_branch=True)
    main = mvcc.open_table(uri, storage_options=options)
    assert (
        main.version == version == 4
        and main.versions()[-1].transaction_properties["mvcc.published_branch_replayed"] == "true"
    )
    rows = sorted(main.to_table().to_pylist(), key=lambda r: r["id"])
    # run again on main's rows: main's new row 4 is updated (2 -> 20) and then deleted (v = 20) too
    assert rows == [{"id": 1, "v": 1}, {"id": 3, "v": 33}, {"id": 9, "v": 99}]
    assert list(main.branches.list()) == [] and verify(main).ok


def test_branches_of_a_table_committing_through_an_external_store(tmp_path: Path) -> None:
    uri, db = str(tmp_path / "t"), f"sqlite://{tmp_path / 'db'}"
    mvcc.write_table(pa.table({"id": [1, 2, 3]}), uri)
    t = mvcc.open_table(uri, external_store=db)
    t.append(pa.table({"id": [4]}))  # main's version 2: through the store
    b = t.create_branch("feat")
    b.append(pa.table({"id": [10]}))
    b.delete("id = 1")
    t.delete("id = 1")  # the same row: the publish runs the branch's writes again
    t.append(pa.table({"id": [20]}))
    assert ids(mvcc.open_table(uri, branch="feat", external_store=db)) == [2, 3, 4, 10]
    assert t.publish_branch("feat") == 5
    store = open_external_store(db)
    assert store.get_latest_version(t.uri) == (5, f"{t.uri}/{manifest_path(5, ManifestNaming.V2)}")
    assert store.get(t.uri, 3) is not None and ids(mvcc.open_table(uri, external_store=db)) == [2, 3, 4, 10, 20]
    # the branch's versions are the object store's (tree/feat/_versions/), never the store's: its keys are main's
    assert [v.version for v in mvcc.open_table(uri, branch="feat", external_store=db).versions()] == [2, 3, 4]
    t.cleanup_old_versions(older_than=parse_duration("0s"), delete_unverified=True)
    assert ids(mvcc.open_table(uri, branch="feat", external_store=db)) == [2, 3, 4, 10]
    t.branches.delete("feat")
    assert verify(mvcc.open_table(uri, external_store=db)).ok and list(t.branches.list()) == []


@pytest.mark.slow
@pytest.mark.s3
def test_no_branches_where_the_object_store_has_no_conditional_put(
    s3_uri: str, s3_options: dict[str, Any], tmp_path: Path
) -> None:
    options = {**s3_options, "conditional_put": "false"}
    t = mvcc.write_table(
        pa.table({"id": [1]}), s3_uri, storage_options=options, external_store=f"sqlite://{tmp_path / 'db'}"
    )
    with pytest.raises(UnsupportedFeatureError, match="put-if-not-exists"):
        t.create_branch("feat")
    assert list(t.branches.list()) == []


def test_config_and_metadata_changes_on_the_branch_are_published_in_the_same_version(tmp_uri: str) -> None:
    t = mvcc.write_table(pa.table({"id": [1, 2, 3]}), tmp_uri)
    t.update_config({"keep": "main", "drop": "x", "shared": "0"})
    b = t.create_branch("feat")
    b.update_config({"owner": "audit", "shared": "1"}, delete=["drop"])
    b.update_schema_metadata({"source": "branch"})
    b.update_field_metadata({"id": {"unit": "count"}})
    b.delete("id = 1")
    t.update_config({"main-only": "yes"})  # another key: the publish goes through as it is
    t.append(pa.table({"id": [4]}))
    version = t.publish_branch("feat")
    main = mvcc.open_table(tmp_uri)
    assert main.version == version and ids(main) == [2, 3, 4]
    assert main.manifest.config == {"keep": "main", "owner": "audit", "shared": "1", "main-only": "yes"}
    assert main.schema.metadata == {b"source": b"branch"} and main.schema.field("id").metadata == {b"unit": b"count"}
    assert "mvcc.published_branch_replayed" not in main.versions()[-1].transaction_properties

    c = main.create_branch("again")
    c.update_config({"shared": "2"})
    main.update_config({"shared": "main"})  # the same key: the branch's change runs again after main's
    main.publish_branch("again")
    assert mvcc.open_table(tmp_uri).manifest.config["shared"] == "2"
    assert main.versions()[-1].transaction_properties["mvcc.published_branch_replayed"] == "true"


def test_an_index_built_on_the_branch_is_built_on_main_after_the_publish(tmp_uri: str) -> None:
    t = mvcc.write_table(pa.table({"id": [1, 2, 3], "v": [1, 2, 3]}), tmp_uri)
    b = t.create_branch("feat")
    b.append(pa.table({"id": [10], "v": [10]}))
    b.create_scalar_index("id", "BTREE")
    b.create_scalar_index("v", "BITMAP", name="dropped")
    b.drop_index("dropped")  # not on the branch's latest version: not carried
    t.append(pa.table({"id": [20], "v": [20]}))
    version = t.publish_branch("feat", delete_branch=True)
    main = mvcc.open_table(tmp_uri)
    assert main.version == version + 1  # the rows in one version, then the index's CreateIndex
    assert [i["name"] for i in main.list_indices()] == ["id_idx"]
    assert main.list_indices()[0]["num_unindexed_fragments"] == 0
    assert main.to_table(filter="id = 10")["v"].to_pylist() == [10] and verify(main).ok


def test_a_write_that_fails_on_mains_rows_when_run_again_refuses_the_publish(tmp_uri: str) -> None:
    t = mvcc.write_table(pa.table({"id": [1, 2, 3], "v": [1, 2, 3]}), tmp_uri)
    b = t.create_branch("feat")
    b.update({"v": "v + 1"}, where="id <= 2")
    t.delete("id = 1")  # the same row: the update must run again
    t.drop_columns("v")  # ... on a main without its column
    before = t.version
    with pytest.raises(IncompatibleConflictError, match=r"branch 'feat' version 2 \(Update\) cannot run again"):
        t.publish_branch("feat")
    main = mvcc.open_table(tmp_uri)
    assert main.version == before and ids(main) == [2, 3] and sorted(main.branches.list()) == ["feat"]


@pytest.mark.slow  # the publisher sleeps at a failpoint (about 1 s)
def test_a_main_commit_during_the_run_again_runs_the_writes_again_on_the_newer_main(tmp_uri: str) -> None:
    t = mvcc.write_table(pa.table({"id": [1, 2, 3, 4], "v": [1, 2, 3, 4]}), tmp_uri)
    b = t.create_branch("feat")
    b.update({"v": "v * 10"}, where="id <= 2")
    t.update({"v": "v + 1"}, where="id = 1")  # the same row: the publish runs the update again
    published: list[int] = []
    with failpoints.armed("branch.publish.replay.before_commit", "sleep(0.5)"):
        publisher = threading.Thread(target=lambda: published.append(t.publish_branch("feat")))
        publisher.start()
        other = mvcc.open_table(tmp_uri)
        while not list_refs(other.state.store, scratch=True).keys() - other.branches.list().keys():
            time.sleep(0.01)
        other.delete("id = 2")  # a row the scratch branch's update changed: its commit conflicts
        publisher.join(30)
    main = mvcc.open_table(tmp_uri)
    assert published == [main.version] == [4]  # version 3 is main's delete; the writes ran again after it
    assert sorted(main.to_table().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "v": 20},
        {"id": 3, "v": 3},
        {"id": 4, "v": 4},
    ]
    assert sorted(main.branches.list()) == ["feat"]


def _ids(table: pa.Table) -> pa.Table:
    return pa.table({"id": pa.array(table, pa.int64())})


def test_a_second_publish_after_main_moved_lands_on_mains_rows(tmp_path: Path) -> None:
    """After a publish while main had moved, main holds the branch's rows under its own fragment ids: the next
    publish must not carry the branch's ids (it deleted main's rows and doubled the branch's before)."""
    uri = str(tmp_path / "t")
    mvcc.write_table(_ids([1, 2, 3]), uri).create_branch("b").append(_ids([10, 11]))
    mvcc.open_table(uri).append(_ids([20, 21]))
    mvcc.open_table(uri).publish_branch("b")
    mvcc.open_table(uri, branch="b").delete("id = 10")
    mvcc.open_table(uri).publish_branch("b")
    assert sorted(mvcc.open_table(uri).to_table()["id"].to_pylist()) == [1, 2, 3, 11, 20, 21]


@pytest.mark.parametrize("main_moved", [False, True])
def test_two_publishes_of_one_branch_at_once_land_it_once(tmp_path: Path, main_moved: bool) -> None:
    uri = str(tmp_path / "t")
    mvcc.write_table(_ids([1, 2, 3]), uri).create_branch("b").append(_ids([10, 11]))
    if main_moved:
        mvcc.open_table(uri).append(_ids([20]))
    handles = [mvcc.open_table(uri), mvcc.open_table(uri)]  # both read the same base
    start = threading.Barrier(2)

    def publish(handle: mvcc.Table) -> None:
        start.wait()
        handle.publish_branch("b")

    threads = [threading.Thread(target=publish, args=(h,)) for h in handles]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = [1, 2, 3, 10, 11] + ([20] if main_moved else [])
    assert sorted(mvcc.open_table(uri).to_table()["id"].to_pylist()) == expected


def test_a_publish_that_runs_again_scans_the_parents_history_since_the_base_once(
    tmp_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding the base reads every parent transaction since it; the run-again path then reads only the parent's
    versions after that scan, to see whether a concurrent publish landed (before: it read them all again)."""
    t = make(tmp_uri)
    b = t.create_branch("feat")
    b.delete("id = 2")
    for i in range(8):
        t.append(pa.table({"id": [100 + i]}))
    t.delete("id = 2")  # the same row: the branch's delete runs again
    loads: list[int] = []
    committer = type(t.state.committer)
    real = committer.load_transaction
    monkeypatch.setattr(committer, "load_transaction", lambda self, *a, **k: loads.append(1) or real(self, *a, **k))
    t.publish_branch("feat")
    assert t.versions()[-1].transaction_properties["mvcc.published_branch_replayed"] == "true"
    assert ids(t) == [1, 3, 4, *range(100, 108)]
    # every transaction the publish reads (the base scan, conflict checks, the branch's records): 42 before,
    # when the run-again path read the 9 parent versions since the fork a second time
    assert len(loads) <= 42 - 9, len(loads)
