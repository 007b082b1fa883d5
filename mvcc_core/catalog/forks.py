"""Per-table forks of catalog branches: the lazy fork at a table's first write on a branch, the repair of a fork
whose catalog publish never happened, and the reconciler `Catalog.cleanup` runs (docs/guide/branches.md, "Catalog
branches").

A catalog branch `b` records a fork by the names its row gives the table's manifests: relative to the table's
root they sit under the fork's tree, `tree/b/_versions/...` (`fork_of`). A row that names main's manifests reads
main's version as of the branch point.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum

from mvcc_core.catalog import refs as catalog_refs
from mvcc_core.catalog.entries import TABLE, Entry, live, read_rows, reconstruct
from mvcc_core.catalog.errors import CatalogEntryError, CatalogError
from mvcc_core.errors import BranchExistsError, BranchNotFoundError, TableNotFoundError
from mvcc_core.failpoints import failpoint
from mvcc_core.format.branches import BranchRef, branch_of, branch_store, read_ref, tree_prefix
from mvcc_core.format.naming import TRANSACTIONS_DIR, VERSIONS_DIR
from mvcc_core.io import ObjectStore
from mvcc_core.maintenance.cleanup import UNVERIFIED_WINDOW
from mvcc_core.table import open_table
from mvcc_core.txn import branches as txn_branches
from mvcc_core.txn.state import TableState

log = logging.getLogger("mvcc.catalog")

_TREE = "tree/"

#: The key in a fork's ref metadata naming the catalog branch it was made for. The reconciler reclaims only refs
#: that carry it: a table branch a user made on a catalog's table directly is the user's, whatever its name.
CATALOG_FORK = "mvcc.catalog_branch"


def is_catalog_fork(ref: BranchRef, name: str) -> bool:
    """Whether the table branch `name` with ref `ref` is a catalog branch's fork (its ref says so).

    Args:
        ref: The table branch's ref.
        name: The table branch's name.
    """
    return ref.metadata.get(CATALOG_FORK) == name


def fork_of(entry: Entry) -> str | None:
    """The table branch a catalog row publishes (None: a version of the table's main).

    Args:
        entry: A table's `__manifest` row.

    Returns:
        The fork's branch name, or None.
    """
    if entry.staged_manifests and entry.staged_manifests[-1].startswith(_TREE):
        return entry.staged_manifests[-1].split("/")[1]
    return None


def rooted(store: ObjectStore, path: str) -> str:
    """`path`, as `store` names it, named from the table's root (a fork's manifests and transactions are in its
    tree; every other file is the root's).

    Args:
        store: The table's store, the root's or a fork's view (`BranchStore`).
        path: A path relative to `store`.

    Returns:
        The path relative to the table's root.
    """
    branch = branch_of(store)
    if branch is not None and path.split("/", 1)[0] in (VERSIONS_DIR, TRANSACTIONS_DIR):
        return f"{tree_prefix(branch)}/{path}"
    return path


class ForkStatus(Enum):
    """What a fresh read of the catalog says of a table branch named like a catalog branch (as the
    branch repair's `ForkRefStatus`, with adoption instead of reclaim for the interrupted first write)."""

    RECORDED = "recorded"  # the catalog branch places the table on it: another writer published it
    ADOPTABLE = "adoptable"  # unrecorded, and exactly the fork a writer makes: the branch point, nothing more
    ORPHAN = "orphan"  # unrecorded and not adoptable, or its catalog branch is gone: cleanup reclaims it
    UNCERTAIN = "uncertain"  # the catalog branch's rows cannot be trusted for this table: kept, never adopted


@dataclass(frozen=True)
class ForkCheck:
    """A classification and why (for messages and logs)."""

    status: ForkStatus
    reason: str


def fresh_branch_rows(manifest_uri: str, branch: str, options: dict | None) -> list[Entry] | None:
    """The rows of catalog branch `branch`'s newest version, read anew (never a cached state:
    "reclaim self-validates against fresh manifest authority"); None when the branch does not exist.

    Args:
        manifest_uri: The catalog's `__manifest` uri.
        branch: The catalog branch.
        options: The store options.

    Returns:
        The rows, or None.
    """
    try:
        return read_rows(open_table(manifest_uri, branch=branch, storage_options=options or None))
    except (BranchNotFoundError, TableNotFoundError):
        return None


def branch_point_rows(manifest_uri: str, branch: str, options: dict | None) -> tuple[int, list[Entry]] | None:
    """(version, rows) of catalog branch `branch`'s first version: main's catalog version it forked, whose table
    rows fix each table's directory for the branch's whole life (a branch makes no DDL); None when the branch
    does not exist.

    Args:
        manifest_uri: The catalog's `__manifest` uri.
        branch: The catalog branch.
        options: The store options.

    Returns:
        The branch point's version and rows, or None.
    """
    try:
        manifest = open_table(manifest_uri, branch=branch, storage_options=options or None)
        first = read_ref(branch_store(manifest.state.store, None), branch).parent_version
        return first, read_rows(open_table(manifest_uri, first, branch=branch, storage_options=options or None))
    except (BranchNotFoundError, TableNotFoundError):
        return None


def foreign_rows(rows: list[Entry], point: tuple[int, list[Entry]], branch: str) -> dict[tuple[str, str], str]:
    """The live table rows of catalog branch `branch` that are not that table's own, with the reason: a row
    whose directory is not the one the same table had at the branch point (it would read, publish and let
    cleanup reclaim another table's fork), a table the branch point did not have, or manifests in another
    branch's fork. Each fails closed: readers refuse it, a publish of the branch refuses, cleanup keeps forks.

    Args:
        rows: The branch's rows at some version.
        point: `branch_point_rows`: the branch point's version and rows.
        branch: The catalog branch.

    Returns:
        (kind, name) to the reason.
    """
    version, point_rows = point
    own = {e.name: e.path for e in live(point_rows).values() if e.object_type == TABLE}
    by_path = {path: name for name, path in own.items()}
    out = {}
    for key, entry in reconstruct(rows).items():
        if entry.object_type != TABLE:
            continue
        mine = own.get(entry.name)
        if mine is None:
            out[key] = f"catalog version {version}, where the branch starts, has no table {entry.name!r}"
        elif entry.path != mine:
            other = by_path.get(entry.path)
            whose = f"table {other!r}'s directory" if other is not None else "not a directory of this branch"
            out[key] = (
                f"field path is {entry.path!r} ({whose}), but the table's directory is {mine!r} (catalog version "
                f"{version}, where the branch starts)"
            )
        elif fork_of(entry) not in (None, branch):
            out[key] = f"its manifests are in fork {fork_of(entry)!r}, not in this branch's"
    return out


def branch_rows_problems(manifest_uri: str, branch: str, options: dict | None, rows: list[Entry]) -> dict:
    """`foreign_rows` of `rows` (catalog branch `branch`'s), reading its branch point anew.

    Args:
        manifest_uri: The catalog's `__manifest` uri.
        branch: The catalog branch.
        options: The store options.
        rows: The branch's rows.

    Returns:
        (kind, name) to the reason (empty when the branch is gone: nothing is read through it then).
    """
    point = branch_point_rows(manifest_uri, branch, options)
    return {} if point is None else foreign_rows(rows, point, branch)


def classify(
    rows: list[Entry] | None,
    path: str,
    name: str,
    ref: BranchRef,
    fork_latest: int | None,
    problems: dict[tuple[str, str], str] | None = None,
) -> ForkCheck:
    """Classify table branch `name` of the table in directory `path` against catalog branch `name`'s rows.

    Args:
        rows: The catalog branch's rows, freshly read (None: no such catalog branch).
        problems: The branch's rows that are not their table's own (`foreign_rows`): while any is there, the
            rows cannot say which fork is whose, so no fork of the branch is reclaimed or adopted.
        path: The table's directory.
        name: The branch name (the catalog branch's and the fork's).
        ref: The table branch's ref.
        fork_latest: The table branch's newest version (None: unreadable or not created yet).

    Returns:
        The classification.
    """
    if rows is None:
        return ForkCheck(ForkStatus.ORPHAN, f"catalog branch {name!r} does not exist")
    if problems:
        shown = "; ".join(f"row {key[1]!r}: {reason}" for key, reason in sorted(problems.items()))
        return ForkCheck(ForkStatus.UNCERTAIN, f"catalog branch {name!r} has rows that are not their table's: {shown}")
    entry = next((e for e in live(rows).values() if e.object_type == TABLE and e.path == path), None)
    if entry is None:
        return ForkCheck(ForkStatus.ORPHAN, f"catalog branch {name!r} has no table in {path}")
    if fork_of(entry) == name:
        return ForkCheck(ForkStatus.RECORDED, f"catalog branch {name!r} publishes its version {entry.table_version}")
    pinned = entry.table_version
    if ref.deleting or ref.published is not None or ref.parent_branch is not None:
        return ForkCheck(ForkStatus.ORPHAN, "it is being deleted, was published, or forks another branch")
    if ref.parent_version != pinned or fork_latest not in (None, pinned):
        return ForkCheck(
            ForkStatus.ORPHAN,
            f"it forks main's version {ref.parent_version} and is at {fork_latest}, the catalog branch reads {pinned}",
        )
    return ForkCheck(ForkStatus.ADOPTABLE, f"an unpublished fork of version {pinned}")


def _fork_latest(main: TableState, name: str) -> int | None:
    """The newest version of table branch `name` (an interrupted creation is completed by opening it)."""
    try:
        return txn_branches.open_branch(main, name).version
    except BranchNotFoundError:
        return None


def fork_for_write(
    manifest_uri: str, options: dict | None, branch: str, entry: Entry, main: TableState
) -> TableState | None:
    """The fork of table `entry` on catalog branch `branch` that a publish on the branch stages its chain on.

    The first write creates it (`create_branch` at the version the branch reads: the ref's put-if-not-exists
    lets exactly one creator win). When the name is taken, a fresh read of the catalog branch decides:
    recorded (another writer published the fork first) -> None, the caller retries on the newer catalog
    version; an unpublished fork at the branch point (a writer killed between the fork and its publish) ->
    adopted as it is, so the next write repairs it exactly once by publishing it, and nothing is destroyed
    (a live writer that made it publishes on the same fork, and the `__manifest` commit picks one); anything
    else is refused, for `Catalog.cleanup` to reclaim.

    Args:
        manifest_uri: The catalog's `__manifest` uri.
        options: The store options.
        branch: The catalog branch.
        entry: The table's row on the catalog branch (not a fork yet).
        main: The table at the version that row publishes (main's).

    Returns:
        The fork at its first version, or None when the catalog branch records a fork already.

    Raises:
        CatalogError: A table branch of that name exists that is not the fork the catalog branch would make.
    """
    try:
        fork = txn_branches.create_branch(main, branch, metadata={CATALOG_FORK: branch})
    except BranchExistsError:
        pass
    else:
        failpoint("catalog.branch.after_fork")
        return fork
    ref = read_ref(main.store, branch)
    rows = fresh_branch_rows(manifest_uri, branch, options)
    recorded = rows is not None and any(e.path == entry.path and fork_of(e) == branch for e in live(rows).values())
    if not recorded and not is_catalog_fork(ref, branch):
        raise CatalogError(
            f"table {main.uri} has a table branch {branch!r} of its own (not a fork of catalog branch {branch!r}); "
            f"rename or delete that table branch before catalog branch {branch!r} writes this table"
        )
    problems = branch_rows_problems(manifest_uri, branch, options, rows or [])
    check = classify(rows, entry.path, branch, ref, _fork_latest(main, branch), problems)
    if check.status is ForkStatus.UNCERTAIN:
        raise CatalogEntryError(f"table {main.uri}: its fork {branch!r} is not written ({check.reason})")
    if check.status is ForkStatus.RECORDED:
        return None
    if check.status is ForkStatus.ADOPTABLE:
        log.warning("%s: adopting the unpublished fork %r (%s)", main.uri, branch, check.reason)
        return txn_branches.open_branch(main, branch, entry.table_version)
    raise CatalogError(
        f"table {main.uri} has a branch {branch!r} that catalog branch {branch!r} does not place it on and that "
        f"is not the fork it would make ({check.reason}); run catalog.cleanup() to reclaim it"
    )


def _depth(name: str, refs: dict[str, BranchRef]) -> int:
    depth, seen = 0, {name}
    parent = refs[name].parent_branch
    while parent is not None and parent in refs and parent not in seen:
        seen.add(parent)
        depth, parent = depth + 1, refs[parent].parent_branch
    return depth


def reconcile(
    manifest_uri: str,
    options: dict | None,
    tables: dict[str, TableState],
    *,
    delete_unverified: bool,
    dry_run: bool,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> list[str]:
    """Reclaim table branches no catalog branch places its table on (the fork reconciler): a fork of a
    catalog branch that is gone (deleted, or its deletion was interrupted), or one the catalog branch never
    recorded. Children are removed before parents. Each is classified from a fresh read of its catalog branch
    just before it is removed; a recorded fork is never removed, and an adoptable one (a writer may be between
    its fork and its publish) only once older than the core's unverified window or with `delete_unverified`.

    Args:
        manifest_uri: The catalog's `__manifest` uri.
        options: The store options.
        tables: Each table's main state, by directory.
        delete_unverified: Reclaim adoptable forks at once (only when no writer runs).
        dry_run: Classify only.
        now: The clock forks are dated against the unverified window by: a callable returning an aware datetime
            (default: the wall clock, UTC).

    Returns:
        The forks removed (or, with `dry_run`, to remove), as "directory@branch".
    """
    removed = []
    window_start = now() - UNVERIFIED_WINDOW
    for path, main in sorted(tables.items()):
        refs = catalog_refs.branch_refs(main.store, sweep=not dry_run, delete_unverified=delete_unverified, now=now)
        for name in sorted(refs, key=lambda n: (-_depth(n, refs), n)):
            ref = refs[name]
            if not is_catalog_fork(ref, name):
                log.debug("%s: table branch %r is not a catalog fork (no %s): left alone", main.uri, name, CATALOG_FORK)
                continue
            latest = None if ref.deleting else _fork_latest(main, name)
            rows = fresh_branch_rows(manifest_uri, name, options)
            problems = branch_rows_problems(manifest_uri, name, options, rows) if rows is not None else None
            check = classify(rows, path, name, ref, latest, problems)
            if check.status is ForkStatus.RECORDED:
                continue
            if check.status is ForkStatus.UNCERTAIN:
                log.error("%s: fork %r kept (%s)", main.uri, name, check.reason)
                continue
            young = datetime.fromtimestamp(ref.create_at, UTC) >= window_start
            if check.status is ForkStatus.ADOPTABLE and young and not delete_unverified:
                log.info("%s: fork %r kept (%s, a writer may be publishing it)", main.uri, name, check.reason)
                continue
            removed.append(f"{path}@{name}")
            if dry_run:
                continue
            log.warning("%s: reclaiming fork %r (%s)", main.uri, name, check.reason)
            txn_branches.delete_branch(main, name)
            failpoint("catalog.cleanup.after_fork_reclaimed")
    return removed


def leftover_forks(stores: dict[str, ObjectStore], name: str) -> list[str]:
    """Tables (directories) that still have catalog branch `name`'s fork (a catalog branch deletion that
    stopped half-way leaves them; `Catalog.cleanup` reclaims them). A user's own table branch of that name is
    not one.

    Args:
        stores: Each table's root store, by directory.
        name: The branch name.

    Returns:
        The directories.
    """
    out = []
    for path, store in stores.items():
        ref = catalog_refs.branch_refs(branch_store(store, None)).get(name)
        if ref is not None and is_catalog_fork(ref, name):
            out.append(path)
    return sorted(out)
