"""mvcc: a table format with multi-version concurrency control (Lance transaction semantics over Parquet).

The package root holds what most programs need: the functions that open and write tables, `Table`,
`Transaction`, `Catalog`, the errors a caller usually decides on, and the public modules `catalog`,
`compaction`, `errors` (every error), `names`, `operations` (pylance's `LanceOperation`s) and `stores`
(object stores, external manifest stores). `mvcc_core.table`, `mvcc_core.verify`, `mvcc_core.spark` and the
small `durations`, `times` and `progress` modules are public too.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

import mvcc_core.failpoints  # noqa: F401 - an unknown point in MVCC_FAILPOINTS is refused at import
from mvcc_core import errors
from mvcc_core._version import __version__
from mvcc_core.errors import (
    CommitConflictError,
    IncompatibleConflictError,
    MvccError,
    RetryableConflictError,
    SchemaError,
    TableExistsError,
    TableNotFoundError,
    VersionNotFoundError,
)

if TYPE_CHECKING:
    from mvcc_core import catalog, compaction, names, operations, stores
    from mvcc_core.catalog import Catalog
    from mvcc_core.ops.write import write_fragments
    from mvcc_core.table import (
        Table,
        VersionInfo,
        create_table_from_fragments,
        open_table,
        write_table,
    )
    from mvcc_core.txn.state import TableState
    from mvcc_core.txn.transaction import Transaction

#: The root's names that are imported when first used (pyarrow.dataset, pandas, sqlglot and the table code
#: cost most of a second to import; `mvcc --version` needs none of them), and the module each comes from.
_LAZY: dict[str, str] = {
    "catalog": "mvcc_core",
    "compaction": "mvcc_core",
    "names": "mvcc_core",
    "operations": "mvcc_core",
    "stores": "mvcc_core",
    "Catalog": "mvcc_core.catalog",
    "write_fragments": "mvcc_core.ops.write",
    "Table": "mvcc_core.table",
    "VersionInfo": "mvcc_core.table",
    "create_table_from_fragments": "mvcc_core.table",
    "open_table": "mvcc_core.table",
    "write_table": "mvcc_core.table",
    "TableState": "mvcc_core.txn.state",
    "Transaction": "mvcc_core.txn.transaction",
}

__all__ = [
    "Catalog",
    "CommitConflictError",
    "IncompatibleConflictError",
    "MvccError",
    "RetryableConflictError",
    "SchemaError",
    "Table",
    "TableExistsError",
    "TableNotFoundError",
    "TableState",
    "Transaction",
    "VersionInfo",
    "VersionNotFoundError",
    "__version__",
    "catalog",
    "compaction",
    "create_table_from_fragments",
    "errors",
    "names",
    "open_table",
    "operations",
    "stores",
    "write_fragments",
    "write_table",
]

#: Names the package root exported before it was narrowed, and the module each lives in now. They resolve
#: (with a DeprecationWarning naming that module) for one more release.
MOVED: dict[str, str] = {
    "Append": "mvcc_core.operations",
    "BasePathError": "mvcc_core.errors",
    "BranchError": "mvcc_core.errors",
    "BranchExistsError": "mvcc_core.errors",
    "BranchInfo": "mvcc_core.table",
    "BranchNotFoundError": "mvcc_core.errors",
    "BranchNotReplayableError": "mvcc_core.errors",
    "Branches": "mvcc_core.table",
    "CatalogConflictError": "mvcc_core.errors",
    "CleanupStats": "mvcc_core.table",
    "Clone": "mvcc_core.operations",
    "CommitNotSupportedError": "mvcc_core.errors",
    "CompactionError": "mvcc_core.errors",
    "CompactionMetrics": "mvcc_core.compaction",
    "CompactionOptions": "mvcc_core.compaction",
    "CorruptManifestError": "mvcc_core.errors",
    "CorruptTagError": "mvcc_core.errors",
    "CreateIndex": "mvcc_core.operations",
    "DataFileMismatchError": "mvcc_core.errors",
    "DataReplacement": "mvcc_core.operations",
    "DatasetBasePath": "mvcc_core.table",
    "Delete": "mvcc_core.operations",
    "DeleteResult": "mvcc_core.table",
    "DynamoDBManifestStore": "mvcc_core.stores",
    "ExternalManifestStore": "mvcc_core.stores",
    "ExternalStoreError": "mvcc_core.errors",
    "ExternalStoreMismatchError": "mvcc_core.errors",
    "ExternalStoreSyncError": "mvcc_core.errors",
    "ExternalStoreUnavailableError": "mvcc_core.errors",
    "FailpointError": "mvcc_core.errors",
    "ForeignBase": "mvcc_core.verify",
    "IndexExistsError": "mvcc_core.errors",
    "IndexNotFoundError": "mvcc_core.errors",
    "InvalidNameError": "mvcc_core.errors",
    "InvalidOperationError": "mvcc_core.errors",
    "ManifestInvariantError": "mvcc_core.errors",
    "Merge": "mvcc_core.operations",
    "ObjectNotFoundError": "mvcc_core.errors",
    "Overwrite": "mvcc_core.operations",
    "PredicateError": "mvcc_core.errors",
    "Progress": "mvcc_core.progress",
    "Project": "mvcc_core.operations",
    "ReserveFragments": "mvcc_core.operations",
    "Restore": "mvcc_core.operations",
    "Rewrite": "mvcc_core.operations",
    "SQLiteManifestStore": "mvcc_core.stores",
    "StorageError": "mvcc_core.errors",
    "TagError": "mvcc_core.errors",
    "UnsafePathError": "mvcc_core.errors",
    "UnsupportedFeatureError": "mvcc_core.errors",
    "Update": "mvcc_core.operations",
    "UpdateBases": "mvcc_core.operations",
    "UpdateConfig": "mvcc_core.operations",
    "UpdateMemWalState": "mvcc_core.operations",
    "UpdateResult": "mvcc_core.table",
    "VerifyProblem": "mvcc_core.verify",
    "VerifyReport": "mvcc_core.verify",
    "live_rows": "mvcc_core.format.deletion",
    "manifest_violations": "mvcc_core.table",
    "open_external_store": "mvcc_core.stores",
    "open_tags": "mvcc_core.table",
    "parse_duration": "mvcc_core.durations",
    "parse_time": "mvcc_core.times",
}

_HINTS = {
    "live_rows": "; a fragment's live rows are `Table.get_fragments()[i].count_rows()`",
}


def __getattr__(name: str) -> Any:
    """A root name imported on first use (`_LAZY`); a moved name (`MOVED`), with a DeprecationWarning that
    names its module; `verify`, the module.

    Args:
        name: the attribute looked up on `mvcc_core`

    Returns:
        The object the name stands for.

    Raises:
        AttributeError: `name` is neither a moved name nor a submodule's.
    """
    lazy = _LAZY.get(name)
    if lazy is not None:
        value = (
            importlib.import_module(f"mvcc_core.{name}")
            if lazy == "mvcc_core"
            else getattr(importlib.import_module(lazy), name)
        )
        globals()[name] = value
        return value
    if name == "verify":
        # the module (calling it runs `mvcc_core.verify.verify`, with a DeprecationWarning)
        return importlib.import_module("mvcc_core.verify")
    module = MOVED.get(name)
    if module is None:
        raise AttributeError(f"module 'mvcc_core' has no attribute {name!r}")
    warnings.warn(
        f"mvcc_core.{name} is deprecated: import it from {module} (`from {module} import {name}`)"
        f"{_HINTS.get(name, '')}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return list(__all__)
