"""Where tables live: object stores (`open_store`, `ObjectStore`) and external manifest stores (`SQLiteManifestStore`,
`DynamoDBManifestStore`, `open_external_store`) for object stores that cannot put-if-not-exists.

Pass an external store to `open_table` / `write_table` as `external_store=` (or the storage option of the same
name, `STORAGE_OPTION`); docs/operations/external_store.md has the design.
"""

from __future__ import annotations

from mvcc_core.io import ObjectMeta, ObjectStore, open_store
from mvcc_core.txn.external_store import STORAGE_OPTION, open_external_store
from mvcc_core.txn.manifest_stores import DynamoDBManifestStore, ExternalManifestStore, SQLiteManifestStore

__all__ = [
    "STORAGE_OPTION",
    "DynamoDBManifestStore",
    "ExternalManifestStore",
    "ObjectMeta",
    "ObjectStore",
    "SQLiteManifestStore",
    "open_external_store",
    "open_store",
]
