"""The `mvcc` command: inspect and maintain tables from a shell (docs/guide/cli.md).

It sits on top of the package and uses its public names only (`import mvcc_core as mvcc`), so what it shows
is what the API answers. click parses the command line; rich draws tables and progress bars (progress only
when stderr is a terminal, so a pipe or a scheduler's log stays clean). Every read command takes `--json`.

Exit codes are decided by exception TYPE, never by message, so that a shell loop or a scheduler can act on
them: 0 success, 1 error, 2 usage error, 3 IncompatibleConflictError (do not retry), 75
RetryableConflictError (EX_TEMPFAIL of sysexits.h: run the command again).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import click

import mvcc_core as mvcc
from mvcc_core.cli.advise_command import advise
from mvcc_core.cli.branch_commands import branches
from mvcc_core.cli.catalog_commands import catalog
from mvcc_core.cli.cleanup_command import cleanup
from mvcc_core.cli.compaction_plan import compaction_sources, show_compaction_plan
from mvcc_core.cli.index_commands import index
from mvcc_core.cli.options import (
    EXIT_BROKEN_PIPE,
    SMALL_ROWS,
    exit_code_for,
    json_option,
    open_table,
    uri_and_storage,
)
from mvcc_core.cli.output import (
    emit_json,
    human_bytes,
    json_default,
    print_indices,
    print_pairs,
    print_table,
    progress_bar,
    version_ranges,
)
from mvcc_core.cli.policy import policy
from mvcc_core.cli.refs import Ref, open_ref, positional_ref, ref_options, resolved, version_words
from mvcc_core.cli.tag_commands import tags
from mvcc_core.cli.verify_command import verify
from mvcc_core.maintenance.policy import TARGET_ROWS_PER_FRAGMENT, compaction_options, parse_size, parse_value

# ---- shared plumbing -------------------------------------------------------------------------------


def _silence_stdout() -> None:
    """Point stdout at /dev/null: its reader is gone, and the interpreter's final flush must not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


class MvccGroup(click.Group):
    """The top-level group: turns an exception of any subcommand into one error line and its exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the subcommand; an exception other than click's becomes one error line and its exit code
        (130 on Ctrl-C).

        Args:
            ctx: the command's click context
        """
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("mvcc: interrupted", err=True)
            ctx.exit(130)
        except BrokenPipeError:  # `mvcc scan ... | head`: the reader is gone; stop quietly, as git does
            _silence_stdout()
            ctx.exit(EXIT_BROKEN_PIPE)
        except Exception as exc:  # one clear line; the traceback only with --debug
            if (ctx.obj or {}).get("debug"):
                traceback.print_exc()
            name = type(exc).__name__
            click.echo(f"mvcc: error: {exc} ({name})" if str(exc) else f"mvcc: error: {name}", err=True)
            ctx.exit(exit_code_for(exc))


# ---- the commands ----------------------------------------------------------------------------------


@click.group(cls=MvccGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(mvcc.__version__, "--version", "-V", prog_name="mvcc", message="%(prog)s %(version)s")
@click.option("--debug", is_flag=True, help="Print the traceback of an error.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Inspect and maintain mvcc tables.

    URI is a local path, memory:// or s3://bucket/prefix (credentials and endpoint from the AWS_* variables
    or --storage-option). Exit codes: 0 ok, 1 error, 2 usage, 3 incompatible conflict, 75 retryable conflict.

    \b
    Example:
        mvcc show ./events
        mvcc versions s3://lake/events --limit 20 --json
    """
    ctx.ensure_object(dict)["debug"] = debug


def policy_target_rows(config: dict[str, str]) -> int:
    """Compaction's row target on a table: its `mvcc.compaction.target_rows_per_fragment`, else the default (also
    when the key does not parse: `mvcc policy show` reports that).

    Args:
        config: the table's configuration
    """
    given = config.get(TARGET_ROWS_PER_FRAGMENT)
    try:
        return SMALL_ROWS if given is None else int(parse_value(TARGET_ROWS_PER_FRAGMENT, given))
    except ValueError:
        return SMALL_ROWS


def describe(t: mvcc.Table, small_rows: int) -> dict[str, Any]:
    """What `show` prints, from the API's answers.

    Args:
        t: the table, at the version shown
        small_rows: fragments with fewer live rows than this count as small
    """
    fragments = t.get_fragments()
    deleted = sum(f.num_deletions for f in fragments)
    live = [f.count_rows() for f in fragments]
    return {
        "uri": t.uri,
        "version": t.version,
        "latest_version": t.latest_version,
        "timestamp": t.timestamp,
        "rows": t.count_rows(),
        "deleted_rows": deleted,
        "fragments": len(fragments),
        "small_fragments": sum(1 for n in live if n < small_rows),
        "small_fragment_rows": small_rows,
        "data_files": sum(len(f.data_files()) for f in fragments),
        "bytes": sum(df.file_size_bytes for f in fragments for df in f.data_files()),
        "schema": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in t.schema],
        "indices": t.list_indices(),
        "tags": {name: info["version"] for name, info in t.tags.list().items()},
        "config": t.config,
        "table_metadata": t.table_metadata,
        "manifest_naming": t.manifest_naming.value,
        "feature_flags": t.feature_flags,
    }


@cli.command()
@uri_and_storage
@ref_options("The version to show (default: the latest)")
@click.option(
    "--small-rows",
    type=click.IntRange(min=1),
    default=None,
    help="Fragments with fewer live rows count as small (default: compaction's target, the table's "
    f"mvcc.compaction.target_rows_per_fragment, else {SMALL_ROWS}).",
)
@json_option
def show(uri: str, storage_option: tuple[str, ...], ref: Ref | None, small_rows: int | None, as_json: bool) -> None:
    """Describe one version: rows, fragments, bytes, schema, indices, tags, config, flags.

    \b
    Example:
        mvcc show ./events --version 12
        mvcc show ./events --tag nightly
    """
    t, ref = open_ref(uri, storage_option, ref)
    if small_rows is None:
        small_rows = policy_target_rows(t.config)
    info = describe(t, small_rows)
    info["resolved"] = resolved(ref, t.version)
    if as_json:
        emit_json(info)
        return
    flags = info["feature_flags"]
    print_pairs(
        [
            ("uri", info["uri"]),
            ("version", version_words(ref, t.version, info["latest_version"])),
            ("timestamp", info["timestamp"].isoformat()),
            ("rows", f"{info['rows']:,} ({info['deleted_rows']:,} deleted)"),
            ("fragments", f"{info['fragments']:,} ({info['small_fragments']:,} under {small_rows:,} rows)"),
            ("data files", f"{info['data_files']:,}, {human_bytes(info['bytes'])}"),
            ("naming", info["manifest_naming"]),
            ("features", f"reader: {', '.join(flags['reader']) or '-'}; writer: {', '.join(flags['writer']) or '-'}"),
            ("tags", ", ".join(f"{k}={v}" for k, v in info["tags"].items()) or "-"),
            ("config", ", ".join(f"{k}={v}" for k, v in info["config"].items()) or "-"),
            ("metadata", ", ".join(f"{k}={v}" for k, v in info["table_metadata"].items()) or "-"),
        ]
    )
    print_table(
        "schema", ["column", "type", "nullable"], [(f["name"], f["type"], f["nullable"]) for f in info["schema"]]
    )
    if info["indices"]:
        print_indices(info["indices"])


def version_row(v: mvcc.VersionInfo) -> dict[str, Any]:
    """One row of `versions`' output.

    Args:
        v: a version's entry in the table's history
    """
    return {
        "version": v.version,
        "timestamp": v.timestamp,
        "operation": v.operation,
        "read_version": v.read_version,
        "message": v.message,
        "transaction_properties": v.transaction_properties,
        "uuid": v.uuid,
        "error": v.error,
    }


@cli.command()
@uri_and_storage
@click.option("--limit", type=click.IntRange(min=0), help="Only the newest N versions.")
@json_option
def versions(uri: str, storage_option: tuple[str, ...], limit: int | None, as_json: bool) -> None:
    """The history, newest first: version, time, operation, read version, message, transaction properties.

    \b
    Example:
        mvcc versions ./events --limit 20
    """
    found = [version_row(v) for v in reversed(open_table(uri, storage_option).versions(limit=limit))]
    if as_json:
        emit_json(found)
        return
    rows = [
        (
            v["version"],
            v["timestamp"].strftime("%Y-%m-%d %H:%M:%S") if v["timestamp"] else "",
            v["operation"] or "",
            "" if v["read_version"] is None else v["read_version"],
            v["message"] or "",
            ", ".join(f"{k}={val}" for k, val in v["transaction_properties"].items()),
            v["error"] or "",
        )
        for v in found
    ]
    print_table(None, ["version", "time", "operation", "read", "message", "properties", "error"], rows)
    click.echo("times are UTC", err=True)


_FORMATS = ("table", "csv", "jsonl", "parquet")
_SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}


@cli.command()
@uri_and_storage
@click.option("--columns", help="Comma-separated columns (default: all).")
@click.option("--filter", "where", metavar="SQL", help="A SQL predicate, e.g. \"id > 10 AND kind = 'a'\".")
@ref_options("The version to read (default: the latest)")
@click.option("--branch", metavar="NAME", help="Read this branch (--version and --at then name its versions).")
@click.option("--limit", type=click.IntRange(min=0), help="At most N rows (the terminal table shows 50 by default).")
@click.option("--output", type=click.Path(dir_okay=False, writable=True), help="Write the rows to this file.")
@click.option("--format", "fmt", type=click.Choice(_FORMATS), help="Output format (default: from --output's suffix).")
@json_option
def scan(
    uri: str,
    storage_option: tuple[str, ...],
    columns: str | None,
    where: str | None,
    ref: Ref | None,
    branch: str | None,
    limit: int | None,
    output: str | None,
    fmt: str | None,
    as_json: bool,
) -> None:
    """Rows as a table, or CSV / JSON lines / Parquet to a file or stdout.

    \b
    Example:
        mvcc scan ./events --columns id,kind --filter "id > 10" --limit 5
        mvcc scan ./events --output events.parquet
        mvcc scan ./events --branch audit-42 --limit 10
    """
    if as_json and fmt not in (None, "jsonl"):
        raise click.UsageError(f"--json writes JSON lines; give --json or --format {fmt}, not both")
    if as_json:
        fmt = "jsonl"
    if fmt is None:
        fmt = _SUFFIXES.get(os.path.splitext(output)[1].lower(), "") if output else "table"
        if not fmt:
            raise click.UsageError(f"cannot tell the format of {output!r}; give --format")
    if fmt == "parquet" and output is None:
        raise click.UsageError("--format parquet needs --output FILE")
    cols = column_list(columns)
    t, _ = open_ref(uri, storage_option, ref, branch=branch)
    if fmt == "table" and output is None:
        shown = 50 if limit is None else limit
        data = t.to_table(cols, where, limit=shown + 1 if limit is None else shown)
        more = limit is None and data.num_rows > shown
        data = data.slice(0, shown)
        rows = [[row[name] for name in data.column_names] for row in data.to_pylist()]
        print_table(None, data.column_names, rows)
        if more:
            click.echo(f"(first {shown} rows; use --limit N or --output FILE for more)", err=True)
        return
    batches: Iterator[Any]
    if limit is not None:
        batches = iter(t.to_table(cols, where, limit=limit).to_batches())
    else:
        batches = iter(t.to_batches(cols, where))
    first = next(batches, None)
    schema = first.schema if first is not None else t.to_table(cols, where, limit=0).schema
    chained = _prepend(first, batches)
    written = write_rows(chained, schema, fmt, output)
    if output is not None:
        click.echo(f"wrote {written:,} rows to {output}", err=True)


def column_list(columns: str | None) -> list[str] | None:
    """`--columns a,b` -> ["a", "b"]; None (every column) when the flag is not given.

    Args:
        columns: the `--columns` value

    Raises:
        click.BadParameter: the value names no column
    """
    if columns is None:
        return None
    names = [c.strip() for c in columns.split(",") if c.strip()]
    if not names:
        raise click.BadParameter("names no column; give e.g. --columns id,kind", param_hint="--columns")
    return names


def _prepend(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    if first is not None:
        yield first
    yield from rest


def write_rows(batches: Iterator[Any], schema: Any, fmt: str, output: str | None) -> int:
    """Stream record batches as CSV, JSON lines or Parquet to `output` (stdout when None); the row count.

    Args:
        batches: the record batches to write
        schema: their Arrow schema
        fmt: `csv`, `json` or `parquet`
        output: the file to write (None: stdout)
    """
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    count = 0
    if fmt == "parquet":
        assert output is not None
        with pq.ParquetWriter(output, schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
                count += batch.num_rows
        return count
    sink = open(output, "wb") if output else sys.stdout.buffer  # noqa: SIM115 - closed below
    try:
        if fmt == "csv":
            with pacsv.CSVWriter(sink, schema) as writer:
                for batch in batches:
                    writer.write_batch(batch)
                    count += batch.num_rows
        else:  # jsonl
            for batch in batches:
                for row in batch.to_pylist():
                    sink.write(json.dumps(row, default=json_default).encode() + b"\n")
                count += batch.num_rows
        sink.flush()
    finally:
        if output:
            sink.close()
    return count


@cli.command()
@uri_and_storage
@click.option(
    "--target-rows-per-fragment",
    type=click.IntRange(min=1),
    default=None,
    help="Fragments with fewer live rows are merged with their neighbours, up to this many rows "
    "(default: the table's mvcc.compaction.target_rows_per_fragment, else 1048576).",
)
@click.option(
    "--materialize-deletions-threshold",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help="Rewrite fragments whose deleted fraction is above this "
    "(default: the table's mvcc.compaction.materialize_deletions_threshold, else 0.1).",
)
@click.option(
    "--where",
    help="A SQL filter: only fragments whose statistics may hold a matching row are rewritten "
    "(e.g. \"day = '2026-11-01'\").",
)
@click.option(
    "--max-bytes",
    help="Rewrite about this many bytes of input at most, the most useful groups first (e.g. 512MiB; default: the "
    "table's mvcc.compaction.max_bytes, else no budget).",
)
@click.option(
    "--partial-progress",
    is_flag=True,
    help="Commit finished groups in several Rewrites as they complete; a group that loses to a concurrent "
    "commit is planned again once, then dropped and reported.",
)
@click.option(
    "--max-commits",
    type=click.IntRange(min=1),
    default=None,
    help="With --partial-progress: the most Rewrites (default 10).",
)
@click.option(
    "--sort-by",
    help="Clustering: rewrite every fragment in scope (all, or those --where selects) globally sorted by these "
    "comma-separated columns, so a filter on the first one reads few files (default: the table's "
    "mvcc.compaction.sort_by, else no clustering).",
)
@click.option(
    "--zorder-by",
    help="Clustering: rewrite every fragment in scope in z-order of these 2 to 4 comma-separated columns, so a box "
    "filter on them reads few files (default: the table's mvcc.compaction.zorder_by, else no clustering).",
)
@click.option("--workers", type=click.IntRange(min=1), default=4, show_default=True, help="Rewrite tasks at once.")
@click.option("--message", "commit_message", help="The commit message.")
@click.option("--dry-run", is_flag=True, help="Only show the plan (tasks, fragments in and out, bytes); write nothing.")
@json_option
def compact(
    uri: str,
    storage_option: tuple[str, ...],
    target_rows_per_fragment: int | None,
    materialize_deletions_threshold: float | None,
    where: str | None,
    max_bytes: str | None,
    partial_progress: bool,
    max_commits: int | None,
    sort_by: str | None,
    zorder_by: str | None,
    workers: int,
    commit_message: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Rewrite small fragments and fragments with many deletions (one Rewrite), with a progress bar over tasks.

    \b
    Example:
        mvcc compact ./events --dry-run
        mvcc compact ./events --target-rows-per-fragment 500000 --workers 2
        mvcc compact ./events --where "day = '2026-11-01'" --max-bytes 512MiB --partial-progress
        mvcc compact ./events --sort-by user --dry-run
        mvcc compact ./events --zorder-by x,y
    """
    if dry_run and commit_message is not None:
        raise click.UsageError("--message is for the commit, and --dry-run commits nothing; give one of them")
    if max_commits is not None and not partial_progress:
        raise click.UsageError("--max-commits bounds the Rewrites of --partial-progress; give --partial-progress too")
    budget = None
    if max_bytes is not None:
        try:
            budget = parse_size(max_bytes)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--max-bytes") from None
    if sort_by is not None and zorder_by is not None:
        raise click.UsageError("give --sort-by or --zorder-by, not both (a compaction writes one layout)")
    layout = {
        name: _column_list(value, hint)
        for name, value, hint in (("sort_by", sort_by, "--sort-by"), ("zorder_by", zorder_by, "--zorder-by"))
        if value is not None
    }
    t = open_table(uri, storage_option)
    chosen: dict[str, Any] = dict(
        target_rows_per_fragment=target_rows_per_fragment,
        materialize_deletions_threshold=materialize_deletions_threshold,
        where=where,
        max_bytes=budget,
        **layout,
    )
    if dry_run:
        try:
            options = compaction_options(t.config, **chosen)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
        show_compaction_plan(t, options, as_json, compaction_sources(t.config, chosen))
        return
    before = len(t.get_fragments())
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool, progress_bar("compacting", not as_json) as progress:
        metrics = t.optimize.compact_files(
            target_rows_per_fragment=target_rows_per_fragment,
            materialize_deletions_threshold=materialize_deletions_threshold,
            where=where,
            max_bytes=budget,
            executor=pool,
            progress=progress,
            commit_message=commit_message,
            partial_progress=partial_progress,
            max_commits=max_commits,
            sort_by=layout.get("sort_by"),
            zorder_by=layout.get("zorder_by"),
        )
    summary = {
        "version": metrics.version,
        "fragments_before": before,
        "fragments_after": len(t.get_fragments()),
        "fragments_removed": metrics.fragments_removed,
        "fragments_added": metrics.fragments_added,
        "rows_rewritten": metrics.rows,
        "bytes_read": metrics.bytes_read,
        "bytes_written": metrics.bytes_written,
        "seconds": round(time.monotonic() - start, 3),
        "commits": metrics.commits,
        "deferred_groups": metrics.deferred_groups,
        "deferred_bytes": metrics.deferred_bytes,
        "conflicted_groups": [list(g) for g in metrics.conflicted_groups],
    }
    if as_json:
        emit_json(summary)
    elif metrics.version is None:
        click.echo(f"nothing to compact: {before:,} fragments, version {t.version}")
    else:
        click.echo(
            f"compacted into version {metrics.version}: fragments {before:,} -> {summary['fragments_after']:,}, "
            f"{metrics.rows:,} rows rewritten, {human_bytes(metrics.bytes_read)} read, "
            f"{human_bytes(metrics.bytes_written)} written, {summary['seconds']:.2f} s"
            + (f", {metrics.commits} commits" if metrics.commits > 1 else "")
        )
    if not as_json and metrics.deferred_groups:
        click.echo(
            f"left for the next run by the budget: {metrics.deferred_groups:,} groups "
            f"({metrics.deferred_fragments:,} fragments, {human_bytes(metrics.deferred_bytes)})"
        )
    if not as_json and metrics.conflicted_groups:
        click.echo(
            f"dropped after losing to concurrent commits: {len(metrics.conflicted_groups):,} groups "
            f"(fragments {', '.join(version_ranges(list(g)) for g in metrics.conflicted_groups)})",
            err=True,
        )


def _column_list(value: str, hint: str) -> tuple[str, ...]:
    """`user,ts` -> ("user", "ts"), refusing an empty name."""
    names = tuple(part.strip() for part in value.split(","))
    if not all(names):
        raise click.BadParameter(f"use column names separated by commas, got {value!r}", param_hint=hint)
    return names


# ---- restore -----------------------------------------------------------------------------------------


@cli.command()
@uri_and_storage
@click.argument("positional", metavar="[REF]", required=False, callback=positional_ref)
@ref_options("The version to restore")
@click.option("--message", "commit_message", help="The commit message.")
def restore(
    uri: str, storage_option: tuple[str, ...], positional: Ref | None, ref: Ref | None, commit_message: str | None
) -> None:
    """Make a version the latest again (a new Restore version); history is kept.

    Name it with --tag NAME, --version N or --at TIME, or as REF: a tag of that name wins, else a number is a
    version, else an ISO 8601 time (UTC without a zone) is the version current then. Works past a corrupt
    latest manifest (only that version's manifest is read).

    \b
    Example:
        mvcc restore ./events --version 12
        mvcc restore ./events --tag before-backfill
        mvcc restore ./events --at 2024-05-01T12:00:00+02:00
        mvcc restore ./events before-backfill
    """
    if positional is not None and ref is not None:
        raise click.UsageError(f"give REF or {ref.flag}, not both")
    ref = positional or ref
    if ref is None:
        raise click.UsageError("name the version to restore: REF, --tag NAME, --version N or --at TIME")
    t, ref = open_ref(uri, storage_option, ref)
    restored = resolved(ref, t.version)
    t.restore(commit_message=commit_message)
    click.echo(f"restored {restored} as version {t.version}")


cli.add_command(advise)
cli.add_command(branches)
cli.add_command(catalog)
cli.add_command(cleanup)
cli.add_command(index)
cli.add_command(policy)
cli.add_command(tags)
cli.add_command(verify)


def main(argv: Sequence[str] | None = None) -> None:
    """The `mvcc` console script ([project.scripts] in pyproject.toml).

    Args:
        argv: the arguments after `mvcc` (None: the process's)
    """
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="mvcc")
    except SystemExit as done:
        code = done.code
    else:  # pragma: no cover - click's standalone mode always exits
        code = 0
    try:
        sys.stdout.flush()  # output still buffered when the reader left (`mvcc show URI | head -1`)
    except BrokenPipeError:
        _silence_stdout()
        code = EXIT_BROKEN_PIPE
    sys.exit(code)
