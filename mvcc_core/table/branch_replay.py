"""Publishing a branch by re-running its writes on the parent's latest version, when its recorded changes
conflict with the parent's commits since the fork (docs/guide/branches.md, "Publish: re-running the branch").

Writes through a branch handle record what they did in words (`REPLAY_PROPERTY`: the delete's predicate, the
update's values and filter, the upsert's keys); the replay runs them again, in order, on a scratch branch
forked from the parent's latest version, then lands that scratch branch's change on the parent as one version.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from mvcc_core.errors import (
    BranchNotFoundError,
    BranchNotReplayableError,
    IncompatibleConflictError,
    InvalidOperationError,
    PredicateError,
    RetryableConflictError,
    SchemaError,
)
from mvcc_core.failpoints import failpoint
from mvcc_core.format import operations
from mvcc_core.format.branches import ScratchMark, branch_of, list_refs, new_scratch_name, read_ref, update_ref
from mvcc_core.ops import branch_publish
from mvcc_core.read.scan import Scan
from mvcc_core.txn import branches as txn_branches
from mvcc_core.txn.state import TableState
from mvcc_core.txn.transaction import Transaction

log = logging.getLogger("mvcc.branches")

#: Transaction property of a write through a branch handle: what it did, as JSON the replay can run again.
REPLAY_PROPERTY = "mvcc.replay"
#: Transaction property of a publish commit that re-ran the branch's writes ("true").
PUBLISHED_BY_REPLAY = "mvcc.published_branch_replayed"
#: How many times the replay is run again when the parent moves while it runs.
REPLAY_ATTEMPTS = 3
#: How long (seconds) a publisher may use its scratch branch: before then no other publish removes it.
SCRATCH_LEASE_SECONDS = 3600


class _ScratchLost(Exception):
    """The publish's scratch branch was removed by another publish while in use."""


_Published = TypeVar("_Published")


def replay_attempts(
    attempt: Callable[[int], _Published], moved: type[RetryableConflictError], on_moved: Callable[[], None]
) -> _Published:
    """Run `attempt(n)` for n = 0, 1, ... until it returns: a `moved` conflict (the parent moved while the writes
    ran again) calls `on_moved` and runs it again, `REPLAY_ATTEMPTS` in all; the last attempt's is raised.

    Args:
        attempt: One replay and publish, given how many came before; cleans up after itself.
        moved: The conflict that runs it again.
        on_moved: Says that it does (a log line).

    Returns:
        What the attempt that succeeded returned.
    """
    for n in range(REPLAY_ATTEMPTS):
        try:
            return attempt(n)
        except moved:
            if n + 1 == REPLAY_ATTEMPTS:
                raise
            on_moved()
    raise AssertionError("unreachable")  # the loop returns or raises


class ReplayTable(Protocol):
    """The part of `Table` the replay writes through."""

    _state: TableState

    def delete(self, predicate: str) -> Any:
        """`Table.delete`: delete the rows matching `predicate`.

        Args:
            predicate: The recorded SQL predicate of the rows to delete.
        """

    def update(self, values: dict[str, Any], where: str | None = None, *, mode: str | None = None) -> Any:
        """`Table.update`: set columns on the rows matching `where`.

        Args:
            values: Column name -> new value, a SQL expression over the row's columns or a literal.
            where: The SQL predicate of the rows to update (None: every row).
            mode: "rewrite_rows", "rewrite_columns", or None for the cheaper.
        """

    def merge_insert(self, on: list[str]) -> Any:
        """`Table.merge_insert`: a merge-insert builder keyed on `on`.

        Args:
            on: The key columns that match a source row to a target row.
        """

    def add_columns(self, transforms: dict[str, str]) -> Any:
        """`Table.add_columns`: new columns computed from SQL expressions.

        Args:
            transforms: New column name -> the SQL expression computing it from the row's columns.
        """

    def drop_columns(self, columns: list[str]) -> Any:
        """`Table.drop_columns`: drop columns or struct fields.

        Args:
            columns: The columns, or `a.b` struct fields, to drop.
        """

    def alter_columns(self, *alterations: dict[str, Any]) -> Any:
        """`Table.alter_columns`: rename columns, make them nullable or change their type.

        Args:
            *alterations: pylance's alteration dicts (`path` and any of `name`, `nullable`, `data_type`).
        """

    def commit(self, operation: operations.Operation) -> Any:
        """`Table.commit`: commit `operation` on top of the handle's version.

        Args:
            operation: The operation to commit, as the branch commit recorded it.
        """


class NotReplayable(Exception):
    """A branch commit that cannot be run again on the parent (its reason in words)."""


def with_replay(state: TableState, properties: Mapping[str, str] | None, description: dict[str, Any]) -> dict[str, str]:
    """`properties` plus the replay description of a write, when `state` is on a branch (main: unchanged).

    Args:
        state: The version the write reads.
        properties: The write's transaction properties.
        description: What the write does (JSON-serializable), e.g. {"op": "delete", "where": "x < 0"}.

    Returns:
        The properties to commit with.
    """
    if branch_of(state.store) is None:
        return dict(properties or {})
    return recorded(properties, description)


def recorded(properties: Mapping[str, str] | None, description: dict[str, Any]) -> dict[str, str]:
    """`properties` plus the replay description of a write (unchanged when it is not JSON: it cannot run again).

    Args:
        properties: The write's transaction properties.
        description: What the write does (JSON-serializable), e.g. {"op": "delete", "where": "x < 0"}.

    Returns:
        The properties to commit with.
    """
    out = dict(properties or {})
    with contextlib.suppress(TypeError, ValueError):  # not JSON (an Arrow Expression, bytes): cannot run again
        out[REPLAY_PROPERTY] = json.dumps(description, sort_keys=True)
    return out


def _step(version: int, txn: Transaction | None, head: TableState) -> Callable[[ReplayTable], None] | None:
    """How to run one branch commit again (None: nothing to run, e.g. a compaction).

    Raises:
        NotReplayable: the commit's writes are not recorded in a form that can run again.
    """
    if txn is None:
        raise NotReplayable(f"version {version} has no transaction file")
    op = txn.operation
    if isinstance(op, operations.Append):
        fragments = list(op.fragments)
        return lambda table: table.commit(operations.Append(fragments=fragments))
    if isinstance(op, operations.UpdateConfig):
        return lambda table: table.commit(op)  # the same keys set or removed again
    if isinstance(op, operations.Rewrite | operations.CreateIndex | operations.ReserveFragments):
        return None  # rows unchanged; an index is built on the parent after the publish (`recorded_index_builds`)
    raw = txn.transaction_properties.get(REPLAY_PROPERTY)
    if raw is None:
        raise NotReplayable(f"version {version} ({op.name}) did not record its write in a form that can run again")
    what = json.loads(raw)
    if what["op"] == "delete":
        return lambda table: table.delete(what["where"])
    if what["op"] == "update":
        return lambda table: table.update(what["values"], what["where"], mode=what.get("mode"))
    if what["op"] == "add_columns":
        return lambda table: table.add_columns(what["transforms"])
    if what["op"] == "drop_columns":
        return lambda table: table.drop_columns(what["columns"])
    if what["op"] == "alter_columns":
        return lambda table: table.alter_columns(*what["alterations"])
    if what["op"] == "merge_insert" and what.get("upsert_all") and isinstance(op, operations.Update):
        # an upsert of every source row writes every source row (matched: updated; unmatched: inserted), so
        # the rows it wrote are its source
        fragments = [_without_deletions(f) for f in op.new_fragments]
        columns = list(what["columns"])  # a partial source: inserted rows hold nulls in the other columns
        source = Scan(head.store, head.manifest, columns=columns, fragments=fragments).to_table() if fragments else None
        if source is None:
            return None
        on = list(what["on"])
        return lambda table: (
            table.merge_insert(on).when_matched_update_all().when_not_matched_insert_all().execute(source)
        )
    raise NotReplayable(f"version {version} ({op.name}, {what['op']}) cannot run again")


def _without_deletions(fragment: Any) -> Any:
    """A copy of `fragment` without its deletion file (the rows a write wrote, before later deletions)."""
    copy = type(fragment)()
    copy.CopyFrom(fragment)
    copy.ClearField("deletion_file")
    return copy


def replay_steps(target: TableState, name: str, branch_base: int, head: TableState) -> list[Callable[[Any], None]]:
    """The branch's commits after `branch_base`, as steps that run them again (checked before anything is written).

    Args:
        target: Any version of the parent.
        name: The branch.
        branch_base: The branch version the publish starts from.
        head: The branch's latest version.

    Returns:
        The steps, in commit order.

    Raises:
        NotReplayable: some commit cannot run again.
    """
    steps = []
    for version in range(branch_base + 1, head.version + 1):
        at = txn_branches.open_branch(target, name, version)
        txn = at.committer.load_transaction(at.manifest)
        step = _step(version, txn, head)
        if step is not None and txn is not None:
            steps.append(_named(step, name, version, txn.operation.name))
    return steps


def _named(step: Callable[[Any], None], name: str, version: int, operation: str) -> Callable[[Any], None]:
    """`step`, whose failure on the parent's rows (a column the parent dropped, a key it made ambiguous) is an
    IncompatibleConflictError naming the branch's version: the write no longer means what it meant."""

    def run(table: Any) -> None:
        try:
            step(table)
        except (SchemaError, PredicateError, InvalidOperationError) as exc:
            raise IncompatibleConflictError(
                f"branch {name!r} version {version} ({operation}) cannot run again on the latest version of "
                f"{table.uri}: {exc}; nothing was published",
                uri=table.uri,
                operation=operation,
            ) from exc

    return run


def drop_leftover_scratch(target: TableState, name: str) -> None:
    """Delete the scratch branches an interrupted publish of `name` left behind: those whose ref's marker names
    `name` and whose lease has run out (one still leased may be in use by a concurrent publisher), or whose
    deletion had begun. Scratch branches are recognised by their ref's marker, never by a name pattern.

    Args:
        target: Any version of the table.
        name: The branch being published.
    """
    now = int(time.time())
    for other, ref in list_refs(target.store, scratch=True).items():
        mark = ref.scratch
        if mark is None or mark.branch != name or (mark.lease_until > now and not ref.deleting):
            continue
        log.warning("%s: removing scratch branch %r left by an interrupted publish of %r", target.uri, other, name)
        with contextlib.suppress(BranchNotFoundError):
            txn_branches.delete_branch(target, other)


def _scratch_is_ours(target: TableState, scratch_name: str, identifier: str) -> bool:
    """Whether our scratch branch is still there (another publish may have removed it)."""
    try:
        ref = read_ref(target.store, scratch_name)
    except BranchNotFoundError:
        return False
    return ref.identifier == identifier and not ref.deleting


def publish_by_replay(
    target: TableState,
    name: str,
    conflict: RetryableConflictError,
    make_table: Callable[[TableState], ReplayTable],
    *,
    base_scanned_through: int,
    commit_message: str | None,
    transaction_properties: Mapping[str, str] | None,
    max_retries: int,
) -> TableState:
    """Publish branch `name` by running its writes since its base again on the parent's latest version.

    Args:
        target: Any version of the parent.
        name: The branch.
        conflict: Why the recorded changes could not be published (raised again when the writes cannot run).
        make_table: Builds a table handle on a state (the replay writes through it).
        base_scanned_through: The parent version up to which the publish's base was found
            (`branch_publish.publish_base`): only later versions are read for a publish that landed meanwhile.
        commit_message: The parent's new version's message.
        transaction_properties: Its properties.
        max_retries: How many lost races the final commit retries.

    Returns:
        The parent's state after the publish.

    Raises:
        BranchNotReplayableError: some write cannot run again (publishing again gives the same answer).
        RetryableConflictError: the parent kept moving during the replay.
        IncompatibleConflictError: a commit on the parent since the fork cannot be reconciled.
    """
    ref = read_ref(target.store, name)
    head = txn_branches.open_branch(target, name)
    branch_base, _ = branch_publish.published_base(target, name, ref, after=base_scanned_through)
    if head.version == branch_base:  # published meanwhile (found in the parent's history)
        return target.latest()
    try:
        steps = replay_steps(target, name, branch_base, head)
    except NotReplayable as exc:
        raise BranchNotReplayableError(
            f"{conflict}; running branch {name!r}'s writes again on the latest version is not possible either: "
            f"{exc}; delete the branch and redo its writes on a new one",
            uri=target.uri,
            read_version=conflict.read_version,
            conflicting_versions=conflict.conflicting_versions,
        ) from conflict

    def attempt(n: int) -> TableState:
        latest = target.latest()
        if n and branch_publish.published_base(target, name, read_ref(target.store, name))[0] == head.version:
            return latest  # another publish of the same version landed meanwhile: never twice
        scratch_name = new_scratch_name()
        mark = ScratchMark(name, ref.identifier, int(time.time()) + SCRATCH_LEASE_SECONDS)
        try:
            forked = txn_branches.create_branch(latest, scratch_name, scratch=mark)
            identifier = read_ref(target.store, scratch_name).identifier
        except BranchNotFoundError as exc:  # removed by another publish between its ref and its first manifest
            txn_branches.discard_unclaimed_tree(target, scratch_name)
            raise _ScratchLost(scratch_name) from exc
        scratch = make_table(forked)
        try:
            failpoint("branch.publish.replay.after_scratch")
            for step in steps:
                step(scratch)
            failpoint("branch.publish.replay.before_commit")
            if not _scratch_is_ours(target, scratch_name, identifier):
                raise _ScratchLost(scratch_name)
            properties = dict(transaction_properties or {}) | {PUBLISHED_BY_REPLAY: "true"}
            state = branch_publish.commit_change(
                target,
                name,
                ref,
                head.version,
                at_base=latest,
                change_base=forked,
                change_head=scratch._state,
                commit_message=commit_message,
                transaction_properties=properties,
                max_retries=max_retries,
            )
        except _ScratchLost:
            txn_branches.discard_unclaimed_tree(target, scratch_name)  # what the steps wrote after the removal
            raise
        except Exception as exc:
            if not _scratch_is_ours(target, scratch_name, identifier):
                txn_branches.discard_unclaimed_tree(target, scratch_name)
                raise _ScratchLost(scratch_name) from exc
            raise
        finally:
            with contextlib.suppress(BranchNotFoundError):
                txn_branches.delete_branch(target, scratch_name)
        update_ref(target.store, name, read_ref(target.store, name), published=(head.version, state.version))
        log.info("%s: published branch %r by replay as version %d", target.uri, name, state.version)
        return state

    def moved() -> None:
        log.info("%s: the parent moved while branch %r was replayed; again", target.uri, name)

    try:
        return replay_attempts(attempt, RetryableConflictError, moved)
    except _ScratchLost as lost:
        raise RetryableConflictError(
            f"publishing branch {name!r} of {target.uri}: its scratch branch {lost} was removed by a concurrent "
            "publish while in use; nothing was published by this one: publish again",
            uri=target.uri,
            read_version=target.version,
        ) from lost


def recorded_index_builds(target: TableState, name: str) -> list[dict[str, Any]]:
    """The index builds of branch `name` since its fork that its latest version still has, last build of a name
    only: what a publish builds on the parent after landing the rows, where the parent has no index of that
    name (docs/guide/branches.md, "Indices").

    Args:
        target: Any version of the parent.
        name: The branch.

    Returns:
        The builds' recorded arguments (column, index_type, name).
    """
    ref = read_ref(target.store, name)
    head = txn_branches.open_branch(target, name)
    since = ref.parent_version  # the branch's first version: the fork
    kept = {index.name for index in head.manifest.indices}
    builds: dict[str, dict[str, Any]] = {}
    for version in range(since + 1, head.version + 1):
        at = txn_branches.open_branch(target, name, version)
        txn = at.committer.load_transaction(at.manifest)
        raw = txn.transaction_properties.get(REPLAY_PROPERTY) if txn is not None else None
        what = json.loads(raw) if raw else {}
        if what.get("op") == "create_index" and what["name"] in kept:
            builds[what["name"]] = what
    return list(builds.values())
