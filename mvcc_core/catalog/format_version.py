"""The catalog's format stamp and its step-by-step migration dispatcher.

Design notes: docs/guide/catalog.md, "Format stamp and migrations, as implemented".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from mvcc_core.catalog.entries import (
    CHANGES_KEY,
    FORMAT_VERSION,
    MIGRATION_KEY,
    SHAPES,
    Entry,
    format_of,
    read_rows,
    rows_table,
)
from mvcc_core.catalog.errors import CatalogFormatError
from mvcc_core.errors import CommitConflictError
from mvcc_core.failpoints import failpoint
from mvcc_core.table import Table, open_table

#: Attempts at one step before giving up (each lost race means another writer moved the catalog).
STEP_ATTEMPTS = 20


def _same_rows(rows: list[Entry]) -> list[Entry]:
    """Steps 1 -> 2, 2 -> 3 and 3 -> 4 change only the shape (a new `definition` column, the staged manifest
    as a list, the carried `manifests`); `state.rows_table` writes the new shape, the rows are carried as they
    are (a format 3 row's staged manifests are finalized from their staged names, as before)."""
    return rows


#: `MIGRATIONS[n]` turns the rows of format `n` into those of format `n + 1`.
MIGRATIONS: dict[int, Callable[[list[Entry]], list[Entry]]] = {
    1: _same_rows,
    2: _same_rows,
    3: _same_rows,
}


def check_writable(found: int, where: str) -> None:
    """CatalogFormatError when the stamp is newer than this code: an old binary must not clobber it.

    Args:
        found: the catalog's format stamp
        where: the catalog, for the message
    """
    if found > FORMAT_VERSION:
        raise CatalogFormatError(
            f"catalog {where} has format {found}, newer than this mvcc writes ({FORMAT_VERSION}); upgrade mvcc "
            f"first (it is readable, not writable, by this version)"
        )


def migrate(manifest_uri: str, storage_options: Mapping[str, Any] | None = None) -> Table:
    """Bring `__manifest` to `FORMAT_VERSION` step by step; the `__manifest` at its newest version after.

    Args:
        manifest_uri: the uri of the catalog's `__manifest`
        storage_options: its store options
    """
    opts = dict(storage_options or {}) or None
    attempts = 0
    while True:
        manifest = open_table(manifest_uri, storage_options=opts)
        found = format_of(manifest)
        check_writable(found, manifest_uri)
        if found == FORMAT_VERSION:
            return manifest
        rows = MIGRATIONS[found](read_rows(manifest))
        try:
            manifest.overwrite(
                rows_table(rows, found + 1),
                schema=SHAPES[found + 1],
                commit_message=f"migrate catalog format {found} -> {found + 1}",
                transaction_properties={CHANGES_KEY: json.dumps([]), MIGRATION_KEY: f"{found}->{found + 1}"},
                max_retries=0,
            )
        except CommitConflictError:
            attempts += 1
            if attempts >= STEP_ATTEMPTS:
                raise
            continue
        failpoint("catalog.migrate.after_step")
