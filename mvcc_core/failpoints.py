"""Named fault-injection points, so that tests can crash a writer exactly between two steps of a protocol.

Design notes: docs/design/architecture.md, "Failpoints".
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager

from mvcc_core.errors import FailpointError

ENV_VAR = "MVCC_FAILPOINTS"
DEFAULT_EXIT_CODE = 77

#: Every named point and where it sits, the catalog's included: MVCC_FAILPOINTS is read when this module is
#: imported, before any module that calls a point, so every name a child process may arm is listed here.
POINTS: dict[str, str] = {
    "commit.after_transaction_file": "the transaction file is written, no manifest yet",
    "commit.before_manifest_put": "the next manifest is built, not yet put-if-not-exists'ed (no external store)",
    "commit.after_stage": "external store, step 1 done: the staged manifest is written, the store not touched",
    "commit.after_external_commit": "external store, step 2 done: the version is committed to the store",
    "commit.after_copy": "external store, step 3 done: the staged manifest is copied to its final name",
    "commit.before_external_update": "external store, just before step 4 (the store still names the staged path)",
    "catalog.after_table_staged": "catalog publish: one table's manifests staged, the other tables' not yet",
    "catalog.after_stage": "catalog publish: every table's next manifest is staged, __manifest not committed",
    "catalog.after_publish": "catalog publish: __manifest committed (the commit point), no table finalized yet",
    "catalog.after_finalize_copy": "catalog finalize: one staged manifest copied to its final name, the rest not yet",
    "catalog.after_finalize": "catalog publish: every table finalized, the staged manifests not yet removed",
    "catalog.branch.after_fork": "catalog branch: a table's fork is created, the publish that records it not begun",
    "catalog.branch.publish.after_commit": "catalog publish_branch: main's catalog version committed, refs not updated",
    "catalog.branch.publish.replay.before_commit": "catalog publish_branch: the forks' writes run again and staged "
    "on main's latest, not committed",
    "catalog.branch.delete.after_catalog": "catalog delete_branch: the catalog branch is deleted, its forks not yet",
    "catalog.cleanup.after_fork_reclaimed": "catalog cleanup: one orphaned fork reclaimed, the others not yet",
    "catalog.migrate.after_step": "catalog migration: one step committed (its stamp written), the next not begun",
    "branch.create.after_ref": "create_branch: the ref is written (the name claimed), not the branch's transaction",
    "branch.create.before_manifest": "create_branch: the branch's transaction file is written, its first manifest not",
    "branch.publish.before_commit": "publish_branch: the change is staged (rewritten fragments written), not committed",
    "branch.publish.after_commit": "publish_branch: the parent's new version is committed, the ref not yet updated",
    "branch.publish.replay.after_scratch": "publish by replay: the scratch branch is forked, no write run on it yet",
    "branch.publish.replay.before_commit": "publish by replay: the writes ran on the scratch branch, nothing published",
    "branch.publish.before_indices": "publish: the rows are published, the branch's index builds not yet run on main",
    "branch.delete.after_mark": "branches.delete: the ref is marked deleting, nothing removed yet",
    "branch.delete.after_files": "branches.delete: the files only the branch used are removed, its tree not yet",
    "store.local.after_temp": "local disk: a write's temporary file is written whole, not yet linked or renamed",
    "branch.delete.before_ref": "branches.delete: the branch's tree is removed, the ref not yet",
    "cleanup.after_delete_batch": "retention: one batch of deletions is done, the batches after it not yet",
    "cleanup.after_manifests": "retention: the old versions' manifests are deleted, the files only they named not yet",
}

_ACTION = re.compile(r"^(raise|off|exit(?:\((-?\d+)\))?|sleep\((\d+(?:\.\d*)?)\))$")

# name -> action; empty when nothing is armed, so `failpoint` costs one lookup.
_ARMED: dict[str, str] = {}


def _check(name: str, action: str) -> str:
    if name not in POINTS:
        raise ValueError(f"unknown failpoint {name!r}; known: {sorted(POINTS)}")
    action = action.strip().lower()
    if not _ACTION.match(action):
        raise ValueError(f"failpoint {name!r}: bad action {action!r} (raise, exit, exit(N), sleep(S), off)")
    return action


def failpoint(name: str) -> None:
    """Trigger `name` if it is armed; otherwise do nothing (one dict lookup).

    Args:
        name: the point's name, one of `POINTS`
    """
    action = _ARMED.get(name)
    if action is not None:
        _trigger(name, action)


def _trigger(name: str, action: str) -> None:
    match = _ACTION.match(action)
    assert match is not None  # validated when armed
    if action == "raise":
        raise FailpointError(name)
    if action.startswith("exit"):
        os._exit(int(match.group(2)) if match.group(2) else DEFAULT_EXIT_CODE)
    if action.startswith("sleep"):
        time.sleep(float(match.group(3)))


def arm(name: str, action: str = "raise") -> None:
    """Arm `name` for this process (until :func:`disarm`).

    Args:
        name: the point's name
        action: "raise" (FailpointError), "exit" or "exit(N)" (the process dies at once), "sleep(S)" or "off"

    Raises:
        ValueError: an unknown point or action
    """
    action = _check(name, action)
    if action == "off":
        _ARMED.pop(name, None)
    else:
        _ARMED[name] = action


def disarm(name: str | None = None) -> None:
    """Disarm one point, or all of them.

    Args:
        name: the point to disarm (None: every point)
    """
    if name is None:
        _ARMED.clear()
    else:
        _ARMED.pop(name, None)


def armed_points() -> dict[str, str]:
    """What is armed now (a copy)."""
    return dict(_ARMED)


@contextmanager
def armed(name: str, action: str = "raise") -> Iterator[None]:
    """Arm `name` for the duration of a ``with`` block, then restore what was armed before.

    Args:
        name: the point's name
        action: "raise" (FailpointError), "exit" or "exit(N)" (the process dies at once), "sleep(S)" or "off"
    """
    previous = _ARMED.get(name)
    arm(name, action)
    try:
        yield
    finally:
        if previous is None:
            _ARMED.pop(name, None)
        else:
            _ARMED[name] = previous


def parse_spec(spec: str) -> dict[str, str]:
    """``"a=exit;b=raise"`` (";" or "," separated) -> {"a": "exit", "b": "raise"}, validated.

    Args:
        spec: the MVCC_FAILPOINTS value, e.g. `a=exit;b=raise`

    Raises:
        ValueError: an unknown point or action
    """
    out: dict[str, str] = {}
    for item in re.split(r"[;,]", spec):
        item = item.strip()
        if not item:
            continue
        name, sep, action = item.partition("=")
        out[name.strip()] = _check(name.strip(), action if sep else "raise")
    return out


def env_spec(points: dict[str, str]) -> str:
    """The value of MVCC_FAILPOINTS that arms `points` in a child process.

    Args:
        points: point name -> action
    """
    return ";".join(f"{name}={_check(name, action)}" for name, action in points.items())


def load_from_env() -> None:
    """Arm what MVCC_FAILPOINTS names (done once at import; call again after changing the variable)."""
    spec = os.environ.get(ENV_VAR, "")
    for name, action in parse_spec(spec).items():
        arm(name, action)


load_from_env()
