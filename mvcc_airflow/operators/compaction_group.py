"""`mvcc_compaction_group`: compaction as the specification's three steps, as three Airflow tasks.

``reserve_fragments`` plans and commits ReserveFragments (the new fragments' ids are fixed before any task
runs) and returns the tasks; ``rewrite_fragments`` is mapped over them with Airflow's dynamic task mapping
(``.expand``: each runs on any worker, writes its fragments and commits nothing); ``commit_rewrite`` lands one
Rewrite of every result. Tasks and results cross XCom as JSON (`utils/compaction_calls.py`); credentials never do
(every task resolves the connection itself).

Retries: reserve and the mapped rewrites retry as every mvcc operator does (`DEFAULT_RETRY_ARGS`). A Rewrite
that loses to a concurrent delete or update of a rewritten fragment removes the files its tasks wrote and
fails ``commit_rewrite`` without retry: committing the same results again would lose again; the next DAG run
plans anew (the one-task `MvccCompactOperator` re-plans on its own retries).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from airflow.sdk import TaskGroup, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException

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
    mvcc_conn_id: str = DEFAULT_CONN_ID,
) -> TaskGroup:
    """A TaskGroup compacting `table`: ``reserve_fragments`` >> ``rewrite_fragments`` (mapped) >> ``commit_rewrite``.

    Call it inside a DAG; set dependencies on the returned group (``group >> optimize``). With nothing to
    compact the mapped step has no instance and ``commit_rewrite`` reports the table unchanged; with no table
    there yet every task of the group is skipped ("nothing to maintain").

    Args:
        table: A table name under the connection's root uri, or a full uri.
        group_id: The group's id (default ``mvcc_compaction``).
        options: The core's `CompactionOptions` as a dict.
        mvcc_conn_id: The Airflow connection of type ``mvcc``.

    Returns:
        The task group. ``commit_rewrite`` returns ``{"table", "version", "operation", "metrics"}`` via XCom.

    Raises:
        ValueError: `table` or `options` is invalid (when the DAG file is parsed).
    """
    if not isinstance(table, str) or not table.strip():
        raise ValueError(f"mvcc_compaction_group: table must be a table name or a uri, got {table!r}")
    compaction_calls.compaction_options(options)
    frozen_options = dict(options) if options else None

    with TaskGroup(group_id or DEFAULT_GROUP_ID, tooltip=f"compaction of {table}") as group:

        @task(task_id="reserve_fragments", **DEFAULT_RETRY_ARGS)
        def reserve_fragments() -> list[dict[str, Any]]:
            t = open_table_to_maintain(MvccHook(mvcc_conn_id), table)  # skipped (and the rest) with no table yet
            with mvcc_errors(f"compaction of {t.uri}"):
                read_version, tasks = compaction_calls.reserve(
                    t,
                    compaction_calls.compaction_options(frozen_options),
                    message=f"airflow: compaction of {table} (reserve fragment ids)",
                    properties=airflow_properties(get_current_context(), "compaction"),
                )
            log.info("%s: %d compaction task(s) planned at version %d", t.uri, len(tasks), read_version)
            return [{"table": t.uri, "task": item} for item in tasks]

        @task(task_id="rewrite_fragments", **DEFAULT_RETRY_ARGS)
        def rewrite_fragments(planned: dict[str, Any]) -> dict[str, Any]:
            options, _ = MvccHook(mvcc_conn_id).storage_options(table)
            with mvcc_errors(f"compaction of {planned['table']}"):
                return compaction_calls.rewrite(planned["task"], planned["table"], options)

        @task(task_id="commit_rewrite", trigger_rule="none_failed", **DEFAULT_RETRY_ARGS)
        def commit_rewrite(results: Any) -> dict[str, Any]:
            # By index: iterating Airflow's lazy sequence probes one past the end (an "XCom not found" log line).
            written = [results[i] for i in range(len(results))] if results is not None else []
            t = open_table_to_maintain(MvccHook(mvcc_conn_id), table)
            if not written:
                return task_result(t, None, {"tasks": 0})
            before = t.version
            try:
                with mvcc_errors(f"compaction of {t.uri}"):
                    t = compaction_calls.commit(
                        t,
                        written,
                        compaction_calls.compaction_options(frozen_options),
                        message=f"airflow: compaction of {table}",
                        properties=airflow_properties(get_current_context(), "compaction"),
                    )
            except mvcc.RetryableConflictError as exc:
                raise AirflowFailException(
                    f"compaction of {t.uri} lost to a concurrent commit ({exc}); the files its tasks wrote were "
                    "removed. Committing the same results again would lose again: the next run plans anew."
                ) from exc
            return task_result(
                t,
                mvcc.operations.Rewrite.name,
                {
                    "read_version": written[0]["read_version"],
                    "latest_version_before": before,
                    "tasks": len(written),
                    "fragments_removed": sum(len(r["old_fragments"]) for r in written),
                    "fragments_added": sum(len(r["new_fragments"]) for r in written),
                    "rows": sum(r["rows"] for r in written),
                    "bytes_read": sum(r["bytes_read"] for r in written),
                    "bytes_written": sum(r["bytes_written"] for r in written),
                },
            )

        commit_rewrite(rewrite_fragments.expand(planned=reserve_fragments()))
    return group
