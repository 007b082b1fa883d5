"""`mvcc index`: create, list, drop and optimize scalar indices."""

from __future__ import annotations

import click

from mvcc_core.cli.options import (
    json_option,
    open_table,
    uri_and_storage,
)
from mvcc_core.cli.output import (
    emit_json,
    print_indices,
    progress_bar,
)
from mvcc_core.cli.refs import Ref, open_ref, ref_options

# ---- shared plumbing -------------------------------------------------------------------------------


@click.group()
def index() -> None:
    """Scalar indices: create, list, drop, optimize.

    \b
    Example:
        mvcc index create ./events id --type BTREE
    """


@index.command("create")
@uri_and_storage
@click.argument("column")
@click.option(
    "--type",
    "index_type",
    type=click.Choice(["BTREE", "BITMAP"], case_sensitive=False),
    default="BTREE",
    show_default=True,
    help="The index kind: BTREE (the values sorted, with row addresses) or BITMAP (row addresses per distinct value).",
)
@click.option("--name", help="The index name (default: COLUMN_idx); an index of that name is replaced.")
def index_create(uri: str, storage_option: tuple[str, ...], column: str, index_type: str, name: str | None) -> None:
    """Build a BTREE or BITMAP index on COLUMN over every fragment.

    \b
    Example:
        mvcc index create ./events kind --type BITMAP --name kind_bitmap
    """
    if name is not None and not name.strip():
        raise click.BadParameter("is empty; leave it out for COLUMN_idx", param_hint="--name")
    t = open_table(uri, storage_option)
    with progress_bar("indexing") as progress:
        t.create_index(column, index_type.upper(), name=name, progress=progress)
    click.echo(f"created index {name or column + '_idx'} on {column} in version {t.version}")


@index.command("list")
@uri_and_storage
@ref_options("The version whose indices to list (default: the latest)")
@json_option
def index_list(uri: str, storage_option: tuple[str, ...], ref: Ref | None, as_json: bool) -> None:
    """The indices of a version, with how many fragments each covers.

    \b
    Example:
        mvcc index list ./events --json
    """
    indices = open_ref(uri, storage_option, ref)[0].list_indices()
    if as_json:
        emit_json(indices)
    elif indices:
        print_indices(indices)
    else:
        click.echo("no indices")


@index.command("drop")
@uri_and_storage
@click.argument("name")
def index_drop(uri: str, storage_option: tuple[str, ...], name: str) -> None:
    """Remove the index NAME (its files stay for older versions until cleanup).

    \b
    Example:
        mvcc index drop ./events id_idx
    """
    t = open_table(uri, storage_option)
    t.drop_index(name)
    click.echo(f"dropped index {name} in version {t.version}")


@index.command("optimize")
@uri_and_storage
def index_optimize(uri: str, storage_option: tuple[str, ...]) -> None:
    """Bring fragments added or rewritten since each index was built into it.

    \b
    Example:
        mvcc index optimize ./events
    """
    t = open_table(uri, storage_option)
    count = t.optimize.optimize_indices()
    click.echo(f"updated {count} indices in version {t.version}" if count else "every index is up to date")
