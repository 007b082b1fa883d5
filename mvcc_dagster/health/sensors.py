"""The version sensor: every new table version becomes a Dagster event, including commits made outside Dagster.

Why a sensor over versions and what each commit becomes: docs/integrations/dagster/sensors_and_health.md ("Version
sensor").
"""

import contextlib
import json
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import dagster as dg

import mvcc_core as mvcc
from mvcc_core import TableNotFoundError, VersionNotFoundError
from mvcc_core.errors import CorruptManifestError

from .._dagster_internals import reuse_sensor_resources
from ..maintenance.target import MaintenanceTarget, manifest_metrics
from ..metadata import TABLE_TAG
from ..properties import PARTITION_KEY_PROPERTY, RUN_ID_PROPERTY
from ..resources import MvccResource, TableName
from ..versions import data_version, is_data_changing, table_metadata

VERSION_TAG = "mvcc/version"
#: How many recorded versions a tick's message names before it says "and N more".
TICK_MESSAGE_VERSIONS = 10


class _JobSensorDefinition(dg.SensorDefinition):
    """A sensor whose ticks reuse the ``mvcc`` resource built by an earlier tick, and whose copies Dagster makes
    without a BetaWarning of ours at start-up.

    Dagster builds a sensor's resources again for every tick; an `MvccResource` is its config and nothing
    else, so the one built for the first tick serves the next ones (`reuse_sensor_resources`;
    docs/integrations/dagster/sensors_and_health.md,
    "What a sensor tick costs").

    When a sensor targets jobs that take resources from the code location (every maintenance job: they bind
    ``mvcc`` there), `Definitions` copies the sensor with the resource-bound jobs (`with_attributes`), and
    Dagster 1.13 passes the sensor's own ``owners`` to the copy as an empty list, which its Beta check reports
    as a use of the Beta parameter ``owners``. Nothing of ours sets owners; only that warning is silenced, only
    around Dagster's copies."""

    def evaluate_tick(self, context: dg.SensorEvaluationContext) -> Any:
        """Dagster's evaluation of the tick, with the resources of an earlier tick when they may be reused.

        Args:
            context: The tick's context.

        Returns:
            Dagster's `SensorExecutionData`.
        """
        reuse_sensor_resources(context, lambda cls: issubclass(cls, MvccResource))
        return super().evaluate_tick(context)

    def with_attributes(self, **kwargs: Any) -> dg.SensorDefinition:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"Parameter `owners` of initializer", category=dg.BetaWarning)
            copy = super().with_attributes(**kwargs)
        # Dagster builds the copy as a plain SensorDefinition; keep it of this class (it adds no state), so a
        # copy of the copy (components add metadata first, then Definitions binds the jobs) stays quiet too.
        copy.__class__ = _JobSensorDefinition
        return copy


def job_sensor(
    evaluation_fn: Callable[..., Any],
    *,
    name: str,
    jobs: Sequence[dg.JobDefinition],
    minimum_interval_seconds: int,
    default_status: dg.DefaultSensorStatus,
    description: str,
) -> dg.SensorDefinition:
    """A sensor of `evaluation_fn` (resources injected by parameter name, as with ``@dg.sensor``) that may
    request runs of `jobs` (none: it only records events).

    Args:
        evaluation_fn: The tick's function.
        name: The sensor's name.
        jobs: The jobs it may request.
        minimum_interval_seconds: Between ticks.
        default_status: The sensor's status when first loaded.
        description: Shown in the UI.

    Returns:
        The sensor.
    """
    return _JobSensorDefinition(
        name=name,
        evaluation_fn=evaluation_fn,
        minimum_interval_seconds=minimum_interval_seconds,
        jobs=list(jobs) or None,
        default_status=default_status,
        description=description,
    )


def _version_label(event: dg.AssetMaterialization | dg.AssetObservation) -> str:
    version = event.metadata["mvcc/version"]
    return f"{event.asset_key.to_user_string()}@{getattr(version, 'value', version)}"


def tick_message(events: Sequence[dg.AssetMaterialization | dg.AssetObservation], idle: Sequence[str]) -> str:
    """What a version-sensor tick did, in the words its tick list shows: the versions it recorded as
    materializations and as observations (``table@version``), or, when it recorded nothing, which tables
    had no new version and which have no table yet (`idle`).

    Args:
        events: The events the tick records.
        idle: The tables with nothing new (or no table yet), described.

    Returns:
        The message.
    """
    parts = []
    for kind, plural in ((dg.AssetMaterialization, "materializations"), (dg.AssetObservation, "observations")):
        labels = [_version_label(e) for e in events if isinstance(e, kind)]
        if labels:
            shown = ", ".join(labels[:TICK_MESSAGE_VERSIONS])
            more = f" and {len(labels) - TICK_MESSAGE_VERSIONS} more" if len(labels) > TICK_MESSAGE_VERSIONS else ""
            parts.append(f"{len(labels)} {plural if len(labels) > 1 else plural[:-1]} ({shown}{more})")
    if parts:
        return "recorded " + " and ".join(parts)
    return "; ".join(idle) if idle else "no tables to watch"


def _start_after(instance: dg.DagsterInstance, key: dg.AssetKey) -> int:
    """Where a table new to the cursor starts: after the version its latest materialization recorded (what
    Dagster already knows), else from the first version."""
    event = instance.get_latest_materialization_event(key)
    if event is None or event.asset_materialization is None:
        return 0
    value = event.asset_materialization.metadata.get("mvcc/version")
    return int(value.value) if value is not None and isinstance(value.value, int) else 0


def version_events(
    table: mvcc.Table, target: MaintenanceTarget, version: int
) -> tuple[dg.AssetMaterialization | dg.AssetObservation | None, bool]:
    """The event recording `version` of `table` (None when skipped) and whether it changed the data.

    Args:
        table: The table.
        target: Its name and asset key.
        version: The version to record.

    Returns:
        The event (None: a commit Dagster made) and whether the version changed the data.
    """
    handle = table.checkout(version)
    txn = handle.transaction()
    props = dict(txn.transaction_properties) if txn is not None else {}
    operation = txn.operation.name if txn is not None else None
    if RUN_ID_PROPERTY in props:
        return None, False
    common: dict[str, Any] = {
        "mvcc/committed_at": dg.MetadataValue.timestamp(handle.timestamp),
        "mvcc/message": (txn.message if txn else "") or "",
    }
    if is_data_changing(operation):
        meta = table_metadata(handle, table_name=target.label, read_version=txn.read_version if txn else None)
        partition = props.get(PARTITION_KEY_PROPERTY)
        return (
            dg.AssetMaterialization(
                asset_key=target.asset_key,
                partition=partition if partition and "..." not in partition else None,
                metadata={**meta, **common},
                tags={"dagster/data_version": str(meta["mvcc/data_version"])},
            ),
            True,
        )
    meta = {**manifest_metrics(handle), "mvcc/operation": operation or "", "mvcc/data_version": data_version(handle)}
    return dg.AssetObservation(asset_key=target.asset_key, metadata={**meta, **common}), False


def build_version_sensor(
    tables: Sequence[TableName],
    *,
    jobs: Sequence[dg.JobDefinition] | None = None,
    minimum_interval_seconds: int = 30,
    max_versions_per_tick: int = 50,
    asset_keys: Sequence[TableName | None] | None = None,
    name: str = "mvcc_version_sensor",
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
) -> dg.SensorDefinition:
    """A sensor recording every new version of `tables` (asset keys or uris, resolved through ``mvcc``).

    `asset_keys`: the asset of each table when a table is named by uri (default: as `MaintenanceTarget`).
    The cursor is JSON ``{uri: last version seen}``. A table that does not exist (yet) is skipped on that
    tick. See the module docstring for what each version becomes.

    Args:
        tables: Asset keys or table uris.
        jobs: Jobs to request for each new data-changing version (run key ``"{uri}@{version}"``).
        minimum_interval_seconds: Between ticks.
        max_versions_per_tick: The most versions read per table per tick.
        asset_keys: The asset of each table named by uri (default: its last path segment).
        name: The sensor's name.
        default_status: Stopped by default, as Dagster's sensors are.

    Returns:
        The sensor.
    """
    if max_versions_per_tick < 1:
        raise ValueError(f"{name}: max_versions_per_tick must be positive, got {max_versions_per_tick}")
    keys = list(asset_keys) if asset_keys is not None else [None] * len(tables)
    if len(keys) != len(tables):
        raise ValueError(f"{name}: asset_keys must name one asset per table ({len(tables)}), got {len(keys)}")
    targets = [MaintenanceTarget(t, k) for t, k in zip(tables, keys, strict=True)]
    job_list = list(jobs or [])

    tables_seen: dict[tuple[str, str], mvcc.Table] = {}  # (uri, storage settings) -> the handle of a tick

    def latest_of(resource: MvccResource, target: MaintenanceTarget, uri: str, last: int | None) -> mvcc.Table | int:
        """The table at its latest version, or only that version's number when it is no newer than `last`
        (the cursor's): then the handle a tick kept answers it from the latest-version hint, with no manifest
        read (an idle tick reads that much per table and nothing else)."""
        key = uri, repr((resource.storage_options, resource.external_store))
        kept = tables_seen.get(key)
        if kept is not None and last is not None:
            try:
                latest = kept.latest_version
            except TableNotFoundError:
                tables_seen.pop(key, None)
                raise
            if latest <= last:
                return latest
            with contextlib.suppress(VersionNotFoundError):  # gone again since: opened afresh below
                table = kept.checkout(latest)  # versions after the cursor's: none read by this handle yet
                tables_seen[key] = table
                return table
        table = resource.open(target.table)
        tables_seen[key] = table
        return table

    def version_sensor(context: dg.SensorEvaluationContext, mvcc: MvccResource) -> dg.SensorResult:
        resource = mvcc  # the parameter's name is the resource key (RESOURCE_KEY); Dagster injects by name
        cursor: dict[str, int] = json.loads(context.cursor) if context.cursor else {}
        events: list[Any] = []
        requests: list[dg.RunRequest] = []
        missing, unchanged = [], []
        for target in targets:
            uri = resource.uri(target.table)
            last = cursor.get(uri)
            try:
                table = latest_of(resource, target, uri, last)
            except TableNotFoundError:
                missing.append(target.label)
                continue
            if isinstance(table, int):  # no version after the cursor's
                unchanged.append(target.label)
                continue
            if last is None:
                last = _start_after(context.instance, target.asset_key)
            end = min(table.version, last + max_versions_per_tick)
            if end <= last:
                unchanged.append(target.label)
            for version in range(last + 1, end + 1):
                try:
                    event, changed = version_events(table, target, version)
                except VersionNotFoundError:
                    continue  # removed by retention before this tick saw it
                except CorruptManifestError as exc:  # reported, not a reason to stop watching the table
                    context.log.warning("%s: version %d cannot be read: %s", target.label, version, exc)
                    continue
                if event is None:
                    continue
                events.append(event)
                if changed:
                    requests.extend(
                        dg.RunRequest(
                            run_key=f"{uri}@{version}",
                            job_name=job.name,
                            tags={TABLE_TAG: target.label, VERSION_TAG: str(version)},
                        )
                        for job in job_list
                    )
            table.trim_version_cache(1)  # the kept handle holds the latest version's manifest, not the history
            cursor[uri] = max(last, end)
        new_cursor = json.dumps(cursor, sort_keys=True)
        idle = [f"no new version of {', '.join(unchanged)}"] if unchanged else []
        idle += [f"no table yet for {', '.join(missing)}"] if missing else []
        message = tick_message(events, idle)
        if requests:  # the tick then lists its runs (Dagster refuses a skip reason beside run requests)
            # so what it recorded goes to the tick's log; in the daemon that log builds the tick's
            # DagsterInstance from its reference (≈ 45 ms) and stores the lines: only ticks with runs pay it
            context.log.info(message)
            return dg.SensorResult(asset_events=events, run_requests=requests, cursor=new_cursor)
        # Without runs Dagster shows a tick as skipped; its reason is the one place the tick list says what the
        # tick recorded (otherwise "0 runs requested" / "returned an empty result").
        return dg.SensorResult(asset_events=events, skip_reason=dg.SkipReason(message), cursor=new_cursor)

    return job_sensor(
        version_sensor,
        name=name,
        jobs=job_list,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description=f"New versions of {', '.join(t.label for t in targets)} as materializations / observations.",
    )
