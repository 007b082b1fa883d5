"""The `mvcc` command: inspect and maintain tables from a shell (docs/cli.md).

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
from datetime import datetime, timedelta
from typing import Any

import click

import mvcc_core as mvcc
from mvcc_core.cli.options import (
    EXIT_ERROR,
    DurationType,
    VersionRefType,
    exit_code_for,
    json_option,
    open_table,
    storage_options_for,
    uri_and_storage,
    version_option,
)
from mvcc_core.cli.output import (
    _default,
    _ranges,
    emit_json,
    format_duration,
    human_bytes,
    print_pairs,
    print_table,
    progress_bar,
)

# ---- shared plumbing -------------------------------------------------------------------------------


class MvccGroup(click.Group):
    """The top-level group: turns an exception of any subcommand into one error line and its exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("mvcc: interrupted", err=True)
            ctx.exit(130)
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


def live_rows(fragment: Any) -> int:
    """Rows of a fragment (a manifest's DataFragment) that its deletion vector leaves."""
    deleted = fragment.deletion_file.num_deleted_rows if fragment.HasField("deletion_file") else 0
    return int(fragment.physical_rows - deleted)


def describe(t: mvcc.Table, small_rows: int) -> dict[str, Any]:
    """What `show` prints, from the API's answers."""
    fragments = t.get_fragments()
    deleted = sum(f.deletion_file.num_deleted_rows for f in fragments if f.HasField("deletion_file"))
    live = [live_rows(f) for f in fragments]
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
        "data_files": sum(len(f.files) for f in fragments),
        "bytes": sum(df.file_size_bytes for f in fragments for df in f.files),
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
@version_option("A version number, tag or ISO time (default: the latest).")
@click.option(
    "--small-rows",
    type=click.IntRange(min=1),
    default=mvcc.CompactionOptions().target_rows_per_fragment,
    show_default=True,
    help="Fragments with fewer live rows count as small (compaction's default target).",
)
@json_option
def show(
    uri: str, storage_option: tuple[str, ...], ref: int | str | datetime | None, small_rows: int, as_json: bool
) -> None:
    """Describe one version: rows, fragments, bytes, schema, indices, tags, config, flags.

    \b
    Example:
        mvcc show ./events --version 12
    """
    info = describe(open_table(uri, storage_option, ref), small_rows)
    if as_json:
        emit_json(info)
        return
    flags = info["feature_flags"]
    print_pairs(
        [
            ("uri", info["uri"]),
            ("version", f"{info['version']} (latest {info['latest_version']})"),
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


def _coverage(index: dict[str, Any]) -> str:
    """ "covered/live" fragments (the MemWAL entry has no coverage)."""
    if "num_indexed_fragments" not in index:
        return ""
    covered = index["num_indexed_fragments"]
    return f"{covered}/{covered + index['num_unindexed_fragments']}"


def print_indices(indices: list[dict[str, Any]]) -> None:
    rows = [
        (
            i["name"],
            i["type"],
            ", ".join(i["fields"]),
            i.get("version", ""),
            _coverage(i),
        )
        for i in indices
    ]
    print_table("indices", ["name", "type", "columns", "built at", "fragments covered"], rows)


def version_row(v: mvcc.VersionInfo) -> dict[str, Any]:
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
@version_option("A version number, tag or ISO time (default: the latest).")
@click.option("--limit", type=click.IntRange(min=0), help="At most N rows (the terminal table shows 50 by default).")
@click.option("--output", type=click.Path(dir_okay=False, writable=True), help="Write the rows to this file.")
@click.option("--format", "fmt", type=click.Choice(_FORMATS), help="Output format (default: from --output's suffix).")
@json_option
def scan(
    uri: str,
    storage_option: tuple[str, ...],
    columns: str | None,
    where: str | None,
    ref: int | str | datetime | None,
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
    t = open_table(uri, storage_option, ref)
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
    """`--columns a,b` -> ["a", "b"]; None (every column) when the flag is not given."""
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
    """Stream record batches as CSV, JSON lines or Parquet to `output` (stdout when None); the row count."""
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
                    sink.write(json.dumps(row, default=_default).encode() + b"\n")
                count += batch.num_rows
        sink.flush()
    finally:
        if output:
            sink.close()
    return count


@cli.command()
@uri_and_storage
@click.option("--target-rows-per-fragment", type=click.IntRange(min=1), default=1_048_576, show_default=True)
@click.option(
    "--materialize-deletions-threshold",
    type=click.FloatRange(0.0, 1.0),
    default=0.1,
    show_default=True,
    help="Rewrite fragments whose deleted fraction is above this.",
)
@click.option("--workers", type=click.IntRange(min=1), default=4, show_default=True, help="Rewrite tasks at once.")
@click.option("--message", "commit_message", help="The commit message.")
@click.option("--dry-run", is_flag=True, help="Only show the plan (tasks, fragments in and out, bytes); write nothing.")
@json_option
def compact(
    uri: str,
    storage_option: tuple[str, ...],
    target_rows_per_fragment: int,
    materialize_deletions_threshold: float,
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
    """
    if dry_run and commit_message is not None:
        raise click.UsageError("--message is for the commit, and --dry-run commits nothing; give one of them")
    t = open_table(uri, storage_option)
    if dry_run:
        options = mvcc.CompactionOptions(
            target_rows_per_fragment=target_rows_per_fragment,
            materialize_deletions_threshold=materialize_deletions_threshold,
        )
        show_compaction_plan(t, options, as_json)
        return
    before = len(t.get_fragments())
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool, progress_bar("compacting", not as_json) as progress:
        metrics = t.optimize.compact_files(
            target_rows_per_fragment=target_rows_per_fragment,
            materialize_deletions_threshold=materialize_deletions_threshold,
            executor=pool,
            progress=progress,
            commit_message=commit_message,
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
        )


def compaction_plan(t: mvcc.Table, options: mvcc.CompactionOptions) -> dict[str, Any]:
    """What `compact` would do to `t`'s version with `options`: its tasks and totals. Nothing is committed
    (`compaction.plan_unreserved`, the plan `compact_files` runs, without reserving fragment ids)."""
    fragments = t.get_fragments()
    by_bytes = {f.SerializeToString(): f for f in fragments}
    tasks = []
    for task in mvcc.compaction.plan_unreserved(t, options).tasks:
        old = [by_bytes[b] for b in task.fragments]
        tasks.append(
            {
                "fragments": [f.id for f in old],
                "rows": sum(live_rows(f) for f in old),
                "bytes": sum(df.file_size_bytes for f in old for df in f.files),
                "new_fragments": len(task.new_fragment_ids),
            }
        )
    removed = sum(len(task["fragments"]) for task in tasks)
    added = sum(task["new_fragments"] for task in tasks)
    return {
        "dry_run": True,
        "version": t.version,
        "tasks": tasks,
        "fragments_before": len(fragments),
        "fragments_after": len(fragments) - removed + added,
        "fragments_removed": removed,
        "fragments_added": added,
        "rows_rewritten": sum(task["rows"] for task in tasks),
        "bytes_read": sum(task["bytes"] for task in tasks),
    }


def show_compaction_plan(t: mvcc.Table, options: mvcc.CompactionOptions, as_json: bool) -> None:
    """Print `compaction_plan` as JSON or as a summary line and one row per task."""
    plan = compaction_plan(t, options)
    if as_json:
        emit_json(plan)
        return
    if not plan["tasks"]:
        click.echo(f"nothing to compact: {plan['fragments_before']:,} fragments, version {t.version}")
    else:
        click.echo(
            f"would compact version {t.version} in {len(plan['tasks']):,} tasks: fragments "
            f"{plan['fragments_before']:,} -> {plan['fragments_after']:,} ({plan['fragments_removed']:,} rewritten "
            f"into {plan['fragments_added']:,}), {plan['rows_rewritten']:,} rows, "
            f"{human_bytes(plan['bytes_read'])} read"
        )
        rows = [
            (n, _ranges(task["fragments"]), f"{task['rows']:,}", human_bytes(task["bytes"]), task["new_fragments"])
            for n, task in enumerate(plan["tasks"], start=1)
        ]
        print_table(None, ["task", "fragments", "rows", "bytes", "new fragments"], rows)
    click.echo("dry run: nothing was written; run again without --dry-run to compact", err=True)


# ---- indices -----------------------------------------------------------------------------------------


@cli.group()
def index() -> None:
    """Scalar indices: create, list, drop, optimize.

    \b
    Example:
        mvcc index create ./events id --type BTREE
    """


@index.command("create")
@uri_and_storage
@click.argument("column")
@click.option("--type", "index_type", type=click.Choice(["BTREE", "BITMAP"], case_sensitive=False), default="BTREE")
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
@version_option("A version number, tag or ISO time (default: the latest).")
@json_option
def index_list(uri: str, storage_option: tuple[str, ...], ref: int | str | datetime | None, as_json: bool) -> None:
    """The indices of a version, with how many fragments each covers.

    \b
    Example:
        mvcc index list ./events --json
    """
    indices = open_table(uri, storage_option, ref).list_indices()
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


@cli.command()
@uri_and_storage
@click.option("--older-than", type=DurationType(), default="14d", show_default=True, help="e.g. 7d, 12h, 0s.")
@click.option("--retain-versions", type=click.IntRange(min=1), help="Keep at least the newest N versions.")
@click.option("--apply", is_flag=True, help="Delete. Without it, only report what would go (a dry run).")
@click.option("--delete-unverified", is_flag=True, help="Also delete unreferenced files younger than 7 days.")
@click.option("--keep-tagged", is_flag=True, help="Keep tagged old versions and go on (default: refuse).")
@json_option
def cleanup(
    uri: str,
    storage_option: tuple[str, ...],
    older_than: timedelta,
    retain_versions: int | None,
    apply: bool,
    delete_unverified: bool,
    keep_tagged: bool,
    as_json: bool,
) -> None:
    """Remove old versions and the files only they use. A DRY RUN unless --apply.

    The latest and tagged versions are always kept; while a tag file cannot be read, every version is.

    \b
    Example:
        mvcc cleanup ./events --older-than 7d            # what would go
        mvcc cleanup ./events --older-than 7d --apply    # delete it
    """
    t = open_table(uri, storage_option)
    with progress_bar("removing files", apply and not as_json) as progress:
        try:
            stats = t.cleanup_old_versions(
                older_than,
                retain_versions,
                delete_unverified=delete_unverified,
                error_if_tagged_old_versions=not keep_tagged,
                dry_run=not apply,
                progress=progress,
            )
        except mvcc.TagError as exc:
            if not exc.tags:
                raise
            tagged = ", ".join(f"{name} (version {v})" for name, v in sorted(exc.tags.items(), key=lambda kv: kv[1]))
            raise mvcc.TagError(
                f"cleanup --older-than {format_duration(older_than)} would remove tagged versions of {uri}: "
                f"{tagged}; give --keep-tagged to keep them (and remove the rest), or delete those tags first "
                f"(mvcc tags delete {uri} NAME)",
                tags=exc.tags,
            ) from exc
    files = {
        "data": stats.data_files_removed,
        "deletion": stats.deletion_files_removed,
        "index": stats.index_files_removed,
        "transaction": stats.transaction_files_removed,
        "unverified": stats.unverified_files_removed,
    }
    if as_json:
        emit_json(
            {
                "dry_run": not apply,
                "removed_versions": list(stats.removed_versions),
                "corrupt_versions": list(stats.corrupt_versions),
                "bad_tags": dict(stats.bad_tags),
                "bytes": stats.bytes_removed,
                "files": files,
            }
        )
        return
    verb = "removed" if apply else "would remove"
    versions_text = _ranges(stats.removed_versions) or "none"
    click.echo(f"{verb} {len(stats.removed_versions)} versions ({versions_text}), {human_bytes(stats.bytes_removed)}")
    click.echo("files: " + ", ".join(f"{n:,} {k}" for k, n in files.items()))
    if stats.corrupt_versions:
        click.echo(f"corrupt versions: {_ranges(stats.corrupt_versions)}")
    for path, problem in stats.bad_tags:
        click.echo(f"bad tag {path}: {problem}")
    if stats.bad_tags:
        click.echo("every version was kept: a tag that cannot be read may name any of them; fix or delete those files")
    if not apply:
        click.echo("dry run: nothing was deleted; run again with --apply to delete", err=True)


@cli.command()
@uri_and_storage
@click.argument("ref", type=VersionRefType())
@click.option("--message", "commit_message", help="The commit message.")
def restore(uri: str, storage_option: tuple[str, ...], ref: int | str | datetime, commit_message: str | None) -> None:
    """Make REF (a version, tag or ISO time) the latest version again; history is kept.

    Works past a corrupt latest manifest (only REF's manifest is read).

    \b
    Example:
        mvcc restore ./events 12
        mvcc restore ./events before-backfill
        mvcc restore ./events 2024-05-01T12:00:00
    """
    t = open_table(uri, storage_option, ref)
    restored = t.version
    t.restore(commit_message=commit_message)
    click.echo(f"restored version {restored} as version {t.version}")


# ---- tags ----------------------------------------------------------------------------------------------


@cli.group()
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
@click.argument("name")
@click.argument("version", type=click.IntRange(min=1), required=False)
def tags_create(uri: str, storage_option: tuple[str, ...], name: str, version: int | None) -> None:
    """Tag VERSION (default: the latest) as NAME.

    \b
    Example:
        mvcc tags create ./events before-backfill 12
    """
    t = open_table(uri, storage_option)
    existing = t.tags.list().get(name)
    if existing is not None:
        raise mvcc.TagError(
            f"tag {name!r} already exists on {uri} (version {existing['version']}); "
            f"move it with: mvcc tags update {uri} {name} VERSION"
        )
    t.tags.create(name, _tag_version(t, version))
    click.echo(f"tagged version {_tag_version(t, version)} as {name}")


@tags.command("update")
@uri_and_storage
@click.argument("name")
@click.argument("version", type=click.IntRange(min=1), required=False)
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


# ---- verify --------------------------------------------------------------------------------------------


class Verifier:
    """Checks versions of one table against its store; a file shared by many versions is checked once."""

    def __init__(self, deep: bool) -> None:
        self.deep = deep
        self.problems: list[dict[str, Any]] = []
        self.checked: dict[str, str | None] = {}  # file uri -> its problem (None: fine)

    def problem(self, version: int | None, kind: str, path: str, text: str) -> None:
        self.problems.append({"version": version, "kind": kind, "path": path, "problem": text})

    def version(self, t: mvcc.Table) -> None:
        """Every file `t`'s version references exists with its recorded size, deletion vectors decode and fit
        their fragments, indices name existing columns and fragment ids; with `deep`, data and index files read."""
        manifest = t.manifest
        try:
            t.transaction()
        except mvcc.MvccError as exc:
            self.problem(t.version, "transaction", manifest.transaction_file, str(exc))
        fragments = {f.id: f for f in manifest.fragments}
        for ref in mvcc.version_files(t.state.store, manifest):
            if ref.uri not in self.checked:
                self.checked[ref.uri] = self.file(ref, fragments, manifest)
            if self.checked[ref.uri] is not None:
                self.problem(t.version, ref.kind, ref.uri, self.checked[ref.uri] or "")
        self.indices(t)

    def file(self, ref: mvcc.ReferencedFile, fragments: dict[int, Any], manifest: Any) -> str | None:
        try:
            meta = ref.store.head(ref.path)
        except mvcc.ObjectNotFoundError:
            return "missing"
        if ref.size is not None and meta.size != ref.size:
            return f"size {meta.size} bytes, the manifest records {ref.size}"
        fragment = fragments.get(ref.fragment_id) if ref.fragment_id is not None else None
        try:
            if ref.kind == "deletion" and fragment is not None:
                return self.deletion(ref, fragment, manifest)
            if self.deep and ref.kind in ("data", "index"):
                return self.parquet(ref, fragment)
        except mvcc.MvccError as exc:
            return str(exc)
        return None

    @staticmethod
    def deletion(ref: mvcc.ReferencedFile, fragment: Any, manifest: Any) -> str | None:
        deleted = mvcc.read_deletion_vector(ref.store, fragment, manifest.base_paths)
        recorded = fragment.deletion_file.num_deleted_rows
        if recorded and len(deleted) != recorded:
            return f"deletion vector holds {len(deleted)} rows, the manifest records {recorded}"
        if len(deleted) and deleted.max() >= fragment.physical_rows:
            return f"deletion vector names row {deleted.max()} of a fragment of {fragment.physical_rows} rows"
        return None

    @staticmethod
    def parquet(ref: mvcc.ReferencedFile, fragment: Any) -> str | None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(pa.BufferReader(ref.store.get(ref.path))).num_rows
        except (OSError, ValueError) as exc:  # ArrowInvalid is a ValueError
            return f"unreadable: {exc}"
        if fragment is not None and rows != fragment.physical_rows:
            return f"{rows} rows, the manifest records {fragment.physical_rows}"
        return None

    def indices(self, t: mvcc.Table) -> None:
        from pyroaring import BitMap

        manifest = t.manifest
        field_ids = {f.id for f in manifest.fields}
        highest = manifest.max_fragment_id if manifest.HasField("max_fragment_id") else None
        for index in manifest.indices:
            missing = [i for i in index.fields if i not in field_ids]
            if missing:
                self.problem(t.version, "index", index.name, f"names field ids {missing} the schema does not have")
            if index.fragment_bitmap and highest is not None:
                try:
                    covered = BitMap.deserialize(index.fragment_bitmap)
                except Exception as exc:  # pyroaring raises plain ValueError/RuntimeError
                    self.problem(t.version, "index", index.name, f"fragment bitmap does not decode: {exc}")
                    continue
                never = [f for f in covered if f > highest]
                if never:
                    self.problem(t.version, "index", index.name, f"covers fragment ids {never} never assigned")


@cli.command()
@uri_and_storage
@version_option("Check this version (number, tag or ISO time).")
@click.option("--all", "all_versions", is_flag=True, help="Check every version kept.")
@click.option("--deep", is_flag=True, help="Also read every data and index file.")
@json_option
@click.pass_context
def verify(
    ctx: click.Context,
    uri: str,
    storage_option: tuple[str, ...],
    ref: int | str | datetime | None,
    all_versions: bool,
    deep: bool,
    as_json: bool,
) -> None:
    """Check a table against its store; print the problems and exit 1 if there are any.

    Every manifest parses, every file a checked version references exists with the recorded size, deletion
    vectors decode, indices point at existing fields and fragments, every tag file reads; --deep reads every data
    and index file.
    Default: the latest version.

    \b
    Example:
        mvcc verify ./events --all --deep
    """
    if ref is not None and all_versions:
        raise click.UsageError("give --version or --all, not both")
    checker = Verifier(deep)
    checked_versions: list[int] = []
    options = storage_options_for(uri, storage_option)

    def manifest_problems(version: int | None, error: str) -> None:
        """Each broken invariant of a manifest that failed to load, after the load's error when that says more
        (it does not decode, or it is the latest and the error names the version to restore)."""
        try:
            found = mvcc.manifest_violations(uri, version, storage_options=options)
        except mvcc.MvccError:
            found = []
        if not found or version is None:
            checker.problem(version, "manifest", uri, error)
        for text in found:
            checker.problem(version, "manifest", uri, text)

    try:
        t = open_table(uri, storage_option, ref)
    except mvcc.CorruptManifestError as exc:  # the latest manifest: its message names the version to restore
        manifest_problems(ref if isinstance(ref, int) else None, str(exc))
    else:
        if all_versions:
            for info in t.versions():
                checked_versions.append(info.version)
                if info.error is not None:
                    manifest_problems(info.version, info.error)
                    continue
                try:
                    checker.version(t.checkout(info.version))
                except mvcc.VersionNotFoundError:
                    continue  # removed by a cleanup running beside us
        else:
            checked_versions.append(t.version)
            checker.version(t)
        for path, problem in t.tags.read_all().problems.items():
            checker.problem(None, "tag", path, problem)
    problems = checker.problems
    if as_json:
        emit_json(
            {
                "ok": not problems,
                "versions": checked_versions,
                "files_checked": len(checker.checked),
                "problems": problems,
            }
        )
    else:
        for p in problems:
            where = "?" if p["version"] is None else p["version"]
            click.echo(f"version {where}: {p['kind']} {p['path']}: {p['problem']}")
        what = f"{len(checked_versions)} version(s), {len(checker.checked)} files"
        click.echo(f"{len(problems)} problem(s) in {what}" if problems else f"ok: {what}", err=bool(problems))
    if problems:
        ctx.exit(EXIT_ERROR)


def main(argv: Sequence[str] | None = None) -> None:
    """The `mvcc` console script ([project.scripts] in pyproject.toml)."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="mvcc")
