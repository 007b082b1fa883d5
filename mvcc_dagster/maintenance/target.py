"""What every maintenance job shares: the table it works on, the job around its ops, the report of a commit.

Why jobs of ops, pools and run tags: docs/integrations/dagster/maintenance.md ("Maintenance jobs").
"""

import re
from collections.abc import Mapping
from typing import Any

import dagster as dg

import mvcc_core as mvcc

from .._dagster_internals import deferred_resources_job
from ..error_mapping import mvcc_conflicts
from ..metadata import MAINTENANCE_IO_KEY, RESOURCE_KEY, TABLE_TAG
from ..properties import ASSET_KEY_PROPERTY, MAINTENANCE_PROPERTY, RUN_ID_PROPERTY
from ..resources import MvccResource, TableName, check_table_key, is_uri, to_asset_key
from ..versions import SIZE_BYTES, data_bytes, data_version, uri_value


class MaintenanceTarget:
    """The table a maintenance job works on: its name (asset key or uri), asset key, pool and job suffix.

    Args:
        table: An asset key (string, `AssetKey` or path parts) or a table uri.
        asset_key: The asset reports go to (default: `table` itself, or a uri's last path segment).

    Raises:
        mvcc_core.errors.InvalidNameError: `table` is an asset key that would name a table outside the root or inside
            another table (`check_table_key`); a ValueError, raised when the job is defined.
    """

    def __init__(self, table: TableName, asset_key: TableName | None = None) -> None:
        if isinstance(table, str) and is_uri(table):
            key = (
                to_asset_key(asset_key)
                if asset_key is not None
                else dg.AssetKey([table.rstrip("/").rsplit("/", 1)[-1]])
            )
        else:
            check_table_key(table)  # at definition load: a key that would leave the root is refused here
            key = to_asset_key(asset_key if asset_key is not None else table)
        self.table = table
        self.asset_key = key
        self.label = key.to_user_string()
        self.suffix = "__".join(re.sub(r"[^A-Za-z0-9_]", "_", p) for p in key.path)
        # A uri names the table itself: its pool must not collide with another table's of the same basename.
        self.pool = f"mvcc/{table}" if isinstance(table, str) and is_uri(table) else f"mvcc/{self.label}"

    def open(self, context: Any, version: int | str | None = None) -> mvcc.Table:
        """The table through the run's ``mvcc`` resource (the latest, or `version`), errors mapped.

        Args:
            context: The op's context (its ``mvcc`` resource).
            version: A version or tag (None: the latest).

        Returns:
            The table handle.
        """
        resource: MvccResource = getattr(context.resources, RESOURCE_KEY)
        with mvcc_conflicts(context, what=f"table {self.label}"):
            return resource.open(self.table, version)

    def properties(self, context: Any, job: str) -> dict[str, str]:
        """Commit properties: Dagster's (so the version sensor skips these commits) and the maintenance kind.

        Args:
            context: The op's context (its run id).
            job: The maintenance kind (``compaction``, ``index:create``, ...).

        Returns:
            The transaction properties.
        """
        return {RUN_ID_PROPERTY: context.run_id, ASSET_KEY_PROPERTY: self.label, MAINTENANCE_PROPERTY: job}


def maintenance_job(
    graph: dg.GraphDefinition,
    *,
    name: str,
    table_tag: str,
    description: str,
    executor_def: dg.ExecutorDefinition | None = None,
    tags: Mapping[str, str] | None = None,
) -> dg.JobDefinition:
    """A job of `graph` binding only the pickling IO manager of the ops' outputs.

    The resource ``mvcc`` comes from the code location (or `execute_in_process(resources=)`).

    Args:
        graph: The job's ops.
        name: The job's name.
        table_tag: The value of its run tag `TABLE_TAG` (the run queue's per-table limit).
        description: Shown in the UI.
        executor_def: The job's executor (None: the code location's).
        tags: More run tags.

    Returns:
        The job.
    """
    return deferred_resources_job(
        graph_def=graph,
        name=name,
        description=description,
        resource_defs={MAINTENANCE_IO_KEY: dg.FilesystemIOManager().get_resource_definition()},
        executor_def=executor_def,
        tags={TABLE_TAG: table_tag, **(tags or {})},
    )


def one_step_job(
    op: dg.OpDefinition,
    step: str,
    *,
    name: str,
    target: MaintenanceTarget,
    description: str,
    tags: Mapping[str, str] | None = None,
) -> dg.JobDefinition:
    """A job of one step, `op` run as `step`, in the run's own process (retention, index, restore, tag jobs).

    One step gains nothing from a step process (the multiprocess executor would start a second interpreter
    that imports Dagster and the plugin again, seconds of CPU for milliseconds of work), so these jobs pin
    Dagster's in-process executor whatever the code location's default.

    Args:
        op: The op.
        step: The step's (node's) name.
        name: The job's name.
        target: The table (its run tag).
        description: Shown in the UI.
        tags: More run tags.

    Returns:
        The job.
    """

    @dg.graph(name=name)
    def graph() -> None:
        op.alias(step)()

    return maintenance_job(
        graph,
        name=name,
        table_tag=target.label,
        description=description,
        executor_def=dg.in_process_executor,
        tags=tags,
    )


def manifest_metrics(table: mvcc.Table) -> dict[str, Any]:
    """Counts of the handle's version read from its manifest (no data file is read).

    Args:
        table: The table at the version to count.

    Returns:
        ``mvcc/version``, ``mvcc/fragments``, ``dagster/size_bytes`` and ``dagster/uri``.
    """
    fragments = table.get_fragments()
    return {
        "mvcc/version": table.version,
        "mvcc/fragments": len(fragments),
        SIZE_BYTES: data_bytes(fragments),
        "dagster/uri": uri_value(table.uri),
    }


def observe(context: Any, target: MaintenanceTarget, table: mvcc.Table, metrics: Mapping[str, Any]) -> None:
    """Report a maintenance commit (version `table.version`) on the table's asset as an observation.

    Args:
        context: The op's context.
        target: The table.
        table: The table at the commit's version.
        metrics: What the commit did (merged over the manifest's counts).
    """
    txn = table.transaction()
    meta = {
        **manifest_metrics(table),
        "mvcc/operation": txn.operation.name if txn is not None else "",
        "mvcc/data_version": data_version(table),
        **metrics,
    }
    context.log_event(dg.AssetObservation(asset_key=target.asset_key, metadata=meta))
