"""The restore job: an older version made the latest again, reported as a materialization."""

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import dagster as dg

import mvcc_core as mvcc

from ..error_mapping import mvcc_conflicts, no_retry_failure
from ..metadata import MAINTENANCE_IO_KEY, RESOURCE_KEY, RESTORED_FROM
from ..resources import TableName
from ..versions import table_metadata
from .due import aware_instant
from .target import MaintenanceTarget, one_step_job


def _restore_ref(label: str, config: Mapping[str, Any]) -> int | str | datetime:
    given: dict[str, Any] = {k: config.get(k) for k in ("version", "tag", "timestamp") if config.get(k) is not None}
    if len(given) != 1:
        raise no_retry_failure(
            f"restore of {label}: run config must give exactly one of version, tag or timestamp "
            f"(ISO 8601 with an offset), got {sorted(given) or 'none'}"
        )
    ((key, value),) = given.items()
    if key != "timestamp":
        return value
    try:
        return aware_instant(str(value), f"restore of {label}: timestamp").astimezone(UTC)
    except ValueError as exc:
        raise no_retry_failure(str(exc)) from exc


def _open_for_restore(context: Any, target: MaintenanceTarget, ref: int | str | datetime) -> mvcc.Table:
    """The table at its latest version; past a corrupt (or hostile) latest manifest, at the version or tag
    restored to, so the restore commits past the damage as the core's `Table.restore` does. A timestamp cannot
    be resolved without the latest manifest: that failure stands."""
    try:
        return target.open(context)
    except dg.Failure as failure:
        if isinstance(ref, datetime) or not isinstance(failure.__cause__, mvcc.errors.CorruptManifestError):
            raise
    return target.open(context, ref)


def build_restore_job(
    table: TableName, *, asset_key: TableName | None = None, name: str | None = None
) -> dg.JobDefinition:
    """A job making an older version the latest again (one Restore commit; history is kept).

    Run config: ``ops: {restore: {config: {version: 3}}}`` or ``tag: "good"`` or ``timestamp:
    "2026-11-20T08:00:00+00:00"`` (the version current then), exactly one. The restore changes what readers
    see, so it is reported as a materialization of the table's asset (downstream assets become stale) with
    `mvcc/restored_from` and a new data version.

    Args:
        table: An asset key (string, `AssetKey` or path parts) or a table uri.
        asset_key: The asset the materialization goes to.
        name: The job's name (default ``mvcc_restore__<asset key>``).

    Returns:
        The job (one step, in the run's process).
    """
    target = MaintenanceTarget(table, asset_key)

    @dg.op(
        name=f"restore__{target.suffix}",
        required_resource_keys={RESOURCE_KEY},
        pool=target.pool,
        config_schema={
            "version": dg.Field(dg.Noneable(int), default_value=None),
            "tag": dg.Field(dg.Noneable(str), default_value=None),
            "timestamp": dg.Field(dg.Noneable(str), default_value=None, description="ISO 8601 with an offset"),
        },
        out=dg.Out(io_manager_key=MAINTENANCE_IO_KEY),
    )
    def restore(context: dg.OpExecutionContext) -> int:
        ref = _restore_ref(target.label, context.op_config)
        t = _open_for_restore(context, target, ref)
        with mvcc_conflicts(context, what=f"restore of {target.label} to {ref!r}"):
            source = t.checkout(ref).version
            read_version = t.version
            t.restore(
                source,
                commit_message=f"dagster: restore of {target.label} to version {source}",
                transaction_properties=target.properties(context, "restore"),
            )
        meta = table_metadata(t, table_name=target.label, read_version=read_version)
        context.log_event(
            dg.AssetMaterialization(
                asset_key=target.asset_key,
                metadata={**meta, RESTORED_FROM: source},
                tags={"dagster/data_version": str(meta["mvcc/data_version"])},
            )
        )
        return t.version

    return one_step_job(
        restore,
        "restore",
        name=name or f"mvcc_restore__{target.suffix}",
        target=target,
        description=f"Restore {target.label} to a version, tag or timestamp (run config of the restore step).",
    )
