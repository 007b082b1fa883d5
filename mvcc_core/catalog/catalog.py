"""`Catalog`: many tables under one root; every change (DDL or data, one table or many) is one catalog version.

Design notes: docs/guide/catalog.md, "The Catalog object, as implemented".
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa

from mvcc_core.catalog import format_version as format_mod
from mvcc_core.catalog import repair, retention
from mvcc_core.catalog.branches import BranchTransaction, CatalogBranchMethods
from mvcc_core.catalog.change_rules import Change
from mvcc_core.catalog.entries import (
    CHANGES_KEY,
    FORMAT_VERSION,
    SCHEMA,
    SHAPES,
    Entry,
    check_table_path,
    format_of,
    read_rows,
    rows_table,
)
from mvcc_core.catalog.errors import CatalogError
from mvcc_core.catalog.forks import fork_of
from mvcc_core.catalog.multi_table import CatalogTransaction
from mvcc_core.catalog.names import DEFAULT_SCHEMA
from mvcc_core.catalog.snapshot import CatalogSnapshot
from mvcc_core.errors import ObjectNotFoundError, StorageError, VersionNotFoundError
from mvcc_core.failpoints import failpoint
from mvcc_core.format.branches import branch_store
from mvcc_core.format.manifest import PUT_IF_NOT_EXISTS, ManifestLocation, location_of, write_latest_hint
from mvcc_core.format.naming import ManifestNaming, manifest_path, parse_manifest_name
from mvcc_core.io import ObjectStore, open_store
from mvcc_core.table import Table, open_table, write_table
from mvcc_core.txn.commit import Committer
from mvcc_core.txn.external_store import final_of, is_staged
from mvcc_core.txn.state import TableState

MANIFEST_DIR = "__manifest"
# `__manifest` versions whose rows this process keeps, and table versions whose manifests it keeps (a
# published version never changes, so neither cache needs a check).
ROWS_CACHED = 8
STATES_CACHED = 64
# `__manifest` manifests and transactions the shared committer keeps (`_trim`): a publisher re-reads only the
# versions since its snapshot (`changes_since`), so the newest few are all it ever asks for again.
MANIFESTS_CACHED = 16


@dataclass(frozen=True)
class CatalogVersion:
    """One catalog version and the changes it made (DuckLake's `snapshot_changes`)."""

    version: int
    timestamp: datetime
    changes: list[dict[str, str]]
    message: str = ""
    properties: dict[str, str] = field(default_factory=dict)  # the writer's (`transaction(transaction_properties=)`)


def _root(root_uri: str) -> str:
    """A catalog's root without a trailing '/': a local path normalized (its `..` resolved), an object-store
    uri refused with ValueError when it has a `.` or `..` segment (a store would resolve it differently).

    Args:
        root_uri: the root as the caller gave it
    """
    root = str(root_uri).rstrip("/")
    scheme, sep, rest = root.partition("://")
    if not sep:
        scheme, rest = "", root
    if any(segment in (".", "..") for segment in rest.split("/")):
        if scheme in ("", "file"):
            normalized = os.path.normpath(rest)
            return f"file://{normalized}" if scheme else normalized
        raise ValueError(f"a catalog root has no '.' or '..' segment, got {root_uri!r}")
    return root


class Catalog(CatalogBranchMethods):
    """Tables kept together under one root; see the module docstring and docs/guide/catalog.md.

    Example::

        cat = Catalog.create("/data/cat")
        cat.create_table("sales.orders", pa.schema([("id", pa.int64())]))
        with cat.transaction() as tx:
            tx.table("sales.orders").append(pa.table({"id": [1]}))
        cat.table("sales.orders").to_table()

    Args:
        root: the catalog's root uri
        storage_options: the store options of every table under the root
        manifest: the `__manifest` table, at its newest version (of `branch`)
        branch: the catalog branch this object reads and writes (None: main; `Catalog.on_branch`)
    """

    def __init__(
        self, root: str, storage_options: Mapping[str, Any] | None, manifest: Table, branch: str | None = None
    ) -> None:
        """A catalog object on an opened `__manifest`; use `Catalog.create` or `Catalog.open`."""
        self.root = root
        self.branch = branch
        self.options = dict(storage_options or {})
        self._manifest_uri = manifest.uri
        self.manifest_uri = manifest.uri  # `__manifest`'s uri (main's, whatever the branch)
        self._lock = threading.Lock()
        # The newest `__manifest` version this object has read or committed, with its committer: one committer
        # per catalog object, so a publish neither re-opens the table nor re-reads what it wrote (`latest_manifest`).
        self._latest: TableState = manifest.state
        #: Whether the catalog is on an object store (requests worth overlapping across tables) rather than a
        #: local disk or memory (file operations that a thread hand-off costs more than it overlaps).
        self.remote = manifest.state.store.scheme not in ("file", "memory")
        self._rows: OrderedDict[int, list[Entry]] = OrderedDict()  # __manifest version -> its rows
        # keyed by `_key`: (table path, version, fork branch), a fork's versions numbered as main's
        self._finalized: set[tuple[str, int, str | None]] = set()  # known to have their final manifests
        self._states: OrderedDict[tuple[str, int, str | None], TableState] = OrderedDict()
        self._stores: OrderedDict[str, ObjectStore] = OrderedDict()  # table path ("" the root) -> its store
        # a catalog branch's first version, (version, rows), read once (`branch_row_problems`)
        self._branch_point: tuple[int, list[Entry]] | None = None

    # ---- opening -----------------------------------------------------------------------------

    @classmethod
    def create(cls, root_uri: str, *, storage_options: Mapping[str, Any] | None = None) -> Catalog:
        """A new, empty catalog with the schema `main` (catalog version 1, stamped with the current format);
        TableExistsError if one is there.

        Args:
            root_uri: where the catalog is created
            storage_options: the store options of every table under the root
        """
        root = _root(root_uri)
        row = Entry(SCHEMA, DEFAULT_SCHEMA, catalog_version=1)
        manifest = write_table(
            rows_table([row]),
            f"{root}/{MANIFEST_DIR}",
            schema=SHAPES[FORMAT_VERSION],
            storage_options=dict(storage_options or {}) or None,
            commit_message="create catalog",
            transaction_properties={CHANGES_KEY: json.dumps([Change("created_schema", DEFAULT_SCHEMA).as_dict()])},
        )
        return cls(root, storage_options, manifest)

    @classmethod
    def open(cls, root_uri: str, *, storage_options: Mapping[str, Any] | None = None) -> Catalog:
        """The catalog at `root_uri`; TableNotFoundError if there is none. Opening writes nothing (an older
        format is migrated by the first write, `migrate`).

        Args:
            root_uri: the catalog's root
            storage_options: the store options of every table under the root
        """
        root = _root(root_uri)
        manifest = open_table(f"{root}/{MANIFEST_DIR}", storage_options=dict(storage_options or {}) or None)
        return cls(root, storage_options, manifest)

    # ---- reading -----------------------------------------------------------------------------

    def manifest_table(self, version: int | datetime | None = None) -> Table:
        """`__manifest` at `version` (default the newest, `latest_manifest`).

        Args:
            version: the catalog version (a number or a datetime; None: the newest)
        """
        opts = self.options or None
        if version is None:
            return self.latest_manifest()
        if isinstance(version, datetime):
            return open_table(self._manifest_uri, asof=version, storage_options=opts, branch=self.branch)
        return open_table(self._manifest_uri, version, storage_options=opts, branch=self.branch)

    def latest_manifest(self) -> Table:
        """`__manifest` at its newest version, a fresh handle on the state this object keeps.

        Re-opening the table on every publish cost a listing, a manifest read and a schema decode; the kept
        state needs only a check that no newer version exists (on a local disk two stats, on an object store
        the one LIST a re-open starts with), and a newer version found is loaded through the same committer.
        """
        with self._lock:
            state = self._latest
        location = _newer_location(state)
        if location is not None:
            state = self.remember_manifest(
                replace(state, manifest=state.committer.load_manifest(location), naming=location.naming)
            )
        return Table.from_state(state)

    def remember_manifest(self, state: TableState) -> TableState:
        """Keep `state` as the newest `__manifest` version unless a newer one is kept already (a publisher
        knows the version it committed); the newest state kept.

        Args:
            state: a `__manifest` version this object read or committed
        """
        with self._lock:
            if state.version >= self._latest.version:
                self._latest = state
            kept = self._latest
        _trim(kept)
        return kept

    @property
    def latest_version(self) -> int:
        return self.latest_manifest().version

    @property
    def format_version(self) -> int:
        """The format stamp of the newest catalog version (`state.FORMAT_VERSION` is what this code writes)."""
        return format_of(self.manifest_table())

    def snapshot(self, version: int | datetime | None = None, *, branch: str | None = None) -> CatalogSnapshot:
        """Every object at catalog `version` (a number or a datetime; default the newest). Writes nothing.

        Args:
            version: the catalog version (a number or a datetime; None: the newest)
            branch: read catalog branch `branch` (its versions; None: this object's branch)
        """
        if branch is not None and branch != self.branch:
            return self.on_branch(branch).snapshot(version)
        return self._snapshot_of(self.manifest_table(version))

    def _snapshot_of(self, manifest: Table) -> CatalogSnapshot:
        with self._lock:
            rows = self._rows.get(manifest.version)
        if rows is None:
            rows = read_rows(manifest)
            self.remember_rows(manifest.version, rows)
        problems = self.branch_row_problems(rows) if self.branch is not None else None
        return CatalogSnapshot(self, manifest.version, rows, format_of(manifest), manifest, problems)

    def remember_rows(self, version: int, rows: list[Entry]) -> None:
        """Keep the rows of catalog `version` (its publisher knows them without reading them back).

        Args:
            version: the catalog version
            rows: its `__manifest` rows
        """
        with self._lock:
            self._rows[version] = rows
            while len(self._rows) > ROWS_CACHED:
                self._rows.popitem(last=False)

    def table(self, name: str, *, version: int | datetime | None = None, branch: str | None = None) -> Table:
        """`name` at the table version catalog `version` (default the newest) publishes.

        Args:
            name: the table's name, `schema.table` or `table` (in the schema `main`)
            version: the catalog version (a number or a datetime; None: the newest)
            branch: the catalog branch (None: this object's): its fork of the table, or main's version as of
                the branch point when the branch never wrote it
        """
        return self.snapshot(version, branch=branch).table(name)

    def tables(self, schema: str | None = None) -> list[str]:
        """The live tables' full names at the newest catalog version, sorted.

        Args:
            schema: list only this schema's (None: every schema's)
        """
        return self.snapshot().tables(schema)

    def views(self, schema: str | None = None) -> list[str]:
        """The live views' full names at the newest catalog version, sorted.

        Args:
            schema: list only this schema's (None: every schema's)
        """
        return self.snapshot().views(schema)

    def view(self, name: str) -> str:
        """The SQL text of view `name` at the newest catalog version.

        Args:
            name: the view's name, `schema.view` or `view` (in the schema `main`)
        """
        return self.snapshot().view(name)

    def schemas(self) -> list[str]:
        return self.snapshot().schemas()

    def versions(self) -> list[CatalogVersion]:
        """Every catalog version, oldest first, with the changes it made."""
        out = []
        for info in self.manifest_table().versions():
            props = info.get("transaction_properties") or {}
            out.append(
                CatalogVersion(
                    version=info["version"],
                    timestamp=info["timestamp"],
                    changes=json.loads(props.get(CHANGES_KEY, "[]")),
                    message=info.get("message") or "",
                    properties={k: v for k, v in props.items() if not k.startswith("catalog.")},
                )
            )
        return out

    def changes_since(self, version: int, until: int) -> list[tuple[int, list[Change]]]:
        """The changes of catalog versions `version + 1 .. until`, for conflict checks (read through the kept
        committer, which has the newest versions' transactions already when this object published them).

        Args:
            version: the catalog version the caller read
            until: the newest catalog version to include
        """
        manifest = self.latest_manifest()
        out = []
        for v in range(version + 1, until + 1):
            txn = manifest.transaction(v)
            props = txn.transaction_properties if txn is not None else {}
            out.append((v, [Change.from_dict(d) for d in json.loads(props.get(CHANGES_KEY, "[]"))]))
        return out

    def table_uri(self, entry: Entry) -> str:
        """The uri of a table's directory.

        Args:
            entry: the table's `__manifest` row
        """
        return f"{self.root}/{entry.path}"

    def store(self, path: str = "") -> ObjectStore:
        """The store of the table directory `path` (default the catalog's root), opened once per catalog
        object: every publish finalizes each table it wrote, and opening a store each time showed up.

        Args:
            path: a table's directory relative to the root ('' for the root)
        """
        with self._lock:
            found = self._stores.get(path)
        if found is None:
            if path:
                check_table_path(path, f"catalog {self.root}")
            found = open_store(f"{self.root}/{path}" if path else self.root, self.options or None)
            with self._lock:
                self._stores[path] = found
                while len(self._stores) > STATES_CACHED:
                    self._stores.popitem(last=False)
        return found

    def table_at(self, entry: Entry) -> Table:
        """The table at the version `entry` publishes, read directly (the catalog knows the version, so no
        lookup of the table's latest version is needed). Finalize the entry first.

        Args:
            entry: the table's `__manifest` row
        """
        with self._lock:
            cached = self._states.get(_key(entry))
        if cached is not None:
            return Table.from_state(cached)
        store = branch_store(self.store(entry.path), fork_of(entry))
        committer = Committer(store, handler=PUT_IF_NOT_EXISTS)
        for naming in (ManifestNaming.V2, ManifestNaming.V1):
            try:
                manifest = committer.load_manifest(location_of(store, entry.table_version, naming))
            except VersionNotFoundError:
                continue
            state = TableState(store, manifest, naming, committer)
            self.remember(entry, state)
            return Table.from_state(state)
        return open_table(
            self.table_uri(entry), entry.table_version, storage_options=self.options or None, branch=fork_of(entry)
        )

    def remember(self, entry: Entry, state: TableState) -> None:
        """Keep `state` as the table at the version `entry` publishes (a writer knows what it published).

        Args:
            entry: the table's `__manifest` row
            state: the table at the version the row publishes
        """
        with self._lock:
            self._states[_key(entry)] = state
            while len(self._states) > STATES_CACHED:
                self._states.popitem(last=False)

    def finalize(self, entry: Entry, known: Mapping[str, bytes] | None = None) -> None:
        """Roll a published table version forward: give each manifest it names its final name, in version
        order (idempotent). `known`: the manifests' bytes, when the caller built them.

        A format 4 entry names the final names and its catalog version carries the bytes (`carried`); an older
        entry names staged manifests, copied to their final names. Any reader or writer may run it; a final
        name is created only if free (`_put_final`, `_link_final`), so racing finalizers make it once, with
        the same bytes. A read error propagates: it never deletes anything.

        Args:
            entry: A table's row of a published catalog version.
            known: The bytes of the manifests `entry` names, by name (the publisher's own).

        Raises:
            CatalogError: A final name holds other bytes (a commit outside the catalog), or the carried
                manifests cannot be found.
        """
        if not entry.staged_manifests or _key(entry) in self._finalized:
            return
        store = self.store(entry.path)
        last = final_of(entry.staged_manifests[-1])
        if known is None and store.exists(last):
            self._finalized.add(_key(entry))
            return
        carried: tuple[bytes, ...] | None = None
        for i, staged in enumerate(entry.staged_manifests):
            final = final_of(staged)
            if known is None and store.exists(final):
                continue
            data = None if known is None else known[staged]
            if staged == final:  # format 4: written from the bytes the catalog version carries
                if data is None:
                    carried = carried or self.carried(entry)
                    data = carried[i]
                written = _put_final(store, final, data)
            else:
                written = _link_final(store, staged, final, data)
            if not written:
                # Not a racing finalizer (same bytes): a commit outside the catalog took the version number
                # after the publisher checked. Say so loudly rather than let readers see the other manifest.
                raise CatalogError(
                    f"table {self.table_uri(entry)}: {final} was written "
                    f"outside the catalog after catalog version {entry.catalog_version} published it; catalog "
                    f"tables are written only through the catalog"
                )
            failpoint("catalog.after_finalize_copy")
        self._finalized.add(_key(entry))
        with contextlib.suppress(StorageError):
            write_latest_hint(branch_store(store, fork_of(entry)), entry.table_version, _naming_of(last))

    def carried(self, entry: Entry) -> tuple[bytes, ...]:
        """The encoded manifests a format 4 `entry` names, from the catalog version that wrote it (a row
        carried into later versions drops them).

        Args:
            entry: A table's row whose manifests may not be final yet.

        Returns:
            One encoded manifest per name in `entry.staged_manifests`.

        Raises:
            CatalogError: The writing catalog version does not carry them (it was removed, or is damaged).
        """
        if len(entry.manifests) == len(entry.staged_manifests):
            return entry.manifests
        snapshot = self._snapshot_of(self.manifest_table(entry.catalog_version))
        for row in snapshot.rows:
            same = (row.path, row.table_version, row.staged_manifests) == (
                entry.path,
                entry.table_version,
                entry.staged_manifests,
            )
            if same and len(row.manifests) == len(entry.staged_manifests):
                return row.manifests
        raise CatalogError(
            f"table {self.table_uri(entry)}: version {entry.table_version} is published by catalog version "
            f"{entry.catalog_version}, which does not carry its manifests; it cannot be finalized"
        )

    def reclaim_staged(self, entries: list[Entry]) -> None:
        """The writer's own tidy-up after finalizing: once the final manifests exist the staged ones (formats
        1-3) are garbage (a reader of an older catalog version finds the final name first). One batched delete.

        Args:
            entries: the rows the writer just published and finalized
        """
        done = [e for e in entries if e.staged_manifests and _key(e) in self._finalized]
        paths = [f"{e.path}/{staged}" for e in done for staged in e.staged_manifests if is_staged(staged)]
        if paths:
            self.store().delete_many(paths)

    def drop_invalid_entry(self, name: str) -> int:
        """Remove a live row that breaks a rule (readers refuse it by name, `CatalogSnapshot.invalid` lists it):
        one catalog version with its tombstone; nothing is read or deleted through it (`catalog/repair.py`).

        Args:
            name: The row's name exactly as stored (the refusal quotes it).

        Returns:
            The catalog version that drops it.
        """
        if self.branch is not None:
            raise CatalogError(f"catalog {self.root}: invalid rows are dropped on main")
        return repair.drop_invalid_entry(self, self._for_write(), name)

    # ---- retention ---------------------------------------------------------------------------

    def cleanup(
        self,
        older_than: timedelta = timedelta(days=14),
        retain_versions: int | None = None,
        *,
        delete_unverified: bool = False,
        dry_run: bool = False,
    ) -> retention.CatalogCleanupStats:
        """Remove catalog versions older than `older_than` (the newest and the newest `retain_versions` are
        kept), every table version no kept catalog version publishes, dropped tables' directories, and dead
        writers' debris once older than the core's unverified window (or with `delete_unverified`, when no
        writer is running). The rules and their order: `mvcc_core/catalog/retention.py`, docs/guide/catalog.md.

        Catalog branches first: forks no catalog branch places its table on are reclaimed (`forks.reconcile`),
        and every live branch's tables stay readable (`branch_entries`).

        Args:
            older_than: catalog versions committed longer ago than this are removed (the newest always stays)
            retain_versions: keep at least this many newest catalog versions (None: no such floor)
            delete_unverified: remove dead writers' debris without waiting for the core's unverified window
                (only when no writer is running)
            dry_run: count what would be removed, remove nothing
        """
        if self.branch is not None:
            raise CatalogError(f"catalog {self.root}: cleanup runs on main (it covers every branch)")
        reclaimed = self.reconcile_forks(delete_unverified=delete_unverified, dry_run=dry_run)
        stats = retention.cleanup(
            self,
            older_than,
            retain_versions,
            delete_unverified=delete_unverified,
            dry_run=dry_run,
            branch_entries=self.branch_entries(),
        )
        return replace(stats, forks_removed=tuple(reclaimed))

    # ---- writing -----------------------------------------------------------------------------

    def migrate(self) -> int:
        """Bring the on-disk format to this code's (`format.migrate`); the format version after."""
        self.remember_manifest(format_mod.migrate(self._manifest_uri, self.options).state)
        return FORMAT_VERSION

    def _for_write(self) -> CatalogSnapshot:
        """Open for write: migrate an older format first (refuse a newer one), then the newest snapshot. The
        current format is the kept state's stamp (no re-open); only another stamp goes to `format.migrate`."""
        manifest = self.latest_manifest()
        if format_of(manifest) != FORMAT_VERSION and self.branch is not None:
            raise CatalogError(f"catalog branch {self.branch!r} has format {format_of(manifest)}: publish or delete it")
        if format_of(manifest) != FORMAT_VERSION:
            manifest = format_mod.migrate(self._manifest_uri, self.options)
            self.remember_manifest(manifest.state)
        return self._snapshot_of(manifest)

    def transaction(
        self,
        *,
        commit_message: str | None = None,
        transaction_properties: dict[str, str] | None = None,
        branch: str | None = None,
    ) -> CatalogTransaction:
        """A transaction on the newest catalog version: stage changes, then one atomic publish on exit.
        `transaction_properties` are stored on the catalog version it publishes (`CatalogVersion.properties`).

        Args:
            commit_message: the message of the catalog version it publishes
            transaction_properties: properties stored on that catalog version (keys starting with `catalog.` are
                reserved)
            branch: a catalog branch to write (data changes only; each table is forked at its first write)
        """
        if branch is not None and branch != self.branch:
            return self.on_branch(branch).transaction(
                commit_message=commit_message, transaction_properties=transaction_properties
            )
        kind = CatalogTransaction if self.branch is None else BranchTransaction
        return kind(
            self, self._for_write(), commit_message=commit_message, transaction_properties=transaction_properties
        )

    def _own_version(self, change: Callable[[CatalogTransaction], object]) -> int:
        """`change` made in a catalog transaction of its own; the catalog version it published."""
        with self.transaction() as tx:
            change(tx)
        if tx.published_version is None:  # the transaction's exit commits it, or raises
            raise CatalogError(f"catalog {self.root}: the transaction ended without publishing")
        return tx.published_version

    def create_schema(self, name: str) -> int:
        """`CatalogTransaction.create_schema` as a transaction of its own; the catalog version it published.

        Args:
            name: the schema's name (`names.CATALOG_SCHEMA`: ASCII letters, digits, '_' and '-')
        """
        return self._own_version(lambda tx: tx.create_schema(name))

    def drop_schema(self, name: str) -> int:
        """`CatalogTransaction.drop_schema` as a transaction of its own; the catalog version it published.

        Args:
            name: the schema's name
        """
        return self._own_version(lambda tx: tx.drop_schema(name))

    def create_table(self, name: str, schema: pa.Schema) -> int:
        """`CatalogTransaction.create_table` as a transaction of its own; the catalog version it published.

        Args:
            name: the table's name, `schema.table` or `table` (in the schema `main`)
            schema: the table's Arrow schema
        """
        return self._own_version(lambda tx: tx.create_table(name, schema))

    def drop_table(self, name: str) -> int:
        """`CatalogTransaction.drop_table` as a transaction of its own; the catalog version it published.

        Args:
            name: the table's name, `schema.table` or `table` (in the schema `main`)
        """
        return self._own_version(lambda tx: tx.drop_table(name))

    def rename_table(self, name: str, new_name: str) -> int:
        """`CatalogTransaction.rename_table` as a transaction of its own; the catalog version it published.

        Args:
            name: the table's name, `schema.table` or `table` (in the schema `main`)
            new_name: its new name (free of tables and views)
        """
        return self._own_version(lambda tx: tx.rename_table(name, new_name))

    def create_view(self, name: str, sql: str, *, or_replace: bool = False, dialect: str | None = None) -> int:
        """Store view `name` as SQL text (validated to parse as a query, never executed); one catalog version.

        Args:
            name: the view's name, `schema.view` or `view` (in the schema `main`)
            sql: the view's query
            or_replace: replace an existing view of that name
            dialect: the sqlglot dialect `sql` is parsed in (None: sqlglot's default)
        """
        return self._own_version(lambda tx: tx.create_view(name, sql, or_replace=or_replace, dialect=dialect))

    def rename_view(self, name: str, new_name: str) -> int:
        """`CatalogTransaction.rename_view` as a transaction of its own; the catalog version it published.

        Args:
            name: the view's name, `schema.view` or `view` (in the schema `main`)
            new_name: its new name (free of tables and views)
        """
        return self._own_version(lambda tx: tx.rename_view(name, new_name))

    def drop_view(self, name: str) -> int:
        """`CatalogTransaction.drop_view` as a transaction of its own; the catalog version it published.

        Args:
            name: the view's name, `schema.view` or `view` (in the schema `main`)
        """
        return self._own_version(lambda tx: tx.drop_view(name))

    def compact_files(self, name: str, options: Any = None, *, executor: Any = None, **kwargs: Any) -> int | None:
        """Compact table `name` as its own catalog version (DuckLake's `ducklake_merge_adjacent_files`; see
        `tx.table(name).compact_files`); the catalog version, or None when there was nothing to compact.

        Args:
            name: the table's name, `schema.table` or `table` (in the schema `main`)
            options: the core's `CompactionOptions` (None: its defaults, or the fields given as keyword arguments)
            executor: where the rewrite tasks run (None: a thread pool in this process)
            **kwargs: `CompactionOptions` fields, or `commit_message` / `transaction_properties` of the table version
                the Rewrite becomes

        Returns:
            The catalog version that published the compaction, or None when no fragment needed compacting (nothing is
            published).
        """
        with self.transaction(commit_message=f"compact {name}") as tx:
            rewritten = tx.table(name).compact_files(options, executor=executor, **kwargs)
        return tx.published_version if rewritten else None


def _link_final(store: ObjectStore, staged: str, final: str, data: bytes | None) -> bool:
    """Give the staged manifest its final name; False when the name holds other bytes (not a racing
    finalizer's copy). On a local disk a hard link: no file is created and nothing is read or written,
    where a copy created one more file per table (the dearest local step); on an object store a
    put-if-not-exists of the bytes (`data`, or the staged object read). Crash-safe either way: the final
    name appears whole, the staged one stays until `reclaim_staged`."""
    try:
        if store.copy_if_not_exists(staged, final, data):
            return True
        return store.get(final) == (store.get(staged) if data is None else data)
    except ObjectNotFoundError:
        # The staged manifest is removed only after its final name exists (`reclaim_staged`): another
        # finalizer finished first. Without a final name this is a real loss, and it propagates.
        if store.exists(final):
            return True
        raise


def _put_final(store: ObjectStore, final: str, data: bytes) -> bool:
    """Write a manifest the catalog carries under its final name; False when the name holds other bytes (not
    a racing finalizer's). Put-if-not-exists: the name appears whole or not at all (locally a temporary file
    hard-linked to it)."""
    return store.put_if_not_exists(final, data) or store.get(final) == data


def _newer_location(state: TableState) -> ManifestLocation | None:
    """Where `__manifest`'s newest version is when it is newer than `state`'s, else None.

    On a local disk with the store's own commit protocol: none is newer when version + 1 does not exist and
    the version itself still does (versions are created in order and retention removes them oldest first, so
    a missing successor is never a hole retention left); anything else takes the full lookup. Elsewhere the
    full lookup is one LIST (or the external store's answer) anyway.
    """
    store = state.store
    if store.scheme == "file" and state.committer.handler is PUT_IF_NOT_EXISTS:
        version, naming = state.version, state.naming
        if not store.exists(manifest_path(version + 1, naming)) and store.exists(manifest_path(version, naming)):
            return None
    location = state.latest_location()
    return location if location.version != state.version else None


def _trim(state: TableState) -> None:
    """Bound the shared committer's cache to the newest `MANIFESTS_CACHED` manifests and transactions: a
    long-lived catalog object publishes without end, and only the newest versions are asked for again."""
    state.committer.trim_cache(MANIFESTS_CACHED)


def _key(entry: Entry) -> tuple[str, int, str | None]:
    return entry.path, entry.table_version, fork_of(entry)


def _naming_of(final: str) -> ManifestNaming:
    parsed = parse_manifest_name(final)
    return parsed[1] if parsed else ManifestNaming.V2
