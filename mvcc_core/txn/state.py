"""TableState: one version of a table and the means to commit on top of it.

Design notes: docs/design/architecture.md, "TableState".
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import pyarrow as pa

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import CorruptManifestError, TableExistsError, VersionNotFoundError, is_definite_failure
from mvcc_core.format import schema as schema_mod
from mvcc_core.format.checked_manifests import RowTotals, row_totals
from mvcc_core.format.manifest import ManifestLocation, list_manifests, location_of
from mvcc_core.format.naming import ManifestNaming
from mvcc_core.io import ObjectStore, open_store
from mvcc_core.txn.commit import DEFAULT_MAX_RETRIES, Committer, RowsMatch
from mvcc_core.txn.external_store import ExternalManifestStore, commit_handler, split_storage_options
from mvcc_core.txn.transaction import Transaction, remove_files

log = logging.getLogger("mvcc.commit")


@dataclass(frozen=True)
class TableState:
    """A table at one version: its store, manifest, naming scheme and committer (with the commit handler)."""

    store: ObjectStore
    manifest: pb.Manifest
    naming: ManifestNaming
    committer: Committer

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as the manifest's bytes (protobuf classes do not pickle by name) and the committer
        without its cache: what an executor task needs, nothing more."""
        return (_unpickle, (self.store, self.manifest.SerializeToString(), self.naming, self.committer))

    @classmethod
    def open(
        cls,
        uri: str,
        version: int | None = None,
        *,
        storage_options: dict[str, Any] | None = None,
        external_store: str | ExternalManifestStore | None = None,
    ) -> TableState:
        """The latest version of the table at `uri`, or `version`; only the manifest asked for is read.

        Args:
            uri: The table's root.
            version: The version to open (None: the latest).
            storage_options: The store's options (may name the external store as "external_store").
            external_store: The table's external manifest store, if it has one.

        Returns:
            The state of that version.

        Raises:
            TableNotFoundError: no table is at `uri`.
            VersionNotFoundError: `version` does not exist (or retention removed it).
            CorruptManifestError: the latest manifest does not decode (its message names the newest intact
                version to restore).
        """
        unread, location = cls._connect(uri, storage_options, external_store)
        if version is not None:
            return unread.checkout(version)
        try:
            manifest = unread.committer.load_manifest(location)
        except CorruptManifestError as exc:
            why = f"it is the latest version of {unread.uri}, so the table cannot be opened at its latest version"
            raise unread.committer.corrupt_history(exc, location, why) from exc
        return replace(unread, manifest=manifest)

    @classmethod
    def unread(
        cls,
        uri: str,
        *,
        storage_options: dict[str, Any] | None = None,
        external_store: str | ExternalManifestStore | None = None,
    ) -> TableState:
        """The table at `uri` before any manifest is read (its manifest is empty): what resolving a tag or a time
        to a version needs, then `checkout`.

        Args:
            uri: The table's root.
            storage_options: The store's options (may name the external store as "external_store").
            external_store: The table's external manifest store, if it has one.

        Returns:
            A state whose manifest is empty.

        Raises:
            TableNotFoundError: no table is at `uri`.
        """
        return cls._connect(uri, storage_options, external_store)[0]

    @classmethod
    def _connect(
        cls,
        uri: str,
        storage_options: dict[str, Any] | None,
        external_store: str | ExternalManifestStore | None,
    ) -> tuple[TableState, ManifestLocation]:
        """The unread state of the table at `uri` and where its latest manifest is (one listing)."""
        external, storage_options = split_storage_options(storage_options, external_store)
        store = open_store(uri, storage_options)
        committer = Committer(store, handler=commit_handler(external))
        location = committer.latest_location()
        return cls(store, pb.Manifest(), location.naming, committer), location

    # ---- what it is ---------------------------------------------------------------------------------

    @property
    def uri(self) -> str:
        """The table's root."""
        return self.store.uri

    @property
    def version(self) -> int:
        """The version of `manifest`."""
        return self.manifest.version

    @property
    def storage_options(self) -> dict[str, Any]:
        """The options the table's store was opened with."""
        return self.store.storage_options

    @property
    def fields(self) -> list[pb.Field]:
        """The schema as the manifest's flattened fields (with their stable ids)."""
        return list(self.manifest.fields)

    @cached_property
    def schema(self) -> pa.Schema:
        """The Arrow schema of this version (field metadata and schema metadata included)."""
        return schema_mod.manifest_schema(self.manifest)

    @cached_property
    def row_totals(self) -> RowTotals:
        """This version's rows and deleted rows, from its manifest: found when it was read, else summed once."""
        known = self.committer.known_totals(self.version, self.manifest)
        return known if known is not None else row_totals(self.manifest)

    # ---- other versions -----------------------------------------------------------------------------

    def load(self, version: int) -> pb.Manifest:
        """The manifest of `version` (cached per committer; VersionNotFoundError says if retention removed it).

        Args:
            version: the version wanted
        """
        cached = self.committer.cached_manifest(version)
        if cached is not None:
            return cached
        try:
            return self.committer.load_manifest(location_of(self.store, version, self.naming))
        except VersionNotFoundError:
            existing = list_manifests(self.store, self.committer.handler)
            if existing and 0 < version < existing[0].version:
                raise VersionNotFoundError(
                    f"version {version} of {self.uri} was removed by retention (cleanup_old_versions); the oldest "
                    f"version left is {existing[0].version}"
                ) from None
            raise

    def checkout(self, version: int) -> TableState:
        """This table at `version`.

        Args:
            version: the version wanted
        """
        return replace(self, manifest=self.load(version))

    def latest_location(self) -> ManifestLocation:
        """Where the table's newest version is (read from the store now)."""
        return self.committer.latest_location()

    def latest(self) -> TableState:
        """This table at its newest version."""
        location = self.latest_location()
        return replace(self, manifest=self.committer.load_manifest(location), naming=location.naming)

    # ---- committing ---------------------------------------------------------------------------------

    def commit(
        self, transaction: Transaction, *, max_retries: int = DEFAULT_MAX_RETRIES, rows_match: RowsMatch | None = None
    ) -> TableState:
        """Commit a staged transaction; the state of the version it created.

        On a definite failure the transaction's files are removed before the error propagates.

        Args:
            transaction: The staged transaction.
            max_retries: How many times a lost race is retried on the newer version.
            rows_match: How the conflict check of a replace_where reads rows (`ops.replace_where.rows_match`;
                the facade passes it); None assumes a concurrent insert matches (the safe answer).

        Returns:
            The state of the version committed.
        """
        manifest, naming = commit_transaction(
            self.committer,
            transaction,
            naming=self.naming,
            hint=self.manifest,
            max_retries=max_retries,
            rows_match=rows_match,
        )
        return replace(self, manifest=manifest, naming=naming)

    def staged(self, files: list[str]) -> list[str]:
        """Paths relative to this table's root as the full URIs a `Transaction` lists.

        Args:
            files: paths relative to the table's root
        """
        return [f"{self.store.uri}/{path}" for path in files]


#: How a first write that lost the race for version 1 is applied to the table that won: given the winner's
#: latest version, the transaction to commit on top of it (same data files; see `commit_transaction`).
IfExists = Callable[["TableState"], Transaction]


def commit_transaction(
    committer: Committer,
    transaction: Transaction,
    *,
    naming: ManifestNaming,
    hint: pb.Manifest | None = None,
    create: bool = False,
    if_exists: IfExists | None = None,
    max_retries: int = DEFAULT_MAX_RETRIES,
    rows_match: RowsMatch | None = None,
) -> tuple[pb.Manifest, ManifestNaming]:
    """Commit `transaction` through `committer`, removing its files on a definite failure.

    `create=True` refuses to commit on top of an existing table (TableExistsError). `if_exists` makes the
    commit a first write that another writer may beat (Lance's and Delta's append / overwrite of a missing
    table): `transaction` is committed as version 1 if no table is there; if another writer creates the table
    first, `if_exists(winner)` turns it into the transaction it means on the winner's latest version (an
    Append, a partition overwrite, an Overwrite), committed under the usual conflict rules. Its files pass to
    that transaction; if `if_exists` refuses (a schema that does not match the winner's) they are removed.

    Args:
        committer: the table's committer
        transaction: the transaction to commit
        naming: the manifest naming scheme of a new table
        hint: the manifest of the read version when the caller has it
        create: refuse to commit on top of an existing table
        if_exists: makes the commit a first write another writer may beat: turns it into the transaction it means on the
            winner's table
        max_retries: how many lost races to retry
        rows_match: `rows_match(store, manifest, fragments, predicate)`: whether another transaction's new rows
            match a predicate, for conflict rules that ask (None: they assume the rows match)
    """
    try:
        try:
            manifest, naming = committer.commit(
                transaction,
                naming=naming,
                read_manifest_hint=hint,
                create=create or if_exists is not None,
                max_retries=max_retries,
                rows_match=rows_match,
            )
        except TableExistsError as exc:
            if if_exists is None or not exc.created_concurrently:
                raise
            location = committer.latest_location()
            winner = TableState(committer.store, committer.load_manifest(location), location.naming, committer)
            rebased = if_exists(winner)
            log.info(
                "%s: a concurrent writer created the table first (version %d); committing %s on top of it",
                committer.store.uri,
                winner.version,
                rebased.operation.name,
            )
            transaction.files = []  # the rebased transaction owns them (and removes them if it fails)
            state = winner.commit(rebased, max_retries=max_retries, rows_match=rows_match)
            return state.manifest, state.naming
    except BaseException as exc:
        if transaction.files and is_definite_failure(exc):
            log.debug("removing %d staged files of the failed %s", len(transaction.files), transaction.operation.name)
            remove_files(transaction.files, near=committer.store)
            transaction.files = []
        raise
    transaction.files = []  # committed: the version owns them now
    return manifest, naming


def _unpickle(store: ObjectStore, manifest: bytes, naming: ManifestNaming, committer: Committer) -> TableState:
    return TableState(store, pb.Manifest.FromString(manifest), naming, committer)
