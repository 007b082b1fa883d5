"""`Catalog.drop_invalid_entry`: the one repair of a live `__manifest` row that breaks a rule (a name no writer
makes, a path leaving the root), which readers leave out and refuse by name (`snapshot.py`). It writes a
tombstone for the row as it is stored, in one catalog version; no file is opened, written or deleted through
the row (a table directory under the root it named is reclaimed by `Catalog.cleanup` once no kept catalog
version names it, as a dropped table's is).
"""

from __future__ import annotations

from mvcc_core.catalog.change_rules import Change
from mvcc_core.catalog.entries import TOMBSTONE, Entry, invalid
from mvcc_core.catalog.errors import CatalogError
from mvcc_core.catalog.multi_table import CatalogTransaction
from mvcc_core.catalog.services import CatalogServices, SnapshotView


class DropInvalidEntry(CatalogTransaction):
    """A catalog transaction whose one change is the tombstone of the invalid live row `key` (kind, name).

    Args:
        catalog: The catalog (on main).
        snapshot: The newest catalog version.
        key: The row's (kind, name), as stored.
    """

    def __init__(self, catalog: CatalogServices, snapshot: SnapshotView, key: tuple[str, str]) -> None:
        """Drop the invalid row `key` of `snapshot`."""
        super().__init__(catalog, snapshot, commit_message=f"drop invalid {key[0]} row {key[1]!r}")
        self.key = key

    def all_changes(self) -> list[Change]:
        """The changes: this transaction's, and the drop of the row (for the conflict rules)."""
        return [*super().all_changes(), Change(f"dropped_{self.key[0]}", self.key[1])]

    def _next_rows(self, current: SnapshotView) -> list[Entry]:
        kind, name = self.key
        if self.key not in invalid(current.rows):
            raise CatalogError(f"catalog {self.catalog.root}: no invalid {kind} row {name!r} (dropped already?)")
        rows = [r for r in super()._next_rows(current) if (r.object_type, r.name) != (kind + TOMBSTONE, name)]
        rows.append(Entry(kind + TOMBSTONE, name, catalog_version=current.version + 1))
        return sorted(rows, key=lambda r: (r.object_type, r.name))


def drop_invalid_entry(catalog: CatalogServices, snapshot: SnapshotView, name: str) -> int:
    """Tombstone the invalid live row called `name` (its name exactly as stored); the catalog version published.

    Args:
        catalog: The catalog (on main).
        snapshot: Its newest catalog version, opened for write.
        name: The row's name as stored (the error that refused it quotes it).

    Returns:
        The catalog version that drops it.

    Raises:
        CatalogError: there is no invalid live row of that name (a good object is dropped with `drop_table`,
            `drop_view` or `drop_schema`).
    """
    keys = [key for key in invalid(snapshot.rows) if key[1] == name]
    if not keys:
        raise CatalogError(
            f"catalog {catalog.root}: no invalid row named {name!r} at catalog version {snapshot.version} "
            f"(drop a good object with drop_table, drop_view or drop_schema)"
        )
    tx = DropInvalidEntry(catalog, snapshot, keys[0])
    return tx.commit()
