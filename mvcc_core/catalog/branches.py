"""Catalog branches: `Catalog.create_branch`, `branches`, `delete_branch`,
`publish_branch`, and the branch-bound catalog (`on_branch`) that `snapshot(branch=)`, `table(branch=)` and
`transaction(branch=)` use. Layout and protocol: docs/guide/branches.md, "Catalog branches".

A catalog branch is a core branch of `__manifest`: its first version is main's catalog version it forked from,
and each publish on it is a version of that branch. A table is forked (a core branch of the table, same name)
by the first publish on the branch that writes it (`forks.fork_for_write`, called by the publisher).
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

from mvcc_core.catalog import forks
from mvcc_core.catalog import refs as catalog_refs
from mvcc_core.catalog.branch_rerun import publish_by_rerun, published_mark
from mvcc_core.catalog.entries import TABLE, Entry
from mvcc_core.catalog.errors import (
    BRANCH_PUBLISHED,
    CatalogEntryError,
    CatalogError,
    IncompatibleCatalogConflictError,
    RetryableCatalogConflictError,
)
from mvcc_core.catalog.host import CatalogHost
from mvcc_core.catalog.multi_table import CatalogTransaction
from mvcc_core.catalog.names import check_branch_name
from mvcc_core.catalog.services import SnapshotView
from mvcc_core.catalog.snapshot import CatalogSnapshot
from mvcc_core.catalog.table_changes import TableWrite, merge_kinds
from mvcc_core.errors import BranchNotFoundError
from mvcc_core.failpoints import failpoint
from mvcc_core.format import operations
from mvcc_core.format.branches import MAIN_NAME, BranchRef, branch_store, read_ref, update_ref
from mvcc_core.ops.branch_publish import (
    PUBLISHED_BRANCH,
    PUBLISHED_BRANCH_ID,
    PUBLISHED_BRANCH_VERSION,
    fragments_of,
    published_base,
    row_changes,
    same_schema,
)
from mvcc_core.table import open_table
from mvcc_core.table.branch_replay import PUBLISHED_BY_REPLAY
from mvcc_core.txn import branches as txn_branches
from mvcc_core.txn.branches import BranchInfo
from mvcc_core.txn.transaction import Transaction

log = logging.getLogger("mvcc.catalog")

# the catalog a branch method is called on (`Catalog`)
_Host = TypeVar("_Host", bound=CatalogHost)


class BranchTransaction(CatalogTransaction):
    """A transaction on a catalog branch: data changes only (each table forked at its first publish); DDL is
    refused before anything is written (docs/guide/branches.md: a branch's tables are main's as of the branch point).
    Each change records what it did (`branch_replay.REPLAY_PROPERTY`), so a publish can run it again."""

    records_writes = True

    def _refuse(self, *_: Any, **__: Any) -> None:
        raise CatalogError(
            f"catalog branch {self.catalog.branch!r}: only data changes are made on a catalog branch; create, drop "
            f"and rename tables, schemas and views on main"
        )

    create_schema = drop_schema = create_table = drop_table = rename_table = _refuse
    create_view = rename_view = drop_view = _refuse


class BranchPublish(CatalogTransaction):
    """The catalog transaction of `publish_branch`: before DuckLake's rules, a catalog version committed since
    its base that already carries this branch's publish (`mvcc.published_branch_id`, a concurrent
    `publish_branch` of the same branch) refuses it, so a branch's changes never land twice."""

    def _check_logical(self, latest: int) -> None:
        ident = self.transaction_properties[PUBLISHED_BRANCH_ID]
        manifest = self.catalog.manifest_table()
        for version in range(self.snapshot.version + 1, latest + 1):
            txn = manifest.transaction(version)
            if txn is not None and txn.transaction_properties.get(PUBLISHED_BRANCH_ID) == ident:
                name = self.transaction_properties[PUBLISHED_BRANCH]
                raise self._conflict(
                    IncompatibleCatalogConflictError,
                    (name, version),
                    ("the same branch was published by another snapshot", BRANCH_PUBLISHED),
                    f"branch {name!r} was published by catalog version {version} while this publish of it ran "
                    f"(read catalog version {self.snapshot.version})",
                )
        super()._check_logical(latest)


class CatalogBranchMethods:
    """Branch methods of `Catalog` (mixed in; they take it as a `CatalogHost`); see the module docstring."""

    # a catalog branch's first version, (version, rows), read once (`branch_row_problems`; set by `Catalog`)
    _branch_point: tuple[int, list[Entry]] | None

    def _main(self: _Host) -> _Host:
        """This catalog on main (itself when it is)."""
        if self.branch is None:
            return self
        return type(self).open(self.root, storage_options=self.options or None)

    def on_branch(self: _Host, name: str) -> _Host:
        """This catalog bound to catalog branch `name`: its snapshots, tables and transactions are the branch's.

        Args:
            name: The catalog branch.

        Returns:
            A catalog object on the branch.

        Raises:
            BranchNotFoundError: there is no such catalog branch.
        """
        if name in (None, MAIN_NAME):
            return self._main()
        manifest = open_table(self._manifest_uri, branch=name, storage_options=self.options or None)
        return type(self)(self.root, self.options, manifest, branch=name)

    def create_branch(self: CatalogHost, name: str) -> int:
        """Create catalog branch `name` at main's newest catalog version (no table is copied or forked yet).

        Args:
            name: The branch's name (letters, digits, '_', '-', '.'; not "main").

        Returns:
            The catalog version it forks (its first version has the same number).

        Raises:
            BranchExistsError: the name is taken.
            BranchError: the name is bad.
            CatalogError: tables still hold forks of an earlier branch of that name (run `cleanup` first).
        """
        check_branch_name(name)
        main = self._main()
        snapshot = main._for_write()  # an older format is migrated first: the branch starts in this one
        stores = {e.path: main.store(e.path) for (kind, _), e in snapshot.entries.items() if kind == TABLE}
        leftover = forks.leftover_forks(stores, name)
        if leftover:
            raise CatalogError(
                f"catalog {self.root}: tables {leftover} still hold forks named {name!r} of a deleted catalog branch; "
                f"run catalog.cleanup() first"
            )
        if snapshot.manifest is None:  # a snapshot for write carries its `__manifest` (`Catalog._for_write`)
            raise CatalogError(f"catalog {self.root}: no `__manifest` table to branch at version {snapshot.version}")
        snapshot.manifest.create_branch(name)
        return snapshot.version

    def branches(self: CatalogHost) -> dict[str, BranchInfo]:
        """Every catalog branch by name (`parent_version`: the catalog version it forked).

        Returns:
            Name to `BranchInfo`.
        """
        store = branch_store(self._main().latest_manifest().state.store, None)
        return {name: BranchInfo.of(ref) for name, ref in catalog_refs.branch_refs(store).items() if not ref.deleting}

    def branch_row_problems(self: CatalogHost, rows: list[Entry]) -> dict[tuple[str, str], str]:
        """The rows of this catalog branch that are not their table's own (`forks.foreign_rows`), checked against
        the branch point (read once per catalog object: it never changes); {} on main.

        Args:
            rows: The branch's rows at some version.

        Returns:
            (kind, name) to the reason.
        """
        if self.branch is None:
            return {}
        point = self._branch_point
        if point is None:
            point = forks.branch_point_rows(self._manifest_uri, self.branch, self.options)
            if point is None:
                return {}
            self._branch_point = point
        return forks.foreign_rows(rows, point, self.branch)

    def branch_entries(self: CatalogHost) -> list[Entry]:
        """The table rows of every live catalog branch at its newest version (what retention keeps), each
        finalized first.

        Returns:
            The rows.
        """
        out: list[Entry] = []
        for name in self.branches():
            try:
                bound = self.on_branch(name)
            except BranchNotFoundError:
                continue  # deleted meanwhile
            entries = [e for e in bound.snapshot().entries.values() if e.object_type == TABLE]
            for entry in entries:  # rolled forward through the branch (its catalog version carries the bytes)
                bound.finalize(entry)
            out += entries
        return out

    def delete_branch(self: CatalogHost, name: str) -> None:
        """Delete catalog branch `name`, then each table's fork of it (a deletion that stops half-way leaves
        forks no catalog branch places their tables on, which `cleanup` reclaims).

        Args:
            name: The catalog branch.

        Raises:
            BranchNotFoundError: there is no such catalog branch (one whose deletion stopped half-way is
                deleted again, which finishes it).
        """
        main = self._main()
        manifest = main.latest_manifest()
        read_ref(manifest.state.store, name)  # BranchNotFoundError before anything is done
        rows = forks.fresh_branch_rows(self._manifest_uri, name, self.options) or []  # none: being deleted
        paths = {e.path for e in [*rows, *main.snapshot().entries.values()] if e.object_type == TABLE}
        manifest.branches.delete(name)
        failpoint("catalog.branch.delete.after_catalog")
        for path in sorted(paths):
            table = open_table(f"{self.root}/{path}", storage_options=self.options or None)
            if name in catalog_refs.branch_refs(table.state.store):
                txn_branches.delete_branch(table.state, name)

    def reconcile_forks(self: CatalogHost, *, delete_unverified: bool = False, dry_run: bool = False) -> list[str]:
        """`forks.reconcile` over every table main or a live catalog branch names.

        Args:
            delete_unverified: Reclaim unpublished forks at once (only when no writer runs).
            dry_run: Classify only.

        Returns:
            The forks reclaimed, as "directory@branch".
        """
        main = self._main()
        entries = [e for (kind, _), e in main.snapshot().entries.items() if kind == TABLE] + self.branch_entries()
        tables = {}
        for entry in entries:
            if entry.path not in tables:
                tables[entry.path] = open_table(f"{self.root}/{entry.path}", storage_options=self.options or None).state
        return forks.reconcile(
            self._manifest_uri, self.options, tables, delete_unverified=delete_unverified, dry_run=dry_run
        )

    def publish_branch(
        self: CatalogHost,
        name: str,
        *,
        commit_message: str | None = None,
        transaction_properties: dict[str, str] | None = None,
    ) -> int:
        """Land every table's changes of catalog branch `name` since it forked (or was last published) on main in
        ONE catalog version. The changes are checked against what main committed since, with DuckLake's rules
        (`change_rules.py`) and then each table's own rules (row-level, rebased where they allow). Where those
        give a retryable conflict (main changed the same rows), each fork's recorded writes run again on main's
        latest catalog version, all in one catalog transaction (`branch_rerun.py`), as `Table.publish_branch`
        does. Refused means a `CatalogConflictError` and main untouched. The branch stays; a later publish
        carries only what is new.

        Args:
            name: The catalog branch.
            commit_message: The message of main's new catalog version (default "publish branch {name}").
            transaction_properties: Properties of that version.

        Returns:
            Main's new catalog version (its newest, when the branch has nothing new).

        Raises:
            BranchNotFoundError: there is no such catalog branch.
            CatalogError: a table's schema changed on the branch (not published by the catalog).
            RetryableCatalogConflictError: main kept moving while the branch's writes ran again.
            IncompatibleCatalogConflictError: a conflict with main no re-run can resolve (rule code
                `branch_published`: a concurrent publish of this branch landed first; `branch_write_not_replayable`:
                a branch write cannot run again on main's rows, e.g. an overwrite; DuckLake's, e.g. a dropped table).
        """
        main = self._main()
        head = main.on_branch(name).snapshot()
        bad = [(entry, reason) for (kind, _), (entry, reason) in head.invalid.items() if kind == TABLE]
        if bad:  # all of a branch's tables or none: a row that is not its table's own stops the whole publish
            shown = "; ".join(f"table {entry.name!r}: {reason}" for entry, reason in bad)
            raise CatalogEntryError(
                f"catalog {self.root}: branch {name!r} is not published: {shown}; main is unchanged. Delete the "
                f"branch (Catalog.delete_branch) to drop its writes"
            )
        manifest_main = main.latest_manifest()
        mref = read_ref(manifest_main.state.store, name)
        branch_base, main_base = published_base(manifest_main.state, name, mref)
        latest = main.snapshot()
        if head.version == branch_base:
            return latest.version
        for entry in latest.entries.values():  # published table versions final: the base scans below read them
            if entry.object_type == TABLE:
                main.finalize(entry)
        message = commit_message if commit_message is not None else f"publish branch {name}"
        properties = {
            **(transaction_properties or {}),
            PUBLISHED_BRANCH: name,
            PUBLISHED_BRANCH_ID: mref.identifier,
            PUBLISHED_BRANCH_VERSION: str(head.version),
        }
        tx = BranchPublish(main, main.snapshot(main_base), commit_message=message, transaction_properties=properties)
        heads: dict[str, tuple[Any, int]] = {}  # path -> (fork ref, fork version published)
        try:
            for entry in head.entries.values():
                if entry.object_type == TABLE and forks.fork_of(entry) == name:
                    published = self._stage_fork(tx, head, entry, name)
                    if published is not None:
                        heads[entry.path] = published
            if not heads:
                return latest.version
            version = tx.commit()
        except (RetryableCatalogConflictError, _FragmentsMoved) as conflict:
            tx.abort()  # as they are, the changes cannot land: run the branch's writes again on main's latest

            def fresh(snapshot: CatalogSnapshot) -> BranchPublish:
                rerun = properties | {PUBLISHED_BY_REPLAY: "true"}
                return BranchPublish(main, snapshot, commit_message=message, transaction_properties=rerun)

            def landed() -> bool:
                state = main.latest_manifest().state
                return published_base(state, name, read_ref(state.store, name))[0] == head.version

            version, heads = publish_by_rerun(
                main, name, head, conflict, new_transaction=fresh, fork_change=_fork_change, published=landed
            )
            if not heads:
                return version
        failpoint("catalog.branch.publish.after_commit")
        rows = {e.path: e for e in main.snapshot(version).entries.values() if e.object_type == TABLE}
        for path, (ref, fork_version) in heads.items():
            store = main.table_at(rows[path]).state.store
            update_ref(store, name, ref, published=(fork_version, rows[path].table_version))
        update_ref(manifest_main.state.store, name, mref, published=(head.version, version))
        log.info(
            "catalog %s: published branch %r version %d as catalog version %d", self.root, name, head.version, version
        )
        return version

    def _stage_fork(
        self: CatalogHost, tx: CatalogTransaction, head: CatalogSnapshot, entry: Entry, name: str
    ) -> tuple[Any, int] | None:
        """Stage the fork's changes since its base as one step of `tx` on the table; (fork ref, fork version) or
        None when it has nothing new."""
        main_base = tx.snapshot
        base_row = next(
            (e for e in main_base.entries.values() if e.object_type == TABLE and e.path == entry.path), None
        )
        if base_row is None:
            raise CatalogError(
                f"catalog branch {name!r}: table {entry.name!r} is not in main's catalog version {main_base.version}"
            )
        change = _fork_change(head, entry, main_base, base_row)
        if change is None:
            return None
        fork, ref, (fork_base, target_base) = change
        target = main_base.catalog.table_at(base_row).state
        if target_base != base_row.table_version:
            raise CatalogError(
                f"catalog branch {name!r}: table {entry.name!r}'s fork was last published as table version "
                f"{target_base}, but catalog version {main_base.version} publishes {base_row.table_version}"
            )
        base_manifest = txn_branches.open_branch(target, name, fork_base).manifest
        if fragments_of(base_manifest) != fragments_of(target.manifest):
            # The fork's changes are fragment ids and deletion vectors relative to its base; after a publish while
            # main had moved, main holds the same rows under other ids or vectors, and the changes would land on
            # the wrong fragments: the publish runs the fork's writes again instead (docs/guide/branches.md, "Publishing
            # a catalog branch").
            raise _FragmentsMoved(
                f"catalog branch {name!r}: table {entry.name!r} was published while main had moved, so its fork "
                f"and main no longer name the same fragments"
            )
        update, written = row_changes(target, base_manifest, fork, fork_base)
        txn = Transaction(
            read_version=target.version,
            operation=update,
            message=tx.commit_message,
            transaction_properties=published_mark(name, ref, fork.version),
            files=written,
        )
        w = TableWrite(entry.path, base_row.name, False, target, target)
        w.add(txn, merge_kinds(update) if isinstance(update, operations.Update) else ["altered_table"])
        tx.writes[entry.path] = w
        return ref, fork.version


class _FragmentsMoved(Exception):
    """A fork whose changes, as fragment ids, no longer mean the same rows on main (its message says which)."""


def _fork_change(
    head: CatalogSnapshot, entry: Entry, snapshot: SnapshotView, row: Entry
) -> tuple[Any, BranchRef, tuple[int, int]] | None:
    """(the fork's state, its ref, (fork version, table version) of its last publish or its fork) of the branch's
    row `entry` in `head`, whose table main's `snapshot` publishes as `row`; None when the fork has nothing new.

    Raises:
        CatalogError: the fork changed the table's schema (a catalog publish carries row changes only).
    """
    name = head.catalog.branch
    if name is None:
        raise CatalogError(f"catalog {head.catalog.root}: a publish reads a catalog branch's snapshot, not main's")
    fork = head.catalog.table_at(entry).state
    target = snapshot.catalog.table_at(row).state
    ref = read_ref(target.store, name)
    base = published_base(target.latest(), name, ref)
    if fork.version == base[0]:
        return None
    if not same_schema(txn_branches.open_branch(target, name, base[0]).manifest, fork.manifest):
        raise CatalogError(
            f"catalog branch {name!r}: table {entry.name!r} changed its schema on the branch; a catalog publish "
            f"carries row changes only"
        )
    return fork, ref, base
