"""`mvcc advise`: what maintenance would pay on a table now (`Table.optimize.recommend`), from its manifest alone
(docs/operations/maintenance.md, "Advice")."""

from __future__ import annotations

import dataclasses

import click

from mvcc_core.cli.options import json_option, open_table, uri_and_storage
from mvcc_core.cli.output import emit_json, human_bytes, print_table


@click.command()
@uri_and_storage
@json_option
def advise(uri: str, storage_option: tuple[str, ...], as_json: bool) -> None:
    """Say which maintenance would pay on the table's latest version, best first, with the figures (no data read).

    \b
    Example:
        mvcc advise ./events
        mvcc advise s3://bucket/events --json
    """
    t = open_table(uri, storage_option)
    advice = t.optimize.recommend()
    if as_json:
        emit_json({"version": t.version, "advice": [dataclasses.asdict(a) for a in advice]})
        return
    if not advice:
        click.echo(f"nothing to do: {len(t.get_fragments()):,} fragments, version {t.version}")
        return
    rows = [
        (a.kind, f"{a.score:.2f}", human_bytes(a.bytes_to_rewrite), f"{a.fragments_before:,} -> {a.fragments_after:,}")
        for a in advice
    ]
    print_table(f"maintenance advice for version {t.version}", ["kind", "score", "rewrite", "fragments"], rows)
    for a in advice:
        click.echo(f"{a.kind}: {a.reason}; {a.effect}. Run: {a.call}")
