"""`CatalogTransaction`: staged changes on one catalog snapshot, published as one catalog version.

Design notes: docs/guide/catalog.md, "Staging and publishing, as implemented".
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import time
import uuid as uuid_mod
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, TypeVar

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from mvcc_core.catalog import chain_rebase
from mvcc_core.catalog.change_rules import Change, find_conflict
from mvcc_core.catalog.entries import CHANGES_KEY, SCHEMA, TABLE, TOMBSTONE, VIEW, Entry, live, overwrite_transaction
from mvcc_core.catalog.errors import (
    RETRY_BUDGET,
    TABLE_GONE,
    TABLE_RULES,
    WRITTEN_OUTSIDE,
    CatalogConflictError,
    CatalogError,
    IncompatibleCatalogConflictError,
    RetryableCatalogConflictError,
)
from mvcc_core.catalog.forks import fork_for_write, fork_of, rooted
from mvcc_core.catalog.format_version import check_writable
from mvcc_core.catalog.names import check_schema_name, qualified, split
from mvcc_core.catalog.services import CatalogServices, SnapshotView
from mvcc_core.catalog.table_changes import TableWrite, TransactionTable
from mvcc_core.errors import CommitConflictError, InvalidNameError, StorageError, is_definite_failure
from mvcc_core.failpoints import failpoint
from mvcc_core.format import operations
from mvcc_core.format.manifest import encode_manifest, location_of
from mvcc_core.io import open_store
from mvcc_core.maintenance import compaction
from mvcc_core.table import Table, write_table
from mvcc_core.txn.transaction import BuildContext, Transaction, build_manifest, check_properties

log = logging.getLogger("mvcc.catalog")

_Conflict = TypeVar("_Conflict", bound="CatalogConflictError")

# PUBLISHER_RETRY_BUDGET: the publisher owns its retries and re-checks conflicts on each one.
PUBLISH_RETRY_BUDGET = 5
# On an object store tables are staged and finalized concurrently: each is a few requests, and they do not
# depend on each other (the order of a chain's versions within one table is kept). On a local disk one after
# the other: each step is a few file operations, and handing them to threads cost more than it overlapped
# (measured: docs/guide/catalog.md "Benchmark").
TABLE_THREADS = 8
# After a lost race the publisher waits a random part of (its last attempt's duration x 2^attempt), at most
# this long, so that contending writers spread out instead of all re-reading the catalog at once.
BACKOFF_CAP_SECONDS = 2.0
_POOL: tuple[int, ThreadPoolExecutor] | None = None  # (the pid that made it, the pool): a forked child
# inherits the pool object without its threads, so it makes its own


def _each(fn: Callable[[Any], Any], items: Iterable[Any], *, concurrent: bool) -> list[Any]:
    """`fn` over `items`, on the catalog's thread pool when `concurrent`; the first exception (in item order)
    propagates after every call has finished, so no attempt is left writing in the background."""
    global _POOL
    items = list(items)
    if len(items) <= 1 or not concurrent:
        return [fn(item) for item in items]
    if _POOL is None or _POOL[0] != os.getpid():
        _POOL = (os.getpid(), ThreadPoolExecutor(max_workers=TABLE_THREADS, thread_name_prefix="mvcc-catalog"))
    futures = [_POOL[1].submit(fn, item) for item in items]
    errors = [f.exception() for f in futures]
    for error in errors:
        if error is not None:
            raise error
    return [f.result() for f in futures]


class _CatalogMoved(Exception):
    """Internal: the catalog advanced while an attempt was staging; the publisher retries."""


def _check_view_sql(name: str, sql: str, dialect: str | None) -> None:
    """A view is stored, not executed, but it must be one query that parses (sqlglot, the project's SQL parser)."""
    if not isinstance(sql, str) or not sql.strip():
        raise ValueError(f"view {name!r}: the definition must be non-empty SQL text, got {sql!r}")
    try:
        parsed = sqlglot.parse(sql, read=dialect)
    except SqlglotError as exc:
        raise ValueError(f"view {name!r}: the definition does not parse as SQL: {exc}") from None
    statements = [p for p in parsed if p is not None]
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        raise ValueError(f"view {name!r}: the definition must be exactly one query (SELECT ...), got {sql!r}")


class CatalogTransaction:
    """Staged changes on one catalog snapshot, published at once by `commit` (or the `with` block's end).

    Optimistic: nothing is locked. At publish every catalog version since the snapshot is checked against
    DuckLake's logical conflicts; without one the publish retries on the newer version without rewriting a
    data file (a table that moved is rebuilt on its new version from the same staged operations, row-level
    changes rebased by the core's resolver).

    Args:
        catalog: the catalog written
        snapshot: the catalog version the changes are staged on
        commit_message: the message of the catalog version it publishes
        transaction_properties: properties stored on that version (keys starting with `catalog.` are reserved)

    Raises:
        ValueError: a property key starts with `catalog.`
    """

    #: changes record what they did for a branch publish to run again (`BranchTransaction`: True)
    records_writes = False

    def __init__(
        self,
        catalog: CatalogServices,
        snapshot: SnapshotView,
        *,
        commit_message: str | None = None,
        transaction_properties: dict[str, str] | None = None,
    ) -> None:
        self.catalog = catalog
        self.snapshot = snapshot
        self.commit_message = commit_message or ""
        # The caller's properties of the catalog version (`CatalogVersion.properties`); `catalog.` is ours.
        self.transaction_properties = check_properties(transaction_properties)
        reserved = [k for k in self.transaction_properties if k.startswith("catalog.")]
        if reserved:
            raise ValueError(f"transaction_properties: keys starting with 'catalog.' are the catalog's own: {reserved}")
        self._ddl: list[Change] = []
        self._schemas: dict[str, bool] = {}  # created (True) or dropped (False) in this transaction
        self._objects: dict[str, Entry] = {}  # tables and views as this transaction leaves them; tombstones
        self.writes: dict[str, TableWrite] = {}  # by table directory
        self._created: dict[str, str] = {}  # directory -> name, of tables created in this transaction
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

    def check_open(self) -> None:
        """Raise ValueError when the transaction is no longer open (published or abandoned)."""
        if self._state != "open":
            raise ValueError(f"the transaction is {self._state}")

    # ---- this transaction's view of the catalog ----------------------------------------------

    def _object(self, name: str) -> Entry | None:
        """The live table or view `name` as this transaction leaves the catalog so far (a name that breaks the rule
        is refused: CatalogEntryError when it is a live row that breaks it, InvalidNameError otherwise)."""
        try:
            full = qualified(name)
        except InvalidNameError:
            return self.snapshot.object(name)  # raises: CatalogEntryError naming the row, or InvalidNameError
        if full in self._objects:
            found = self._objects[full]
            return None if found.object_type.endswith(TOMBSTONE) else found
        return self.snapshot.object(full)

    def _schema_exists(self, name: str) -> bool:
        if name in self._schemas:
            return self._schemas[name]
        return (SCHEMA, name) in self.snapshot.entries

    def _objects_in(self, schema: str) -> list[str]:
        names = {n for (k, n) in self.snapshot.entries if k in (TABLE, VIEW)} | set(self._objects)
        return sorted(n for n in names if n.split(".")[0] == schema and self._object(n) is not None)

    def _table(self, name: str) -> Entry:
        found = self._object(name)
        if found is None or found.object_type != TABLE:
            what = "a view" if found is not None else "no table"
            raise CatalogError(f"{qualified(name)!r} is {what} in catalog {self.catalog.root} (this transaction)")
        return found

    def _view(self, name: str) -> Entry:
        found = self._object(name)
        if found is None or found.object_type != VIEW:
            raise CatalogError(f"no view {qualified(name)!r} in catalog {self.catalog.root} (this transaction)")
        return found

    def _rename(self, name: str, new_name: str, lookup: Callable[[str], Entry]) -> None:
        """Move the table or view `lookup(name)` finds to `new_name`: an alter of the old name and a create of the
        new one, for the conflict rules; the new name must be free of tables and views."""
        self.check_open()
        full, new_full = qualified(name), qualified(new_name)
        found = lookup(full)
        self._check_free(new_full)
        kind = found.object_type
        self._objects[full] = Entry(kind + TOMBSTONE, full)
        self._objects[new_full] = replace(found, name=new_full)
        self._ddl.append(Change(f"altered_{kind}", full))
        self._ddl.append(Change(f"created_{kind}", new_full))

    def write_for(self, name: str) -> TableWrite:
        """The chain of data changes on table `name` (started on the version the snapshot publishes).

        Args:
            name: the table's name
        """
        self.check_open()
        entry = self._table(name)
        w = self.writes.get(entry.path)
        if w is None:
            created = entry.path in self._created
            if created:
                state = self.catalog.table_at(entry).state
                origin = self._created[entry.path]
            else:
                origin = self._snapshot_name(entry.path)
                state = self.snapshot.table(origin).state
            w = TableWrite(entry.path, origin, created, state, state)
            self.writes[entry.path] = w
        return w

    def _snapshot_name(self, path: str) -> str:
        """The name the table in directory `path` had in the snapshot."""
        return next(e.name for (kind, _), e in self.snapshot.entries.items() if kind == TABLE and e.path == path)

    # ---- staging -----------------------------------------------------------------------------

    def table(self, name: str) -> TransactionTable:
        """The table `name` as this transaction sees it: reads and staged writes.

        Args:
            name: the table's name, `schema.table` or `table` (in the schema `main`)
        """
        self._object(name)  # a bad name is refused here: CatalogEntryError for a live row that breaks the rule
        return TransactionTable(self, name)

    def create_schema(self, name: str) -> None:
        """Create the schema `name`.

        Args:
            name: the schema's name (`names.CATALOG_SCHEMA`: ASCII letters, digits, '_' and '-')

        Raises:
            InvalidNameError: the name breaks the rule (a ValueError)
            CatalogError: the schema exists
        """
        self.check_open()
        check_schema_name(name)
        if self._schema_exists(name):
            raise CatalogError(f"schema {name!r} exists already")
        self._schemas[name] = True
        self._ddl.append(Change("created_schema", name))

    def drop_schema(self, name: str) -> None:
        """Drop the schema `name`, which must be empty.

        Args:
            name: the schema's name

        Raises:
            CatalogError: there is no such schema, or it holds tables or views
        """
        self.check_open()
        if not self._schema_exists(name):
            raise CatalogError(f"no schema {name!r}")
        inside = self._objects_in(name)
        if inside:
            raise CatalogError(f"schema {name!r} is not empty: {', '.join(inside)}")
        self._schemas[name] = False
        self._ddl.append(Change("dropped_schema", name))

    def _check_free(self, full: str) -> None:
        schema_name = split(full)[0]
        if not self._schema_exists(schema_name):
            raise CatalogError(f"no schema {schema_name!r} for {full!r}")
        found = self._object(full)
        if found is not None:
            raise CatalogError(f"{found.object_type} {full!r} exists already (tables and views share names)")

    def create_table(self, name: str, schema: pa.Schema) -> None:
        """Create the table's directory now (version 1, empty); it is published with the transaction.

        Args:
            name: the table's name, `schema.table` or `table` (in the schema `main`)
            schema: the table's Arrow schema
        """
        self.check_open()
        full = qualified(name)
        self._check_free(full)
        schema_name, table_name = split(full)
        path = f"{schema_name}/{table_name}-{uuid_mod.uuid4().hex[:12]}"
        write_table(
            schema.empty_table(),
            f"{self.catalog.root}/{path}",
            schema=schema,
            storage_options=self.catalog.options or None,
            commit_message=f"create {full}",
        )
        self._created[path] = full
        self._objects[full] = Entry(TABLE, full, path, 1)
        self._ddl.append(Change("created_table", full))

    def _discard(self, entry: Entry) -> None:
        """A table dropped in this transaction: its staged changes (and, if created here, itself) go away."""
        w = self.writes.pop(entry.path, None)
        if w is not None:
            self._remove_chain(w)
        if entry.path in self._created:
            self._remove_directory(entry.path)

    def drop_table(self, name: str) -> None:
        """Drop the table; data changes staged on it in this transaction are discarded with it.

        Args:
            name: the table's name, `schema.table` or `table` (in the schema `main`)
        """
        self.check_open()
        full = qualified(name)
        entry = self._table(full)
        self._discard(entry)
        self._objects[full] = Entry(TABLE + TOMBSTONE, full)
        self._ddl.append(Change("dropped_table", full))

    def rename_table(self, name: str, new_name: str) -> None:
        """A rename alters the old name and creates the new one (for the conflict rules); same directory, so
        changes staged before and after it are one chain on the one table.

        Args:
            name: the table's name, `schema.table` or `table` (in the schema `main`)
            new_name: its new name (free of tables and views)
        """
        self._rename(name, new_name, self._table)

    def create_view(self, name: str, sql: str, *, or_replace: bool = False, dialect: str | None = None) -> None:
        """Store view `name` as the SQL text `sql`: it must parse as one query (sqlglot, `dialect`), and is never
        executed or checked against the tables it names (DuckLake: a view is its text). `or_replace` replaces
        an existing view (an alter, for the conflict rules); a table of that name is never replaced.

        Args:
            name: the view's name, `schema.view` or `view` (in the schema `main`)
            sql: the view's query
            or_replace: replace an existing view of that name
            dialect: the sqlglot dialect `sql` is parsed in (None: sqlglot's default)
        """
        self.check_open()
        full = qualified(name)
        _check_view_sql(full, sql, dialect)
        existing = self._object(full)
        if existing is not None and existing.object_type == VIEW and or_replace:
            kind = "altered_view"
        else:
            self._check_free(full)
            kind = "created_view"
        self._objects[full] = Entry(VIEW, full, definition=sql)
        self._ddl.append(Change(kind, full))

    def rename_view(self, name: str, new_name: str) -> None:
        """Rename view `name` (DuckLake: `ALTER VIEW ... RENAME TO`): an alter of the old name and a create of
        the new one for the conflict rules, as `rename_table`; the new name must be free of tables and views.

        Args:
            name: the view's name, `schema.view` or `view` (in the schema `main`)
            new_name: its new name (free of tables and views)
        """
        self._rename(name, new_name, self._view)

    def drop_view(self, name: str) -> None:
        """Drop the view `name`.

        Args:
            name: the view's name, `schema.view` or `view` (in the schema `main`)

        Raises:
            CatalogError: there is no such view
        """
        self.check_open()
        full = qualified(name)
        self._view(full)
        self._objects[full] = Entry(VIEW + TOMBSTONE, full)
        self._ddl.append(Change("dropped_view", full))

    # ---- publishing --------------------------------------------------------------------------

    def staged_files(self) -> list[str]:
        """The full URIs of the data and deletion files staged so far (removed again if the publish fails)."""
        return [f for w in self.writes.values() for txn in w.chain for f in txn.files]

    def all_changes(self) -> list[Change]:
        out = list(self._ddl)
        for w in self.writes.values():
            out.extend(Change(kind, w.origin) for kind in w.kinds)
        return out

    def abort(self) -> None:
        """Remove every staged file; the transaction cannot be committed afterwards."""
        if self._state != "open":
            return
        self._state = "aborted"
        self._cleanup()

    def _cleanup(self) -> None:
        for w in self.writes.values():
            self._remove_chain(w)
        for path in self._created:
            self._remove_directory(path)

    def _remove_chain(self, w: TableWrite) -> None:
        self._remove_written(w)
        for txn in w.chain:
            with contextlib.suppress(StorageError):
                txn.abort(self.catalog.options or None)

    def _remove_directory(self, path: str) -> None:
        with contextlib.suppress(StorageError):
            store = open_store(f"{self.catalog.root}/{path}", self.catalog.options or None)
            store.delete_many([m.path for m in store.list("")])

    def _remove_written(self, w: TableWrite) -> None:
        if w.written:
            with contextlib.suppress(StorageError):
                self.catalog.store(w.path).delete_many(w.written)
            w.written = []

    def commit(self) -> int:
        """Publish every staged change as one catalog version (returned); nothing is visible before, all after.

        Raises `CatalogConflictError` (retryable or incompatible, by DuckLake's rule) naming the object and
        the expected and actual versions; its staged files are removed first.
        """
        self.check_open()
        self._state = "committing"
        try:
            version = self._publish()
        except BaseException as exc:
            if self.published_version is not None:
                self._state = "committed"  # failed after the commit point: published; nothing may be removed
                raise
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
        took = 0.0
        for attempt in range(PUBLISH_RETRY_BUDGET):
            if attempt:
                time.sleep(min(BACKOFF_CAP_SECONDS, random.uniform(0, took * 2**attempt)))
            began = time.monotonic()
            # Optimistic: the first attempt commits on the snapshot it staged on (the `__manifest` commit
            # fails if anything was published since); later attempts read the newest catalog version.
            current = self.snapshot if attempt == 0 else self.catalog.snapshot()
            check_writable(current.format_version, self.catalog.root)
            if current.version > read:
                self._check_logical(current.version)
            try:
                rows = self._next_rows(current)
            except _CatalogMoved:
                self._forget_attempt()
                took = time.monotonic() - began
                continue
            properties = {**self.transaction_properties, CHANGES_KEY: json.dumps([c.as_dict() for c in changes])}
            failpoint("catalog.after_stage")
            # `is None`, not `or`: a Table's truth value is its row count, a scan of the whole state.
            base = current.manifest if current.manifest is not None else self.catalog.manifest_table(current.version)
            manifest = Table.from_state(base.state)  # a handle of its own: the snapshot's stays at its version
            txn = overwrite_transaction(
                manifest, rows, commit_message=self.commit_message, transaction_properties=properties
            )
            try:
                manifest.commit(txn, max_retries=0)
            except CommitConflictError:
                self._forget_attempt()
                took = time.monotonic() - began
                log.debug(
                    "catalog %s: lost catalog version %d (attempt %d)", self.catalog.root, current.version + 1, attempt
                )
                continue
            new_version = current.version + 1
            self.published_version = new_version  # the commit point is passed: from here on, roll forward only
            self.catalog.remember_manifest(manifest.state)
            self.catalog.remember_rows(new_version, rows)
            failpoint("catalog.after_publish")
            self._after_publish(rows, new_version)
            return new_version
        raise RetryableCatalogConflictError(
            f"catalog {self.catalog.root}: lost the race for a new catalog version {PUBLISH_RETRY_BUDGET} times "
            f"(read version {read}); run the transaction again",
            object_name="__manifest",
            expected_version=read,
            actual_version=self.catalog.latest_version,
            rule="publisher retry budget exhausted",
            rule_code=RETRY_BUDGET,
            uri=self.catalog.root,
            read_version=read,
        )

    def _after_publish(self, rows: list[Entry], version: int) -> None:
        """Finalize every table this version published (the roll-forward readers would otherwise do), then
        remove what the published versions no longer need. Best effort: a failure leaves work for readers
        (finalizing) or retention (debris), never an inconsistency."""
        known: dict[str, dict[str, bytes]] = {}  # table path -> manifest name -> bytes
        superseded: list[str] = []
        for w in self.writes.values():
            for txn in w.chain:
                txn.files = []  # the published versions own them now
            known[w.path] = w.staged_bytes
            superseded += [f"{w.path}/{f}" for f in w.superseded]
        published = [e for e in live(rows).values() if e.catalog_version == version and e.staged_manifests]

        def finalize(entry: Entry) -> None:
            mine = known.get(entry.path, {})
            ours = all(s in mine for s in entry.staged_manifests)
            try:
                self.catalog.finalize(entry, {s: mine[s] for s in entry.staged_manifests} if ours else None)
            except StorageError:
                pass  # a reader or the next writer finalizes it
            except CatalogError as exc:
                log.error("catalog %s, version %d is published but: %s", self.catalog.root, version, exc)

        _each(finalize, published, concurrent=self.catalog.remote)
        for w in self.writes.values():
            entry = next((e for e in published if e.path == w.path), None)
            if entry is not None and w.published is not None:
                self.catalog.remember(entry, w.published)
        failpoint("catalog.after_finalize")
        with contextlib.suppress(StorageError):
            self.catalog.reclaim_staged(published)
        if superseded:
            with contextlib.suppress(StorageError):
                self.catalog.store().delete_many(superseded)

    def _forget_attempt(self) -> None:
        """A lost race: the staged manifests of this attempt are garbage (no catalog version names them)."""
        for w in self.writes.values():
            self._remove_written(w)
            w.superseded = []

    def _check_logical(self, latest: int) -> None:
        ours = self.all_changes()
        for version, theirs in self.catalog.changes_since(self.snapshot.version, latest):
            found = find_conflict(ours, theirs)
            if found is None:
                continue
            rule, name = found
            cls = RetryableCatalogConflictError if rule.retryable else IncompatibleCatalogConflictError
            raise self._conflict(
                cls,
                (name, version),
                (rule.text, rule.code),
                f"{name!r} conflicts with catalog version {version} ({rule.text}); this transaction read catalog "
                f"version {self.snapshot.version}, the catalog is at {latest}",
            )

    def _conflict(
        self,
        cls: type[_Conflict],
        found: tuple[str, int],
        rule: tuple[str, str],
        what: str,
        *,
        conflicting: bool = True,
    ) -> _Conflict:
        """A `cls` conflict of this transaction (which read `snapshot`) with a later catalog version: `found` is
        (the object both changed, that catalog version), `rule` (DuckLake's words, the rule's code), `what` the
        message after "catalog <root>: ", `conflicting` whether that version made the change (False: only the
        newest version, where the change was found)."""
        name, version = found
        return cls.with_catalog_version(
            f"catalog {self.catalog.root}: {what}",
            root=self.catalog.root,
            object_name=name,
            read_version=self.snapshot.version,
            version=version,
            rule=rule[0],
            rule_code=rule[1],
            conflicting=conflicting,
        )

    def _gone(self, name: str, current: int) -> IncompatibleCatalogConflictError:
        return self._conflict(
            IncompatibleCatalogConflictError,
            (name, current),
            ("a snapshot tries to change a table that was dropped by another snapshot", TABLE_GONE),
            f"{name!r} names another table now (dropped, or dropped and re-created)",
            conflicting=False,  # `current` is the newest catalog version, not necessarily the one that dropped it
        )

    def _next_rows(self, current: SnapshotView) -> list[Entry]:
        """`current`'s rows with this transaction applied; stages each changed table's chain of manifests."""
        new = current.version + 1
        # A row carried into this version unchanged drops the manifests its own catalog version carries
        # (`Catalog.finalize` reads them there): the state stays as small as the rows.
        rows = {(r.object_type, r.name): replace(r, manifests=()) if r.manifests else r for r in current.rows}
        by_path = {e.path: e for (kind, _), e in current.entries.items() if kind == TABLE}

        def put(entry: Entry) -> None:
            rows[(entry.object_type, entry.name)] = replace(entry, catalog_version=new)

        def bury(name: str) -> None:
            """A tombstone for what our snapshot had under `name` (never for an object only others know)."""
            old = self.snapshot.object(name)
            if old is not None:
                put(Entry(old.object_type + TOMBSTONE, name))

        for name, alive in self._schemas.items():
            if alive:
                put(Entry(SCHEMA, name))
            elif (SCHEMA, name) in self.snapshot.entries:
                put(Entry(SCHEMA + TOMBSTONE, name))

        bases = []
        for path, w in self.writes.items():
            if not w.chain:
                continue  # only reads, or changes that matched no row: nothing to publish
            base = self._objects_by_path(path) if w.created else by_path.get(path)
            if base is None:
                raise self._gone(w.origin, current.version)
            bases.append((w, base))
        staged = _each(
            lambda wb: self._stage_chain(wb[0], wb[1], current.version), bases, concurrent=self.catalog.remote
        )
        published = {w.path: entry for (w, _), entry in zip(bases, staged, strict=True)}
        placed: set[str] = set()
        for name, entry in self._objects.items():
            if entry.object_type.endswith(TOMBSTONE):
                bury(name)
                continue
            old = self.snapshot.object(name)
            if old is not None and old.object_type != entry.object_type:
                bury(name)
            if entry.object_type == VIEW:
                put(entry)
                continue
            source = entry if entry.path in self._created else by_path.get(entry.path)
            if source is None:
                raise self._gone(name, current.version)
            put(replace(published.get(entry.path, source), name=name))
            placed.add(entry.path)
        for path, entry in published.items():
            if path not in placed:
                put(entry)
        return sorted(rows.values(), key=lambda r: (r.object_type, r.name))

    def _objects_by_path(self, path: str) -> Entry | None:
        return next((e for e in self._objects.values() if e.path == path and e.object_type == TABLE), None)

    def _stage_chain(self, w: TableWrite, entry: Entry, current: int) -> Entry:
        """Build the chain's manifests on the version `entry` publishes (in memory: the catalog version carries
        them, format 4) and write each step's transaction file; the entry publishing them.

        When the table moved since the snapshot the chain is rebased step by step (`_rebase_chain`).

        Args:
            w: The chain.
            entry: The table's row in the catalog version being committed on.
            current: That catalog version.

        Returns:
            The row naming the new table version, the final names of its manifests and their bytes.
        """
        self._remove_written(w)
        w.superseded = []
        w.staged_bytes = {}
        if not w.created:
            self.catalog.finalize(entry)
        base = Table.from_state(w.base) if entry.table_version == w.base.version else self.catalog.table_at(entry)
        if self.catalog.branch is not None and fork_of(entry) is None:  # the table's first write on the branch
            fork = fork_for_write(
                self.catalog.manifest_uri, self.catalog.options, self.catalog.branch, entry, base.state
            )
            if fork is None:
                raise _CatalogMoved  # another writer's publish recorded the fork: retry on the newer branch version
            base = Table.from_state(fork)
        store = base.state.store
        if store.exists(location_of(store, entry.table_version + 1, base.manifest_naming).path):
            if self.catalog.latest_version != current:
                raise _CatalogMoved  # another publish finalized it after we read the catalog: a lost race
            raise IncompatibleCatalogConflictError(
                f"table {base.uri} is at version {base.latest_version} but catalog version {current} publishes "
                f"{entry.table_version}: it was written outside the catalog, which catalog tables do not allow",
                object_name=w.origin,
                expected_version=entry.table_version,
                actual_version=base.latest_version,
                rule="a catalog table is written only through the catalog",
                rule_code=WRITTEN_OUTSIDE,
                uri=base.uri,
            )
        chain = list(w.chain)
        if entry.table_version != w.base.version:
            chain = self._rebase_chain(w, base, chain, current)
        manifest = base.manifest
        staged: list[str] = []
        carried: list[bytes] = []
        for txn in chain:
            version = manifest.version + 1
            operation = txn.operation
            if isinstance(operation, operations.Rewrite):  # an unreserved compaction: ids after the newest
                operation = compaction.renumber_new_fragments(operation, manifest)
            step = Transaction(
                read_version=manifest.version,
                operation=operation,
                uuid=str(uuid_mod.uuid4()),
                message=txn.message,
                transaction_properties=txn.transaction_properties,
            )
            store.put_new(step.file_path, step.encode())  # a fresh name, as the staged manifest's below
            txn_name = step.file_path.rsplit("/", 1)[-1]
            w.written.append(rooted(store, step.file_path))
            manifest = build_manifest(
                manifest,
                step,
                version=version,
                transaction_file=txn_name,
                ctx=BuildContext(load_version=base.state.load),
            )
            # Nothing is written for the manifest before the commit point: the catalog version carries its
            # bytes, and finalizing writes them under the final name (format 4; docs/guide/catalog.md).
            path = rooted(store, location_of(store, version, base.manifest_naming).path)
            encoded = encode_manifest(manifest)
            w.staged_bytes[path] = encoded
            staged.append(path)
            carried.append(encoded)
        failpoint("catalog.after_table_staged")
        w.published = replace(base.state, manifest=manifest)
        return replace(entry, table_version=manifest.version, staged_manifests=tuple(staged), manifests=tuple(carried))

    def _table_rules_conflict(
        self, w: TableWrite, base: Table, current: int, message: str, **kwargs: Any
    ) -> RetryableCatalogConflictError:
        """A retryable conflict decided by the table's own (Lance) rules on a table that moved."""
        return RetryableCatalogConflictError(
            message,
            object_name=w.origin,
            expected_version=self.snapshot.version,
            actual_version=current,
            rule="the core's conflict rules",
            rule_code=TABLE_RULES,
            uri=base.uri,
            read_version=w.base.version,
            **kwargs,
        )

    def _rebase_chain(self, w: TableWrite, base: Table, chain: list[Transaction], current: int) -> list[Transaction]:
        """`chain` moved onto `base` (the table moved since the snapshot): `chain_rebase.rebase_chain`, with this
        transaction's conflict errors."""
        return chain_rebase.rebase_chain(
            w,
            base,
            chain,
            conflict=lambda version, theirs, reason: self._chain_conflict(
                w, base, chain, current, version, theirs, reason
            ),
            rows_conflict=lambda message: self._table_rules_conflict(w, base, current, message),
        )

    def _chain_conflict(
        self,
        w: TableWrite,
        base: Table,
        chain: list[Transaction],
        current: int,
        version: int,
        theirs: Transaction | None,
        reason: str,
    ) -> RetryableCatalogConflictError:
        op_name = theirs.operation.name if theirs is not None else "unreadable"
        return self._table_rules_conflict(
            w,
            base,
            current,
            f"{', '.join(t.operation.name for t in chain)} on {w.origin!r} (table version {w.base.version}) "
            f"conflicts with table version {version} ({op_name}) by the table's own rules: {reason}; this "
            f"transaction read catalog version {self.snapshot.version}, table {w.origin!r} is published at "
            f"catalog version {current} as table version {base.version}",
            conflicting_versions=[version],
        )
