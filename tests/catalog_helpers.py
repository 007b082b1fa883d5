"""A catalog to test on, shared by the catalog tests in `tests/` and `tests/catalog/`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from mvcc_core.catalog import Catalog

IDS = pa.schema([("id", pa.int64())])


def make(root: str, options: dict[str, Any] | None = None, *, tables: Sequence[str] = ("s.a", "s.b", "s.c")) -> Catalog:
    """A new catalog at `root` with the schema `s` and `tables`, each holding the ids 1, 2, 3.

    Args:
        root: where the catalog goes (a path or a store uri)
        options: the store's storage options
        tables: the tables' names, all created and filled in one catalog transaction

    Returns:
        The catalog, at the version of that transaction.
    """
    cat = Catalog.create(root, storage_options=options)
    cat.create_schema("s")
    with cat.transaction() as tx:
        for name in tables:
            tx.create_table(name, IDS)
            tx.table(name).append(pa.table({"id": [1, 2, 3]}))
    return cat
