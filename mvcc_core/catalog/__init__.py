"""A catalog of many mvcc tables under one root, with commits that change several tables at once.

See docs/catalog.md for the design: the catalog's state is the mvcc table `__manifest`; one catalog version is
one `__manifest` version; a transaction stages each table's next manifest under a unique name and the
`__manifest` commit is the single commit point for all of them.
"""

from __future__ import annotations

from .catalog import Catalog, CatalogSnapshot, CatalogVersion
from .errors import (
    CatalogConflictError,
    CatalogError,
    CatalogFormatError,
    IncompatibleCatalogConflictError,
    RetryableCatalogConflictError,
)
from .retention import CatalogCleanupStats
from .state import FORMAT_VERSION
from .transaction import CatalogTransaction

__all__ = [
    "Catalog",
    "CatalogCleanupStats",
    "CatalogConflictError",
    "CatalogError",
    "CatalogFormatError",
    "CatalogSnapshot",
    "CatalogTransaction",
    "CatalogVersion",
    "FORMAT_VERSION",
    "IncompatibleCatalogConflictError",
    "RetryableCatalogConflictError",
]
