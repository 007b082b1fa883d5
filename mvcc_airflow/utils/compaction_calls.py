"""Every call mvcc_airflow makes into the core's compaction seam, `mvcc.compaction`, and nothing else.

Kept in one module so that a change of the seam (the plan carrying its ReserveFragments' version, commit
taking and returning a table state) is adapted here only. Tasks and results cross Airflow's XCom, which holds
JSON: they travel as dicts whose serialized fragments are base64 text (`task_to_xcom` / `result_from_xcom`).
"""

from __future__ import annotations

import base64
import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

import mvcc_core as mvcc

#: The compaction options an operator and the compaction group take as arguments of their own (beside `options`).
OPTION_ARGUMENTS = ("where", "sort_by", "zorder_by", "max_bytes")

_SIZE = re.compile(r"^\s*(\d+)\s*(b|kb|kib|mb|mib|gb|gib|tb|tib)?\s*$", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS.update({"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40})


def is_templated(value: Any) -> bool:
    """Whether `value` is (or holds) a Jinja template Airflow renders before the task runs.

    Args:
        value: an operator's argument
    """
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, list | tuple):
        return any(is_templated(v) for v in value)
    return False


def to_size(value: Any, name: str = "max_bytes") -> int:
    """A positive number of bytes from an int or a size in the CLI's words (``134217728``, ``128MiB``, ``1GB``).

    Args:
        value: the argument
        name: its name, for the error

    Raises:
        ValueError: naming `name`, for anything else or a size that is not positive
    """
    if isinstance(value, str):
        match = _SIZE.match(value.replace("_", ""))
        if match is None:
            raise ValueError(
                f"{name}: {value!r} is not a size: use a number of bytes, optionally with a unit: "
                "134217728, 128MiB, 1GB"
            )
        value = int(match.group(1)) * _UNITS[(match.group(2) or "b").lower()]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive number of bytes (or a size such as '128MiB'), got {value!r}")
    return value


def _columns(value: Any) -> Any:
    """A rendered column list: a comma-separated string (``"user,ts"``, the table policy's form) becomes a list."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",")]
    return value


def compaction_fields(options: Mapping[str, Any] | None = None, **explicit: Any) -> dict[str, Any]:
    """The `CompactionOptions` fields a task gives the core: `options` and the operator's own arguments
    (`OPTION_ARGUMENTS`, None: not given). Every field not given follows the table's policy (its
    ``mvcc.compaction.*`` keys), then the core's defaults, as `compact_files` without arguments does.

    Templated values (``{{ ... }}``) are checked only after Airflow has rendered them (`rendered_fields`).

    Args:
        options: Field names of `CompactionOptions` and their values; None for none.
        **explicit: ``where``, ``sort_by``, ``zorder_by``, ``max_bytes`` as the operator's arguments.

    Returns:
        The fields, as given (JSON-ready).

    Raises:
        ValueError: `options` is not a dict, names an unknown field, a field is given twice, or a value is out
            of range; the message names the argument.
    """
    if options is not None and not isinstance(options, Mapping):
        raise ValueError(f"options must be a dict of CompactionOptions fields, got {type(options).__name__}")
    fields = dict(options or {})
    known = {f.name for f in dataclasses.fields(mvcc.compaction.CompactionOptions)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ValueError(f"options: unknown compaction option(s) {unknown}; known: {sorted(known)}")
    for name, value in explicit.items():
        if value is None:
            continue
        if name in fields:
            raise ValueError(f"{name} is given twice, as {name}= and in options: give it once")
        fields[name] = value
    given = {k: v for k, v in explicit.items() if v is not None and not is_templated(v)}
    try:  # the operator's own arguments first, so that the error names the argument and not `options`
        mvcc.compaction.CompactionOptions(**_as_core(rendered_fields(given)))
    except (TypeError, ValueError) as exc:
        raise ValueError(str(exc)) from None
    compaction_options(rendered_fields({k: v for k, v in fields.items() if not is_templated(v)}))
    return fields


def _as_core(fields: Mapping[str, Any]) -> dict[str, Any]:
    """JSON lists of columns as the tuples `CompactionOptions` keeps."""
    return {k: tuple(v) if k in ("sort_by", "zorder_by") and isinstance(v, list) else v for k, v in fields.items()}


def rendered_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The fields as the core takes them once templates are rendered: a size string (``"128MiB"``) as bytes, a
    comma-separated column string as a list of columns.

    Args:
        fields: what `compaction_fields` returned, rendered
    """
    out = dict(fields)
    if isinstance(out.get("max_bytes"), str):
        out["max_bytes"] = to_size(out["max_bytes"])
    for name in ("sort_by", "zorder_by"):
        if name in out:
            out[name] = _columns(out[name])
    if out.get("where") == "":
        out.pop("where")
    return out


def compaction_options(options: Mapping[str, Any] | None) -> mvcc.compaction.CompactionOptions:
    """The core's `CompactionOptions` from an `options` dict over the defaults (what a check of the fields
    uses; a compaction itself passes the fields, so that the table's policy fills the rest).

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
        return mvcc.compaction.CompactionOptions(**_as_core(options))
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
    table: mvcc.Table,
    fields: Mapping[str, Any],
    *,
    message: str,
    properties: Mapping[str, str],
    partial_progress: bool = False,
    max_commits: int | None = None,
) -> tuple[dict[str, Any], mvcc.Table]:
    """Plan, rewrite and commit in this process (`compact_files`), the fields not given under the table's policy.

    Args:
        table: the table, at the version the plan reads
        fields: the `CompactionOptions` fields given (`compaction_fields`, rendered)
        message: the message stored with the commit
        properties: the commit's transaction properties (the task's `airflow_properties`)
        partial_progress: commit finished groups in up to `max_commits` Rewrites; a group that loses to a
            concurrent commit is planned again once, then dropped and reported (`conflicted_groups`)
        max_commits: with `partial_progress`, the most Rewrites (None: the core's default, 10)

    Returns:
        The metrics (`CompactionMetrics` as a dict) and the table at the last Rewrite's version (the input when
        there was nothing to do).
    """
    metrics, state = mvcc.compaction.compact_files(
        table,
        commit_message=message,
        transaction_properties=properties,
        partial_progress=partial_progress,
        max_commits=max_commits,
        **_as_core(rendered_fields(fields)),
    )
    return dataclasses.asdict(metrics), mvcc.Table.from_state(state)


def would_compact(table: mvcc.Table, fields: Mapping[str, Any]) -> int:
    """How many tasks a compaction with `fields` (the rest under the table's policy) would plan now; nothing is
    committed (the core's `plan_unreserved`).

    Args:
        table: the table at its latest version
        fields: the `CompactionOptions` fields given (`compaction_fields`, rendered)
    """
    return len(mvcc.compaction.plan_unreserved(table, **_as_core(rendered_fields(fields))).tasks)


def reserve(
    table: mvcc.Table, fields: Mapping[str, Any], *, message: str, properties: Mapping[str, str]
) -> tuple[int, list[dict[str, Any]]]:
    """Plan the compaction and commit its ReserveFragments (none when there is nothing to do).

    Args:
        table: the table, at the version the plan reads
        fields: the `CompactionOptions` fields given (`compaction_fields`, rendered); the rest follow the
            table's policy
        message: the ReserveFragments' message
        properties: the commit's transaction properties (the task's `airflow_properties`)

    Returns:
        The version the plan read and its tasks, as XCom data.
    """
    plan = mvcc.compaction.plan(
        table, commit_message=message, transaction_properties=properties, **_as_core(rendered_fields(fields))
    )
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
    fields: Mapping[str, Any],
    *,
    message: str,
    properties: Mapping[str, str],
) -> mvcc.Table:
    """One Rewrite of every result. On a lost race the core removes the files the tasks wrote and raises.

    Args:
        table: the table (any version: the results carry their read version)
        results: every task's result, as `rewrite` returned them
        fields: the plan's fields (their `defer_index_remap` applies)
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
        defer_index_remap=bool(fields.get("defer_index_remap", False)),
    )
    return mvcc.Table.from_state(state)


@dataclasses.dataclass(frozen=True)
class PartialOutcome:
    """What a partial commit of the group's results landed and dropped (`commit_partial`).

    Attributes:
        table: The table at the last Rewrite's version (the input when none landed).
        committed: Indices (the rewrite tasks' map indices) of the results that landed, in order.
        dropped: One dict per result that lost to a concurrent commit: ``{"task": map index, "fragments":
            [fragment ids it would have replaced], "reason": why, in words}``; its files are removed.
        versions: The Rewrites' versions, in commit order.
    """

    table: mvcc.Table
    committed: tuple[int, ...]
    dropped: tuple[dict[str, Any], ...]
    versions: tuple[int, ...]


def commit_partial(
    table: mvcc.Table,
    results: Sequence[Mapping[str, Any]],
    fields: Mapping[str, Any],
    *,
    message: str,
    properties: Mapping[str, str],
) -> PartialOutcome:
    """Every result that does not conflict, committed (`mvcc.compaction.commit(..., partial=True)`); the
    others dropped and named.

    Args:
        table: the table (any version: the results carry their read version)
        results: every task's result, as `rewrite` returned them (in map-index order)
        fields: the plan's fields (their `defer_index_remap` applies)
        message: the message stored with the commit
        properties: the commit's transaction properties (the task's `airflow_properties`)
    """
    given = [result_from_xcom(r) for r in results]
    outcome = mvcc.compaction.commit(
        table,
        given,
        commit_message=message,
        transaction_properties=properties,
        defer_index_remap=bool(fields.get("defer_index_remap", False)),
        partial=True,
    )
    index = {id(r): i for i, r in enumerate(given)}
    decode = _fragment_decoder(table, given[0].read_version) if outcome.conflicted else None
    dropped = tuple(
        {
            "task": index[id(r)],
            "fragments": [decode(f) for f in r.old_fragments] if decode is not None else [],
            "reason": why,
        }
        for r, why in zip(outcome.conflicted, outcome.reasons, strict=True)
    )
    return PartialOutcome(
        table=mvcc.Table.from_state(outcome.state),
        committed=tuple(index[id(r)] for r in outcome.committed),
        dropped=dropped,
        versions=tuple(outcome.versions),
    )


def _fragment_decoder(table: mvcc.Table, version: int) -> Any:
    """The id of a serialized fragment (a task's, a result's), read with the class of the manifest entries
    the public `Fragment.metadata` returns."""
    fragments = table.checkout(version).get_fragments()
    if not fragments:
        return None
    message = type(fragments[0].metadata)
    return lambda data: int(message.FromString(data).id)


def result_totals(results: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """The sums over results (as `rewrite` returned them): fragments removed and added, rows, bytes.

    Args:
        results: the results to count (the committed ones)
    """
    return {
        "fragments_removed": sum(len(r["old_fragments"]) for r in results),
        "fragments_added": sum(len(r["new_fragments"]) for r in results),
        "rows": sum(int(r["rows"]) for r in results),
        "bytes_read": sum(int(r["bytes_read"]) for r in results),
        "bytes_written": sum(int(r["bytes_written"]) for r in results),
    }
