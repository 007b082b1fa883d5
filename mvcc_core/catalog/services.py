"""What the catalog's transaction (`multi_table.py`) and retention (`retention.py`) need of a `Catalog` and of a
`CatalogSnapshot`, as Protocols: those modules name these instead of importing `catalog.py`, which imports them,
so the package's imports run one way (docs/design/architecture.md, "catalog/").
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol

from mvcc_core.catalog.change_rules import Change
from mvcc_core.catalog.entries import Entry
from mvcc_core.io import ObjectStore
from mvcc_core.table import Table
from mvcc_core.txn.state import TableState


class SnapshotView(Protocol):
    """One catalog version as a `CatalogTransaction` reads it (a `CatalogSnapshot`)."""

    version: int
    rows: list[Entry]
    format_version: int
    manifest: Table | None
    entries: dict[tuple[str, str], Entry]

    def object(self, name: str) -> Entry | None:
        """Args: see :meth:`CatalogSnapshot.object`"""
        ...

    def table(self, name: str) -> Table:
        """Args: see :meth:`CatalogSnapshot.table`"""
        ...


class CatalogServices(Protocol):
    """What a `CatalogTransaction` and retention use of a `Catalog`; each member is the `Catalog` one."""

    root: str
    options: dict[str, Any]
    remote: bool
    branch: str | None  # the catalog branch written (None: main)
    manifest_uri: str

    def manifest_table(self, version: int | datetime | None = None) -> Table:
        """Args: see :meth:`Catalog.manifest_table`"""
        ...

    def latest_version(self) -> int:
        """See :meth:`Catalog.latest_version`."""
        ...

    def snapshot(self, version: int | datetime | None = None) -> SnapshotView:
        """Args: see :meth:`Catalog.snapshot`"""
        ...

    def remember_manifest(self, state: TableState) -> TableState:
        """Args: see :meth:`Catalog.remember_manifest`"""
        ...

    def remember_rows(self, version: int, rows: list[Entry]) -> None:
        """Args: see :meth:`Catalog.remember_rows`"""

    def changes_since(self, version: int, until: int) -> list[tuple[int, list[Change]]]:
        """Args: see :meth:`Catalog.changes_since`"""
        ...

    def table_uri(self, entry: Entry) -> str:
        """Args: see :meth:`Catalog.table_uri`"""
        ...

    def store(self, path: str = "") -> ObjectStore:
        """Args: see :meth:`Catalog.store`"""
        ...

    def table_at(self, entry: Entry) -> Table:
        """Args: see :meth:`Catalog.table_at`"""
        ...

    def remember(self, entry: Entry, state: TableState) -> None:
        """Args: see :meth:`Catalog.remember`"""

    def finalize(self, entry: Entry, known: Mapping[str, bytes] | None = None) -> None:
        """Args: see :meth:`Catalog.finalize`"""

    def reclaim_staged(self, entries: list[Entry]) -> None:
        """Args: see :meth:`Catalog.reclaim_staged`"""
