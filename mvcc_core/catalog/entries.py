"""The rows of `__manifest` and their on-disk shapes (format versions), read and written.

Design notes: docs/guide/catalog.md, "The catalog's rows, as implemented".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from mvcc_core.catalog.errors import CatalogEntryError
from mvcc_core.catalog.names import row_name_problem
from mvcc_core.format import operations
from mvcc_core.format.fragments import write_small_fragment
from mvcc_core.format.invariants import path_problem
from mvcc_core.format.naming import data_file_path
from mvcc_core.table import Table
from mvcc_core.txn.transaction import Transaction, check_properties

STAMP_KEY = "mvcc:catalog_format"
#: The shape this code writes. A bump is one constant, one schema below, one step in `format.MIGRATIONS`.
FORMAT_VERSION = 4

SCHEMA, TABLE, VIEW = "schema", "table", "view"
TOMBSTONE = "_tombstone"

_V1_FIELDS = [
    pa.field("object_type", pa.string(), nullable=False),  # schema, table, view, and `<kind>_tombstone`
    pa.field("name", pa.string(), nullable=False),  # "schema" or "schema.object"
    pa.field("path", pa.string(), nullable=False),  # a table's directory relative to the root
    pa.field("table_version", pa.int64(), nullable=False),  # the published table version
    pa.field("staged_manifest", pa.string(), nullable=False),  # relative to the table; "" once final at write
    pa.field("catalog_version", pa.int64(), nullable=False),  # the catalog version that wrote the row
]
_DEFINITION = pa.field("definition", pa.string(), nullable=False)
_STAGED_LIST = pa.field("staged_manifests", pa.list_(pa.string()), nullable=False)
# Format 4: the encoded manifests of the table versions a row publishes, carried by the catalog version that
# wrote the row (rows carried into later versions drop them); `staged_manifests` then holds their final names.
_MANIFESTS = pa.field("manifests", pa.list_(pa.binary()), nullable=False)
_V3_FIELDS = [*(f if f.name != "staged_manifest" else _STAGED_LIST for f in _V1_FIELDS), _DEFINITION]


def _stamped(fields: list[pa.Field], version: int) -> pa.Schema:
    return pa.schema(fields, metadata={STAMP_KEY: str(version)})


SHAPES: dict[int, pa.Schema] = {
    1: pa.schema(_V1_FIELDS),
    2: _stamped([*_V1_FIELDS, _DEFINITION], 2),
    3: _stamped(_V3_FIELDS, 3),
    4: _stamped([*_V3_FIELDS, _MANIFESTS], 4),
}


@dataclass(frozen=True)
class Entry:
    """One row of `__manifest`, whatever shape it was read from.

    `staged_manifests`: the manifests of the table versions this entry publishes (relative to the table, in
    version order): staged names that finalizing copies to their final names (formats 1-3), or the final names
    themselves (format 4), written by finalizing from `manifests`, their encoded bytes, which only the catalog
    version that wrote the entry carries (`Catalog.finalize` reads them there). `definition`: a view's SQL text.
    """

    object_type: str
    name: str
    path: str = ""
    table_version: int = 0
    staged_manifests: tuple[str, ...] = field(default_factory=tuple)
    catalog_version: int = 0
    definition: str = ""
    manifests: tuple[bytes, ...] = field(default_factory=tuple, repr=False)


def format_of(manifest: Table) -> int:
    """The format stamp of a `__manifest` version (1 when there is none: the pre-stamp shape).

    Args:
        manifest: the `__manifest` table at some version
    """
    metadata = manifest.schema.metadata or {}
    raw = metadata.get(STAMP_KEY.encode())
    return int(raw) if raw is not None else 1


def check_table_path(path: str, where: str) -> str:
    """`path` if it is a plain relative path under the catalog's root; CatalogEntryError otherwise.

    Args:
        path: a table's directory relative to the catalog's root, as a `__manifest` row records it
        where: the row, for the message
    """
    problem = path_problem(path)
    if problem is not None:
        raise CatalogEntryError(
            f"{where}: field path is {path!r}: a table's path must stay under the catalog's root, and {problem}"
        )
    return path


def entry_problem(entry: Entry) -> str | None:
    """Why `entry` is a row no writer of this catalog makes (None: it is a good one): a name that breaks the
    catalog's name rule (`names.row_name_problem`, the rule `create_schema` / `create_table` apply), or a table
    path or staged manifest that would leave the catalog's root (or the table's directory).

    Args:
        entry: One row of `__manifest`.

    Returns:
        The reason, naming the field, or None.
    """
    problem = row_name_problem(entry.object_type, entry.name)
    if problem is not None:
        return f"field name: {problem}"
    if entry.path or entry.table_version or entry.staged_manifests:
        problem = path_problem(entry.path)
        if problem is not None:
            return f"field path is {entry.path!r}: a table's path must stay under the catalog's root, and {problem}"
    for staged in entry.staged_manifests:
        problem = path_problem(staged)
        if problem is not None:
            return (
                f"field staged_manifests holds {staged!r}: a staged manifest must stay under its table's "
                f"directory, and {problem}"
            )
    return None


def read_rows(manifest: Table) -> list[Entry]:
    """Every row of a `__manifest` version, from any shape this code knows (reading writes nothing).

    Rows are returned as stored, good or not: a writer carries every row it does not change into the next
    version unchanged, and `live` leaves out the ones that break a rule (`entry_problem`; `invalid` lists them),
    so one bad row never stops the rest of the catalog.

    Args:
        manifest: The `__manifest` table at the version wanted.

    Returns:
        The rows.
    """
    out = []
    for row in manifest.to_table().to_pylist():
        if "staged_manifests" in row:
            staged = tuple(row.get("staged_manifests") or ())
        else:
            single = row.get("staged_manifest") or ""
            staged = (single,) if single else ()
        out.append(
            Entry(
                object_type=row["object_type"],
                name=row["name"],
                path=row.get("path") or "",
                table_version=row.get("table_version") or 0,
                staged_manifests=staged,
                catalog_version=row.get("catalog_version") or 0,
                definition=row.get("definition") or "",
                manifests=tuple(row.get("manifests") or ()),
            )
        )
    return out


def rows_table(rows: list[Entry], shape: int = FORMAT_VERSION) -> pa.Table:
    """`rows` in the shape `shape` (the migration steps write older shapes than the current one).

    Args:
        rows: the rows
        shape: the format version whose columns are written
    """
    schema = SHAPES[shape]
    cols: dict[str, list[object]] = {}
    for f in schema:
        if f.name == "staged_manifest":
            cols[f.name] = [r.staged_manifests[-1] if r.staged_manifests else "" for r in rows]
        elif f.name == "staged_manifests":
            cols[f.name] = [list(r.staged_manifests) for r in rows]
        elif f.name == "manifests":
            cols[f.name] = [list(r.manifests) for r in rows]
        else:
            cols[f.name] = [getattr(r, f.name) for r in rows]
    return pa.table(cols, schema=schema)


def overwrite_transaction(
    manifest: Table, rows: list[Entry], *, commit_message: str, transaction_properties: Mapping[str, str]
) -> Transaction:
    """The `__manifest` Overwrite holding `rows` in the current shape, staged on `manifest`'s version.

    When `manifest` has the current shape already (every publish but a migration's first), its Parquet file is
    encoded in memory and written with one `put_new` (`fragments.write_small_fragment`), keeping the field
    ids, instead of the general streaming writer: the state is a few kilobytes rewritten by every publish.

    Args:
        manifest: the `__manifest` table at the version published on
        rows: every row of the new catalog version
        commit_message: the catalog version's message
        transaction_properties: the catalog version's properties
    """
    schema = SHAPES[FORMAT_VERSION]
    data = rows_table(rows)
    if not manifest.schema.equals(schema, check_metadata=True):
        return manifest.overwrite_uncommitted(
            data, schema=schema, commit_message=commit_message, transaction_properties=transaction_properties
        )
    state = manifest.state
    fields = list(state.manifest.fields)
    fragments = write_small_fragment(state.store, data, fields, schema)
    return Transaction(
        read_version=state.version,
        operation=operations.Overwrite(fragments=fragments, schema=fields, schema_metadata=dict(schema.metadata or {})),
        message=commit_message,
        transaction_properties=check_properties(transaction_properties),
        files=state.staged([data_file_path(f.path) for frag in fragments for f in frag.files]),
    )


def reconstruct(rows: list[Entry]) -> dict[tuple[str, str], Entry]:
    """The reconstruction: the latest entry per object minus those a tombstone at or after it hides,
    every row judged alike (good or not: `live` and `invalid` split them).

    Args:
        rows: Every row of a `__manifest` version.

    Returns:
        (kind, name) to entry.
    """
    entries: dict[tuple[str, str], Entry] = {}
    tombstones: dict[tuple[str, str], int] = {}
    for row in rows:
        if row.object_type.endswith(TOMBSTONE):
            key = (row.object_type[: -len(TOMBSTONE)], row.name)
            tombstones[key] = max(tombstones.get(key, -1), row.catalog_version)
        else:
            key = (row.object_type, row.name)
            if key not in entries or entries[key].catalog_version <= row.catalog_version:
                entries[key] = row
    return {k: e for k, e in entries.items() if tombstones.get(k, -1) < e.catalog_version}


def live(rows: list[Entry]) -> dict[tuple[str, str], Entry]:
    """The live objects of a `__manifest` version that keep every rule (`reconstruct`, minus `invalid`): the
    only ones the catalog opens, writes, finalizes or cleans.

    Args:
        rows: Every row of a `__manifest` version.

    Returns:
        (kind, name) to entry.
    """
    return {k: e for k, e in reconstruct(rows).items() if entry_problem(e) is None}


def invalid(rows: list[Entry]) -> dict[tuple[str, str], tuple[Entry, str]]:
    """The live objects of a `__manifest` version that break a rule (`entry_problem`), with the reason: each
    fails closed on its own (nothing is opened, written or deleted through it) and is carried unchanged into
    later versions.

    Args:
        rows: Every row of a `__manifest` version.

    Returns:
        (kind, name) to (entry, reason).
    """
    out = {}
    for key, entry in reconstruct(rows).items():
        problem = entry_problem(entry)
        if problem is not None:
            out[key] = (entry, problem)
    return out


#: The `__manifest` transaction property holding the changes a catalog version made (a JSON list).
CHANGES_KEY = "catalog.changes"
#: The `__manifest` transaction property a migration step writes ("1->2"); its changes list is empty.
MIGRATION_KEY = "catalog.migration"
