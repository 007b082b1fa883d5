"""mvcc tables as Dagster assets: every materialization is a table version (docs/integrations/dagster/index.md).

The package root holds what a deployment needs; the rest is in one subpackage per concept:

- `MvccResource` (bound as ``mvcc``) opens tables by asset key or uri; `MvccIOManager` writes asset outputs as
  one commit each and loads inputs at the version the run depends on (`io_manager/`: the manager, the
  `MvccTypeHandler`s that convert pyarrow, pandas, polars and Spark data, backfills via restore).
- `MvccCatalogResource` (bound as ``mvcc_catalog``): a `multi_asset` publishes its tables in one catalog
  version (`catalog/`).
- Write-audit-publish (`write_audit_publish/`): `branch_check`, `audited_output`, `build_publish_branch_job`.
- Health checks and sensors (`health/`); maintenance jobs, their schedule and the
  fleet's schedule on one nightly budget (`maintenance/`).
- `MvccTableComponent` (`components/`): one table's asset, checks, jobs, schedule and sensors from a
  ``defs.yaml`` (registered for ``dg`` through the ``dagster_dg_cli.registry_modules`` entry point).
- `conflict_retry_policy`, `mvcc_conflicts`: commit conflicts mapped to Dagster retries and failures;
  `materialize_result`, `data_version`: for assets that write tables themselves.
- `metadata`: every metadata key, run tag and resource key (``mvcc/write_mode``, ``columns``, ...).

The modules' map: docs/integrations/dagster/index.md, "The plugin's layout". Only public `mvcc_core` names are
used (import-linter checks it).
"""

from __future__ import annotations

from . import _deprecated, metadata
from .catalog import MvccCatalogResource
from .components import MvccTableComponent
from .error_mapping import conflict_retry_policy, mvcc_conflicts
from .health import (
    HealthThresholds,
    build_health_sensor,
    build_table_health_checks,
    build_version_sensor,
    health_automation_condition,
)
from .io_manager import MvccIOManager, MvccTypeHandler
from .maintenance import (
    build_compaction_job,
    build_fleet_maintenance,
    build_index_job,
    build_index_optimize_job,
    build_maintenance_schedule,
    build_restore_job,
    build_retention_job,
    build_tag_job,
)
from .maintenance.catalog import build_catalog_health_checks, build_catalog_maintenance_job
from .resources import MvccResource
from .versions import data_version, materialize_result
from .write_audit_publish import (
    BranchAudit,
    BranchCheck,
    RowAudit,
    audited_output,
    branch_check,
    build_publish_branch_job,
)

__all__ = [
    "BranchAudit",
    "BranchCheck",
    "HealthThresholds",
    "MvccCatalogResource",
    "MvccIOManager",
    "MvccResource",
    "MvccTableComponent",
    "MvccTypeHandler",
    "RowAudit",
    "audited_output",
    "branch_check",
    "build_catalog_health_checks",
    "build_catalog_maintenance_job",
    "build_compaction_job",
    "build_fleet_maintenance",
    "build_health_sensor",
    "build_index_job",
    "build_index_optimize_job",
    "build_maintenance_schedule",
    "build_publish_branch_job",
    "build_restore_job",
    "build_retention_job",
    "build_table_health_checks",
    "build_tag_job",
    "build_version_sensor",
    "conflict_retry_policy",
    "data_version",
    "health_automation_condition",
    "materialize_result",
    "metadata",
    "mvcc_conflicts",
]

#: Names the package root exported before it was narrowed, and the module each lives in now. They resolve
#: (with a DeprecationWarning naming that module) for one more release.
MOVED: dict[str, str] = {
    "BRANCH": "mvcc_dagster.metadata",
    "BRANCH_VERSION": "mvcc_dagster.metadata",
    "CATALOG_BRANCH_VERSION": "mvcc_dagster.metadata",
    "CATALOG_PUBLISHED_BY_RUN": "mvcc_dagster.metadata",
    "CATALOG_READ_VERSION": "mvcc_dagster.metadata",
    "CATALOG_RESOURCE_KEY": "mvcc_dagster.metadata",
    "CATALOG_TABLE": "mvcc_dagster.metadata",
    "CATALOG_URI": "mvcc_dagster.metadata",
    "CATALOG_VERSION": "mvcc_dagster.metadata",
    "CHECKS": "mvcc_dagster.health",
    "DATA_CHANGING_OPERATIONS": "mvcc_dagster.versions",
    "MAINTENANCE_IO_KEY": "mvcc_dagster.metadata",
    "MAINTENANCE_OPERATIONS": "mvcc_dagster.versions",
    "MERGE_ON": "mvcc_dagster.metadata",
    "PARTITION_EXPR": "mvcc_dagster.metadata",
    "RESOURCE_KEY": "mvcc_dagster.metadata",
    "RESTORED_FROM": "mvcc_dagster.metadata",
    "RESTORE_ALLOW_DATA_LOSS": "mvcc_dagster.metadata",
    "RESTORE_TAG": "mvcc_dagster.metadata",
    "TABLE_TAG": "mvcc_dagster.metadata",
    "WAP_BRANCH_PREFIX": "mvcc_dagster.metadata",
    "WRITE_AUDIT_PUBLISH": "mvcc_dagster.metadata",
    "WRITE_MODE": "mvcc_dagster.metadata",
    "BackfillRestoreError": "mvcc_dagster.io_manager.backfill",
    "CatalogAssetTransaction": "mvcc_dagster.catalog",
    "Level": "mvcc_dagster.health",
    "PartitionPredicateError": "mvcc_dagster.partitions",
    "RestorePlan": "mvcc_dagster.io_manager.backfill",
    "catalog_table_name": "mvcc_dagster.catalog",
    "check_table_key": "mvcc_dagster.resources",
    "check_write_audit_publish": "mvcc_dagster.write_audit_publish",
    "conflict_metadata": "mvcc_dagster.error_mapping",
    "delete_catalog_wap_branches": "mvcc_dagster.write_audit_publish",
    "delete_wap_branches": "mvcc_dagster.write_audit_publish",
    "evaluate_health": "mvcc_dagster.health",
    "is_data_changing": "mvcc_dagster.versions",
    "partition_predicate": "mvcc_dagster.partitions",
    "pinned_partition_versions": "mvcc_dagster.lineage",
    "pinned_version": "mvcc_dagster.lineage",
    "plan_restore": "mvcc_dagster.io_manager.backfill",
    "resolve_uri": "mvcc_dagster.resources",
    "restore_for_backfill": "mvcc_dagster.io_manager.backfill",
    "retry_wait": "mvcc_dagster.error_mapping",
    "table_key_problem": "mvcc_dagster.resources",
    "table_metadata": "mvcc_dagster.versions",
    "to_asset_key": "mvcc_dagster.resources",
    "to_dagster": "mvcc_dagster.error_mapping",
    "wap_branch_name": "mvcc_dagster.write_audit_publish",
}

_deprecated.register(__name__)
__getattr__ = _deprecated.moved_names_getattr(__name__, MOVED)
