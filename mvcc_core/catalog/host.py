"""What the branch methods of a `Catalog` (`branches.CatalogBranchMethods`, mixed into it) and the branch publish's
re-run (`branch_rerun.py`) use of the catalog, as a Protocol: those modules name it instead of importing
`catalog.py`, which imports them, so the package's imports run one way (docs/design/architecture.md, "catalog/").
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol, Self

from mvcc_core.catalog.entries import Entry
from mvcc_core.catalog.multi_table import CatalogTransaction
from mvcc_core.catalog.services import CatalogServices
from mvcc_core.catalog.snapshot import CatalogSnapshot
from mvcc_core.table import Table
from mvcc_core.txn.branches import BranchInfo


class CatalogHost(CatalogServices, Protocol):
    """A `Catalog` as its branch methods see it: `CatalogServices`, the catalog's own snapshots and the branch
    methods themselves; each member is the `Catalog` one (see there).

    Args:
        root: the catalog's root uri
        storage_options: the store options of every table under the root
        manifest: the `__manifest` table, at its newest version (of `branch`)
        branch: the catalog branch the object reads and writes (None: main)
    """

    _manifest_uri: str  # `__manifest`'s uri
    # a catalog branch's first version, (version, rows), read once (`CatalogBranchMethods.branch_row_problems`)
    _branch_point: tuple[int, list[Entry]] | None

    def __init__(
        self, root: str, storage_options: Mapping[str, Any] | None, manifest: Table, branch: str | None = None
    ) -> None:
        """A catalog object on an opened `__manifest` (of `branch`; None: main)."""

    @classmethod
    def open(cls, root_uri: str, *, storage_options: Mapping[str, Any] | None = None) -> Self:
        """The catalog at `root_uri`. See :meth:`Catalog.open`.

        Args:
            root_uri: the catalog's root
            storage_options: the store options of every table under the root
        """
        ...

    def latest_manifest(self) -> Table:
        """`__manifest` at its newest version. See :meth:`Catalog.latest_manifest`."""
        ...

    def snapshot(self, version: int | datetime | None = None, *, branch: str | None = None) -> CatalogSnapshot:
        """Every object at catalog `version`. See :meth:`Catalog.snapshot`.

        Args:
            version: the catalog version (a number or a datetime; None: the newest)
            branch: read catalog branch `branch` (None: this object's branch)
        """
        ...

    def _for_write(self) -> CatalogSnapshot: ...

    # the branch methods (`CatalogBranchMethods`)

    def _main(self) -> Self: ...

    def on_branch(self, name: str) -> Self:
        """This catalog bound to catalog branch `name`. See :meth:`Catalog.on_branch`.

        Args:
            name: the catalog branch
        """
        ...

    def branches(self) -> dict[str, BranchInfo]:
        """Every catalog branch by name. See :meth:`Catalog.branches`."""
        ...

    def branch_entries(self) -> list[Entry]:
        """The table rows of every live catalog branch at its newest version. See :meth:`Catalog.branch_entries`."""
        ...

    def _stage_fork(
        self, tx: CatalogTransaction, head: CatalogSnapshot, entry: Entry, name: str
    ) -> tuple[Any, int] | None: ...
