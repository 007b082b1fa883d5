"""The operations a transaction commits, as pylance's `lance.LanceOperation`: `Append`, `Overwrite`, `Delete`, ...

Build one and commit it with `Table.commit` (or `Transaction`); `Operation` is their common base. The classes
are defined in `mvcc_core.format.operations`, next to their protobuf messages.
"""

from __future__ import annotations

from mvcc_core.format.operations import (
    ALL_OPERATIONS,
    Append,
    Clone,
    CreateIndex,
    DataReplacement,
    Delete,
    Merge,
    Operation,
    Overwrite,
    Project,
    ReserveFragments,
    Restore,
    Rewrite,
    Update,
    UpdateBases,
    UpdateConfig,
    UpdateMemWalState,
)

__all__ = [
    "ALL_OPERATIONS",
    "Append",
    "Clone",
    "CreateIndex",
    "DataReplacement",
    "Delete",
    "Merge",
    "Operation",
    "Overwrite",
    "Project",
    "ReserveFragments",
    "Restore",
    "Rewrite",
    "Update",
    "UpdateBases",
    "UpdateConfig",
    "UpdateMemWalState",
]
