"""The catalog's conflict rule codes, and its errors (defined with every other error in `mvcc_core.errors`).

A catalog conflict is a `CommitConflictError`, and each concrete one is also the core's
`RetryableConflictError` or `IncompatibleConflictError`, so code that already decides on the core's two
types (the Dagster plugin's one conflict mapping) handles catalog transactions without a new branch.
"""

from __future__ import annotations

from mvcc_core.errors import (
    CatalogConflictError,
    CatalogEntryError,
    CatalogError,
    CatalogFormatError,
    IncompatibleCatalogConflictError,
    RetryableCatalogConflictError,
)

#: Rule codes that are not one of DuckLake's lines (those are `change_rules.RULES[i].code`).
TABLE_RULES = "table_rules"  # the table's own (Lance) conflict rules, checked on a moved table
TABLE_GONE = "table_gone"  # the table this transaction changes was dropped (or dropped and re-created)
WRITTEN_OUTSIDE = "written_outside_catalog"  # a catalog table got a version that no catalog version publishes
RETRY_BUDGET = "publish_retry_budget"  # lost the race for the next catalog version too many times
BRANCH_PUBLISHED = "branch_published"  # a concurrent publish_branch of the same branch landed first
BRANCH_NOT_REPLAYABLE = "branch_write_not_replayable"  # a publish could not run a branch write again on main

__all__ = [
    "BRANCH_NOT_REPLAYABLE",
    "BRANCH_PUBLISHED",
    "RETRY_BUDGET",
    "TABLE_GONE",
    "TABLE_RULES",
    "WRITTEN_OUTSIDE",
    "CatalogConflictError",
    "CatalogEntryError",
    "CatalogError",
    "CatalogFormatError",
    "IncompatibleCatalogConflictError",
    "RetryableCatalogConflictError",
]
