"""Health checks and maintenance of catalog tables (through the `mvcc_catalog` resource).

Why the per-table factories do not apply: docs/integrations/dagster/sensors_and_health.md ("Health checks", "Catalog
tables").
"""

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import dagster as dg

import mvcc_core as mvcc

from ..catalog.resource import MvccCatalogResource
from ..error_mapping import mvcc_conflicts
from ..health.checks import HealthThresholds, health_checks
from ..metadata import CATALOG_RESOURCE_KEY, CATALOG_VERSION
from ..resources import TableName
from ..write_audit_publish.catalog import delete_catalog_wap_branches
from .target import MaintenanceTarget, maintenance_job, observe

#: The pool of the catalog maintenance steps and the value of their run tag ``mvcc/table``.
CATALOG_POOL = "mvcc/catalog"
CATALOG_TABLE_TAG = "catalog"


def _open_catalog(resource: MvccCatalogResource) -> mvcc.Catalog:
    """The existing catalog (a check or a maintenance run never creates one)."""
    return mvcc.Catalog.open(resource.root_uri, storage_options=resource.options())


def build_catalog_health_checks(
    keys: Sequence[TableName], *, thresholds: HealthThresholds | None = None
) -> list[dg.AssetChecksDefinition]:
    """One multi-asset check per catalog table (asset key), the seven health checks of `health.CHECKS` on the
    table the newest catalog snapshot publishes (through the resource ``mvcc_catalog``).

    Args:
        keys: The tables' asset keys.
        thresholds: The WARN / ERROR levels (default `HealthThresholds()`).

    Returns:
        One checks definition per table.
    """
    thresholds = thresholds or HealthThresholds()
    out = []
    for key in keys:
        target = MaintenanceTarget(key)

        def open_table(resource: MvccCatalogResource, key: TableName = key) -> mvcc.Table:
            return _open_catalog(resource).snapshot().table(resource.table_name(key))

        out.append(health_checks(target, thresholds, resource_key=CATALOG_RESOURCE_KEY, open_table=open_table))
    return out


def build_catalog_maintenance_job(
    keys: Sequence[TableName],
    *,
    older_than: timedelta = timedelta(days=14),
    retain_versions: int | None = None,
    name: str = "mvcc_catalog_maintenance",
) -> dg.JobDefinition:
    """A job compacting each catalog table of `keys` (`Catalog.compact_files`, one catalog version per table
    that had something to compact), then running the catalog's retention: the write-audit-publish branches
    (``dagster-wap-*``) whose newest version is older than `older_than` are deleted (with their forks), then
    `Catalog.cleanup(older_than, retain_versions)`. Each compaction is an observation on its table's asset; the
    retention's counts (and the deleted branches) are the step's output metadata.

    Args:
        keys: The tables' asset keys.
        older_than: Catalog versions older than this are removed.
        retain_versions: Keep at least the newest this many catalog versions.
        name: The job's name.

    Returns:
        The job (in the run's process).
    """
    if not isinstance(older_than, timedelta) or older_than < timedelta(0):
        raise ValueError(f"{name}: older_than must be a non-negative timedelta, got {older_than!r}")
    if retain_versions is not None and (isinstance(retain_versions, bool) or retain_versions < 1):
        raise ValueError(f"{name}: retain_versions must be a positive int, got {retain_versions!r}")
    targets = [MaintenanceTarget(k) for k in keys]

    @dg.op(name=f"compact_tables__{name}", required_resource_keys={CATALOG_RESOURCE_KEY}, pool=CATALOG_POOL)
    def compact_tables(context: dg.OpExecutionContext) -> None:
        resource: MvccCatalogResource = getattr(context.resources, CATALOG_RESOURCE_KEY)
        with mvcc_conflicts(context, what=f"catalog compaction: the catalog at {resource.root_uri}"):
            catalog = _open_catalog(resource)
        for target in targets:
            table_name = resource.table_name(target.asset_key)
            with mvcc_conflicts(context, what=f"compaction of catalog table {table_name}"):
                version = catalog.compact_files(table_name)
            if version is None:
                context.log.info("%s: nothing to compact", table_name)
                continue
            table = catalog.snapshot(version).table(table_name)
            observe(context, target, table, {CATALOG_VERSION: version})

    @dg.op(
        name=f"cleanup_catalog__{name}",
        required_resource_keys={CATALOG_RESOURCE_KEY},
        pool=CATALOG_POOL,
        ins={"after": dg.In(dg.Nothing)},
    )
    def cleanup_catalog(context: dg.OpExecutionContext) -> dg.Output:
        resource: MvccCatalogResource = getattr(context.resources, CATALOG_RESOURCE_KEY)
        with mvcc_conflicts(context, what=f"retention of the catalog at {resource.root_uri}"):
            catalog = _open_catalog(resource)
            wap_branches = delete_catalog_wap_branches(catalog, older_than)
            stats = catalog.cleanup(older_than, retain_versions)
        tables: dict[str, Any] = stats.tables
        return dg.Output(
            None,
            metadata={
                "catalog_versions_removed": dg.MetadataValue.json(list(stats.catalog_versions_removed)),
                "table_versions_removed": sum(s.old_versions for s in tables.values()),
                "bytes_removed": sum(s.bytes_removed for s in tables.values()),
                "directories_removed": dg.MetadataValue.json(list(stats.directories_removed)),
                "wap_branches_deleted": dg.MetadataValue.json(wap_branches),
            },
        )

    @dg.graph(name=name)
    def graph() -> None:
        cleanup_catalog.alias("cleanup_catalog")(after=compact_tables.alias("compact_tables")())

    labels = ", ".join(t.label for t in targets)
    return maintenance_job(
        graph,
        name=name,
        table_tag=CATALOG_TABLE_TAG,
        description=f"Maintenance of the catalog tables {labels}: compaction, then the catalog's retention.",
        executor_def=dg.in_process_executor,  # two small steps: a step process each would cost more than they do
    )
