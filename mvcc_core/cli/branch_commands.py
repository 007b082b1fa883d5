"""`mvcc branches`: list, create, delete and publish a table's branches (docs/guide/branches.md)."""

from __future__ import annotations

from datetime import UTC, datetime

import click

import mvcc_core as mvcc
from mvcc_core.cli.options import (
    json_option,
    publish_options,
    storage_options_for,
    uri_and_storage,
)
from mvcc_core.cli.output import emit_json, print_table
from mvcc_core.cli.refs import Ref, checkout_ref, ref_options


@click.group()
def branches() -> None:
    """A table's branches: write to a branch, check it, publish it to its parent in one version.

    \b
    Example:
        mvcc branches create ./events audit-42
        mvcc branches publish ./events audit-42 --delete-branch
    """


def _open(uri: str, storage_option: tuple[str, ...], branch: str | None = None) -> mvcc.Table:
    return mvcc.open_table(uri, storage_options=storage_options_for(uri, storage_option), branch=branch)


@branches.command("list")
@uri_and_storage
@json_option
def branches_list(uri: str, storage_option: tuple[str, ...], as_json: bool) -> None:
    """Every branch: its parent, the parent's version it forked at, when, and its latest version.

    \b
    Example:
        mvcc branches list ./events --json
    """
    t = _open(uri, storage_option)
    rows = []
    for name, info in t.branches.list_ordered():
        rows.append(
            {
                "branch": name,
                "parent_branch": info.parent_branch or "main",
                "parent_version": info.parent_version,
                "created": datetime.fromtimestamp(info.create_at, UTC),
                "latest_version": t.checkout_branch(name).version,
            }
        )
    if as_json:
        emit_json(rows)
    elif rows:
        print_table(None, list(rows[0]), [list(row.values()) for row in rows])
    else:
        click.echo("no branches")


@branches.command("create")
@uri_and_storage
@click.argument("name")
@click.option("--from-branch", "from_branch", metavar="BRANCH", help="Fork from this branch (default: main).")
@ref_options("Fork at this version of that branch (default: its latest)")
def branches_create(
    uri: str, storage_option: tuple[str, ...], name: str, from_branch: str | None, ref: Ref | None
) -> None:
    """Create the branch NAME (no data is copied).

    \b
    Example:
        mvcc branches create ./events audit-42 --version 12
        mvcc branches create ./events audit-42 --tag nightly
    """
    t = _open(uri, storage_option, from_branch)
    source, _ = checkout_ref(t, uri, ref)
    if name in t.branches:
        raise mvcc.errors.BranchExistsError(
            f"branch {name!r} already exists on {uri}; pick another name or delete it with: "
            f"mvcc branches delete {uri} {name}"
        )
    branch = source.create_branch(name)
    click.echo(f"created branch {name} at version {branch.version} of {from_branch or 'main'}")


@branches.command("delete")
@uri_and_storage
@click.argument("name")
def branches_delete(uri: str, storage_option: tuple[str, ...], name: str) -> None:
    """Delete the branch NAME and the files only it uses (files its parent uses stay).

    \b
    Example:
        mvcc branches delete ./events audit-42
    """
    _open(uri, storage_option).branches.delete(name)
    click.echo(f"deleted branch {name}")


@branches.command("publish")
@uri_and_storage
@publish_options("The message of the new version.")
def branches_publish(
    uri: str, storage_option: tuple[str, ...], name: str, delete_branch: bool, message: str | None, as_json: bool
) -> None:
    """Land the branch NAME's changes on the branch it forked from, in one version.

    Exit 75 when the parent kept moving while the branch's writes ran again on its rows, 3 when it cannot be
    reconciled (an overwrite or a restore of the parent, a branch write that cannot run again): the parent is
    untouched either way.

    \b
    Example:
        mvcc branches publish ./events audit-42 --delete-branch
    """
    probe = _open(uri, storage_option)
    parent = probe.branch_info(name).parent_branch
    t = probe if parent is None else probe.checkout_branch(parent)
    before = t.version
    version = t.publish_branch(name, delete_branch=delete_branch, commit_message=message)
    published = version != before
    if as_json:
        emit_json({"branch": name, "into": parent or "main", "version": version, "published": published})
    elif published:
        click.echo(f"published branch {name} as version {version} of {parent or 'main'}")
    else:
        click.echo(f"branch {name} has nothing new; {parent or 'main'} stays at version {version}")
