"""A catalog of many mvcc tables under one root, with commits that change several tables at once.

See docs/guide/catalog.md for the design: the catalog's state is the mvcc table `__manifest`; one catalog version is
one `__manifest` version; a transaction stages each table's next manifest under a unique name and the
`__manifest` commit is the single commit point for all of them.
"""

from __future__ import annotations

from mvcc_core.catalog.catalog import Catalog, CatalogSnapshot, CatalogVersion
from mvcc_core.catalog.entries import FORMAT_VERSION
from mvcc_core.catalog.errors import (
    CatalogConflictError,
    CatalogEntryError,
    CatalogError,
    CatalogFormatError,
    IncompatibleCatalogConflictError,
    RetryableCatalogConflictError,
)
from mvcc_core.catalog.forks import fork_of
from mvcc_core.catalog.multi_table import CatalogTransaction
from mvcc_core.catalog.retention import CatalogCleanupStats

__all__ = [
    "FORMAT_VERSION",
    "Catalog",
    "CatalogCleanupStats",
    "CatalogConflictError",
    "CatalogEntryError",
    "CatalogError",
    "CatalogFormatError",
    "CatalogSnapshot",
    "CatalogTransaction",
    "CatalogVersion",
    "IncompatibleCatalogConflictError",
    "RetryableCatalogConflictError",
    "fork_of",
]
