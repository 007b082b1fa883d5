"""`mvcc advise`: what maintenance would pay on tables now (`Table.optimize.recommend`), from their manifests alone
(docs/operations/maintenance.md, "Advice"), as text, JSON or OpenMetrics (`advise_metrics`).

A table that cannot be opened or advised on does not stop the others: its error goes to stderr (and, in
OpenMetrics, `mvcc_table_up 0`), the rest is printed, and the command exits 1.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import click

from mvcc_core.cli.advise_metrics import TableFigures, figures_of, openmetrics
from mvcc_core.cli.options import EXIT_ERROR, open_table, storage_option_flag
from mvcc_core.cli.output import emit_json, human_bytes, print_table

if TYPE_CHECKING:
    from mvcc_core.maintenance.advice import MaintenanceAdvice

__all__ = ["advise"]

_FORMATS = ("text", "json", "openmetrics")


@dataclasses.dataclass(frozen=True)
class _Advised:
    """One table's answer: its advice and figures, or the error that stopped it."""

    uri: str
    version: int | None = None
    fragments: int = 0
    advice: tuple[MaintenanceAdvice, ...] = ()
    figures: TableFigures | None = None
    error: str | None = None


def _advise_one(uri: str, storage_option: tuple[str, ...], with_figures: bool) -> _Advised:
    try:
        t = open_table(uri, storage_option)
        advice = tuple(t.optimize.recommend())
        figures = figures_of(t, advice) if with_figures else None
        return _Advised(uri, t.version, len(t.state.manifest.fragments), advice, figures)
    except Exception as exc:  # noqa: BLE001 - one table's error must not hide the others' advice
        return _Advised(uri, error=f"{exc} ({type(exc).__name__})" if str(exc) else type(exc).__name__)


def _as_json(one: _Advised) -> dict[str, Any]:
    if one.error is not None:
        return {"uri": one.uri, "error": one.error}
    out: dict[str, Any] = {
        "uri": one.uri,
        "version": one.version,
        "advice": [dataclasses.asdict(a) for a in one.advice],
    }
    if one.figures is not None:
        out["figures"] = dataclasses.asdict(one.figures) | {
            "deleted_share": one.figures.deleted_share,
            "stored_over_live": one.figures.stored_over_live,
        }
    return out


def _print_text(one: _Advised, several: bool) -> None:
    where = f" of {one.uri}" if several else ""
    if not one.advice:
        click.echo(f"nothing to do{where}: {one.fragments:,} fragments, version {one.version}")
        return
    rows = [
        (a.kind, f"{a.score:.2f}", human_bytes(a.bytes_to_rewrite), f"{a.fragments_before:,} -> {a.fragments_after:,}")
        for a in one.advice
    ]
    title = f"maintenance advice{where} for version {one.version}"
    if several:  # a title as wide as the table would fold a long URI
        click.echo(title)
    print_table(None if several else title, ["kind", "score", "rewrite", "fragments"], rows)
    for a in one.advice:
        click.echo(f"{a.kind}: {a.reason}; {a.effect}. Run: {a.call}")


@click.command()
@click.argument("uris", metavar="URI...", nargs=-1, required=True)
@storage_option_flag
@click.option(
    "--format",
    "fmt",
    type=click.Choice(_FORMATS),
    default=None,
    help="text (the default), json, or openmetrics: gauges per table for a Prometheus textfile collector.",
)
@click.option("--json", "as_json", is_flag=True, help="The same as --format json.")
@click.pass_context
def advise(
    ctx: click.Context, uris: tuple[str, ...], storage_option: tuple[str, ...], fmt: str | None, as_json: bool
) -> None:
    """Say which maintenance would pay on each table's latest version, best first, with the figures (no data read).

    With one URI, --json prints one object; with several, a list (a table that cannot be read has "error").
    json and openmetrics add the figures: fragments, small fragments, deleted-row share, stored and live bytes, versions
    kept, the score of each kind of advice, and mvcc_table_up (0 for a table that cannot be read). Exit code 1
    when a table could not be read; the others are printed.

    \b
    Example:
        mvcc advise ./events
        mvcc advise s3://bucket/events --json
        mvcc advise ./events ./orders --format openmetrics > /var/lib/node_exporter/mvcc.prom.$$ \\
            && mv /var/lib/node_exporter/mvcc.prom.$$ /var/lib/node_exporter/mvcc.prom
    """
    if as_json and fmt not in (None, "json"):
        raise click.UsageError(f"--json is --format json; give --json or --format {fmt}, not both")
    fmt = "json" if as_json else fmt or "text"
    answers = [_advise_one(uri, storage_option, fmt != "text") for uri in dict.fromkeys(uris)]
    for one in answers:
        if one.error is not None:
            click.echo(f"mvcc: error: {one.uri}: {one.error}", err=True)
    if fmt == "openmetrics":
        click.echo(openmetrics([(one.uri, one.figures) for one in answers]), nl=False)
    elif fmt == "json":
        found = [_as_json(one) for one in answers]
        emit_json(found[0] if len(found) == 1 else found)
    else:
        for one in answers:
            if one.error is None:
                _print_text(one, len(answers) > 1)
    if any(one.error is not None for one in answers):
        ctx.exit(EXIT_ERROR)
