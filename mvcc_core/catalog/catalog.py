"""`Catalog`: many tables under one root; every change (DDL or data, one table or many) is one catalog version.

The state is the mvcc table `{root}/__manifest` (seed 003). Catalog version N is `__manifest` version N, and
each version is an Overwrite holding every object's latest entry and tombstone. Why an Overwrite and not an
Append of the changed rows: the core's rules make two concurrent Overwrites a conflict while two Appends are
rebased onto each other, and the catalog needs exactly one winner per version (its commit point). A catalog
of thousands of objects rewrites one small Parquet file per version; that is the price.

A transaction's table changes become visible only through that commit: each table's next manifest is built
and written under a unique staged name first, the `__manifest` commit records the staged names, and
finalizing (copying each staged manifest to its final name) is a roll-forward that any reader of the
catalog completes. Nothing is ever rolled back (docs/catalog.md).
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid as uuid_mod
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import Any

import pyarrow as pa

from mvcc_core.conflicts import ConflictContext, Outcome, resolve
from mvcc_core.errors import CommitConflictError, StorageError, is_definite_failure
from mvcc_core.external_store import final_of, staged_manifest_path
from mvcc_core.failpoints import POINTS, failpoint
from mvcc_core.features import FLAG_STABLE_ROW_IDS
from mvcc_core.manifest import encode_manifest, write_latest_hint
from mvcc_core.naming import ManifestNaming, parse_manifest_name
from mvcc_core.replace import rows_match
from mvcc_core.storage import open_store
from mvcc_core.table import Table, open_table, write_table
from mvcc_core.transaction import BuildContext, Transaction, build_manifest, write_transaction

from .conflicts import Change, find_conflict
from .errors import CatalogError, IncompatibleCatalogConflictError, RetryableCatalogConflictError

log = logging.getLogger("mvcc.catalog")

# The catalog's crash points, registered with the core's failpoints so tests can kill a writer between steps.
# A child process arms them with `failpoints.arm` after importing the catalog (MVCC_FAILPOINTS is read when
# the core is imported, before these names exist).
FAILPOINTS = {
    "catalog.after_stage": "catalog publish: every table's next manifest is staged, __manifest not committed",
    "catalog.after_publish": "catalog publish: __manifest committed (the commit point), no table finalized yet",
}
POINTS.update(FAILPOINTS)

MANIFEST_DIR = "__manifest"
CHANGES_KEY = "catalog.changes"
# Seed 003's PUBLISHER_RETRY_BUDGET: the publisher owns its retries and re-checks conflicts on each one.
PUBLISH_RETRY_BUDGET = 5
DEFAULT_SCHEMA = "main"

SCHEMA, TABLE = "schema", "table"
TOMBSTONE = "_tombstone"

_MANIFEST_SCHEMA = pa.schema(
    [
        pa.field("object_type", pa.string(), nullable=False),  # schema, table, schema_tombstone, table_tombstone
        pa.field("name", pa.string(), nullable=False),  # "schema" or "schema.table"
        pa.field("path", pa.string(), nullable=False),  # a table's directory relative to the root
        pa.field("table_version", pa.int64(), nullable=False),  # the published table version
        pa.field("staged_manifest", pa.string(), nullable=False),  # relative to the table; "" once final at write
        pa.field("catalog_version", pa.int64(), nullable=False),  # the catalog version that wrote the row
    ]
)


@dataclass(frozen=True)
class Entry:
    """One row of `__manifest`."""

    object_type: str
    name: str
    path: str = ""
    table_version: int = 0
    staged_manifest: str = ""
    catalog_version: int = 0


def _split(name: str) -> tuple[str, str]:
    """`schema.table` (or `table`, in the default schema) as its two parts."""
    if not isinstance(name, str) or not name or name.count(".") > 1 or name.startswith(".") or name.endswith("."):
        raise ValueError(f"a table name is 'table' or 'schema.table', got {name!r}")
    schema, _, table = name.rpartition(".")
    return schema or DEFAULT_SCHEMA, table


def qualified(name: str) -> str:
    """The table's full name, `schema.table`."""
    return ".".join(_split(name))


def _check_schema_name(name: str) -> str:
    if not isinstance(name, str) or not name or "." in name or "/" in name:
        raise ValueError(f"a schema name is a non-empty string without '.' or '/', got {name!r}")
    return name


def _live(rows: list[Entry]) -> dict[tuple[str, str], Entry]:
    """Seed 003's reconstruction: the latest entry per object minus those a tombstone at or after it hides."""
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


@dataclass(frozen=True)
class CatalogVersion:
    """One catalog version and the changes it made (DuckLake's `snapshot_changes`)."""

    version: int
    timestamp: datetime
    changes: list[dict[str, str]]
    message: str = ""


class CatalogSnapshot:
    """A consistent read of every object at one catalog version: each table opens at the version it publishes."""

    def __init__(self, catalog: Catalog, version: int, rows: list[Entry]) -> None:
        self.catalog = catalog
        self.version = version
        self.rows = rows
        self.entries = _live(rows)

    def schemas(self) -> list[str]:
        return sorted(name for kind, name in self.entries if kind == SCHEMA)

    def tables(self, schema: str | None = None) -> list[str]:
        names = sorted(name for kind, name in self.entries if kind == TABLE)
        return names if schema is None else [n for n in names if n.split(".")[0] == schema]

    def entry(self, name: str) -> Entry:
        full = qualified(name)
        found = self.entries.get((TABLE, full))
        if found is None:
            raise CatalogError(f"no table {full!r} in catalog {self.catalog.root} at catalog version {self.version}")
        return found

    def table_version(self, name: str) -> int:
        return self.entry(name).table_version

    def table(self, name: str) -> Table:
        """The table at the version this snapshot publishes (finalizing it first if its writer stopped short)."""
        entry = self.entry(name)
        self.catalog.finalize(entry)
        return open_table(self.catalog.table_uri(entry), entry.table_version, storage_options=self.catalog.options)


class Catalog:
    """Tables kept together under one root; see the module docstring and docs/catalog.md.

    Example::

        cat = Catalog.create("/data/cat")
        cat.create_table("sales.orders", pa.schema([("id", pa.int64())]))
        with cat.transaction() as tx:
            tx.table("sales.orders").append(pa.table({"id": [1]}))
        cat.table("sales.orders").to_table()
    """

    def __init__(self, root: str, storage_options: Mapping[str, Any] | None, manifest: Table) -> None:
        self.root = root
        self.options = dict(storage_options or {})
        self._manifest_uri = manifest.uri

    # ---- opening -----------------------------------------------------------------------------

    @classmethod
    def create(cls, root_uri: str, *, storage_options: Mapping[str, Any] | None = None) -> Catalog:
        """A new, empty catalog with the schema `main` (catalog version 1); TableExistsError if one is there."""
        root = str(root_uri).rstrip("/")
        row = Entry(SCHEMA, DEFAULT_SCHEMA, catalog_version=1)
        manifest = write_table(
            _rows_table([row]),
            f"{root}/{MANIFEST_DIR}",
            schema=_MANIFEST_SCHEMA,
            storage_options=dict(storage_options or {}) or None,
            commit_message="create catalog",
            transaction_properties={CHANGES_KEY: json.dumps([Change("created_schema", DEFAULT_SCHEMA).as_dict()])},
        )
        return cls(root, storage_options, manifest)

    @classmethod
    def open(cls, root_uri: str, *, storage_options: Mapping[str, Any] | None = None) -> Catalog:
        """The catalog at `root_uri`; TableNotFoundError if there is none."""
        root = str(root_uri).rstrip("/")
        manifest = open_table(f"{root}/{MANIFEST_DIR}", storage_options=dict(storage_options or {}) or None)
        return cls(root, storage_options, manifest)

    # ---- reading -----------------------------------------------------------------------------

    def _manifest(self, version: int | datetime | None = None) -> Table:
        opts = self.options or None
        if version is None:
            return open_table(self._manifest_uri, storage_options=opts)
        if isinstance(version, datetime):
            return open_table(self._manifest_uri, asof=version, storage_options=opts)
        return open_table(self._manifest_uri, version, storage_options=opts)

    @property
    def latest_version(self) -> int:
        return self._manifest().version

    def snapshot(self, version: int | datetime | None = None) -> CatalogSnapshot:
        """Every object at catalog `version` (a number or a datetime; default the newest)."""
        manifest = self._manifest(version)
        return CatalogSnapshot(self, manifest.version, _read_rows(manifest))

    def table(self, name: str, *, version: int | datetime | None = None) -> Table:
        """`name` at the table version catalog `version` (default the newest) publishes."""
        return self.snapshot(version).table(name)

    def tables(self, schema: str | None = None) -> list[str]:
        return self.snapshot().tables(schema)

    def schemas(self) -> list[str]:
        return self.snapshot().schemas()

    def versions(self) -> list[CatalogVersion]:
        """Every catalog version, oldest first, with the changes it made."""
        out = []
        for info in self._manifest().versions():
            props = info.get("transaction_properties") or {}
            out.append(
                CatalogVersion(
                    version=info["version"],
                    timestamp=info["timestamp"],
                    changes=json.loads(props.get(CHANGES_KEY, "[]")),
                    message=info.get("message") or "",
                )
            )
        return out

    def changes_since(self, version: int, until: int) -> list[tuple[int, list[Change]]]:
        """The changes of catalog versions `version + 1 .. until`, for conflict checks."""
        manifest = self._manifest(until)
        out = []
        for v in range(version + 1, until + 1):
            txn = manifest.transaction(v)
            props = txn.transaction_properties if txn is not None else {}
            out.append((v, [Change.from_dict(d) for d in json.loads(props.get(CHANGES_KEY, "[]"))]))
        return out

    def table_uri(self, entry: Entry) -> str:
        return f"{self.root}/{entry.path}"

    def finalize(self, entry: Entry) -> None:
        """Roll a published table version forward: copy its staged manifest to the final name (idempotent).

        Any reader or writer may run it; the final name is written with put-if-not-exists, so racing
        finalizers write the same bytes once. A read error propagates: it never deletes anything.
        """
        if not entry.staged_manifest:
            return
        store = open_store(self.table_uri(entry), self.options or None)
        final = final_of(entry.staged_manifest)
        if store.exists(final):
            return
        store.put_if_not_exists(final, store.get(entry.staged_manifest))
        with contextlib.suppress(StorageError):
            write_latest_hint(store, entry.table_version, _naming_of(final))

    def _reclaim_staged(self, entry: Entry) -> None:
        """The writer's own tidy-up after finalizing: the final manifest exists, so the staged one is garbage
        (a reader of an older catalog version finds the final name first)."""
        store = open_store(self.table_uri(entry), self.options or None)
        if entry.staged_manifest and store.exists(final_of(entry.staged_manifest)):
            store.delete_many([entry.staged_manifest])

    # ---- writing -----------------------------------------------------------------------------

    def transaction(self, *, commit_message: str | None = None) -> CatalogTransaction:
        """A transaction on the newest catalog version: stage changes, then one atomic publish on exit."""
        return CatalogTransaction(self, self.snapshot(), commit_message=commit_message)

    def create_schema(self, name: str) -> int:
        with self.transaction() as tx:
            tx.create_schema(name)
        return tx.published_version  # type: ignore[return-value]

    def drop_schema(self, name: str) -> int:
        with self.transaction() as tx:
            tx.drop_schema(name)
        return tx.published_version  # type: ignore[return-value]

    def create_table(self, name: str, schema: pa.Schema) -> int:
        with self.transaction() as tx:
            tx.create_table(name, schema)
        return tx.published_version  # type: ignore[return-value]

    def drop_table(self, name: str) -> int:
        with self.transaction() as tx:
            tx.drop_table(name)
        return tx.published_version  # type: ignore[return-value]

    def rename_table(self, name: str, new_name: str) -> int:
        with self.transaction() as tx:
            tx.rename_table(name, new_name)
        return tx.published_version  # type: ignore[return-value]


def _rows_table(rows: list[Entry]) -> pa.Table:
    cols = {f.name: [getattr(r, f.name) for r in rows] for f in _MANIFEST_SCHEMA}
    return pa.table(cols, schema=_MANIFEST_SCHEMA)


def _read_rows(manifest: Table) -> list[Entry]:
    return [Entry(**row) for row in manifest.to_table().to_pylist()]


class _CatalogMoved(Exception):
    """Internal: the catalog advanced while an attempt was staging; the publisher retries."""


@dataclass
class _Write:
    """A staged data change on one table: the core's uncommitted transaction and what it means."""

    name: str
    entry: Entry
    txn: Transaction
    change: str
    written: list[str] = field(default_factory=list)  # staged manifest and transaction file, per attempt


class _TxTable:
    """`tx.table(name)`: the data changes of a catalog transaction on one table (the core's staged forms)."""

    def __init__(self, tx: CatalogTransaction, name: str) -> None:
        self._tx = tx
        self.name = qualified(name)

    def _stage(self, change: str, make: Any) -> None:
        self._tx._check_open()
        if self.name in self._tx._writes:
            raise ValueError(f"{self.name} is already changed in this transaction (one data change per table)")
        if self.name in {c.name for c in self._tx._changes if c.kind in ("created_table", "dropped_table")}:
            raise ValueError(f"{self.name} is created or dropped in this transaction; write to it in another one")
        if self.name in self._tx._renames:
            raise ValueError(f"{self.name} is renamed in this transaction; write to it in another one")
        entry = self._tx.snapshot.entry(self.name)
        table = self._tx.snapshot.table(self.name)
        txn = make(table)
        if txn is not None:
            self._tx._writes[self.name] = _Write(self.name, entry, txn, change)

    def append(self, data: Any, **kwargs: Any) -> None:
        self._stage("inserted_into_table", lambda t: t.append_uncommitted(data, **kwargs))

    def delete(self, predicate: Any, **kwargs: Any) -> None:
        self._stage("deleted_from_table", lambda t: t.delete_uncommitted(predicate, **kwargs))

    def overwrite(self, data: Any, *, where: str | None = None, **kwargs: Any) -> None:
        """Replace every row, or with `where` the rows matching it (DuckLake: a delete and an insert)."""
        self._stage("overwrote_table", lambda t: t.overwrite_uncommitted(data, where=where, **kwargs))


class CatalogTransaction:
    """Staged changes on one catalog snapshot, published at once by `commit` (or the `with` block's end).

    Optimistic: nothing is locked. At publish every catalog version since the snapshot is checked against
    DuckLake's logical conflicts; without one the publish retries on the newer version without rewriting a
    data file (a table that moved is rebuilt on its new version from the same staged operation).
    """

    def __init__(self, catalog: Catalog, snapshot: CatalogSnapshot, *, commit_message: str | None = None) -> None:
        self.catalog = catalog
        self.snapshot = snapshot
        self.commit_message = commit_message or ""
        self._changes: list[Change] = []
        self._writes: dict[str, _Write] = {}
        self._new_tables: dict[str, Entry] = {}
        self._renames: dict[str, str] = {}
        self._state = "open"
        self.published_version: int | None = None

    def __enter__(self) -> CatalogTransaction:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._state != "open":
            return
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    def _check_open(self) -> None:
        if self._state != "open":
            raise ValueError(f"the transaction is {self._state}")

    # ---- staging -----------------------------------------------------------------------------

    def table(self, name: str) -> _TxTable:
        return _TxTable(self, name)

    def create_schema(self, name: str) -> None:
        self._check_open()
        _check_schema_name(name)
        if (SCHEMA, name) in self.snapshot.entries:
            raise CatalogError(f"schema {name!r} exists already")
        self._changes.append(Change("created_schema", name))

    def drop_schema(self, name: str) -> None:
        self._check_open()
        if (SCHEMA, name) not in self.snapshot.entries:
            raise CatalogError(f"no schema {name!r}")
        if self.snapshot.tables(name):
            raise CatalogError(f"schema {name!r} is not empty: {', '.join(self.snapshot.tables(name))}")
        self._changes.append(Change("dropped_schema", name))

    def create_table(self, name: str, schema: pa.Schema) -> None:
        """Create the table's directory now (version 1, empty); it is published with the transaction."""
        self._check_open()
        full = qualified(name)
        schema_name, table_name = _split(full)
        created = {c.name for c in self._changes if c.kind == "created_schema"}
        if (SCHEMA, schema_name) not in self.snapshot.entries and schema_name not in created:
            raise CatalogError(f"no schema {schema_name!r} for table {full!r}")
        if (TABLE, full) in self.snapshot.entries or full in self._new_tables:
            raise CatalogError(f"table {full!r} exists already")
        path = f"{schema_name}/{table_name}-{uuid_mod.uuid4().hex[:12]}"
        write_table(
            schema.empty_table(),
            f"{self.catalog.root}/{path}",
            schema=schema,
            storage_options=self.catalog.options or None,
            commit_message=f"create {full}",
        )
        self._new_tables[full] = Entry(TABLE, full, path, 1)
        self._changes.append(Change("created_table", full))

    def _no_write(self, name: str, what: str) -> None:
        """One change per table object in a transaction: a write and a rename or drop of it would have to be
        ordered within the one catalog version, which this slice does not do (docs/catalog.md)."""
        if name in self._writes:
            raise ValueError(f"{name} has a data change in this transaction; it cannot be {what} in the same one")

    def drop_table(self, name: str) -> None:
        self._check_open()
        full = qualified(name)
        self.snapshot.entry(full)
        self._no_write(full, "dropped")
        if full in self._renames or any(c.name == full for c in self._changes if c.kind == "dropped_table"):
            raise ValueError(f"{full} is renamed or dropped in this transaction already")
        self._changes.append(Change("dropped_table", full))

    def rename_table(self, name: str, new_name: str) -> None:
        """A rename alters the old name and creates the new one (for the conflict rules); same directory."""
        self._check_open()
        full, new_full = qualified(name), qualified(new_name)
        self.snapshot.entry(full)
        self._no_write(full, "renamed")
        if full in self._renames or any(c.name == full for c in self._changes if c.kind == "dropped_table"):
            raise ValueError(f"{full} is renamed or dropped in this transaction already")
        if (TABLE, new_full) in self.snapshot.entries or new_full in self._new_tables:
            raise CatalogError(f"table {new_full!r} exists already")
        if (SCHEMA, _split(new_full)[0]) not in self.snapshot.entries:
            raise CatalogError(f"no schema {_split(new_full)[0]!r} for table {new_full!r}")
        self._renames[full] = new_full
        self._changes.append(Change("altered_table", full))
        self._changes.append(Change("created_table", new_full))

    # ---- publishing --------------------------------------------------------------------------

    def staged_files(self) -> list[str]:
        """The full URIs of the data and deletion files staged so far (removed again if the publish fails)."""
        return [f for w in self._writes.values() for f in w.txn.files]

    def all_changes(self) -> list[Change]:
        return self._changes + [Change(w.change, w.name) for w in self._writes.values()]

    def abort(self) -> None:
        """Remove every staged file; the transaction cannot be committed afterwards."""
        if self._state != "open":
            return
        self._state = "aborted"
        self._cleanup()

    def _cleanup(self) -> None:
        for w in self._writes.values():
            self._remove_written(w)
            with contextlib.suppress(StorageError):
                w.txn.abort(self.catalog.options or None)
        for entry in self._new_tables.values():
            with contextlib.suppress(StorageError):
                store = open_store(self.catalog.table_uri(entry), self.catalog.options or None)
                store.delete_many([m.path for m in store.list("")])

    def _remove_written(self, w: _Write) -> None:
        if w.written:
            with contextlib.suppress(StorageError):
                open_store(self.catalog.table_uri(w.entry), self.catalog.options or None).delete_many(w.written)
            w.written = []

    def commit(self) -> int:
        """Publish every staged change as one catalog version (returned); nothing is visible before, all after.

        Raises `CatalogConflictError` (retryable or incompatible, by DuckLake's rule) naming the object and
        the expected and actual versions; its staged files are removed first.
        """
        self._check_open()
        self._state = "committing"
        try:
            version = self._publish()
        except BaseException as exc:
            if is_definite_failure(exc) or isinstance(exc, CatalogError):
                self._state = "failed"
                self._cleanup()
            else:
                self._state = "unknown"  # ambiguous: leave the files to retention
            raise
        self._state = "committed"
        self.published_version = version
        return version

    def _publish(self) -> int:
        read = self.snapshot.version
        changes = self.all_changes()
        if not changes:
            self.published_version = read
            return read
        for attempt in range(PUBLISH_RETRY_BUDGET):
            current = self.catalog.snapshot()
            if current.version > read:
                self._check_logical(current.version)
            try:
                rows = self._next_rows(current)
            except _CatalogMoved:
                self._forget_attempt()
                continue
            properties = {CHANGES_KEY: json.dumps([c.as_dict() for c in changes])}
            failpoint("catalog.after_stage")
            manifest = self.catalog._manifest(current.version)
            try:
                manifest.overwrite(
                    _rows_table(rows),
                    commit_message=self.commit_message,
                    transaction_properties=properties,
                    max_retries=0,
                )
            except CommitConflictError:
                self._forget_attempt()
                log.debug(
                    "catalog %s: lost catalog version %d (attempt %d)", self.catalog.root, current.version + 1, attempt
                )
                continue
            new_version = current.version + 1
            failpoint("catalog.after_publish")
            for w in self._writes.values():
                w.txn.files = []  # the published versions own them now
            for entry in _live(rows).values():
                if entry.catalog_version == new_version:
                    with contextlib.suppress(StorageError):
                        self.catalog.finalize(entry)
                        self.catalog._reclaim_staged(entry)
            return new_version
        raise RetryableCatalogConflictError(
            f"catalog {self.catalog.root}: lost the race for a new catalog version {PUBLISH_RETRY_BUDGET} times "
            f"(read version {read}); run the transaction again",
            object_name="__manifest",
            expected_version=read,
            actual_version=self.catalog.latest_version,
            rule="publisher retry budget exhausted",
            uri=self.catalog.root,
            read_version=read,
        )

    def _forget_attempt(self) -> None:
        """A lost race: the staged manifests of this attempt are garbage (no catalog version names them)."""
        for w in self._writes.values():
            self._remove_written(w)

    def _check_logical(self, latest: int) -> None:
        ours = self.all_changes()
        for version, theirs in self.catalog.changes_since(self.snapshot.version, latest):
            found = find_conflict(ours, theirs)
            if found is None:
                continue
            rule, name, retryable = found
            cls = RetryableCatalogConflictError if retryable else IncompatibleCatalogConflictError
            raise cls(
                f"catalog {self.catalog.root}: {name!r} conflicts with catalog version {version} ({rule}); this "
                f"transaction read catalog version {self.snapshot.version}, the catalog is at {latest}",
                object_name=name,
                expected_version=self.snapshot.version,
                actual_version=version,
                rule=rule,
                uri=self.catalog.root,
                read_version=self.snapshot.version,
                conflicting_versions=[version],
            )

    def _next_rows(self, current: CatalogSnapshot) -> list[Entry]:
        """`current`'s rows with this transaction applied; stages each changed table's next manifest."""
        new = current.version + 1
        rows = {(r.object_type, r.name): r for r in current.rows}

        def put(entry: Entry) -> None:
            rows[(entry.object_type, entry.name)] = replace(entry, catalog_version=new)

        for change in self._changes:
            if change.kind == "created_schema":
                put(Entry(SCHEMA, change.name))
            elif change.kind == "dropped_schema":
                put(Entry(SCHEMA + TOMBSTONE, change.name))
            elif change.kind == "dropped_table":
                put(Entry(TABLE + TOMBSTONE, change.name))
            elif change.kind == "created_table" and change.name in self._new_tables:
                put(self._new_tables[change.name])
        for old, new_name in self._renames.items():
            entry = current.entry(old)
            put(Entry(TABLE + TOMBSTONE, old))
            put(replace(entry, name=new_name))
        for w in self._writes.values():
            put(self._stage_manifest(w, current.entry(w.name), current.version))
        return sorted(rows.values(), key=lambda r: (r.object_type, r.name))

    def _stage_manifest(self, w: _Write, entry: Entry, current: int) -> Entry:
        """Build the table's next manifest on the version `entry` publishes and write it under a staged name."""
        self._remove_written(w)
        if entry.path != w.entry.path:
            raise IncompatibleCatalogConflictError(
                f"catalog {self.catalog.root}: {w.name!r} names another table now (dropped and re-created)",
                object_name=w.name,
                expected_version=self.snapshot.version,
                actual_version=current,
                rule="a snapshot tries to change a table that was dropped by another snapshot",
                uri=self.catalog.root,
            )
        self.catalog.finalize(entry)
        base = open_table(
            self.catalog.table_uri(entry), entry.table_version, storage_options=self.catalog.options or None
        )
        if base.latest_version != entry.table_version:
            if self.catalog.latest_version != current:
                raise _CatalogMoved  # another publish finalized it after we read the catalog: a lost race
            raise IncompatibleCatalogConflictError(
                f"table {base.uri} is at version {base.latest_version} but catalog version publishes "
                f"{entry.table_version}: it was written outside the catalog, which catalog tables do not allow",
                object_name=w.name,
                expected_version=entry.table_version,
                actual_version=base.latest_version,
                rule="a catalog table is written only through the catalog",
                uri=base.uri,
            )
        txn = w.txn
        for v in range(txn.read_version + 1, entry.table_version + 1):
            theirs = base.transaction(v)
            if theirs is None:
                outcome = Outcome.RETRYABLE
            else:
                theirs_manifest = base.state.load(v)
                ctx = ConflictContext(
                    stable_row_ids=bool(theirs_manifest.writer_feature_flags & FLAG_STABLE_ROW_IDS),
                    rows_match=partial(rows_match, base.state.store, theirs_manifest),
                )
                outcome = resolve(txn, theirs, ctx)[0]
            # The DuckLake rules let only inserts through to here; anything the table's own rules would
            # rebase or refuse is treated as a retryable conflict rather than rebased (first slice).
            if outcome is not Outcome.COMPATIBLE:
                raise RetryableCatalogConflictError(
                    f"{txn.operation.name} on {w.name!r} (table version {txn.read_version}) conflicts with table "
                    f"version {v} ({theirs.operation.name if theirs else 'unreadable'}) by the table's own rules; "
                    f"this transaction read catalog version {self.snapshot.version}, table {w.name!r} is "
                    f"published at catalog version {current} as table version {entry.table_version}",
                    object_name=w.name,
                    expected_version=self.snapshot.version,
                    actual_version=current,
                    rule="the core's conflict rules",
                    uri=base.uri,
                    read_version=txn.read_version,
                    conflicting_versions=[v],
                )
        store = base.state.store
        rebased = Transaction(
            read_version=entry.table_version,
            operation=txn.operation,
            uuid=str(uuid_mod.uuid4()),
            message=txn.message,
            transaction_properties=txn.transaction_properties,
        )
        txn_name = write_transaction(store, rebased)
        w.written.append(rebased.file_path)
        version = entry.table_version + 1
        manifest = build_manifest(
            base.manifest,
            rebased,
            version=version,
            transaction_file=txn_name,
            ctx=BuildContext(load_version=base.state.load),
        )
        staged = staged_manifest_path(version, base.manifest_naming, uuid_mod.uuid4().hex)
        store.put(staged, encode_manifest(manifest))
        w.written.append(staged)
        return replace(entry, table_version=version, staged_manifest=staged)


def _naming_of(final: str) -> ManifestNaming:
    parsed = parse_manifest_name(final)
    return parsed[1] if parsed else ManifestNaming.V2
