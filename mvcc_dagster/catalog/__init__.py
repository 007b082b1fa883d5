"""Catalog assets: several tables of one step published in one catalog version (docs/integrations/dagster/catalog.md).

- `resource`: `MvccCatalogResource` (bound as ``mvcc_catalog``) and its `CatalogAssetTransaction`.
- `step_identity`: which step of which run lineage published a catalog version (what makes a retry idempotent).

The catalog's health checks and maintenance job are in `mvcc_dagster.maintenance.catalog`.
"""

from __future__ import annotations

from .._deprecated import forwarding_getattr
from .resource import CatalogAssetTransaction, MvccCatalogResource, catalog_table_name

__all__ = ["CatalogAssetTransaction", "MvccCatalogResource", "catalog_table_name"]

# The names of the former module `mvcc_dagster.catalog` (now `resource`), with a DeprecationWarning.
__getattr__ = forwarding_getattr(__name__, f"{__name__}.resource")
