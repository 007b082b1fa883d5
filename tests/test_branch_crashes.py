"""A writer killed at each failpoint of branch creation, publish and deletion leaves a readable, consistent
table, and running the operation again finishes it exactly once.

The fast tier stops the writer in-process (the failpoint raises: nothing after it runs, as in a crash); the
slow tier kills a child process at the same points (`os._exit`).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core import failpoints
from mvcc_core.errors import BranchExistsError, BranchNotFoundError, FailpointError
from mvcc_core.verify import verify

ROOT = Path(failpoints.__file__).resolve().parents[1]

CREATE = ["branch.create.after_ref", "branch.create.before_manifest"]
PUBLISH = ["branch.publish.before_commit", "branch.publish.after_commit"]
DELETE = ["branch.delete.after_mark", "branch.delete.after_files", "branch.delete.before_ref"]
# a publish that runs the branch's writes again (main deleted a row the branch deleted too)
REPLAY = [
    "branch.publish.replay.after_scratch",
    "branch.publish.replay.before_commit",
    "branch.publish.after_commit",
    "branch.publish.before_indices",
]

STEP = """
import sys
sys.path.insert(0, sys.argv[3])
from test_branch_crashes import run_step
run_step(sys.argv[1], sys.argv[2])
print("done")
"""


def run_step(uri: str, step: str) -> None:
    """Create, publish or delete the branch `audit` of the table at `uri`."""
    t = mvcc.open_table(uri)
    if step == "create":
        t.create_branch("audit")
    elif step in ("publish", "replay"):
        t.publish_branch("audit")
    else:
        t.branches.delete("audit")


def ids(t: mvcc.Table) -> list[int]:
    return sorted(t.to_table(columns=["id"])["id"].to_pylist())


def prepare(uri: str, step: str) -> None:
    """main: 1..4 in two versions; for publish and delete a branch `audit` with its own rows and deletions."""
    t = mvcc.write_table(pa.table({"id": [1, 2, 3]}), uri)
    t.append(pa.table({"id": [4]}))
    if step != "create":
        b = t.create_branch("audit")
        b.append(pa.table({"id": [10, 11]}))
        b.delete("id = 1 or id = 11")  # an inherited and a new fragment: publish rewrites the new one
        t.create_branch("other").append(pa.table({"id": [20]}))
    if step == "replay":
        t.delete("id = 1")  # the row the branch deleted: its writes are run again on main
        mvcc.open_table(uri, branch="audit").create_scalar_index("id")  # built on main after the rows


def check_after_replay(uri: str) -> None:
    """main as before or after the publish; the publish run again lands it exactly once, with no scratch branch left."""
    main = mvcc.open_table(uri)
    assert ids(main) in ([2, 3, 4], [2, 3, 4, 10])
    version = main.publish_branch("audit")
    assert (version, main.version, ids(main)) == (4, 5, [2, 3, 4, 10])  # the rows in version 4, the index in 5
    latest = mvcc.open_table(uri)
    assert latest.version == 5 and [i["name"] for i in latest.list_indices()] == ["id_idx"]  # rows once, index once
    assert sorted(main.branches.list()) == ["audit", "other"]
    assert ids(mvcc.open_table(uri, branch="other")) == [1, 2, 3, 4, 20]
    assert verify(mvcc.open_table(uri)).ok


def check_after(uri: str, step: str) -> None:
    """The table reads as before or after the step; the step run again finishes it exactly once."""
    if step == "replay":
        check_after_replay(uri)
        return
    main = mvcc.open_table(uri)
    assert ids(main) in ([1, 2, 3, 4], [2, 3, 4, 10])
    if step == "create":
        assert ids(mvcc.open_table(uri, branch="audit")) == [1, 2, 3, 4]  # the interrupted fork is completed
        with pytest.raises(BranchExistsError):
            main.create_branch("audit")
        assert [v.version for v in mvcc.open_table(uri, branch="audit").versions()] == [2]
    elif step == "publish":
        version = main.publish_branch("audit")
        assert (version, ids(main)) == (3, [2, 3, 4, 10])  # exactly once: a publish that committed is not redone
        assert mvcc.open_table(uri).version == 3
    else:
        with pytest.raises(BranchNotFoundError):
            mvcc.open_table(uri, branch="audit")  # half-deleted: never opened with part of its history
        main.branches.delete("audit")
        assert "audit" not in main.branches.list()
        with pytest.raises(BranchNotFoundError):
            main.branches.delete("audit")
    assert ids(mvcc.open_table(uri)) in ([1, 2, 3, 4], [2, 3, 4, 10])
    if step != "create":
        assert ids(mvcc.open_table(uri, branch="other")) == [1, 2, 3, 4, 20]  # another branch is untouched
    assert verify(mvcc.open_table(uri)).ok


def _cases() -> list[tuple[str, str]]:
    steps = {"create": CREATE, "publish": PUBLISH, "delete": DELETE, "replay": REPLAY}
    return [(point, step) for step, points in steps.items() for point in points]


@pytest.mark.parametrize(("point", "step"), _cases())
def test_stopped_at_a_point_in_process(tmp_uri: str, point: str, step: str) -> None:
    prepare(tmp_uri, step)
    with failpoints.armed(point), pytest.raises(FailpointError):
        run_step(tmp_uri, step)
    check_after(tmp_uri, step)


@pytest.mark.slow
@pytest.mark.parametrize(("point", "step"), _cases())
def test_killed_at_a_point_in_a_child(tmp_uri: str, point: str, step: str) -> None:
    prepare(tmp_uri, step)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env[failpoints.ENV_VAR] = failpoints.env_spec({point: "exit"})
    done = subprocess.run(
        [sys.executable, "-c", STEP, tmp_uri, step, str(Path(__file__).parent)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == failpoints.DEFAULT_EXIT_CODE, done.stderr
    assert "done" not in done.stdout
    check_after(tmp_uri, step)


def _child(uri: str, step: str, points: dict[str, str] | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env.pop(failpoints.ENV_VAR, None)
    if points:
        env[failpoints.ENV_VAR] = failpoints.env_spec(points)
    return subprocess.Popen(
        [sys.executable, "-c", STEP, uri, step, str(Path(__file__).parent)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _scratch(uri: str) -> set[str]:
    from mvcc_core.format.branches import list_refs

    t = mvcc.open_table(uri)
    return set(list_refs(t.state.store, scratch=True)) - set(t.branches.list())


def _ended_well(proc: subprocess.Popen[str]) -> None:
    out, err = proc.communicate(timeout=120)
    last = err.strip().splitlines()[-1] if err.strip() else ""
    assert (proc.returncode, "done" in out) == (0, True) or last.startswith(
        "mvcc_core.errors.RetryableConflictError:"
    ), err


@pytest.mark.slow
def test_two_publisher_processes_of_one_branch_land_it_once(tmp_uri: str) -> None:
    """The second publisher leaves the first's scratch branch alone (its lease); the first then finds the branch
    published (or gets a retryable conflict), never BranchNotFoundError; the rows land once."""
    prepare(tmp_uri, "replay")
    first = _child(tmp_uri, "replay", {"branch.publish.replay.before_commit": "sleep(2)"})
    deadline = time.monotonic() + 60
    while not _scratch(tmp_uri):
        assert time.monotonic() < deadline and first.poll() is None
        time.sleep(0.02)
    second = _child(tmp_uri, "replay")
    _ended_well(second)
    _ended_well(first)
    main = mvcc.open_table(tmp_uri)
    assert (main.version, ids(main)) == (5, [2, 3, 4, 10])  # the rows once (version 4), the index once (5)
    assert main.publish_branch("audit") == 5 and mvcc.open_table(tmp_uri).version == 5
    assert sorted(main.branches.list()) == ["audit", "other"] and not _scratch(tmp_uri)
    assert ids(mvcc.open_table(tmp_uri, branch="other")) == [1, 2, 3, 4, 20]
    assert verify(mvcc.open_table(tmp_uri)).ok


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_a_publish_killed_at_a_random_moment_lands_once_when_run_again(tmp_uri: str, seed: int) -> None:
    """SIGKILL at a random moment of a publish that runs again (plain publishes, refs, scratch branches and their
    deletion in between): afterwards the rows are published all or none, and publishing again lands them once."""
    prepare(tmp_uri, "replay")
    child = _child(tmp_uri, "replay")
    time.sleep(random.Random(seed).uniform(0.3, 1.5))  # the interpreter's start and import take ~0.3-0.5 s
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=60)
    assert ids(mvcc.open_table(tmp_uri)) in ([2, 3, 4], [2, 3, 4, 10])
    main = mvcc.open_table(tmp_uri)
    main.publish_branch("audit")
    assert ids(main) == [2, 3, 4, 10]
    assert sorted(main.branches.list()) == ["audit", "other"]
    main.cleanup_old_versions(older_than=timedelta(0))
    assert ids(mvcc.open_table(tmp_uri)) == [2, 3, 4, 10]
    assert ids(mvcc.open_table(tmp_uri, branch="other")) == [1, 2, 3, 4, 20]
