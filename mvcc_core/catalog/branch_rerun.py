"""Publishing a catalog branch by running each fork's recorded writes again on main's latest catalog version, in
ONE catalog transaction, when its changes as they are conflict with main (docs/guide/branches.md, "Publishing a catalog
branch", step 4). The table-level counterpart, which this follows, is `table/branch_replay.py`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from mvcc_core.catalog import forks
from mvcc_core.catalog.entries import TABLE, Entry
from mvcc_core.catalog.errors import (
    BRANCH_NOT_REPLAYABLE,
    TABLE_GONE,
    IncompatibleCatalogConflictError,
    RetryableCatalogConflictError,
)
from mvcc_core.catalog.host import CatalogHost
from mvcc_core.catalog.multi_table import CatalogTransaction
from mvcc_core.catalog.services import SnapshotView
from mvcc_core.catalog.snapshot import CatalogSnapshot
from mvcc_core.catalog.table_changes import TransactionTable
from mvcc_core.errors import IncompatibleConflictError
from mvcc_core.failpoints import failpoint
from mvcc_core.format import operations
from mvcc_core.format.branches import BranchRef
from mvcc_core.ops.branch_publish import PUBLISHED_BRANCH, PUBLISHED_BRANCH_ID, PUBLISHED_BRANCH_VERSION
from mvcc_core.table.branch_replay import NotReplayable, replay_attempts, replay_steps
from mvcc_core.txn.state import TableState
from mvcc_core.txn.transaction import Transaction

log = logging.getLogger("mvcc.catalog")

#: What a fork's re-run staged: table directory -> (the fork's ref, the fork version it publishes).
Staged = dict[str, tuple[BranchRef, int]]
#: (branch snapshot, its row of a table, main's snapshot, main's row of it) -> the fork's state, its ref and
#: (fork version, table version) of its last publish (None: nothing new).
ForkChange = Callable[
    [CatalogSnapshot, Entry, SnapshotView, Entry], "tuple[TableState, BranchRef, tuple[int, int]] | None"
]


class RerunTable(TransactionTable):
    """`tx.table(name)` with what `branch_replay`'s steps call besides the staged writes: `commit(operation)` of
    a recorded Append or UpdateConfig, and `uri` for their errors.

    Args:
        tx: The re-run's catalog transaction.
        name: The table's name on main.
        uri: Its directory (named in errors).
    """

    def __init__(self, tx: CatalogTransaction, name: str, uri: str) -> None:
        """The re-run's changes on table `name`."""
        super().__init__(tx, name)
        self.uri = uri

    def commit(self, operation: operations.Operation) -> None:
        """Stage `operation` as it is (a branch's Append of its fragments, or its config change).

        Args:
            operation: The recorded operation.
        """
        w = self._tx.write_for(self.name)
        kind = "inserted_into_table" if isinstance(operation, operations.Append) else "altered_table"
        w.add(Transaction(read_version=w.state.version, operation=operation), [kind])


def publish_by_rerun(
    main: CatalogHost,
    name: str,
    head: CatalogSnapshot,
    conflict: Exception,
    *,
    new_transaction: Callable[[CatalogSnapshot], CatalogTransaction],
    fork_change: ForkChange,
    published: Callable[[], bool],
) -> tuple[int, Staged]:
    """Run every fork's writes since its base again on main's latest catalog version and publish them as one
    catalog version; if main moves meanwhile, the transaction's own checks decide, and a retryable conflict runs
    them again (`REPLAY_ATTEMPTS` in all).

    Args:
        main: The catalog, on main.
        name: The catalog branch.
        head: The branch's catalog snapshot being published.
        conflict: Why the changes as they are could not be published.
        new_transaction: The publish's catalog transaction on a snapshot of main.
        fork_change: A fork's state, ref and base (None: nothing new), from the branch's and main's rows.
        published: Whether this branch version was published meanwhile (then nothing is run).

    Returns:
        (main's new catalog version, what was staged per table), or (main's latest, {}) when published meanwhile.

    Raises:
        IncompatibleCatalogConflictError: a write cannot run again (an overwrite, a pyarrow Expression filter, a
            write through the low-level API), fails on main's rows, or its table was dropped on main.
        RetryableCatalogConflictError: main kept moving while the writes ran again.
    """

    def attempt(_: int) -> tuple[int, Staged]:
        if published():
            return main.latest_version, {}  # another publish of the same version landed meanwhile: never twice
        latest = main.snapshot()
        tx = new_transaction(latest)
        try:
            staged: Staged = {}
            for entry in head.entries.values():
                if entry.object_type == TABLE and forks.fork_of(entry) == name:
                    found = _rerun_fork(tx, latest, head, entry, name, conflict, fork_change)
                    if found is not None:
                        staged[entry.path] = found
            failpoint("catalog.branch.publish.replay.before_commit")
            version = tx.commit()
        finally:
            tx.abort()  # a failure before the commit: its staged files go (after a commit: nothing to do)
        log.info("catalog %s: branch %r ran again on catalog version %d", main.root, name, latest.version)
        return version, staged

    def moved() -> None:
        log.info("catalog %s: main moved while branch %r ran again; again", main.root, name)

    return replay_attempts(attempt, RetryableCatalogConflictError, moved)


def _rerun_fork(
    tx: CatalogTransaction,
    latest: CatalogSnapshot,
    head: CatalogSnapshot,
    entry: Entry,
    name: str,
    conflict: Exception,
    fork_change: ForkChange,
) -> tuple[BranchRef, int] | None:
    """Stage the fork's writes since its base again in `tx`, on the table as main's `latest` publishes it; (fork
    ref, fork version) or None when the fork has nothing new."""
    row = next((e for e in latest.entries.values() if e.object_type == TABLE and e.path == entry.path), None)
    if row is None:
        raise _refused(
            tx,
            latest,
            entry.name,
            f"{conflict}; catalog branch {name!r} wrote table {entry.name!r}, which main dropped since: nothing was "
            f"published; delete the branch",
            ("the table the branch wrote was dropped on main", TABLE_GONE),
        )
    change = fork_change(head, entry, latest, row)
    if change is None:
        return None
    fork, ref, (fork_base, _) = change
    target = latest.catalog.table_at(row).state
    try:
        steps = replay_steps(target, name, fork_base, fork)
        table = RerunTable(tx, row.name, target.uri)
        for step in steps:
            step(table)
    except (NotReplayable, IncompatibleConflictError) as exc:
        raise _refused(
            tx,
            latest,
            row.name,
            f"{conflict}; running catalog branch {name!r}'s writes to {row.name!r} again on main's catalog version "
            f"{latest.version} is not possible either: {exc}. Nothing was published: delete the branch "
            f"(Catalog.delete_branch) and redo its writes on a new one",
            ("a write of the branch cannot run again on main's rows", BRANCH_NOT_REPLAYABLE),
        ) from exc
    w = tx.writes.get(row.path)
    if w is not None and w.chain:  # found by the next publish if this one is killed after its commit point
        last = w.chain[-1]
        last.transaction_properties = last.transaction_properties | published_mark(name, ref, fork.version)
    return ref, fork.version


def _refused(
    tx: CatalogTransaction, latest: CatalogSnapshot, table: str, message: str, rule: tuple[str, str]
) -> IncompatibleCatalogConflictError:
    """The error of a re-run on main's `latest` catalog version refused for `table` ((rule, rule code))."""
    return IncompatibleCatalogConflictError.with_catalog_version(
        message,
        root=tx.catalog.root,
        object_name=table,
        read_version=latest.version,
        version=latest.version,
        rule=rule[0],
        rule_code=rule[1],
        conflicting=False,
    )


def published_mark(name: str, ref: BranchRef, version: int) -> dict[str, str]:
    """The properties that mark a table version as the publish of fork `name`'s `version` (`published_base`
    finds them).

    Args:
        name: The catalog branch (and fork).
        ref: The fork's ref.
        version: The fork version published.

    Returns:
        The properties.
    """
    return {PUBLISHED_BRANCH: name, PUBLISHED_BRANCH_ID: ref.identifier, PUBLISHED_BRANCH_VERSION: str(version)}
