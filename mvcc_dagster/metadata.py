"""The keys a user writes into Dagster definitions and reads back from materializations, in one place.

Definition metadata (``@dg.asset(metadata={...})``, ``dg.AssetIn(metadata={...})``), run tags, the resource
keys the plugin binds, and the keys of the materialization metadata it reports. What each means:
docs/integrations/dagster/io_manager.md and index.md ("The plugin's layout").
"""

from __future__ import annotations

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
    "COLUMNS",
    "MAINTENANCE_IO_KEY",
    "MERGE_ON",
    "PARTITION_EXPR",
    "PARTITION_VERSIONS",
    "RESOURCE_KEY",
    "RESTORED_FROM",
    "RESTORE_ALLOW_DATA_LOSS",
    "RESTORE_TAG",
    "TABLE_TAG",
    "WAP_BRANCH_PREFIX",
    "WRITE_AUDIT_PUBLISH",
    "WRITE_MODE",
]

# ---- definition metadata of an asset (its output)
WRITE_MODE = "mvcc/write_mode"
"""How `MvccIOManager` writes the output: ``overwrite`` (the default), ``append`` or ``merge``."""
MERGE_ON = "mvcc/merge_on"
"""The key column (a name) or columns (a list) of a ``merge`` write."""
PARTITION_EXPR = "partition_expr"
"""The column (or SQL expression) a partitioned asset's partitions are values of."""
WRITE_AUDIT_PUBLISH = "mvcc/write_audit_publish"
"""``True`` turns write-audit-publish on for the asset."""

# ---- definition metadata of an input (``dg.AssetIn`` / ``dg.In``)
COLUMNS = "columns"
"""The columns `MvccIOManager.load_input` reads (a list of names): the projection is pushed into the scan."""

# ---- run tags
RESTORE_TAG = "mvcc/backfill_restore"
"""Run tag (set it on the backfill: Dagster copies a backfill's tags to each of its runs)."""
RESTORE_ALLOW_DATA_LOSS = "allow-data-loss"
"""`RESTORE_TAG` value: restore even when later writes of other partitions are undone."""
TABLE_TAG = "mvcc/table"
"""The run tag every maintenance job carries: the run queue's per-table limit."""

# ---- resource keys
RESOURCE_KEY = "mvcc"
"""The key `MvccResource` is bound as."""
CATALOG_RESOURCE_KEY = "mvcc_catalog"
"""The key `MvccCatalogResource` is bound as."""
MAINTENANCE_IO_KEY = "mvcc_maintenance_io"
"""The pickling IO manager of the maintenance ops' own outputs (tasks, results), bound by each job: never the
deployment's ``io_manager`` (usually `MvccIOManager`, which writes tables)."""

# ---- branch names
WAP_BRANCH_PREFIX = "dagster-wap-"
"""Every branch made by write-audit-publish starts with this (what `delete_wap_branches` removes)."""

# ---- materialization and input metadata the plugin reports
BRANCH = "mvcc/branch"
"""The write-audit-publish branch a materialization was written to."""
BRANCH_VERSION = "mvcc/branch_version"
"""That branch's version the branch checks read."""
CATALOG_BRANCH_VERSION = "mvcc/catalog_branch_version"
"""A catalog asset's write-audit-publish: the catalog branch's version the checks read."""
CATALOG_VERSION = "mvcc/catalog_version"
"""The catalog version a catalog asset's step published."""
CATALOG_READ_VERSION = "mvcc/catalog_read_version"
"""The catalog version that step's transaction read."""
CATALOG_TABLE = "mvcc/catalog_table"
"""The catalog table's name (``schema.table``)."""
CATALOG_URI = "mvcc/catalog_uri"
"""The catalog's uri."""
CATALOG_PUBLISHED_BY_RUN = "mvcc/catalog_published_by_run"
"""Set only when this attempt did not publish because an earlier attempt of the same step had."""
RESTORED_FROM = "mvcc/restored_from"
"""The version a restore job (or a backfill's restore) made the latest again."""
PARTITION_VERSIONS = "mvcc/partition_versions"
"""An input read partition by partition: the version each partition was read at."""
