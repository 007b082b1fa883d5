"""The facade: `Table`, a handle on one version with pylance's methods, and the entry points that open and write
tables by URI. `handle` holds the class; `reading`, `versions`, `schema_changes`, `indices` and `configuration`
hold its methods by concept (mixins); `entry_points` the module-level functions."""

from mvcc_core.format.bases import DatasetBasePath
from mvcc_core.maintenance.cleanup import CleanupStats
from mvcc_core.table.arguments import Uri
from mvcc_core.table.branches import Branches
from mvcc_core.table.entry_points import (
    create_table_from_fragments,
    manifest_violations,
    open_table,
    open_tags,
    write_table,
)
from mvcc_core.table.fragments import DataFile, Fragment
from mvcc_core.table.handle import Table
from mvcc_core.table.results import DeleteResult, UpdateResult
from mvcc_core.txn.branches import BranchInfo
from mvcc_core.txn.history import VersionInfo, VersionRef

__all__ = [
    "BranchInfo",
    "Branches",
    "CleanupStats",
    "DataFile",
    "DatasetBasePath",
    "DeleteResult",
    "Fragment",
    "Table",
    "UpdateResult",
    "Uri",
    "VersionInfo",
    "VersionRef",
    "create_table_from_fragments",
    "manifest_violations",
    "open_table",
    "open_tags",
    "write_table",
]
