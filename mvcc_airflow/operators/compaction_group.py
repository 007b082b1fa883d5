"""`mvcc_compaction_group`: compaction as the specification's three steps, as three Airflow tasks.

``reserve_fragments`` plans and commits ReserveFragments (the new fragments' ids are fixed before any task
runs) and returns the tasks; ``rewrite_fragments`` is mapped over them with Airflow's dynamic task mapping
(``.expand``: each runs on any worker, writes its fragments and commits nothing); ``commit_rewrite`` lands one
Rewrite of every result. Tasks and results cross XCom as JSON (`utils/compaction_calls.py`); credentials never do
(every task resolves the connection itself).

Options: `options` (the core's `CompactionOptions` as a dict) and the arguments `where` (scope), `sort_by` /
`zorder_by` (layout) and `max_bytes` (budget); what is not given follows the table's policy (its
``mvcc.compaction.*`` configuration keys), then the core's defaults.

Retries: reserve and the mapped rewrites retry as every mvcc operator does (`DEFAULT_RETRY_ARGS`). A Rewrite
that loses to a concurrent delete or update of a rewritten fragment removes the files its tasks wrote and
fails ``commit_rewrite`` without retry: committing the same results again would lose again; the next DAG run
plans anew (the one-task `MvccCompactOperator` re-plans on its own retries). With ``partial_progress=True``
``commit_rewrite`` commits every task's group that does not conflict (`mvcc.compaction.commit(...,
partial=True)`): a conflict costs only the groups it touched, whose files are removed; the totals count the
committed groups and ``metrics["dropped"]`` names the others (map index, fragment ids, reason). It fails only
when every group was dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import TaskGroup, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

import mvcc_core as mvcc

from ..hooks.mvcc import DEFAULT_CONN_ID, MvccHook
from ..utils import compaction_calls
from ..utils.conflicts import DEFAULT_RETRY_ARGS, mvcc_errors
from ..utils.task_results import airflow_properties, task_result
from .base import open_table_to_maintain

DEFAULT_GROUP_ID = "mvcc_compaction"
log = logging.getLogger(__name__)


def mvcc_compaction_group(
    table: str,
    *,
    group_id: str | None = None,
    options: Mapping[str, Any] | None = None,
    where: str | None = None,
    sort_by: Sequence[str] | str | None = None,
    zorder_by: Sequence[str] | str | None = None,
    max_bytes: int | str | None = None,
    partial_progress: bool = False,
    when_advised: bool = False,
    mvcc_conn_id: str = DEFAULT_CONN_ID,
) -> TaskGroup:
    """A TaskGroup compacting `table`: ``reserve_fragments`` >> ``rewrite_fragments`` (mapped) >> ``commit_rewrite``.

    Call it inside a DAG; set dependencies on the returned group (``group >> optimize``). With nothing to
    compact the mapped step has no instance and ``commit_rewrite`` reports the table unchanged; with no table
    there yet every task of the group is skipped ("nothing to maintain"), and with `when_advised` too when
    the compaction would rewrite nothing.

    Args:
        table: A table name under the connection's root uri, or a full uri.
        group_id: The group's id (default ``mvcc_compaction``).
        options: The core's `CompactionOptions` as a dict.
        where: Scope: a SQL filter; only fragments whose statistics may hold a matching row are rewritten.
        sort_by: Layout: rewrite every fragment in scope sorted by these columns.
        zorder_by: Layout: rewrite every fragment in scope in z-order of these 2 to 4 columns.
        max_bytes: Budget: about this many on-disk bytes of input at most (an int or a size such as ``"512MiB"``).
        partial_progress: Commit every group that does not conflict and name the dropped ones, instead of
            failing the whole Rewrite.
        when_advised: Skip the group when the compaction would rewrite nothing.
        mvcc_conn_id: The Airflow connection of type ``mvcc``.

    Returns:
        The task group. ``commit_rewrite`` returns ``{"table", "version", "operation", "metrics"}`` via XCom.

    Raises:
        ValueError: `table` or an option is invalid (when the DAG file is parsed).
    """
    if not isinstance(table, str) or not table.strip():
        raise ValueError(f"mvcc_compaction_group: table must be a table name or a uri, got {table!r}")
    for name, flag in (("partial_progress", partial_progress), ("when_advised", when_advised)):
        if not isinstance(flag, bool):
            raise ValueError(f"mvcc_compaction_group: {name} must be True or False, got {flag!r}")
    given = compaction_calls.compaction_fields(
        options,
        where=where,
        sort_by=list(sort_by) if isinstance(sort_by, list | tuple) else sort_by,
        zorder_by=list(zorder_by) if isinstance(zorder_by, list | tuple) else zorder_by,
        max_bytes=max_bytes,
    )
    templated = sorted(name for name, value in given.items() if compaction_calls.is_templated(value))
    if templated:  # the group's tasks take their options when the DAG file is parsed; nothing renders them
        raise ValueError(
            f"mvcc_compaction_group: {', '.join(templated)} cannot be a template here (the group's options are "
            "fixed when the DAG file is parsed); use MvccCompactOperator, whose options are templated"
        )
    fields = compaction_calls.rendered_fields(given)
    kind = "partial compaction" if partial_progress else "compaction"

    with TaskGroup(group_id or DEFAULT_GROUP_ID, tooltip=f"compaction of {table}") as group:

        @task(task_id="reserve_fragments", **DEFAULT_RETRY_ARGS)
        def reserve_fragments() -> list[dict[str, Any]]:
            t = open_table_to_maintain(MvccHook(mvcc_conn_id), table)  # skipped (and the rest) with no table yet
            with mvcc_errors(f"compaction of {t.uri}"):
                if when_advised and not compaction_calls.would_compact(t, fields):
                    raise AirflowSkipException(
                        f"{t.uri} version {t.version}: no compaction advised (nothing to rewrite)"
                    )
                read_version, tasks = compaction_calls.reserve(
                    t,
                    fields,
                    message=f"airflow: compaction of {table} (reserve fragment ids)",
                    properties=airflow_properties(get_current_context(), "compaction"),
                )
            log.info("%s: %d compaction task(s) planned at version %d", t.uri, len(tasks), read_version)
            return [{"table": t.uri, "task": item} for item in tasks]

        @task(task_id="rewrite_fragments", **DEFAULT_RETRY_ARGS)
        def rewrite_fragments(planned: dict[str, Any]) -> dict[str, Any]:
            storage, _ = MvccHook(mvcc_conn_id).storage_options(table)
            with mvcc_errors(f"compaction of {planned['table']}"):
                return compaction_calls.rewrite(planned["task"], planned["table"], storage)

        @task(task_id="commit_rewrite", trigger_rule="none_failed", **DEFAULT_RETRY_ARGS)
        def commit_rewrite(results: Any) -> dict[str, Any]:
            # By index: iterating Airflow's lazy sequence probes one past the end (an "XCom not found" log line).
            written = [results[i] for i in range(len(results))] if results is not None else []
            t = open_table_to_maintain(MvccHook(mvcc_conn_id), table)
            if not written:
                if when_advised:
                    raise AirflowSkipException(f"{t.uri}: nothing was planned, so nothing to commit")
                return task_result(t, None, {"tasks": 0})
            before = t.version
            properties = airflow_properties(get_current_context(), "compaction")
            message = f"airflow: {kind} of {table}"
            if partial_progress:
                return _commit_partially(t, written, fields, message, properties)
            try:
                with mvcc_errors(f"compaction of {t.uri}"):
                    t = compaction_calls.commit(t, written, fields, message=message, properties=properties)
            except mvcc.RetryableConflictError as exc:
                raise AirflowFailException(
                    f"compaction of {t.uri} lost to a concurrent commit ({exc}); the files its tasks wrote were "
                    "removed. Committing the same results again would lose again: the next run plans anew "
                    "(partial_progress=True would have committed the groups the conflict did not touch)."
                ) from exc
            return task_result(
                t,
                mvcc.operations.Rewrite.name,
                {
                    "read_version": written[0]["read_version"],
                    "latest_version_before": before,
                    "tasks": len(written),
                    **compaction_calls.result_totals(written),
                },
            )

        commit_rewrite(rewrite_fragments.expand(planned=reserve_fragments()))
    return group


def _commit_partially(
    table: mvcc.Table,
    written: list[dict[str, Any]],
    fields: Mapping[str, Any],
    message: str,
    properties: Mapping[str, str],
) -> dict[str, Any]:
    """``commit_rewrite`` with partial progress: the groups that do not conflict land; the totals count them only
    and ``dropped`` names the others. Every group dropped fails the task (not retried: the next run plans anew)."""
    before = table.version
    with mvcc_errors(f"compaction of {table.uri}"):
        outcome = compaction_calls.commit_partial(table, written, fields, message=message, properties=properties)
    committed = [written[i] for i in outcome.committed]
    for item in outcome.dropped:
        log.warning(
            "%s: the group of rewrite task %d (fragments %s) lost to a concurrent commit and was dropped: %s",
            table.uri,
            item["task"],
            item["fragments"],
            item["reason"],
        )
    if not committed:
        raise AirflowFailException(
            f"compaction of {table.uri}: all {len(written)} group(s) lost to concurrent commits and were dropped "
            f"(their files removed): {[d['fragments'] for d in outcome.dropped]}; the next run plans anew"
        )
    return task_result(
        outcome.table,
        mvcc.operations.Rewrite.name,
        {
            "read_version": written[0]["read_version"],
            "latest_version_before": before,
            "tasks": len(written),
            "committed_tasks": list(outcome.committed),
            "versions": list(outcome.versions),
            **compaction_calls.result_totals(committed),
            "dropped": list(outcome.dropped),
        },
    )
