"""Committing compaction results: one Rewrite of every group, or (`partial=True`) every group that does not
conflict, the others reported.

A partial commit tries the groups together; when a concurrent commit wins, the groups whose old fragments it
touched (or whose rows it names) are set aside with the reason and the rest are tried again. A conflict that names
no group (an index or a whole-table change) splits the groups in halves, each committed on its own, so a group is
only dropped for a conflict of its own. The files of the groups set aside are removed; those of the groups that
landed belong to their version. Rules: docs/operations/maintenance.md, "Partial progress".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, overload

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import CommitConflictError, CompactionError, IncompatibleConflictError
from mvcc_core.format.bases import data_file_uris
from mvcc_core.maintenance.compaction import RewriteResult, rewrite_transaction
from mvcc_core.maintenance.handles import TableLike, state_of
from mvcc_core.txn.commit import DEFAULT_MAX_RETRIES
from mvcc_core.txn.conflicts import touched_fragments
from mvcc_core.txn.state import TableState
from mvcc_core.txn.transaction import Transaction, remove_files

__all__ = ["PartialCommit", "commit"]

log = logging.getLogger("mvcc.maintenance")


@dataclass(frozen=True)
class PartialCommit:
    """What `commit(..., partial=True)` landed and what it left.

    Attributes:
        state: The state of the last Rewrite committed (the input's state when none landed).
        committed: The results that landed, in the order given.
        conflicted: The results that lost to a concurrent commit (their files are removed).
        reasons: Why each of `conflicted` lost, in words (same order).
        versions: The Rewrites' versions, in commit order (more than one when a conflict split the groups).
    """

    state: TableState
    committed: tuple[RewriteResult, ...] = ()
    conflicted: tuple[RewriteResult, ...] = ()
    reasons: tuple[str, ...] = ()
    versions: tuple[int, ...] = ()


def _old_ids(result: RewriteResult) -> set[int]:
    return {pb.DataFragment.FromString(f).id for f in result.old_fragments}


def _new_files(state: TableState, results: Sequence[RewriteResult]) -> list[str]:
    new = [pb.DataFragment.FromString(f) for r in results for f in r.new_fragments]
    return data_file_uris(state.store, state.manifest.base_paths, new)


@overload
def commit(
    table: TableLike,
    results: Sequence[RewriteResult],
    *,
    commit_message: str | None = ...,
    transaction_properties: Mapping[str, str] | None = ...,
    defer_index_remap: bool = ...,
    max_retries: int = ...,
    partial: Literal[False] = ...,
) -> TableState: ...


@overload
def commit(
    table: TableLike,
    results: Sequence[RewriteResult],
    *,
    commit_message: str | None = ...,
    transaction_properties: Mapping[str, str] | None = ...,
    defer_index_remap: bool = ...,
    max_retries: int = ...,
    partial: Literal[True],
) -> PartialCommit: ...


def commit(
    table: TableLike,
    results: Sequence[RewriteResult],
    *,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    defer_index_remap: bool = False,
    max_retries: int = DEFAULT_MAX_RETRIES,
    partial: bool = False,
) -> TableState | PartialCommit:
    """One Rewrite of every group, on top of the results' read version; the state of the new version.

    Args:
        table: A `TableState` (the plan's `state` will do: the Rewrite is checked against every version
            committed since, and lands on the latest), or a `Table`, which moves to the new version.
        results: Every task's `RewriteResult`, all of one read version.
        commit_message: The Rewrite's message (default ``"compaction"``).
        transaction_properties: Properties of the Rewrite (checked before anything is committed).
        defer_index_remap: Carry the fragment reuse index with a version for these groups, so indices keep
            covering the moved rows.
        max_retries: How often the commit loop re-reads the latest version after losing a race it can rebase.
        partial: Commit every group that does not conflict and report the others (a `PartialCommit`) instead
            of failing the whole Rewrite.

    Returns:
        The state of the Rewrite's version; with `partial=True`, a `PartialCommit`.

    Raises:
        CompactionError: No results, or results of different read versions.
        RetryableConflictError: Without `partial`: a concurrent delete or update of a rewritten fragment won (a
            definite failure: the files the tasks wrote are removed). Committing the same results again loses
            again: plan again.
    """
    if not results:
        raise CompactionError("compaction.commit needs at least one RewriteResult")

    def staged(pending: Sequence[RewriteResult]) -> Transaction:
        return rewrite_transaction(
            table,
            pending,
            commit_message=commit_message,
            transaction_properties=transaction_properties,
            defer_index_remap=defer_index_remap,
        )

    if partial:
        return _commit_partial(table, list(results), max_retries, staged)
    return _land(table, staged(results), max_retries)


def _land(table: TableLike, txn: Transaction, max_retries: int) -> TableState:
    """Commit `txn` on its read version; a `Table` handle moves to it, as pylance's."""
    state = state_of(table)
    base = state if state.version == txn.read_version else state.checkout(txn.read_version)
    if isinstance(table, TableState):
        return base.commit(txn, max_retries=max_retries)
    table.commit(txn, max_retries=max_retries)
    return table.state


def _culprits(state: TableState, pending: list[RewriteResult], exc: CommitConflictError) -> set[int]:
    """Indices into `pending` of the groups the winning commit touched (or whose rows it names)."""
    touched = {address >> 32 for address in exc.row_addresses}
    for version in exc.conflicting_versions:
        theirs = state.committer.load_transaction(state.checkout(version).manifest)
        if theirs is not None:
            touched |= touched_fragments(theirs.operation)
    return {i for i, r in enumerate(pending) if _old_ids(r) & touched}


def _commit_partial(
    table: TableLike,
    results: list[RewriteResult],
    max_retries: int,
    staged: Callable[[Sequence[RewriteResult]], Transaction],
) -> PartialCommit:
    state = state_of(table)
    committed: list[RewriteResult] = []
    conflicted: list[tuple[RewriteResult, str]] = []
    versions: list[int] = []
    latest = state

    def attempt(pending: list[RewriteResult]) -> None:
        nonlocal latest
        while pending:
            txn = staged(pending)
            txn.files = []  # the groups set aside keep their files for the next try; removed below
            try:
                latest = _land(table, txn, max_retries)
            except IncompatibleConflictError as exc:
                conflicted.extend((r, str(exc)) for r in pending)
                return
            except CommitConflictError as exc:
                lost = _culprits(state, pending, exc)
                if not lost:
                    if len(pending) == 1 or not exc.conflicting_versions:
                        conflicted.extend((r, str(exc)) for r in pending)
                        return
                    half = len(pending) // 2
                    attempt(pending[:half])
                    attempt(pending[half:])
                    return
                conflicted.extend((r, str(exc)) for i, r in enumerate(pending) if i in lost)
                pending = [r for i, r in enumerate(pending) if i not in lost]
                continue
            committed.extend(pending)
            versions.append(latest.version)
            return

    try:
        attempt(list(results))
    except BaseException:
        # not a conflict (storage, a crash): whether the last try landed is unknown, so its files stay (they
        # are unreferenced files for retention if it did not); only the groups already set aside go
        remove_files(_new_files(state, [r for r, _ in conflicted]), near=state.store)
        raise
    if conflicted:
        log.info("%s: %d compaction groups lost to concurrent commits", state.uri, len(conflicted))
        remove_files(_new_files(state, [r for r, _ in conflicted]), near=state.store)
    order = {id(r): i for i, r in enumerate(results)}
    return PartialCommit(
        state=latest,
        committed=tuple(sorted(committed, key=lambda r: order[id(r)])),
        conflicted=tuple(r for r, _ in conflicted),
        reasons=tuple(why for _, why in conflicted),
        versions=tuple(versions),
    )
