"""`mvcc tags`: names for versions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

import mvcc_core as mvcc
from mvcc_core.cli.options import (
    json_option,
    open_table,
    uri_and_storage,
)
from mvcc_core.cli.output import (
    emit_json,
    print_table,
)

# ---- shared plumbing -------------------------------------------------------------------------------


def name_and_version(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The NAME argument and the optional VERSION (default: the latest) of `tags create` and `tags update`.

    Args:
        fn: the command's callback
    """
    fn = click.argument("version", type=click.IntRange(min=1), required=False)(fn)
    return click.argument("name")(fn)


# ---- tags ----------------------------------------------------------------------------------------------


@click.group()
def tags() -> None:
    """Names for versions (a tagged version is kept by cleanup).

    \b
    Example:
        mvcc tags create ./events before-backfill 12
    """


@tags.command("list")
@uri_and_storage
@json_option
def tags_list(uri: str, storage_option: tuple[str, ...], as_json: bool) -> None:
    """Every tag and its version. A tag file that cannot be read is reported on stderr and left out.

    \b
    Example:
        mvcc tags list ./events
    """
    listing = open_table(uri, storage_option).tags.read_all()
    found = listing.tags
    for path, problem in listing.problems.items():
        click.echo(f"bad tag {path} left out: {problem}", err=True)
    if as_json:
        emit_json(found)
    elif found:
        print_table(None, ["tag", "version"], list(found.items()))
    else:
        click.echo("no tags")


def _tag_version(t: mvcc.Table, version: int | None) -> int:
    return t.version if version is None else version


@tags.command("create")
@uri_and_storage
@name_and_version
def tags_create(uri: str, storage_option: tuple[str, ...], name: str, version: int | None) -> None:
    """Tag VERSION (default: the latest) as NAME.

    \b
    Example:
        mvcc tags create ./events before-backfill 12
    """
    t = open_table(uri, storage_option)
    existing = t.tags.list().get(name)
    if existing is not None:
        raise mvcc.errors.TagError(
            f"tag {name!r} already exists on {uri} (version {existing['version']}); "
            f"move it with: mvcc tags update {uri} {name} VERSION"
        )
    t.tags.create(name, _tag_version(t, version))
    click.echo(f"tagged version {_tag_version(t, version)} as {name}")


@tags.command("update")
@uri_and_storage
@name_and_version
def tags_update(uri: str, storage_option: tuple[str, ...], name: str, version: int | None) -> None:
    """Move the tag NAME to VERSION (default: the latest).

    \b
    Example:
        mvcc tags update ./events nightly 40
    """
    t = open_table(uri, storage_option)
    t.tags.update(name, _tag_version(t, version))
    click.echo(f"moved tag {name} to version {_tag_version(t, version)}")


@tags.command("delete")
@uri_and_storage
@click.argument("name")
def tags_delete(uri: str, storage_option: tuple[str, ...], name: str) -> None:
    """Delete the tag NAME (the version stays until cleanup).

    \b
    Example:
        mvcc tags delete ./events nightly
    """
    open_table(uri, storage_option).tags.delete(name)
    click.echo(f"deleted tag {name}")
