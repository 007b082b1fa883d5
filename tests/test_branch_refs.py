"""Refs and their neighbours: publishes' scratch branches never touch a user's branch, temporary files are never
read as refs or tags, a fork killed after its ref survives retention, a ref cycle is a clear error."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core import failpoints
from mvcc_core.errors import BranchError, FailpointError, RetryableConflictError
from mvcc_core.format.branches import ScratchMark, list_refs, new_scratch_name
from mvcc_core.txn import branches as txn_branches


def ids(t: mvcc.Table) -> list[int]:
    return sorted(t.to_table(columns=["id"])["id"].to_pylist())


def needs_replay(uri: str, name: str) -> mvcc.Table:
    """main 1..4; branch `name` deleted row 1 and appended 10; main deleted row 1 too (a publish runs again)."""
    t = mvcc.write_table(pa.table({"id": [1, 2, 3, 4]}), uri)
    b = t.create_branch(name)
    b.delete("id = 1")
    b.append(pa.table({"id": [10]}))
    t.delete("id = 1")
    return t


def test_a_users_branch_named_like_an_old_scratch_branch_survives_a_publish(tmp_uri: str) -> None:
    t = needs_replay(tmp_uri, "audit")
    t.create_branch("audit.replay-q3").append(pa.table({"id": [30]}))
    t.publish_branch("audit")
    assert t.versions()[-1].transaction_properties["mvcc.published_branch_replayed"] == "true"
    assert ids(t) == [2, 3, 4, 10]
    assert sorted(t.branches.list()) == ["audit", "audit.replay-q3"]
    assert ids(mvcc.open_table(tmp_uri, branch="audit.replay-q3")) == [2, 3, 4, 30]


def test_a_200_character_branch_publishes_by_running_its_writes_again(tmp_uri: str) -> None:
    name = "b" * 200
    t = needs_replay(tmp_uri, name)
    t.publish_branch(name)
    assert ids(t) == [2, 3, 4, 10]


def test_a_leftover_scratch_branch_is_hidden_and_removed_once_its_lease_ran_out(
    tmp_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = needs_replay(tmp_uri, "audit")
    with failpoints.armed("branch.publish.replay.before_commit"), pytest.raises(FailpointError):
        t.publish_branch("audit")
    scratch = set(list_refs(t.state.store, scratch=True)) - {"audit"}
    assert len(scratch) == 0  # the failing publish removed its own (finally)
    from mvcc_core.table import branch_replay

    # a leftover: a scratch branch created as a killed publish leaves it
    name = new_scratch_name()
    mark = ScratchMark("audit", "x", int(time.time()) + 3600)
    txn_branches.create_branch(t.state, name, scratch=mark)
    assert sorted(t.branches.list()) == ["audit"]  # the user's view has no scratch branch
    assert name in list_refs(t.state.store, scratch=True)
    t.publish_branch("audit")
    assert name in list_refs(t.state.store, scratch=True)  # leased: it may be a concurrent publisher's
    monkeypatch.setattr(branch_replay.time, "time", lambda: mark.lease_until + 1)
    mvcc.open_table(tmp_uri, branch="audit").append(pa.table({"id": [11]}))
    t.publish_branch("audit")
    assert name not in list_refs(t.state.store, scratch=True)
    assert ids(mvcc.open_table(tmp_uri)) == [2, 3, 4, 10, 11]


def test_a_publish_whose_scratch_branch_is_removed_meanwhile_is_a_retryable_conflict(tmp_uri: str) -> None:
    t = needs_replay(tmp_uri, "audit")
    errors: list[BaseException] = []

    def publish() -> None:
        try:
            mvcc.open_table(tmp_uri).publish_branch("audit")
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            errors.append(exc)

    with failpoints.armed("branch.publish.replay.before_commit", "sleep(1)"):
        thread = threading.Thread(target=publish)
        thread.start()
        deadline = time.monotonic() + 20
        while not (scratch := set(list_refs(t.state.store, scratch=True)) - {"audit"}):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        txn_branches.delete_branch(t.state, scratch.pop())  # what a publish after an expired lease does
        thread.join(30)
    assert len(errors) == 1 and isinstance(errors[0], RetryableConflictError), errors
    assert ids(mvcc.open_table(tmp_uri)) == [2, 3, 4]  # nothing published
    mvcc.open_table(tmp_uri).publish_branch("audit")  # the retry lands it once
    assert ids(mvcc.open_table(tmp_uri)) == [2, 3, 4, 10]


@pytest.mark.parametrize("point", ["branch.create.after_ref", "branch.publish.replay.after_scratch"])
def test_a_scratch_branch_removed_while_it_is_made_or_used_is_a_retryable_conflict(tmp_uri: str, point: str) -> None:
    t = needs_replay(tmp_uri, "audit")
    errors: list[BaseException] = []

    def publish() -> None:
        try:
            mvcc.open_table(tmp_uri).publish_branch("audit")
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            errors.append(exc)

    with failpoints.armed(point, "sleep(1)"):  # held between the scratch ref and its first manifest, or after
        thread = threading.Thread(target=publish)
        thread.start()
        deadline = time.monotonic() + 20
        while not (scratch := set(list_refs(t.state.store, scratch=True)) - {"audit"}):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        name = scratch.pop()
        txn_branches.delete_branch(t.state, name)
        thread.join(30)
    assert len(errors) == 1 and isinstance(errors[0], RetryableConflictError), errors
    left = [p for p in Path(tmp_uri).rglob("*") if name in str(p) and p.is_file()]
    assert not left, left  # no fork files behind the removed ref (a local disk keeps the empty folders)
    assert ids(mvcc.open_table(tmp_uri)) == [2, 3, 4]
    mvcc.open_table(tmp_uri).publish_branch("audit")
    assert ids(mvcc.open_table(tmp_uri)) == [2, 3, 4, 10]


@pytest.mark.parametrize("where", ["branches", "tags"])
@pytest.mark.parametrize("torn", [False, True])
def test_temporary_files_under_refs_are_never_refs_or_tags(tmp_uri: str, where: str, torn: bool) -> None:
    t = needs_replay(tmp_uri, "audit")
    t.tags.create("v1", 1)
    body = (
        b'{"parentBr'
        if torn
        else (Path(tmp_uri) / f"_refs/{where}/{'audit' if where == 'branches' else 'v1'}.json").read_bytes()
    )
    for name in ("_tmp-0123456789abcdef0123456789abcdef-x.json", "_tmp-0123456789abcdef0123456789abcdef-x.json.tmp"):
        (Path(tmp_uri) / f"_refs/{where}" / name).write_bytes(body)
    assert sorted(t.branches.list()) == ["audit"]
    assert t.tags.list() == {"v1": {"version": 1}}
    t.publish_branch("audit")
    assert ids(t) == [2, 3, 4, 10]
    t.cleanup_old_versions(older_than=timedelta(0), delete_unverified=True, error_if_tagged_old_versions=False)
    assert not [p for p in (Path(tmp_uri) / "_refs").rglob("_tmp-*")]  # stale temporary files removed
    assert ids(mvcc.open_table(tmp_uri, branch="audit")) == [2, 3, 4, 10]


def test_a_temporary_name_never_ends_in_the_final_suffix() -> None:
    from mvcc_core.io.backend import is_temporary, temp_name

    name = temp_name("audit.json")
    assert not name.endswith(".json") and name.endswith(".tmp") and is_temporary(f"_refs/branches/{name}")


def test_a_fork_killed_after_its_ref_survives_mains_retention(tmp_uri: str) -> None:
    t = mvcc.write_table(pa.table({"id": [1, 2, 3]}), tmp_uri)
    t.append(pa.table({"id": [4]}))
    with failpoints.armed("branch.create.after_ref"), pytest.raises(FailpointError):
        t.create_branch("audit")
    t.delete("id = 1")
    t.append(pa.table({"id": [5]}))
    t.cleanup_old_versions(older_than=timedelta(0))
    assert ids(mvcc.open_table(tmp_uri, branch="audit")) == [1, 2, 3, 4]
    t.cleanup_old_versions(older_than=timedelta(0))  # completed: the branch's own manifest keeps its files now
    assert ids(mvcc.open_table(tmp_uri, branch="audit")) == [1, 2, 3, 4]


@pytest.mark.parametrize("parent", ["self", "pair"])
def test_a_ref_cycle_is_a_branch_error_naming_it(tmp_uri: str, parent: str) -> None:
    t = mvcc.write_table(pa.table({"id": [1]}), tmp_uri)
    with failpoints.armed("branch.create.after_ref"), pytest.raises(FailpointError):
        t.create_branch("a")
    refs = Path(tmp_uri) / "_refs/branches"
    doc = json.loads((refs / "a.json").read_text())
    doc["parentBranch"] = "a" if parent == "self" else "b"
    (refs / "a.json").write_text(json.dumps(doc))
    if parent == "pair":
        (refs / "b.json").write_text(json.dumps(doc | {"parentBranch": "a"}))
    with pytest.raises(BranchError, match="cycle: a -> "):
        mvcc.open_table(tmp_uri, branch="a")
    t.branches.delete("a")  # a broken ref can still be deleted


WRITE_REF = """
import sys
import mvcc_core as mvcc
from mvcc_core import failpoints
t = mvcc.open_table(sys.argv[1])
failpoints.arm("store.local.after_temp", "exit")
if sys.argv[2] == "branch":
    t.create_branch("late")
else:
    t.tags.create("late", 1)
"""


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["branch", "tag"])
def test_a_process_killed_inside_a_ref_or_tag_write_leaves_no_ref_or_tag(tmp_uri: str, kind: str) -> None:
    import os
    import subprocess
    import sys

    t = needs_replay(tmp_uri, "audit")
    t.tags.create("v1", 1)
    root = Path(failpoints.__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-c", WRITE_REF, tmp_uri, kind], env=env, capture_output=True, timeout=120)
    assert done.returncode == failpoints.DEFAULT_EXIT_CODE, done.stderr
    left = list((Path(tmp_uri) / "_refs").rglob("_tmp-*"))
    assert len(left) == 1 and left[0].name.endswith(".tmp")  # the killed write's temporary file
    assert sorted(t.branches.list()) == ["audit"] and t.tags.list() == {"v1": {"version": 1}}
    t.publish_branch("audit")
    assert ids(t) == [2, 3, 4, 10]
    t.cleanup_old_versions(older_than=timedelta(0), delete_unverified=True, error_if_tagged_old_versions=False)
    assert not list((Path(tmp_uri) / "_refs").rglob("_tmp-*"))
    t.create_branch("late")  # the name was never taken
    t.tags.create("late", t.version)


@pytest.mark.slow
@pytest.mark.s3
def test_ref_and_tag_writes_on_s3_leave_only_their_final_objects(s3_uri: str, s3_options: dict, s3_client) -> None:
    t = mvcc.write_table(pa.table({"id": [1, 2, 3, 4]}), s3_uri, storage_options=s3_options)
    b = t.create_branch("audit")
    b.delete("id = 1")
    t.delete("id = 1")
    t.tags.create("v1", 1)
    t.publish_branch("audit")  # by replay: a scratch branch created and deleted
    bucket, prefix = s3_uri[len("s3://") :].split("/", 1)
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/_refs/")["Contents"]]
    assert sorted(k[len(prefix) + 1 :] for k in keys) == ["_refs/branches/audit.json", "_refs/tags/v1.json"]
    assert ids(t) == [2, 3, 4] and sorted(t.branches.list()) == ["audit"]
