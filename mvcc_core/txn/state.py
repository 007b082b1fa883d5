"""TableState: one version of a table and the means to commit on top of it.

Operations, maintenance and executor tasks receive a `TableState`, never the `Table` facade: the facade
sits above them and is the only thing that holds a mutable "current version". A state is immutable; a
commit returns the next state. It pickles small (the committer's cache of read manifests stays behind),
so a compaction or index task can carry it to a process pool or a Spark executor.

`commit` is the one commit-or-clean-up path of the package: every write stages a `Transaction` (its
files written, nothing visible), then commits it here. On a definite failure (`errors.is_definite_failure`:
a conflict, a refused operation, bad data) the staged files are removed; on an ambiguous one (a storage
error that may have followed a successful manifest write) they are left for retention.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import pyarrow as pa

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import TableExistsError, VersionNotFoundError, is_definite_failure
from mvcc_core.format import schema as schema_mod
from mvcc_core.format.manifest import ManifestLocation, list_manifests, location_of
from mvcc_core.format.naming import ManifestNaming
from mvcc_core.io import ObjectStore, open_store
from mvcc_core.ops.replace_where import rows_match
from mvcc_core.txn.commit import DEFAULT_MAX_RETRIES, Committer
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
        """The latest version of the table at `uri`, or `version` (a number)."""
        external, storage_options = split_storage_options(storage_options, external_store)
        store = open_store(uri, storage_options)
        committer = Committer(store, handler=commit_handler(external))
        location = committer.latest_location()
        state = cls(store, committer.load_manifest(location), location.naming, committer)
        return state if version is None or version == state.version else state.checkout(version)

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

    # ---- other versions -----------------------------------------------------------------------------

    def load(self, version: int) -> pb.Manifest:
        """The manifest of `version` (cached per committer; VersionNotFoundError says if retention removed it)."""
        cached = self.committer.cache.manifests.get(version)
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
        """This table at `version`."""
        return replace(self, manifest=self.load(version))

    def latest_location(self) -> ManifestLocation:
        """Where the table's newest version is (read from the store now)."""
        return self.committer.latest_location()

    def latest(self) -> TableState:
        """This table at its newest version."""
        location = self.latest_location()
        return replace(self, manifest=self.committer.load_manifest(location), naming=location.naming)

    # ---- committing ---------------------------------------------------------------------------------

    def commit(self, transaction: Transaction, *, max_retries: int = DEFAULT_MAX_RETRIES) -> TableState:
        """Commit a staged transaction; the state of the version it created.

        On a definite failure the transaction's files are removed before the error propagates.
        """
        manifest, naming = commit_transaction(
            self.committer, transaction, naming=self.naming, hint=self.manifest, max_retries=max_retries
        )
        return replace(self, manifest=manifest, naming=naming)

    def staged(self, files: list[str]) -> list[str]:
        """Paths relative to this table's root as the full URIs a `Transaction` lists."""
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
) -> tuple[pb.Manifest, ManifestNaming]:
    """Commit `transaction` through `committer`, removing its files on a definite failure.

    `create=True` refuses to commit on top of an existing table (TableExistsError). `if_exists` makes the
    commit a first write that another writer may beat (Lance's and Delta's append / overwrite of a missing
    table): `transaction` is committed as version 1 if no table is there; if another writer creates the table
    first, `if_exists(winner)` turns it into the transaction it means on the winner's latest version (an
    Append, a partition overwrite, an Overwrite), committed under the usual conflict rules. Its files pass to
    that transaction; if `if_exists` refuses (a schema that does not match the winner's) they are removed.
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
            state = winner.commit(rebased, max_retries=max_retries)
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
