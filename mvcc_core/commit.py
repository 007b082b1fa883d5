"""The commit loop (DESIGN.md "Commit protocol").

1. Write the transaction file. 2. Load what was committed since the read version and ask the
resolver. 3. Build the next manifest from the latest one. 4. Create it with put-if-not-exists; if
another writer took the name, back off with jitter and go to 2.

With an external manifest store, step 4 is the specification's stage / commit / finalize / update protocol
(see `external_store.py`): the object store then needs no conditional write at all, and losing the store's
put-if-not-exists is the same lost race as above.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
import uuid
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from . import conflicts
from . import rebase as rebase_mod
from ._proto import table_pb2 as pb
from .errors import (
    CorruptManifestError,
    IncompatibleConflictError,
    ObjectNotFoundError,
    RetryableConflictError,
    StorageError,
    TableExistsError,
    TableNotFoundError,
    VersionNotFoundError,
)
from .external_store import ExternalManifestStore, ExternalStoreError, finalize, full_path, staged_manifest_path
from .failpoints import failpoint
from .features import FLAG_STABLE_ROW_IDS
from .manifest import (
    ManifestLocation,
    attach_external_store,
    encode_manifest,
    external_store_of,
    latest_manifest_location,
    location_of,
    read_manifest,
    write_latest_hint,
    write_manifest,
)
from .naming import ManifestNaming
from .storage import ObjectStore
from .transaction import BuildContext, Transaction, build_manifest, read_transaction, write_transaction

DEFAULT_MAX_RETRIES = 20
# Backoff in slots, as Lance's SlotBackoff: a slot is as long as our last attempt took (a few ms on a
# local disk, tens of ms on S3), so the waits scale with the store without per-store constants.
BACKOFF_MIN_SLOT_SECONDS = 0.0005
BACKOFF_MAX_SLOT_SECONDS = 0.05
BACKOFF_MAX_DOUBLINGS = 8
BACKOFF_CAP_SECONDS = 2.0


@dataclass
class CommitCache:
    """Manifests and transactions already read; both are immutable once committed."""

    manifests: dict[int, pb.Manifest] = field(default_factory=dict)
    transactions: dict[str, Transaction] = field(default_factory=dict)


_LOOKUPS: tuple[int, ThreadPoolExecutor] | None = None


def _lookups() -> ThreadPoolExecutor:
    """A small pool for overlapped lookups, made per process (a pool inherited through fork has no threads)."""
    global _LOOKUPS
    if _LOOKUPS is None or _LOOKUPS[0] != os.getpid():
        _LOOKUPS = (os.getpid(), ThreadPoolExecutor(max_workers=8, thread_name_prefix="mvcc-commit-reads"))
    return _LOOKUPS[1]


def _latest_or_none(store: ObjectStore, known: ManifestLocation | None) -> ManifestLocation | None:
    try:
        return latest_manifest_location(store, known)
    except TableNotFoundError:
        return None


def backoff_delay(attempt: int, slot_seconds: float, rng: random.Random | None = None) -> float:
    """Randomized exponential backoff: a random number of slots out of 2**(attempt + 1).

    Losers of one race spread over twice as many slots each time they lose again; slot 0 retries at
    once, which is right when the race was lost to a single other writer.
    """
    slot = min(max(slot_seconds, BACKOFF_MIN_SLOT_SECONDS), BACKOFF_MAX_SLOT_SECONDS)
    slots = (rng or random).randrange(2 ** (min(attempt, BACKOFF_MAX_DOUBLINGS) + 1))
    return min(BACKOFF_CAP_SECONDS, slots * slot + (rng or random).uniform(0, slot / 2))


class Committer:
    """Commits transactions to one table, reading each committed version at most once.

    With `external_store`, commits go through that store (and reads of `store` resolve through it too).
    """

    def __init__(
        self,
        store: ObjectStore,
        cache: CommitCache | None = None,
        external_store: ExternalManifestStore | None = None,
    ) -> None:
        self.store = store
        self.cache = cache or CommitCache()
        if external_store is not None:
            attach_external_store(store, external_store)
        self.external_store = external_store or external_store_of(store)

    def load_manifest(self, location: ManifestLocation) -> pb.Manifest:
        cached = self.cache.manifests.get(location.version)
        if cached is None:
            cached = read_manifest(self.store, location)
            self.cache.manifests[location.version] = cached
        return cached

    def load_transaction(self, manifest: pb.Manifest) -> Transaction | None:
        name = manifest.transaction_file
        if not name:
            return None
        txn = self.cache.transactions.get(name)
        if txn is None:
            try:
                txn = read_transaction(self.store, name)
            except ObjectNotFoundError:
                return None
            self.cache.transactions[name] = txn
        return txn

    def _prefetch(self, versions: list[int], naming: ManifestNaming) -> None:
        """Read the manifests and transactions of `versions` concurrently (object stores: round trips
        overlap instead of adding up; each version costs two GETs). Errors surface in the serial pass."""
        if len(versions) < 2 or self.store.scheme in ("file", "memory"):
            return

        def fetch(version: int) -> None:
            with contextlib.suppress(Exception):  # the serial pass reads again and reports
                self.load_transaction(self.load_manifest(location_of(self.store, version, naming)))

        list(_lookups().map(fetch, versions))

    def _check_concurrent(self, txn: Transaction, naming: ManifestNaming, latest: int, checked: set[int]) -> bool:
        """Raise on a conflict; True when ours must be rebased onto the latest version first."""
        needs_rebase = False
        self._prefetch([v for v in range(txn.read_version + 1, latest + 1) if v not in checked], naming)
        for version in range(txn.read_version + 1, latest + 1):
            if version in checked:
                continue
            manifest = self.load_manifest(location_of(self.store, version, naming))
            theirs = self.load_transaction(manifest)
            name = txn.operation.name
            common = dict(
                uri=self.store.uri,
                read_version=txn.read_version,
                conflicting_versions=[version],
                operation=name,
                conflicting_operation=theirs.operation.name if theirs else None,
            )
            if theirs is None:
                raise RetryableConflictError(
                    f"{name} on {self.store.uri} read version {txn.read_version}, and version {version} was "
                    "committed without a readable transaction file, so the two cannot be checked; "
                    "re-read the table and run the operation again",
                    **common,
                )
            ctx = conflicts.ConflictContext(stable_row_ids=bool(manifest.writer_feature_flags & FLAG_STABLE_ROW_IDS))
            outcome, rule = conflicts.resolve(txn, theirs, ctx)
            if outcome is conflicts.Outcome.INCOMPATIBLE:
                raise IncompatibleConflictError(
                    f"{name} on {self.store.uri} (read version {txn.read_version}) is incompatible with "
                    f"{theirs.operation.name} committed as version {version} ({rule.when}); the operation no "
                    "longer means what it meant: do not retry it blindly, decide again from the new version",
                    **common,
                )
            if outcome is conflicts.Outcome.REBASE and rebase_mod.rebasable(txn.operation, theirs.operation):
                try:
                    rebase_mod.check_rows(txn.operation, theirs.operation)
                except rebase_mod.RowConflict as exc:
                    shown = ", ".join(f"{a >> 32}:{a & 0xFFFFFFFF}" for a in exc.rows)
                    raise RetryableConflictError(
                        f"{name} on {self.store.uri} (read version {txn.read_version}) and "
                        f"{theirs.operation.name} committed as version {version}: {exc.reason}"
                        + (f" (fragment:offset {shown})" if shown else "")
                        + "; re-read the table and run the operation again",
                        row_addresses=exc.rows,
                        **common,
                    ) from None
                needs_rebase = True
                checked.add(version)
                continue
            if outcome in (conflicts.Outcome.RETRYABLE, conflicts.Outcome.REBASE):
                why = rule.when if outcome is conflicts.Outcome.RETRYABLE else f"{rule.when}; it cannot be rebased"
                raise RetryableConflictError(
                    f"{name} on {self.store.uri} (read version {txn.read_version}) conflicts with "
                    f"{theirs.operation.name} committed as version {version} ({why}); re-read the table "
                    "and run the operation again",
                    **common,
                )
            checked.add(version)
        return needs_rebase

    def commit(
        self,
        txn: Transaction,
        *,
        naming: ManifestNaming = ManifestNaming.V2,
        read_manifest_hint: pb.Manifest | None = None,
        create: bool = False,
        max_retries: int = DEFAULT_MAX_RETRIES,
        before_put: Callable[[pb.Manifest], None] | None = None,
    ) -> tuple[pb.Manifest, ManifestNaming]:
        """Commit `txn` and return the manifest of the new version and the table's naming scheme.

        `create=True` refuses to commit on top of an existing table (TableExistsError). A new table
        (read version 0) uses `naming`; an existing one keeps the scheme found on disk.
        """
        if self.external_store is None:
            self.store.check_commit_supported()  # with an external store no conditional write is needed
        if read_manifest_hint is not None:
            self.cache.manifests.setdefault(read_manifest_hint.version, read_manifest_hint)
        known = None  # a version seen to exist: where the next look for the latest starts
        if read_manifest_hint is not None and txn.read_version:
            known = location_of(self.store, txn.read_version, naming)
        # On an object store the first look for the latest version (a LIST) overlaps the transaction
        # file's PUT: both are round trips and neither needs the other. Seeing an older latest only
        # means losing the conditional PUT and looking again.
        early = None
        if self.external_store is None and self.store.scheme not in ("file", "memory"):
            early = _lookups().submit(_latest_or_none, self.store, known)
        txn_file = write_transaction(self.store, txn)
        failpoint("commit.after_transaction_file")
        checked: set[int] = set()
        rebased_files: dict[str, list[str]] = {"written": [], "superseded": []}
        build_ctx = BuildContext(load_version=self._load_version_any, load_reference=self._load_reference)
        slot = BACKOFF_MAX_SLOT_SECONDS  # the quickest attempt so far: a slot of the backoff
        for attempt in range(max_retries + 1):
            attempt_start = time.perf_counter()
            if early is not None:
                latest_loc, early = early.result(), None
            else:
                latest_loc = _latest_or_none(self.store, known)
            if latest_loc is not None and create:
                raise TableExistsError(f"a table already exists at {self.store.uri} (version {latest_loc.version})")
            if latest_loc is None and txn.read_version != 0:
                raise TableNotFoundError(f"table {self.store.uri} has no versions (was it deleted?)")
            if latest_loc is not None:
                naming = latest_loc.naming
                if latest_loc.version < txn.read_version:
                    raise CorruptManifestError(
                        f"table {self.store.uri}: latest version {latest_loc.version} is older than read version "
                        f"{txn.read_version}"
                    )
                needs_rebase = self._check_concurrent(txn, naming, latest_loc.version, checked)
                previous = self.load_manifest(latest_loc)
                if needs_rebase:
                    txn, txn_file = self._rebase(txn, previous, rebased_files)
                    checked = set()
                self._naming = naming
            else:
                previous = None
            version = (latest_loc.version if latest_loc else 0) + 1
            manifest = build_manifest(previous, txn, version=version, transaction_file=txn_file, ctx=build_ctx)
            if before_put is not None:
                before_put(manifest)
            if self.external_store is not None:
                won = self._put_external(manifest, naming)
            else:
                failpoint("commit.before_manifest_put")
                won = write_manifest(self.store, manifest, naming)
                if won:
                    write_latest_hint(self.store, version, naming)
            if won:
                self.cache.manifests[version] = manifest
                self.cache.transactions[txn_file] = txn
                self._drop_superseded(rebased_files, manifest)
                return manifest, naming
            # A conditional PUT whose reply was lost is retried by the client and then "fails" against
            # our own object: if the winner names our transaction file, the commit is ours.
            try:
                winner = self.load_manifest(location_of(self.store, version, naming))
            except VersionNotFoundError:
                winner = None
            if winner is not None and winner.transaction_file == txn_file:
                self.cache.transactions[txn_file] = txn
                return winner, naming
            if winner is not None:
                known = location_of(self.store, version, naming)
            if attempt < max_retries:
                slot = min(slot, time.perf_counter() - attempt_start)
                time.sleep(backoff_delay(attempt, slot))
        raise RetryableConflictError(
            f"{txn.operation.name} on {self.store.uri} lost the race for a new version {max_retries + 1} times "
            f"(read version {txn.read_version}); re-read the table and run it again, or raise max_retries",
            uri=self.store.uri,
            read_version=txn.read_version,
            operation=txn.operation.name,
        )

    def _rebase(self, txn: Transaction, latest: pb.Manifest, files: dict[str, list[str]]) -> tuple[Transaction, str]:
        """Ours rewritten on top of `latest`, as a new transaction file (the specification's rebase)."""
        try:
            rebased = rebase_mod.rebase(self.store, txn, latest)
        except rebase_mod.RowConflict as exc:
            raise RetryableConflictError(
                f"{txn.operation.name} on {self.store.uri} (read version {txn.read_version}) cannot be rebased onto "
                f"version {latest.version}: {exc.reason}; re-read the table and run the operation again",
                uri=self.store.uri,
                read_version=txn.read_version,
                conflicting_versions=[latest.version],
                operation=txn.operation.name,
            ) from None
        files["written"].extend(rebased.written)
        files["superseded"].extend(rebased.superseded)
        return rebased.txn, write_transaction(self.store, rebased.txn)

    def _drop_superseded(self, files: dict[str, list[str]], manifest: pb.Manifest) -> None:
        """After a rebased commit: our first deletion files (and unused rebase files) are unreferenced."""
        if not files["superseded"] and not files["written"]:
            return
        from .maintenance.cleanup import referenced_files

        needed = referenced_files(manifest)
        stale = [p for p in files["superseded"] + files["written"] if p not in needed]
        with contextlib.suppress(StorageError):
            self.store.delete_many(stale)

    def _put_external(self, manifest: pb.Manifest, naming: ManifestNaming) -> bool:
        """Steps 1-4 with an external store; False if another writer committed this version first."""
        external = self.external_store
        assert external is not None
        version, uri = manifest.version, self.store.uri
        staged = staged_manifest_path(version, naming, uuid.uuid4().hex)
        self.store.put(staged, encode_manifest(manifest))  # 1. stage: a plain PUT, invisible to readers
        failpoint("commit.after_stage")
        staged_full = full_path(self.store, staged)
        won = external.put_if_not_exists(uri, version, staged_full)  # 2. the commit point
        # A retried request whose first attempt succeeded also "loses": then the entry is ours.
        if not won and external.get(uri, version) != staged_full:
            with contextlib.suppress(StorageError):
                self.store.delete_many([staged])
            return False
        failpoint("commit.after_external_commit")
        try:
            finalize(self.store, external, version, staged)  # 3. copy to the final name, 4. update the store
        except (StorageError, ExternalStoreError) as exc:
            # The commit stands (step 2 made it); the next reader synchronizes, so do not report a failure.
            warnings.warn(
                f"{uri} version {version} is committed but not finalized ({type(exc).__name__}: {exc}); "
                "the next reader through the external store will finalize it",
                RuntimeWarning,
                stacklevel=3,
            )
            return True
        write_latest_hint(self.store, version, naming)
        return True

    def _load_version_any(self, version: int) -> pb.Manifest:
        """Load any version (for Restore), whatever scheme the table uses."""
        cached = self.cache.manifests.get(version)
        if cached is not None:
            return cached
        return self.load_manifest(location_of(self.store, version, self._naming))

    _naming: ManifestNaming = ManifestNaming.V2

    def _load_reference(self, uri: str, version: int) -> pb.Manifest:
        """Another table's manifest (a Clone's source), opened with this store's options."""
        from .manifest import detect_naming

        source = ObjectStore(uri, self.store._init_args[1])
        return read_manifest(source, location_of(source, version, detect_naming(source)))
