"""Run lineage: which table version a step depends on, from Dagster's run and event storage.

The rules are in docs/integrations/dagster/io_manager.md ("Reading: `load_input` reads the version the run depends on").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import dagster as dg

from .metadata import PARTITION_VERSIONS
from .properties import ROOT_RUN_ID_TAG

_PAGE = 200


def lineage_root(run: dg.DagsterRun) -> str:
    """The run a run's lineage starts from: its root run when it re-executes another, else itself.

    Args:
        run: The run.

    Returns:
        The root run's id (Dagster's `root_run_id`, or the `dagster/root_run_id` tag), or `run`'s own id.
    """
    return run.root_run_id or run.tags.get(ROOT_RUN_ID_TAG) or run.run_id


def as_int(value: Any) -> int | None:
    """A metadata value as an int: an int, or a string of digits (None for anything else).

    Args:
        value: The raw value.

    Returns:
        The int, or None.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, str) and value.isdigit() else None


def metadata_value(record: Any, key: str) -> Any:
    """The raw value of `key` in a materialization record's metadata (None when absent).

    Args:
        record: An event log record of a materialization.
        key: The metadata entry.

    Returns:
        The value.
    """
    materialization = record.asset_materialization
    if materialization is None:
        return None
    value = materialization.metadata.get(key)
    return getattr(value, "value", value)


def loaded_input_metadata(
    instance: dg.DagsterInstance, run_id: str, step_key: str, input_name: str
) -> Mapping[str, Any] | None:
    """The metadata (raw values) of the newest LOADED_INPUT event of `input_name` of step `step_key` in a run.

    Args:
        instance: The Dagster instance.
        run_id: The run whose event log is read.
        step_key: The step that loaded the input.
        input_name: The input's name.

    Returns:
        The event's metadata, or None when the step never loaded that input in that run.
    """
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.LOADED_INPUT).records
    for record in reversed(records):
        event = record.event_log_entry.dagster_event
        data = event.event_specific_data if event is not None else None
        if event is None or event.step_key != step_key or getattr(data, "input_name", None) != input_name:
            continue
        return {k: getattr(v, "value", v) for k, v in (getattr(data, "metadata", None) or {}).items()}
    return None


def materialized_in_run(
    instance: dg.DagsterInstance,
    run_id: str,
    key: dg.AssetKey,
    metadata_key: str,
    *,
    partitions: set[str] | None = None,
    convert: Callable[[Any], Any] = as_int,
) -> Any:
    """The value of `metadata_key` recorded by a run's newest materialization of `key` that has one.

    Args:
        instance: The Dagster instance.
        run_id: The run.
        key: The asset.
        metadata_key: The metadata entry (e.g. ``mvcc/version``).
        partitions: Only materializations of these partitions (None: any).
        convert: Turns the raw value into the result; None skips the record.

    Returns:
        The converted value, or None when no materialization of the run has one.
    """
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
    for record in reversed(records):
        mat = record.asset_materialization
        if mat is None or mat.asset_key != key or (partitions is not None and mat.partition not in partitions):
            continue
        value = convert(metadata_value(record, metadata_key))
        if value is not None:
            return value
    return None


def run_created_at(instance: dg.DagsterInstance, run_id: str) -> float | None:
    """When a run was created (seconds since the epoch), None when the run is not in the instance.

    Args:
        instance: The Dagster instance.
        run_id: The run.

    Returns:
        The time, or None.
    """
    record = instance.get_run_record_by_id(run_id)
    return record.create_timestamp.timestamp() if record is not None else None


def recorded_before(
    instance: dg.DagsterInstance,
    key: dg.AssetKey,
    metadata_key: str,
    *,
    before: float | None = None,
    partitions: set[str] | None = None,
    convert: Callable[[Any], Any] = as_int,
) -> Any:
    """The value of `metadata_key` recorded by the newest materialization of `key` created before `before`.

    Args:
        instance, key, metadata_key, partitions, convert: See `materialized_in_run`.
        before: Seconds since the epoch (None: the newest of all).

    Returns:
        The converted value, None when there is no such materialization or it records no such value.
    """
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(
            asset_key=key,
            asset_partitions=sorted(partitions) if partitions is not None else None,
            before_timestamp=before,
        ),
        limit=1,
    ).records
    return convert(metadata_value(records[0], metadata_key)) if records else None


def pinned_value(
    instance: dg.DagsterInstance,
    run: dg.DagsterRun,
    key: dg.AssetKey,
    metadata_key: str,
    *,
    partitions: set[str] | None = None,
    loaded_by: tuple[str, str] | None = None,
    convert: Callable[[Any], Any] = as_int,
) -> Any:
    """The value of `metadata_key` of the materialization of `key` a step of `run` depends on.

    1. `key` was materialized in this run: that materialization's value.
    2. The run re-executes an earlier one (its root run): the value the root run's same step loaded (when
       `loaded_by` names the step and input), else the root run's own materialization, else the newest
       materialization created before the root run was (what the root run read).
    3. Otherwise the newest materialization.

    Args:
        instance: The Dagster instance.
        run: The step's run.
        key: The upstream asset.
        metadata_key: What to pin (``mvcc/version``, ``mvcc/catalog_version``).
        partitions: Only materializations of these partitions (None: any).
        loaded_by: (step key, input name) whose LOADED_INPUT event in the root run records the value.
        convert: Turns a raw metadata value into the result (None: not a usable value).

    Returns:
        The value, or None when none is recorded (read the latest).
    """
    value = materialized_in_run(instance, run.run_id, key, metadata_key, partitions=partitions, convert=convert)
    if value is not None:
        return value
    root = lineage_root(run)
    before = None
    if root != run.run_id:
        if loaded_by is not None:
            loaded = loaded_input_metadata(instance, root, *loaded_by)
            value = convert(loaded.get(metadata_key)) if loaded is not None else None
            if value is not None:
                return value
        value = materialized_in_run(instance, root, key, metadata_key, partitions=partitions, convert=convert)
        if value is not None:
            return value
        before = run_created_at(instance, root)
    return recorded_before(instance, key, metadata_key, before=before, partitions=partitions, convert=convert)


def pinned_version(context: dg.InputContext) -> int | None:
    """The version of the upstream table an input depends on (`pinned_value` of ``mvcc/version``).

    Args:
        context: The IO manager's input context.

    Returns:
        The version, or None (read the latest: no materialization records one).
    """
    step = context.step_context
    return pinned_value(
        context.instance,
        step.dagster_run,
        context.asset_key,
        "mvcc/version",
        partitions=set(context.asset_partition_keys) if context.has_asset_partitions else None,
        loaded_by=(step.step.key, context.name),
    )


def pinned_partition_versions(context: dg.InputContext) -> dict[str, int | None] | None:
    """Per mapped upstream partition, the version its own newest materialization recorded.

    Why per partition, and how a re-execution reads what its root run loaded: docs/integrations/dagster/io_manager.md
    ("Reading").

    Args:
        context: The IO manager's input context.

    Returns:
        Partition key -> version (None for a partition without one: the latest) when the step reads two or
        more upstream partitions; None otherwise (one version for everything: `pinned_version`), and for a
        re-execution whose root run loaded one version.
    """
    if not context.has_asset_partitions:
        return None
    keys = sorted(set(context.asset_partition_keys))
    if len(keys) < 2:
        return None
    instance = context.instance
    step = context.step_context
    run = step.dagster_run
    root = lineage_root(run)
    if root != run.run_id:
        loaded = loaded_input_metadata(instance, root, step.step.key, context.name)
        value = loaded.get(PARTITION_VERSIONS) if loaded is not None else None
        return {k: value.get(k) for k in keys} if isinstance(value, dict) else None
    pins: dict[str, int | None] = {}
    cursor = None
    while True:
        result = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=context.asset_key, asset_partitions=keys), limit=_PAGE, cursor=cursor
        )
        for record in result.records:
            mat = record.asset_materialization
            if mat is not None and mat.partition in keys and mat.partition not in pins:
                pins[mat.partition] = as_int(metadata_value(record, "mvcc/version"))
        if len(pins) == len(keys) or not result.has_more:
            break
        cursor = result.cursor
    return {k: pins.get(k) for k in keys}
