"""`mvcc catalog branches`: list, create, delete and publish a catalog's branches (docs/guide/branches.md,
"Catalog branches"; docs/guide/cli.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypedDict

import click

import mvcc_core as mvcc
from mvcc_core.cli.options import (
    DurationType,
    json_option,
    publish_options,
    storage_option_flag,
    storage_options_for,
)
from mvcc_core.cli.output import emit_json, human_bytes, print_table, version_ranges
from mvcc_core.errors import CatalogError

if TYPE_CHECKING:
    from mvcc_core.catalog import Catalog, CatalogSnapshot


def root_and_storage(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The ROOT argument (a catalog's root) and the repeatable `--storage-option` of every catalog command.

    Args:
        fn: the command's callback

    Returns:
        The callback with both added.
    """
    return click.argument("root")(storage_option_flag(fn))


def open_catalog(root: str, storage_option: tuple[str, ...]) -> Catalog:
    """The catalog at `root`, or an error that says there is none there (opening writes nothing).

    Args:
        root: the catalog's root, as typed
        storage_option: the `--storage-option k=v` values

    Returns:
        The catalog, on main.

    Raises:
        CatalogError: no catalog has its root at `root` (a table's uri, or a catalog's subdirectory).
    """
    from mvcc_core.catalog import Catalog  # the catalog code, imported when a command needs it

    options = storage_options_for(root, storage_option)
    try:
        return Catalog.open(root, storage_options=options)
    except mvcc.TableNotFoundError:
        pass
    try:
        mvcc.open_table(root, storage_options=options)
    except mvcc.TableNotFoundError:
        raise CatalogError(f"no catalog at {root} (a catalog's root holds its __manifest/ table)") from None
    raise CatalogError(f"{root} is a table, not a catalog; its own branches: mvcc branches list {root}")


@contextmanager
def branch_named(cat: Catalog, root: str, name: str, hint: str = "") -> Iterator[None]:
    """Words for a catalog branch that is not there: the API names the `__manifest` table; this names the root,
    the branches there are and the command that lists them.

    Args:
        cat: the catalog
        root: its root as typed
        name: the branch the command was given
        hint: what else the command's user may need to know, appended to the message

    Raises:
        BranchNotFoundError: reworded, when the body found no catalog branch `name`.
    """
    try:
        yield
    except mvcc.errors.BranchNotFoundError:
        live = sorted(cat.branches())
        if name in live:
            raise
        there = f"its branches: {', '.join(live)}" if live else "it has no branches"
        raise mvcc.errors.BranchNotFoundError(
            f"catalog {root} has no branch {name!r} ({there}; mvcc catalog branches list {root}){hint}"
        ) from None


def tables_written(snapshot: CatalogSnapshot) -> list[str]:
    """The tables a catalog branch has written (forked), sorted: each of them opens on its fork. Read from the
    branch's catalog rows alone (no table is opened: one request per table on an object store, and a read that
    would finalize a table version first).

    Args:
        snapshot: the branch's catalog snapshot

    Returns:
        Their full names.
    """
    from mvcc_core.catalog import fork_of

    return [name for name in snapshot.tables() if fork_of(snapshot.entry(name)) is not None]


def tables_changed(cat: Catalog, version: int) -> list[str]:
    """The tables whose published table version catalog `version` moved (what a publish landed), sorted.

    Args:
        cat: the catalog
        version: a catalog version after the first

    Returns:
        Their full names.
    """
    before, after = cat.snapshot(version - 1), cat.snapshot(version)
    return [
        name
        for name in after.tables()
        if name not in before.tables() or before.table_version(name) != after.table_version(name)
    ]


@click.group()
def catalog() -> None:
    """Commands on a catalog of tables (ROOT: the catalog's root; docs/guide/catalog.md).

    \b
    Example:
        mvcc catalog branches list ./lake
    """


@catalog.group("branches")
def catalog_branches() -> None:
    """A catalog's branches: write to many tables on a branch, check them, publish them to main in one version.

    \b
    Example:
        mvcc catalog branches create ./lake audit-42
        mvcc catalog branches publish ./lake audit-42 --delete-branch
    """


class _BranchRow(TypedDict):
    """A row of `mvcc catalog branches list` (its JSON keys, in its column order)."""

    branch: str
    parent_version: int
    created: datetime
    latest_version: int
    tables_written: list[str]


class _TableCleanup(TypedDict):
    """What `mvcc catalog cleanup` removed of one table: its versions and their bytes."""

    removed_versions: list[int]
    bytes: int


@catalog_branches.command("list")
@root_and_storage
@json_option
def catalog_branches_list(root: str, storage_option: tuple[str, ...], as_json: bool) -> None:
    """Every catalog branch: the catalog version it forked, when, its latest version and the tables it wrote.

    \b
    Example:
        mvcc catalog branches list ./lake --json
    """
    cat = open_catalog(root, storage_option)
    rows: list[_BranchRow] = []
    for name, info in sorted(cat.branches().items(), key=lambda item: (item[1].create_at, item[0])):
        try:
            head = cat.snapshot(branch=name)
        except mvcc.errors.BranchNotFoundError:
            continue  # deleted since it was listed
        rows.append(
            _BranchRow(
                branch=name,
                parent_version=info.parent_version,
                created=datetime.fromtimestamp(info.create_at, UTC),
                latest_version=head.version,
                tables_written=tables_written(head),
            )
        )
    if as_json:
        emit_json(rows)
    elif rows:
        columns = ["branch", "forked at", "created", "latest version", "tables written"]
        print_table(None, columns, [[*list(row.values())[:-1], ", ".join(row["tables_written"])] for row in rows])
    else:
        click.echo("no catalog branches")


@catalog_branches.command("create")
@root_and_storage
@click.argument("name")
def catalog_branches_create(root: str, storage_option: tuple[str, ...], name: str) -> None:
    """Create the catalog branch NAME at main's latest catalog version (no table is copied; a table is forked by
    the branch's first write to it).

    \b
    Example:
        mvcc catalog branches create ./lake audit-42
    """
    cat = open_catalog(root, storage_option)
    if name in cat.branches():
        raise mvcc.errors.BranchExistsError(
            f"catalog {root} has a branch {name!r} already; pick another name or delete it with: "
            f"mvcc catalog branches delete {root} {name}"
        )
    try:
        version = cat.create_branch(name)
    except CatalogError as exc:  # forks of an earlier branch of that name: the API names `catalog.cleanup()`
        if "catalog.cleanup()" not in str(exc):
            raise
        command = f"mvcc catalog cleanup {root} --apply"
        words = str(exc).replace("run catalog.cleanup() first", f"reclaim them first with: {command}")
        raise CatalogError(words.replace("catalog.cleanup()", command)) from None
    click.echo(f"created catalog branch {name} at catalog version {version}")


@catalog_branches.command("delete")
@root_and_storage
@click.argument("name")
def catalog_branches_delete(root: str, storage_option: tuple[str, ...], name: str) -> None:
    """Delete the catalog branch NAME and every table's fork of it (what main published stays).

    \b
    Example:
        mvcc catalog branches delete ./lake audit-42
    """
    cat = open_catalog(root, storage_option)
    written: list[str] = []
    if name in cat.branches():  # one whose deletion stopped half-way is not listed; deleting it finishes it
        written = tables_written(cat.snapshot(branch=name))
    half_way = f"; forks left by a deletion that stopped half-way are reclaimed by: mvcc catalog cleanup {root} --apply"
    with branch_named(cat, root, name, half_way):
        cat.delete_branch(name)
    forks = f" and its forks of {', '.join(written)}" if written else ""
    click.echo(f"deleted catalog branch {name}{forks}")


@catalog_branches.command("publish")
@root_and_storage
@publish_options("The message of main's new catalog version.")
def catalog_branches_publish(
    root: str, storage_option: tuple[str, ...], name: str, delete_branch: bool, message: str | None, as_json: bool
) -> None:
    """Land every table's changes on the catalog branch NAME on main, in one catalog version.

    The branch's changes since it forked (or was last published) are checked against main's catalog versions
    since; where main changed the same rows, the branch's writes run again on main's latest rows. Exit 3 when
    they cannot (main dropped a table the branch wrote, an overwrite on the branch), 75 only when main moved
    while the publish ran and running it again may pass: main is untouched either way.

    \b
    Example:
        mvcc catalog branches publish ./lake audit-42 --delete-branch
    """
    cat = open_catalog(root, storage_option)
    before = cat.latest_version
    with branch_named(cat, root, name):
        version = cat.publish_branch(name, commit_message=message)
    published = version != before
    tables = tables_changed(cat, version) if published else []
    if delete_branch:
        cat.delete_branch(name)
    if as_json:
        emit_json(
            {
                "branch": name,
                "into": "main",
                "version": version,
                "published": published,
                "tables": tables,
                "branch_deleted": delete_branch,
            }
        )
        return
    elif published:
        click.echo(f"published catalog branch {name} as catalog version {version} ({', '.join(tables)})")
    else:
        click.echo(f"catalog branch {name} has nothing new; main stays at catalog version {version}")
    if delete_branch:
        click.echo(f"deleted catalog branch {name}")


@catalog.command("cleanup")
@root_and_storage
@click.option("--older-than", type=DurationType(), default="14d", show_default=True, help="e.g. 7d, 12h, 0s.")
@click.option("--retain-versions", type=click.IntRange(min=1), help="Keep at least the newest N catalog versions.")
@click.option("--apply", is_flag=True, help="Delete. Without it, only report what would go (a dry run).")
@click.option(
    "--delete-unverified",
    is_flag=True,
    help="Also delete dead writers' debris (and unpublished forks) younger than 7 days: only when no writer runs.",
)
@json_option
def catalog_cleanup(
    root: str,
    storage_option: tuple[str, ...],
    older_than: timedelta,
    retain_versions: int | None,
    apply: bool,
    delete_unverified: bool,
    as_json: bool,
) -> None:
    """Remove old catalog versions, the table versions only they publish, dropped tables' directories and
    forks no catalog branch uses (a deleted branch's, one whose deletion stopped half-way). A DRY RUN unless
    --apply.

    \b
    Example:
        mvcc catalog cleanup ./lake --older-than 7d            # what would go
        mvcc catalog cleanup ./lake --older-than 7d --apply    # delete it
    """
    cat = open_catalog(root, storage_option)
    stats = cat.cleanup(older_than, retain_versions, delete_unverified=delete_unverified, dry_run=not apply)
    tables = {
        path: _TableCleanup(removed_versions=list(t.removed_versions), bytes=t.bytes_removed)
        for path, t in sorted(stats.tables.items())
        if t.removed_versions or t.bytes_removed
    }
    if as_json:
        emit_json(
            {
                "dry_run": not apply,
                "catalog_versions_removed": list(stats.catalog_versions_removed),
                "forks_removed": list(stats.forks_removed),
                "directories_removed": list(stats.directories_removed),
                "tables": tables,
            }
        )
        return
    verb = "removed" if apply else "would remove"
    removed = stats.catalog_versions_removed
    click.echo(f"{verb} {len(removed)} catalog versions ({version_ranges(removed) or 'none'})")
    click.echo(f"forks: {', '.join(stats.forks_removed) or 'none'}")
    click.echo(f"dropped tables' directories: {', '.join(stats.directories_removed) or 'none'}")
    for path, t in tables.items():
        click.echo(
            f"table {path}: versions {version_ranges(t['removed_versions']) or 'none'}, {human_bytes(t['bytes'])}"
        )
    if not apply:
        click.echo("dry run: nothing was deleted; run again with --apply to delete", err=True)
