"""Branches of a table, with pylance's names: `t.create_branch`, `t.branches`, `t.checkout_branch`,
`t.publish_branch` (a mixin of `Table`). Layout and rules: docs/guide/branches.md."""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Self

from mvcc_core.errors import CorruptTagError, RetryableConflictError, TagError, VersionNotFoundError
from mvcc_core.failpoints import failpoint
from mvcc_core.format.branches import MAIN_NAME, branch_of, read_ref
from mvcc_core.ops.branch_publish import publish_base, publish_branch
from mvcc_core.table.arguments import BranchReference
from mvcc_core.table.branch_replay import drop_leftover_scratch, publish_by_replay, recorded_index_builds
from mvcc_core.table.host import TableHost
from mvcc_core.txn import branches as txn_branches
from mvcc_core.txn import history
from mvcc_core.txn.branches import BranchInfo
from mvcc_core.txn.commit import DEFAULT_MAX_RETRIES
from mvcc_core.txn.state import TableState


class Branches:
    """`t.branches`: the table's branches (pylance's `branches` namespace).

    Args:
        state: the table version whose branches this namespace lists and deletes (the branches are the table's,
            whichever version `state` is)
    """

    def __init__(self, state: TableState) -> None:
        self._state = state

    def list(self) -> dict[str, BranchInfo]:
        """Every branch by name.

        Returns:
            Name to `BranchInfo` (parent_branch, parent_version, create_at, manifest_size, metadata).
        """
        return {name: BranchInfo.of(ref) for name, ref in txn_branches.list_branches(self._state).items()}

    def list_ordered(self, order: str | None = None) -> builtins.list[tuple[str, BranchInfo]]:
        """The branches ordered by creation time (pylance's `list_ordered`).

        Args:
            order: "asc" (default: oldest first) or "desc".

        Returns:
            (name, info) pairs.

        Raises:
            ValueError: `order` is neither.
        """
        if order not in (None, "asc", "desc"):
            raise ValueError(f"order must be 'asc' or 'desc', got {order!r}")
        pairs = sorted(self.list().items(), key=lambda item: (item[1].create_at, item[0]))
        return pairs[::-1] if order == "desc" else pairs

    def delete(self, name: str) -> None:
        """Delete branch `name` and the files only it uses (see `txn.branches.delete_branch`).

        Args:
            name: The branch.

        Raises:
            BranchNotFoundError: no such branch.
            BranchError: another branch forks from it.
        """
        txn_branches.delete_branch(self._state, name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in txn_branches.list_branches(self._state)


class BranchMethods(TableHost):
    """Branch methods of `Table` (mixed in); `self._state` is the handle's version."""

    _state: TableState

    @property
    def branch(self) -> str | None:
        """The branch this handle is on (None: main)."""
        return branch_of(self._state.store)

    @property
    def branches(self) -> Branches:
        """pylance's `branches` namespace: `.list()`, `.list_ordered(order)`, `.delete(name)`."""
        return Branches(self._state)

    def _reference_state(self, reference: BranchReference | None) -> TableState:
        """The state a reference names (see `BranchReference`; None: this handle's version)."""
        if reference is None:
            return self._state
        if isinstance(reference, tuple):
            if len(reference) != 2:
                raise VersionNotFoundError(f"a branch reference is (branch, version), got {reference!r}")
            branch, version = reference
            branch = None if branch == MAIN_NAME else branch
            if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
                raise VersionNotFoundError(f"a version is an int or None, got {version!r}")
            return txn_branches.open_branch(self._state, branch, version)
        if isinstance(reference, str):
            try:
                branch, version = history.tags_of(self._state).get_reference(reference)
            except CorruptTagError:
                raise
            except TagError as exc:
                raise VersionNotFoundError(str(exc)) from None
            return txn_branches.open_branch(self._state, branch, version)
        return self._state.checkout(history.resolve(self._state, reference))

    def create_branch(self, name: str, reference: BranchReference | None = None) -> Self:
        """Create branch `name` forked from `reference` and return a handle on it (pylance's `create_branch`).

        No data is copied: the branch's first version is the referenced version (same number), and writes
        through the returned handle commit to the branch only.

        Args:
            name: The new branch's name (letters, digits, '_', '-', '.'; not "main").
            reference: A version of this handle's branch, a tag, or (branch, version); None: this handle's
                version.

        Returns:
            A handle on the branch's first version.

        Raises:
            BranchExistsError: the name is taken.
            BranchError: the name is bad.
            VersionNotFoundError / BranchNotFoundError: the reference names nothing.
        """
        source = self._reference_state(reference)
        return type(self)(txn_branches.create_branch(source, name))

    def checkout_branch(self, name: str | None) -> Self:
        """A handle on the latest version of branch `name` (None or "main": main).

        Args:
            name: The branch.

        Returns:
            The handle.

        Raises:
            BranchNotFoundError: no such branch.
        """
        return type(self)(self._reference_state((name, None)))

    def publish_branch(
        self,
        name: str,
        *,
        delete_branch: bool = False,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> int:
        """Land branch `name`'s changes since it forked (or was last published) on this handle's branch in ONE
        version, and move this handle there.

        When this branch has not moved since, the new version holds exactly the branch's rows (a
        fast-forward); otherwise the branch's changes are checked against this branch's commits since, under
        the usual conflict rules: compatible or rebasable, they are published as they are; retryable (the same
        rows, the same new keys, fragments compacted since), the branch's writes are run again on the latest
        version (`table/branch_replay.py`) and that result is published; incompatible, a conflict error and
        nothing changes. See docs/guide/branches.md for Iceberg's
        `fast_forward` / `cherrypick_snapshot`.

        Args:
            name: The branch to publish (forked from this handle's branch).
            delete_branch: Delete it once published.
            commit_message: The new version's message.
            transaction_properties: The new version's properties.
            max_retries: How many times a lost race is retried.

        Index builds the branch made are then built on this branch, one version each (docs/guide/branches.md): the
        handle moves to the last of them.

        Returns:
            The version the rows and config landed in (the latest version, when the branch had nothing new).

        Raises:
            BranchNotFoundError: no such branch.
            BranchError: it was forked from another branch, or it changed the schema and this branch moved.
            BranchNotReplayableError: a commit since the fork conflicts and some write of the branch cannot run
                again (an overwrite, a type change, a write through the low-level API): publishing again gives
                the same answer (an IncompatibleConflictError).
            RetryableConflictError: this branch kept moving while the branch's writes ran again.
            IncompatibleConflictError: a commit since the fork cannot be reconciled (an overwrite, a restore), or
                a branch write fails when run again on this branch's rows (a column dropped here).
        """
        drop_leftover_scratch(self._state, name)
        builds = recorded_index_builds(self._state, name)
        base, scanned = publish_base(self._state, name)  # a run again reads only the versions after `scanned`
        try:
            state = publish_branch(
                self._state,
                name,
                base=base,
                delete_branch_after=delete_branch,
                commit_message=commit_message,
                transaction_properties=transaction_properties,
                max_retries=max_retries,
            )
        except RetryableConflictError as conflict:
            state = publish_by_replay(
                self._state,
                name,
                conflict,
                type(self),  # type: ignore[arg-type]
                base_scanned_through=scanned,
                commit_message=commit_message,
                transaction_properties=transaction_properties,
                max_retries=max_retries,
            )
            if delete_branch:
                txn_branches.delete_branch(state, name)
        self._state = state
        missing = [b for b in builds if b["name"] not in {i.name for i in state.manifest.indices}]
        if missing:  # one CreateIndex each, over the fragment ids the parent now has (the parent's own index wins)
            failpoint("branch.publish.before_indices")
            for build in missing:
                self.create_index(build["column"], build["index_type"], name=build["name"])
        return state.version

    def branch_info(self, name: str) -> BranchInfo:
        """One branch's info (see `Branches.list`).

        Args:
            name: The branch.

        Returns:
            Its info.

        Raises:
            BranchNotFoundError: no such branch.
        """
        return BranchInfo.of(read_ref(self._state.store, name))
