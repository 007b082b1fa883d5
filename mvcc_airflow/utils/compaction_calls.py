"""Every call mvcc_airflow makes into the core's compaction seam, `mvcc.compaction`, and nothing else.

Kept in one module so that a change of the seam (the plan carrying its ReserveFragments' version, commit
taking and returning a table state) is adapted here only. Tasks and results cross Airflow's XCom, which holds
JSON: they travel as dicts whose serialized fragments are base64 text (`task_to_xcom` / `result_from_xcom`).
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import mvcc_core as mvcc


def compaction_options(options: Mapping[str, Any] | None) -> mvcc.compaction.CompactionOptions:
    """The core's `CompactionOptions` from the operator's `options` dict.

    Args:
        options: Field names of `CompactionOptions` and their values; None for the defaults.

    Returns:
        The options.

    Raises:
        ValueError: `options` is not a dict, names an unknown field, or a value is out of range.
    """
    if options is None:
        return mvcc.compaction.CompactionOptions()
    if not isinstance(options, Mapping):
        raise ValueError(f"options must be a dict of CompactionOptions fields, got {type(options).__name__}")
    known = {f.name for f in dataclasses.fields(mvcc.compaction.CompactionOptions)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"options: unknown compaction option(s) {unknown}; known: {sorted(known)}")
    try:
        return mvcc.compaction.CompactionOptions(**dict(options))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"options: {exc}") from exc


_BYTES = "base64"  # the key of a bytes value's JSON form: {"base64": "..."}


def _json_value(item: Any) -> Any:
    """One field's value as JSON data: bytes (serialized fragments, row maps) as base64 text under `_BYTES`,
    tuples as lists (nested too); ints, strings and None as they are."""
    if isinstance(item, bytes):
        return {_BYTES: base64.b64encode(item).decode("ascii")}
    if isinstance(item, tuple):
        return [_json_value(v) for v in item]
    return item


def _field_value(item: Any) -> Any:
    """The value `_json_value` wrote: lists become tuples again, base64 text bytes."""
    if isinstance(item, dict) and set(item) == {_BYTES}:
        return base64.b64decode(item[_BYTES])
    if isinstance(item, list):
        return tuple(_field_value(v) for v in item)
    return item


def _to_xcom(value: Any) -> dict[str, Any]:
    """A `CompactionTask` or `RewriteResult` as JSON data, each field by name (`_json_value`)."""
    return {f.name: _json_value(getattr(value, f.name)) for f in dataclasses.fields(value)}


def _from_xcom(cls: type, data: Mapping[str, Any]) -> Any:
    """The `cls` instance that `_to_xcom` wrote (a field it did not write keeps its default)."""
    return cls(**{f.name: _field_value(data[f.name]) for f in dataclasses.fields(cls) if f.name in data})


def task_to_xcom(task: Any) -> dict[str, Any]:
    """A `CompactionTask` as JSON-serializable data (its fragments base64 text).

    Args:
        task: a `CompactionTask` of a plan
    """
    return _to_xcom(task)


def task_from_xcom(data: Mapping[str, Any]) -> Any:
    """The `CompactionTask` that `task_to_xcom` wrote.

    Args:
        data: what `task_to_xcom` wrote, as XCom hands it back
    """
    return _from_xcom(mvcc.compaction.CompactionTask, data)


def result_to_xcom(result: Any) -> dict[str, Any]:
    """A `RewriteResult` as JSON-serializable data.

    Args:
        result: a task's `RewriteResult`
    """
    return _to_xcom(result)


def result_from_xcom(data: Mapping[str, Any]) -> Any:
    """The `RewriteResult` that `result_to_xcom` wrote.

    Args:
        data: what `result_to_xcom` wrote, as XCom hands it back
    """
    return _from_xcom(mvcc.compaction.RewriteResult, data)


def compact(
    table: mvcc.Table, options: mvcc.compaction.CompactionOptions, *, message: str, properties: Mapping[str, str]
) -> tuple[dict[str, Any], mvcc.Table]:
    """Plan, rewrite and commit in this process (`compact_files`).

    Args:
        table: the table, at the version the plan reads
        options: what to rewrite and the task bounds
        message: the message stored with the commit
        properties: the commit's transaction properties (the task's `airflow_properties`)

    Returns:
        The metrics (`CompactionMetrics` as a dict) and the table at the Rewrite's version (the input when
        there was nothing to do).
    """
    metrics, state = mvcc.compaction.compact_files(
        table, options, commit_message=message, transaction_properties=properties
    )
    return dataclasses.asdict(metrics), mvcc.Table.from_state(state)


def reserve(
    table: mvcc.Table, options: mvcc.compaction.CompactionOptions, *, message: str, properties: Mapping[str, str]
) -> tuple[int, list[dict[str, Any]]]:
    """Plan the compaction and commit its ReserveFragments (none when there is nothing to do).

    Args:
        table: the table, at the version the plan reads
        options: what to rewrite and the task bounds
        message: the ReserveFragments' message
        properties: the commit's transaction properties (the task's `airflow_properties`)

    Returns:
        The version the plan read and its tasks, as XCom data.
    """
    plan = mvcc.compaction.plan(table, options, commit_message=message, transaction_properties=properties)
    return plan.read_version, [task_to_xcom(task) for task in plan.tasks]


def rewrite(task: Mapping[str, Any], uri: str, storage_options: dict[str, Any] | None) -> dict[str, Any]:
    """Run one task (read its fragments at the plan's version, write the new ones); nothing is committed.

    Args:
        task: one task, as `reserve` returned it
        uri: the table's uri
        storage_options: its store options
    """
    return result_to_xcom(task_from_xcom(task).execute(uri, storage_options))


def commit(
    table: mvcc.Table,
    results: Sequence[Mapping[str, Any]],
    options: mvcc.compaction.CompactionOptions,
    *,
    message: str,
    properties: Mapping[str, str],
) -> mvcc.Table:
    """One Rewrite of every result. On a lost race the core removes the files the tasks wrote and raises.

    Args:
        table: the table (any version: the results carry their read version)
        results: every task's result, as `rewrite` returned them
        options: the plan's options (its `defer_index_remap` applies)
        message: the message stored with the commit
        properties: the commit's transaction properties (the task's `airflow_properties`)

    Returns:
        The table at the Rewrite's version.
    """
    state = mvcc.compaction.commit(
        table,
        [result_from_xcom(r) for r in results],
        commit_message=message,
        transaction_properties=properties,
        defer_index_remap=options.defer_index_remap,
    )
    return mvcc.Table.from_state(state)
