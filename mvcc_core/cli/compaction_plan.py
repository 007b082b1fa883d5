"""`mvcc compact --dry-run`: the plan `compact` would run (tasks, fragments in and out, bytes), and where each of
its settings came from: a flag, the table's `mvcc.compaction.*` policy or the default."""

from __future__ import annotations

from typing import Any, TypedDict

import click

import mvcc_core as mvcc
from mvcc_core.cli.output import emit_json, human_bytes, plural, print_table, version_ranges

__all__ = ["compaction_plan", "compaction_sources", "show_compaction_plan"]


class _PlannedTask(TypedDict):
    """One task of `compaction_plan`: the fragments it rewrites, their rows and bytes, the fragments it writes."""

    fragments: list[int]
    rows: int
    bytes: int
    new_fragments: int


def compaction_plan(t: mvcc.Table, options: mvcc.compaction.CompactionOptions) -> dict[str, Any]:
    """What `compact` would do to `t`'s version with `options`: its tasks and totals. Nothing is committed
    (`compaction.plan_unreserved`, the plan `compact_files` runs, without reserving fragment ids).

    Args:
        t: the table, at the version to compact
        options: what to rewrite and the task bounds
    """
    fragments = t.get_fragments()
    by_bytes = {f.metadata.SerializeToString(): f for f in fragments}
    tasks: list[_PlannedTask] = []
    for task in mvcc.compaction.plan_unreserved(t, options).tasks:
        old = [by_bytes[b] for b in task.fragments]
        tasks.append(
            _PlannedTask(
                fragments=[f.fragment_id for f in old],
                rows=sum(f.count_rows() for f in old),
                bytes=sum(df.file_size_bytes for f in old for df in f.data_files()),
                new_fragments=len(task.new_fragment_ids),
            )
        )
    removed = sum(len(task["fragments"]) for task in tasks)
    added = sum(task["new_fragments"] for task in tasks)
    layout = options.clustering
    return {
        "dry_run": True,
        "version": t.version,
        "layout": "bin-pack (row order kept)" if layout is None else f"{layout[0]} by {', '.join(layout[1])}",
        "tasks": tasks,
        "fragments_before": len(fragments),
        "fragments_after": len(fragments) - removed + added,
        "fragments_removed": removed,
        "fragments_added": added,
        "rows_rewritten": sum(task["rows"] for task in tasks),
        "bytes_read": sum(task["bytes"] for task in tasks),
    }


#: The settings a compaction takes from a flag or the table's policy: (field, flag, words for the text line).
_SETTINGS = (
    ("target_rows_per_fragment", "--target-rows-per-fragment", "target rows"),
    ("target_bytes_per_fragment", None, "target bytes"),
    ("materialize_deletions_threshold", "--materialize-deletions-threshold", "deletions threshold"),
    ("max_bytes", "--max-bytes", "budget"),
    ("sort_by", "--sort-by", "sort by"),
    ("zorder_by", "--zorder-by", "z-order by"),
)


def compaction_sources(config: dict[str, str], chosen: dict[str, Any]) -> dict[str, str]:
    """Where each setting of a compaction comes from: "flag", "table" (its `mvcc.compaction.*` key) or "default".

    Args:
        config: the table's configuration
        chosen: the `CompactionOptions` fields the flags gave (None: not given)
    """
    layout_given = any(chosen.get(name) is not None for name in ("sort_by", "zorder_by"))
    out = {}
    for field, _, _ in _SETTINGS:
        if chosen.get(field) is not None:
            out[field] = "flag"
        elif f"mvcc.compaction.{field}" in config and not (field in ("sort_by", "zorder_by") and layout_given):
            out[field] = "table"
        else:
            out[field] = "default"
    return out


def _settings_line(options: mvcc.compaction.CompactionOptions, sources: dict[str, str]) -> str:
    """The settings of a planned compaction in words, each with its source."""
    parts = []
    for field, flag, words in _SETTINGS:
        value = getattr(options, field)
        if value is None and sources[field] == "default" and field in ("sort_by", "zorder_by"):
            continue  # the layout is in the summary line
        shown = (
            "none"
            if value is None
            else ",".join(value)
            if isinstance(value, tuple)
            else human_bytes(value)
            if field in ("max_bytes", "target_bytes_per_fragment")
            else f"{value:,}"
            if isinstance(value, int)
            else str(value)
        )
        source = {"flag": flag, "table": f"the table's mvcc.compaction.{field}", "default": "default"}[sources[field]]
        parts.append(f"{words} {shown} ({source})")
    return "settings: " + ", ".join(parts)


def show_compaction_plan(
    t: mvcc.Table, options: mvcc.compaction.CompactionOptions, as_json: bool, sources: dict[str, str]
) -> None:
    """Print `compaction_plan` as JSON or as a summary line, the settings and where they came from, and one row
    per task.

    Args:
        t: the table, at the version to compact
        options: what to rewrite and the task bounds
        as_json: print JSON instead of a summary and a table
        sources: where each setting came from (`compaction_sources`)
    """
    plan = compaction_plan(t, options)
    if as_json:
        plan["settings"] = {
            field: {"value": getattr(options, field), "from": sources[field]} for field, _, _ in _SETTINGS
        }
        emit_json(plan)
        return
    if not plan["tasks"]:
        click.echo(f"nothing to compact: {plan['fragments_before']:,} fragments, version {t.version}")
        click.echo(_settings_line(options, sources))
    else:
        click.echo(
            f"would compact version {t.version} in {plural(len(plan['tasks']), 'task')}: fragments "
            f"{plan['fragments_before']:,} -> {plan['fragments_after']:,} ({plan['fragments_removed']:,} rewritten "
            f"into {plan['fragments_added']:,}), {plan['rows_rewritten']:,} rows, "
            f"{human_bytes(plan['bytes_read'])} read, layout: {plan['layout']}"
        )
        click.echo(_settings_line(options, sources))
        rows = [
            (
                n,
                version_ranges(task["fragments"]),
                f"{task['rows']:,}",
                human_bytes(task["bytes"]),
                task["new_fragments"],
            )
            for n, task in enumerate(plan["tasks"], start=1)
        ]
        print_table(None, ["task", "fragments", "rows", "bytes", "new fragments"], rows)
    click.echo("dry run: nothing was written; run again without --dry-run to compact", err=True)
