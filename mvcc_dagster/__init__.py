"""mvcc tables as Dagster assets: every materialization is a table version (docs/integrations/dagster/index.md).

- `MvccResource` (bind as ``mvcc``): opens tables by asset key or uri.
- `MvccIOManager`: writes asset outputs as one commit each (overwrite / append / merge, partition-scoped
  overwrites), reports the version as the materialization, loads inputs at the version the run depends on.
- `conflict_retry_policy`, `mvcc_conflicts`: the one mapping of commit conflicts to Dagster retries/failures.
- `materialize_result`, `data_version`: for assets that write tables themselves.
- `MvccCatalogResource` (bind as ``mvcc_catalog``): a catalog of tables named by asset key; a
  `multi_asset` publishes all its tables in one catalog version with ``transaction(context)``; their health
  checks and maintenance (catalog compaction and retention) in `catalog_maintenance.py`.
- Backfills via restore (`RESTORE_TAG` on a backfill): the table restored to before the backfill's partitions
  were first written, once per backfill, refused when data outside the backfill would be lost (`backfill.py`).
- Write-audit-publish (``mvcc/write_audit_publish: true``): the materialization written to a branch named after
  the run, audited by the asset's `branch_check`s, published to main when they pass (`write_audit_publish.py`);
  catalog assets (`MvccCatalogResource.transaction`) stage the step on a catalog branch the same way; for a
  table written outside Dagster, `build_publish_branch_job` audits and publishes the writer's branch.
- `MvccTableComponent`: one table's asset, checks, maintenance jobs, schedule and sensors from a ``defs.yaml``
  (registered for ``dg`` through the ``dagster_dg_cli.registry_modules`` entry point).
- Maintenance jobs, one module per kind in `maintenance/` (compaction, retention, indices, restore, tags, the
  schedule); the modules' map: docs/integrations/dagster/index.md, "The plugin's layout".

Only public `mvcc_core` names are used (import-linter checks it).
"""

from __future__ import annotations

from .backfill import (
    RESTORE_ALLOW_DATA_LOSS,
    RESTORE_TAG,
    BackfillRestoreError,
    RestorePlan,
    plan_restore,
    restore_for_backfill,
)
from .catalog import (
    CATALOG_PUBLISHED_BY_RUN,
    CATALOG_READ_VERSION,
    CATALOG_RESOURCE_KEY,
    CATALOG_TABLE,
    CATALOG_URI,
    CATALOG_VERSION,
    CatalogAssetTransaction,
    MvccCatalogResource,
    catalog_table_name,
)
from .catalog_maintenance import build_catalog_health_checks, build_catalog_maintenance_job
from .catalog_write_audit_publish import delete_catalog_wap_branches
from .component import MvccTableComponent
from .error_mapping import conflict_metadata, conflict_retry_policy, mvcc_conflicts, retry_wait, to_dagster
from .health import CHECKS, HealthThresholds, Level, build_health_sensor, build_table_health_checks, evaluate_health
from .io_manager import MERGE_ON, WRITE_MODE, MvccIOManager
from .lineage import pinned_partition_versions, pinned_version
from .maintenance import (
    MAINTENANCE_IO_KEY,
    RESTORED_FROM,
    TABLE_TAG,
    build_compaction_job,
    build_index_job,
    build_index_optimize_job,
    build_maintenance_schedule,
    build_restore_job,
    build_retention_job,
    build_tag_job,
)
from .partitions import PARTITION_EXPR, PartitionPredicateError, partition_predicate
from .publish_job import RowAudit, build_publish_branch_job
from .resources import RESOURCE_KEY, MvccResource, check_table_key, resolve_uri, table_key_problem, to_asset_key
from .sensors import build_version_sensor
from .versions import (
    DATA_CHANGING_OPERATIONS,
    MAINTENANCE_OPERATIONS,
    data_version,
    is_data_changing,
    materialize_result,
    table_metadata,
)
from .write_audit_publish import (
    BRANCH,
    BRANCH_VERSION,
    CATALOG_BRANCH_VERSION,
    WAP_BRANCH_PREFIX,
    WRITE_AUDIT_PUBLISH,
    BranchAudit,
    BranchCheck,
    audited_output,
    branch_check,
    check_write_audit_publish,
    delete_wap_branches,
    wap_branch_name,
)

__all__ = [
    "BRANCH",
    "BRANCH_VERSION",
    "CATALOG_BRANCH_VERSION",
    "CATALOG_PUBLISHED_BY_RUN",
    "CATALOG_READ_VERSION",
    "CATALOG_RESOURCE_KEY",
    "CATALOG_TABLE",
    "CATALOG_URI",
    "CATALOG_VERSION",
    "CHECKS",
    "DATA_CHANGING_OPERATIONS",
    "MAINTENANCE_IO_KEY",
    "MAINTENANCE_OPERATIONS",
    "MERGE_ON",
    "PARTITION_EXPR",
    "RESOURCE_KEY",
    "RESTORED_FROM",
    "RESTORE_ALLOW_DATA_LOSS",
    "RESTORE_TAG",
    "TABLE_TAG",
    "WAP_BRANCH_PREFIX",
    "WRITE_AUDIT_PUBLISH",
    "WRITE_MODE",
    "BackfillRestoreError",
    "BranchAudit",
    "BranchCheck",
    "CatalogAssetTransaction",
    "HealthThresholds",
    "Level",
    "MvccCatalogResource",
    "MvccIOManager",
    "MvccResource",
    "MvccTableComponent",
    "PartitionPredicateError",
    "RestorePlan",
    "RowAudit",
    "audited_output",
    "branch_check",
    "build_catalog_health_checks",
    "build_catalog_maintenance_job",
    "build_compaction_job",
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
    "catalog_table_name",
    "check_table_key",
    "check_write_audit_publish",
    "conflict_metadata",
    "conflict_retry_policy",
    "data_version",
    "delete_catalog_wap_branches",
    "delete_wap_branches",
    "evaluate_health",
    "is_data_changing",
    "materialize_result",
    "mvcc_conflicts",
    "partition_predicate",
    "pinned_partition_versions",
    "pinned_version",
    "plan_restore",
    "resolve_uri",
    "restore_for_backfill",
    "retry_wait",
    "table_key_problem",
    "table_metadata",
    "to_asset_key",
    "to_dagster",
    "wap_branch_name",
]
