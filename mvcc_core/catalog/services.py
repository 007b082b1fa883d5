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

    catalog: CatalogServices  # the catalog read
    version: int
    rows: list[Entry]
    format_version: int
    manifest: Table | None
    entries: dict[tuple[str, str], Entry]

    def object(self, name: str) -> Entry | None:
        """The live table or view called `name` (they share one namespace), or None. See :meth:`CatalogSnapshot.object`.

        Args:
            name: the object's name, `schema.name` or `name`
        """
        ...

    def table(self, name: str) -> Table:
        """The table at the version this snapshot publishes (finalizing it first if its writer stopped short).
        See :meth:`CatalogSnapshot.table`.

        Args:
            name: the table's name, `schema.table` or `table` (in the schema `main`)
        """
        ...


class CatalogServices(Protocol):
    """What a `CatalogTransaction` and retention use of a `Catalog`; each member is the `Catalog` one."""

    root: str
    options: dict[str, Any]
    remote: bool
    branch: str | None  # the catalog branch written (None: main)
    manifest_uri: str

    def manifest_table(self, version: int | datetime | None = None) -> Table:
        """`__manifest` at `version` (default the newest, `latest_manifest`). See :meth:`Catalog.manifest_table`.

        Args:
            version: the catalog version (a number or a datetime; None: the newest)
        """
        ...

    @property
    def latest_version(self) -> int:
        """See :meth:`Catalog.latest_version`."""
        ...

    def snapshot(self, version: int | datetime | None = None) -> SnapshotView:
        """Every object at catalog `version` (a number or a datetime; default the newest). Writes nothing.
        See :meth:`Catalog.snapshot`.

        Args:
            version: the catalog version (a number or a datetime; None: the newest)
        """
        ...

    def remember_manifest(self, state: TableState) -> TableState:
        """Keep `state` as the newest `__manifest` version unless a newer one is kept already (a publisher knows the
        version it committed); the newest state kept. See :meth:`Catalog.remember_manifest`.

        Args:
            state: a `__manifest` version this object read or committed
        """
        ...

    def remember_rows(self, version: int, rows: list[Entry]) -> None:
        """Keep the rows of catalog `version` (its publisher knows them without reading them back).
        See :meth:`Catalog.remember_rows`.

        Args:
            version: the catalog version
            rows: its `__manifest` rows
        """

    def changes_since(self, version: int, until: int) -> list[tuple[int, list[Change]]]:
        """The changes of catalog versions `version + 1 .. until`, for conflict checks (read through the kept committer,
        which has the newest versions' transactions already when this object published them).
        See :meth:`Catalog.changes_since`.

        Args:
            version: the catalog version the caller read
            until: the newest catalog version to include
        """
        ...

    def table_uri(self, entry: Entry) -> str:
        """The uri of a table's directory. See :meth:`Catalog.table_uri`.

        Args:
            entry: the table's `__manifest` row
        """
        ...

    def store(self, path: str = "") -> ObjectStore:
        """The store of the table directory `path` (default the catalog's root), opened once per catalog object: every
        publish finalizes each table it wrote, and opening a store each time showed up. See :meth:`Catalog.store`.

        Args:
            path: a table's directory relative to the root ('' for the root)
        """
        ...

    def table_at(self, entry: Entry) -> Table:
        """The table at the version `entry` publishes, read directly (the catalog knows the version, so no lookup of the
        table's latest version is needed). Finalize the entry first. See :meth:`Catalog.table_at`.

        Args:
            entry: the table's `__manifest` row
        """
        ...

    def remember(self, entry: Entry, state: TableState) -> None:
        """Keep `state` as the table at the version `entry` publishes (a writer knows what it published).
        See :meth:`Catalog.remember`.

        Args:
            entry: the table's `__manifest` row
            state: the table at the version the row publishes
        """

    def finalize(self, entry: Entry, known: Mapping[str, bytes] | None = None) -> None:
        """Roll a published table version forward: give each manifest it names its final name, in version order
        (idempotent). `known`: the manifests' bytes, when the caller built them. See :meth:`Catalog.finalize`.

        Args:
            entry: A table's row of a published catalog version.
            known: The bytes of the manifests `entry` names, by name (the publisher's own).
        """

    def reclaim_staged(self, entries: list[Entry]) -> None:
        """The writer's own tidy-up after finalizing: once the final manifests exist the staged ones (formats 1-3) are
        garbage (a reader of an older catalog version finds the final name first). One batched delete.
        See :meth:`Catalog.reclaim_staged`.

        Args:
            entries: the rows the writer just published and finalized
        """
