"""`CatalogSnapshot`: a consistent read of every object at one catalog version, and what it does with a row
that breaks a rule (docs/guide/catalog.md, "Names, and rows a reader does not recognise").

A row that breaks a rule (a name no writer makes, a path leaving the root, a catalog branch's row naming a
directory that is not that table's) fails closed on its own: it is left out of `entries`, listed in
`invalid`, and naming it raises `CatalogEntryError` saying why; every other object reads, writes and cleans.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from mvcc_core.catalog.entries import FORMAT_VERSION, SCHEMA, TABLE, VIEW, Entry, invalid, reconstruct
from mvcc_core.catalog.errors import CatalogEntryError, CatalogError
from mvcc_core.catalog.names import DEFAULT_SCHEMA, qualified
from mvcc_core.errors import InvalidNameError

if TYPE_CHECKING:
    from mvcc_core.catalog.services import CatalogServices
    from mvcc_core.table import Table


class CatalogSnapshot:
    """A consistent read of every object at one catalog version: each table opens at the version it publishes.

    Args:
        catalog: the catalog read
        version: the catalog version
        rows: every row of `__manifest` at that version
        format_version: the format stamp of that version
        manifest: the `__manifest` table at that version (None: not at hand)
        problems: live rows that break a rule only the caller can check (a catalog branch's row naming
            another table's directory: `CatalogBranchMethods.branch_row_problems`), by key, with the reason
    """

    def __init__(
        self,
        catalog: CatalogServices,
        version: int,
        rows: list[Entry],
        format_version: int = FORMAT_VERSION,
        manifest: Table | None = None,
        problems: Mapping[tuple[str, str], str] | None = None,
    ) -> None:
        """The objects of catalog `version`, from the `__manifest` rows of that version."""
        self.catalog = catalog
        self.version = version
        self.rows = rows
        self.format_version = format_version
        self.manifest = manifest  # the `__manifest` table at `version` (the publisher commits on top of it)
        every = reconstruct(rows)
        #: The live objects that break a rule, with the reason: never opened, written or deleted through.
        self.invalid: dict[tuple[str, str], tuple[Entry, str]] = invalid(rows)
        for key, reason in (problems or {}).items():
            if key in every and key not in self.invalid:
                self.invalid[key] = (every[key], reason)
        self.entries = {k: e for k, e in every.items() if k not in self.invalid}

    def schemas(self) -> list[str]:
        return sorted(name for kind, name in self.entries if kind == SCHEMA)

    def tables(self, schema: str | None = None) -> list[str]:
        """The live tables' full names, sorted.

        Args:
            schema: list only this schema's (None: every schema's)
        """
        return self._names(TABLE, schema)

    def views(self, schema: str | None = None) -> list[str]:
        """The live views' full names, sorted.

        Args:
            schema: list only this schema's (None: every schema's)
        """
        return self._names(VIEW, schema)

    def _names(self, kind: str, schema: str | None) -> list[str]:
        names = sorted(name for k, name in self.entries if k == kind)
        return names if schema is None else [n for n in names if n.split(".")[0] == schema]

    def entry(self, name: str) -> Entry:
        """The `__manifest` row of the live table `name`.

        Args:
            name: the table's name, `schema.table` or `table` (in the schema `main`)

        Raises:
            CatalogError: there is no such table at this version
        """
        return self._live(TABLE, name)

    def _live(self, kind: str, name: str) -> Entry:
        full = self._full(name)
        found = self.entries.get((kind, full))
        if found is None:
            raise CatalogError(f"no {kind} {full!r} in catalog {self.catalog.root} at catalog version {self.version}")
        return found

    def object(self, name: str) -> Entry | None:
        """The live table or view called `name` (they share one namespace), or None.

        Args:
            name: the object's name, `schema.name` or `name`
        """
        full = self._full(name)
        return self.entries.get((TABLE, full)) or self.entries.get((VIEW, full))

    def _full(self, name: str) -> str:
        """`name` as `schema.name`; CatalogEntryError when it names a live row that breaks a rule (so a lookup
        never mistakes it for a missing object), InvalidNameError when it is no name at all."""
        try:
            full = qualified(name)
        except InvalidNameError:
            full = name if isinstance(name, str) and "." in name else f"{DEFAULT_SCHEMA}.{name}"
            self._refuse_invalid(full)
            raise
        self._refuse_invalid(full)
        return full

    def _refuse_invalid(self, full: str) -> None:
        for kind in (TABLE, VIEW):
            found = self.invalid.get((kind, full))
            if found is not None:
                raise CatalogEntryError(invalid_message(self.catalog.root, self.catalog.branch, self.version, *found))

    def view(self, name: str) -> str:
        """The SQL text of view `name` (views are stored, never executed, by the catalog).

        Args:
            name: the view's name, `schema.view` or `view` (in the schema `main`)

        Raises:
            CatalogError: there is no such view at this version
        """
        return self._live(VIEW, name).definition

    def table_version(self, name: str) -> int:
        """The table version this catalog version publishes for `name`.

        Args:
            name: the table's name, `schema.table` or `table` (in the schema `main`)
        """
        return self.entry(name).table_version

    def table(self, name: str) -> Table:
        """The table at the version this snapshot publishes (finalizing it first if its writer stopped short).

        Args:
            name: the table's name, `schema.table` or `table` (in the schema `main`)
        """
        entry = self.entry(name)
        self.catalog.finalize(entry)
        return self.catalog.table_at(entry)


def invalid_message(root: str, branch: str | None, version: int, entry: Entry, reason: str) -> str:
    """What a reader says of a live row that breaks a rule, and what to do.

    Args:
        root: The catalog's root.
        branch: The catalog branch read (None: main).
        version: The catalog version read.
        entry: The row.
        reason: Why it breaks a rule.

    Returns:
        The message.
    """
    where = f"catalog {root} version {version}" + ("" if branch is None else f" of branch {branch!r}")
    repair = (
        f"Catalog.drop_invalid_entry({entry.name!r}) removes the row (the table's files stay until cleanup)"
        if branch is None
        else f"the branch cannot be published while it holds the row; Catalog.delete_branch({branch!r}) removes "
        f"the branch and its forks"
    )
    return (
        f"{where}: the {entry.object_type} row {entry.name!r} is refused ({reason}); nothing is read, written or "
        f"deleted through it, and every other object works as usual; {repair}"
    )
