"""The commit loop (docs/reference/format.md, "Commits").

Design notes: docs/design/architecture.md, "The commit loop".
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import TypedDict

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import (
    CommitConflictError,
    CorruptManifestError,
    IncompatibleConflictError,
    ManifestInvariantError,
    ObjectNotFoundError,
    RetryableConflictError,
    StorageError,
    TableExistsError,
    TableNotFoundError,
    VersionNotFoundError,
    is_definite_failure,
)
from mvcc_core.failpoints import failpoint
from mvcc_core.format import operations
from mvcc_core.format.checked_manifests import RowTotals
from mvcc_core.format.features import FLAG_STABLE_ROW_IDS
from mvcc_core.format.invariants import check_manifest
from mvcc_core.format.manifest import (
    PUT_IF_NOT_EXISTS,
    CommitHandler,
    ManifestLocation,
    detect_naming,
    latest_manifest_location,
    location_of,
    read_manifest,
)
from mvcc_core.format.naming import TRANSACTIONS_DIR, ManifestNaming
from mvcc_core.format.referenced_files import referenced_files
from mvcc_core.io import ObjectStore
from mvcc_core.txn import conflicts
from mvcc_core.txn import rebase as rebase_mod
from mvcc_core.txn.transaction import BuildContext, Transaction, build_manifest, read_transaction, write_transaction

log = logging.getLogger("mvcc.commit")


class _ConflictDetails(TypedDict):
    """The fields a conflict error of a commit check carries besides its message (`CommitConflictError`)."""

    uri: str
    read_version: int
    conflicting_versions: list[int]
    operation: str
    conflicting_operation: str | None


DEFAULT_MAX_RETRIES = 20

#: `rows_match(store, manifest, fragments, predicate)`: does any row of these fragments match the predicate?
RowsMatch = Callable[[ObjectStore, pb.Manifest, Sequence[pb.DataFragment], str], bool]
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
    #: version -> (the manifest read, its row totals): what the read found, for that very manifest object
    totals: dict[int, tuple[pb.Manifest, RowTotals]] = field(default_factory=dict)


_LOOKUPS: tuple[int, ThreadPoolExecutor] | None = None


def _lookups() -> ThreadPoolExecutor:
    """A small pool for overlapped lookups, made per process (a pool inherited through fork has no threads)."""
    global _LOOKUPS
    if _LOOKUPS is None or _LOOKUPS[0] != os.getpid():
        _LOOKUPS = (os.getpid(), ThreadPoolExecutor(max_workers=8, thread_name_prefix="mvcc-commit-reads"))
    return _LOOKUPS[1]


def _latest_or_none(
    store: ObjectStore, known: ManifestLocation | None, handler: CommitHandler
) -> ManifestLocation | None:
    try:
        return latest_manifest_location(store, known, handler)
    except TableNotFoundError:
        return None


def backoff_delay(attempt: int, slot_seconds: float, rng: random.Random | None = None) -> float:
    """Randomized exponential backoff: a random number of slots out of 2**(attempt + 1).

    Losers of one race spread over twice as many slots each time they lose again; slot 0 retries at
    once, which is right when the race was lost to a single other writer.

    Args:
        attempt: how many times this writer has lost the race already (0 for the first retry)
        slot_seconds: the length of one slot, clamped to the configured bounds (about one commit's duration)
        rng: the random source (None: the `random` module)

    Returns:
        Seconds to sleep before the next attempt.
    """
    slot = min(max(slot_seconds, BACKOFF_MIN_SLOT_SECONDS), BACKOFF_MAX_SLOT_SECONDS)
    slots = (rng or random).randrange(2 ** (min(attempt, BACKOFF_MAX_DOUBLINGS) + 1))
    return min(BACKOFF_CAP_SECONDS, slots * slot + (rng or random).uniform(0, slot / 2))


class Committer:
    """Commits transactions to one table, reading each committed version at most once.

    `handler` decides how versions are found and published (the object store's put-if-not-exists, or an
    external manifest store); every read this committer makes goes through it too.

    Args:
        store: the table's store
        cache: the manifests and transactions already read, shared by committers of one table (None: a fresh cache)
        handler: how versions are found and published (None: the object store's put-if-not-exists)
    """

    def __init__(
        self,
        store: ObjectStore,
        cache: CommitCache | None = None,
        handler: CommitHandler | None = None,
    ) -> None:
        self.store = store
        self.cache = cache or CommitCache()
        self.handler = handler or PUT_IF_NOT_EXISTS

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled without its cache: a task on another process reads what it needs again."""
        return (Committer, (self.store, None, self.handler))

    def latest_location(self, known: ManifestLocation | None = None) -> ManifestLocation:
        """The table's newest version (TableNotFoundError if it has none).

        Args:
            known: a version the caller has seen; the lookup may start there
        """
        return latest_manifest_location(self.store, known, self.handler)

    def load_manifest(self, location: ManifestLocation) -> pb.Manifest:
        """The manifest at `location`, read once per committer cache.

        Args:
            location: the version's manifest location
        """
        cached = self.cache.manifests.get(location.version)
        if cached is None:
            cached = read_manifest(self.store, location, self.handler, totals=self.cache.totals)
            self.cache.manifests[location.version] = cached
        return cached

    def known_totals(self, version: int, manifest: pb.Manifest) -> RowTotals | None:
        """The row totals of `manifest` if this committer read it as `version` (None: not known here).

        Args:
            version: the version
            manifest: its manifest, as the caller holds it
        """
        entry = self.cache.totals.get(version)
        return entry[1] if entry is not None and entry[0] is manifest else None

    def cached_manifest(self, version: int) -> pb.Manifest | None:
        """The manifest of `version` if this committer has read it already.

        Args:
            version: The version.

        Returns:
            The manifest, or None when it has not been read.
        """
        return self.cache.manifests.get(version)

    def forget_manifests(self) -> None:
        """Drop every cached manifest (after retention removed versions, so none is served from memory)."""
        self.cache.manifests.clear()
        self.cache.totals.clear()

    def trim_cache(self, keep: int) -> None:
        """Keep only the newest `keep` manifests and transactions read (a long-lived handle reads without end).

        Args:
            keep: How many of each to keep.
        """
        for version in sorted(self.cache.manifests)[:-keep]:
            self.cache.manifests.pop(version, None)
            self.cache.totals.pop(version, None)
        for name in list(self.cache.transactions)[:-keep]:  # oldest first: a dict keeps insertion order
            self.cache.transactions.pop(name, None)

    def load_transaction(self, manifest: pb.Manifest) -> Transaction | None:
        """The transaction that produced a version (None: the version records none), read once per cache.

        Args:
            manifest: the version's manifest
        """
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

    def _check_concurrent(
        self, txn: Transaction, naming: ManifestNaming, latest: int, checked: set[int], rows_match: RowsMatch | None
    ) -> bool:
        """Raise on a conflict; True when ours must be rebased onto the latest version first."""
        needs_rebase = False
        self._prefetch([v for v in range(txn.read_version + 1, latest + 1) if v not in checked], naming)
        for version in range(txn.read_version + 1, latest + 1):
            if version in checked:
                continue
            try:
                manifest = self.load_manifest(location_of(self.store, version, naming))
            except CorruptManifestError as exc:
                if version == latest:
                    why = f"it is the latest version of {self.store.uri}, so nothing can be committed on top of it"
                else:
                    why = (
                        f"a commit read at version {txn.read_version} must be checked against it, so nothing "
                        f"can be committed to {self.store.uri}"
                    )
                raise self.corrupt_history(exc, location_of(self.store, latest, naming), why) from exc
            theirs = self.load_transaction(manifest)
            name = txn.operation.name
            common = _ConflictDetails(
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
            ctx = conflicts.ConflictContext(
                stable_row_ids=bool(manifest.writer_feature_flags & FLAG_STABLE_ROW_IDS),
                rows_match=None if rows_match is None else partial(rows_match, self.store, manifest),
            )
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
        rows_match: RowsMatch | None = None,
    ) -> tuple[pb.Manifest, ManifestNaming]:
        """Commit `txn` and return the manifest of the new version and the table's naming scheme.

        `create=True` refuses to commit on top of an existing table (TableExistsError). A new table
        (read version 0) uses `naming`; an existing one keeps the scheme found on disk. Conflicts are
        logged (logger "mvcc.commit", INFO) before they propagate. `rows_match(store, manifest, fragments,
        predicate)` lets conflict rules ask whether another transaction's new rows match a predicate (reading
        data is above this layer; without it such rules assume the rows match).

        Args:
            txn: the transaction to commit
            naming: the manifest naming scheme of a new table (an existing one keeps its own)
            read_manifest_hint: the manifest of `txn.read_version` when the caller has it (spares a read)
            create: refuse to commit on top of an existing table
            max_retries: how many lost races to retry before giving up
            rows_match: answers whether another transaction's new rows match a predicate, for conflict rules that ask
                (None: they assume the rows match)

        Raises:
            CommitConflictError: a concurrent commit conflicts, or the retries ran out
            TableExistsError: `create` and the table exists
        """
        written: list[str] = []  # the transaction files and rebase files this commit writes
        try:
            return self._commit(
                txn,
                naming=naming,
                read_manifest_hint=read_manifest_hint,
                create=create,
                max_retries=max_retries,
                written=written,
                rows_match=rows_match,
            )
        except BaseException as exc:
            if isinstance(exc, CommitConflictError):
                log.info("%s: %s: %s", self.store.uri, type(exc).__name__, exc)
            if written and is_definite_failure(exc):  # no version references them
                with contextlib.suppress(StorageError):
                    self.store.delete_many(written)
            raise

    def _commit(
        self,
        txn: Transaction,
        *,
        naming: ManifestNaming,
        read_manifest_hint: pb.Manifest | None,
        create: bool,
        max_retries: int,
        written: list[str],
        rows_match: RowsMatch | None,
    ) -> tuple[pb.Manifest, ManifestNaming]:
        """The commit loop itself (see `commit`); `written` collects the transaction and rebase files it
        writes, which `commit` removes on a definite failure."""
        self.handler.check_supported(self.store)
        if read_manifest_hint is not None:
            self.cache.manifests.setdefault(read_manifest_hint.version, read_manifest_hint)
        known = None  # a version seen to exist: where the next look for the latest starts
        if read_manifest_hint is not None and txn.read_version:
            known = location_of(self.store, txn.read_version, naming)
        # On an object store the first look for the latest version (a LIST) overlaps the transaction
        # file's PUT: both are round trips and neither needs the other. Seeing an older latest only
        # means losing the conditional PUT and looking again.
        early = None
        if self.handler.lists_latest and self.store.scheme not in ("file", "memory"):
            early = _lookups().submit(_latest_or_none, self.store, known, self.handler)
        txn_file = write_transaction(self.store, txn)
        written.append(f"{TRANSACTIONS_DIR}/{txn_file}")
        failpoint("commit.after_transaction_file")
        checked: set[int] = set()
        rebased_files: dict[str, list[str]] = {"written": [], "superseded": []}
        build_ctx = BuildContext(
            load_version=lambda v: self._load_version_any(v, naming), load_reference=self._load_reference
        )
        slot = BACKOFF_MAX_SLOT_SECONDS  # the quickest attempt so far: a slot of the backoff
        for attempt in range(max_retries + 1):
            attempt_start = time.perf_counter()
            if early is not None:
                latest_loc, early = early.result(), None
            else:
                latest_loc = _latest_or_none(self.store, known, self.handler)
            if latest_loc is not None and create:
                raise TableExistsError(
                    f"a table already exists at {self.store.uri} (version {latest_loc.version}): another writer "
                    "created it while this one was writing",
                    uri=self.store.uri,
                    version=latest_loc.version,
                    created_concurrently=True,
                )
            if latest_loc is None and txn.read_version != 0:
                raise TableNotFoundError(f"table {self.store.uri} has no versions (was it deleted?)")
            if latest_loc is not None:
                naming = latest_loc.naming
                if latest_loc.version < txn.read_version:
                    raise CorruptManifestError(
                        f"table {self.store.uri}: latest version {latest_loc.version} is older than read version "
                        f"{txn.read_version}"
                    )
                needs_rebase = self._check_concurrent(txn, naming, latest_loc.version, checked, rows_match)
                previous = self._previous(latest_loc, txn)
                if needs_rebase:
                    before = len(rebased_files["written"])
                    txn, txn_file = self._rebase(txn, previous, rebased_files)
                    written.extend([*rebased_files["written"][before:], f"{TRANSACTIONS_DIR}/{txn_file}"])
                    checked = set()
            else:
                previous = None
            version = (latest_loc.version if latest_loc else 0) + 1
            manifest = build_manifest(previous, txn, version=version, transaction_file=txn_file, ctx=build_ctx)
            # the fragments unchanged since `previous` passed the check (when read or committed) are not re-checked
            check_manifest(manifest, f"{self.store.uri} version {version} (about to be committed)", previous)
            won = self.handler.publish(self.store, manifest, naming)
            if won:
                self.cache.manifests[version] = manifest
                self.cache.transactions[txn_file] = txn
                self._drop_superseded(rebased_files, manifest)
                log.info(
                    "%s: committed %s as version %d (read version %d, attempt %d)",
                    self.store.uri,
                    txn.operation.name,
                    version,
                    txn.read_version,
                    attempt + 1,
                )
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
            log.debug("%s: lost the race for version %d (attempt %d); retrying", self.store.uri, version, attempt + 1)
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

    def _previous(self, latest: ManifestLocation, txn: Transaction) -> pb.Manifest:
        """The latest manifest, which the next one is built from.

        A corrupt latest manifest must not wedge the table: a Restore (which replaces the table's state with
        an intact older version's) is built on the newest intact manifest instead and committed past the
        corrupt one. Any other operation is refused with an error that says how to get out.
        """
        try:
            return self.load_manifest(latest)
        except CorruptManifestError as exc:
            if not isinstance(txn.operation, operations.Restore):
                why = f"it is the latest version of {self.store.uri}, so nothing can be committed on top of it"
                raise self.corrupt_history(exc, latest, why) from exc
            intact = self.newest_intact(latest)
            if intact is None:
                raise
            version, manifest = intact
            log.warning(
                "%s: latest version %d is corrupt (%s); restoring version %d on top of version %d",
                self.store.uri,
                latest.version,
                exc,
                txn.operation.version,
                version,
            )
            return manifest

    def newest_intact(self, latest: ManifestLocation) -> tuple[int, pb.Manifest] | None:
        """The newest version below `latest` whose manifest decodes, with that manifest (None if none does).

        Args:
            latest: the table's latest version, whose manifest is corrupt
        """
        for version in range(latest.version - 1, 0, -1):
            try:
                return version, self.load_manifest(location_of(self.store, version, latest.naming))
            except (CorruptManifestError, VersionNotFoundError):
                continue
        return None

    def corrupt_history(self, exc: CorruptManifestError, latest: ManifestLocation, why: str) -> CorruptManifestError:
        """The error for a corrupt manifest in the way of a read or write of the table whose latest version is
        `latest`: `exc`, `why` it stops the caller, and the way out, a restore of the newest intact version
        below `latest`, in the API's words and the `mvcc` command's.

        Args:
            exc: the error reading the corrupt manifest
            latest: the table's latest version
            why: why the corruption stops the caller, in its words
        """
        intact = self.newest_intact(latest)
        uri = self.store.uri
        if intact is None:
            way_out = "no older version is intact either, so there is nothing to restore"
        else:
            version = intact[0]
            way_out = (
                f"the newest intact version is {version}: make it the latest again with Table.restore({version}) "
                f"(e.g. open_table({uri!r}, version={version}).restore()), or from a shell: "
                f"mvcc restore {uri} --version {version}"
            )
        message, intact_version = f"{exc}; {why}; {way_out}", None if intact is None else intact[0]
        if isinstance(exc, ManifestInvariantError):
            return ManifestInvariantError(message, field=exc.field, value=exc.value, intact_version=intact_version)
        return CorruptManifestError(message, intact_version=intact_version)

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
        needed = referenced_files(manifest)
        stale = [p for p in files["superseded"] + files["written"] if p not in needed]
        with contextlib.suppress(StorageError):
            self.store.delete_many(stale)

    def _load_version_any(self, version: int, naming: ManifestNaming) -> pb.Manifest:
        """Load any version (for Restore) of a table whose manifests use `naming`."""
        cached = self.cache.manifests.get(version)
        if cached is not None:
            return cached
        return self.load_manifest(location_of(self.store, version, naming))

    def _load_reference(self, uri: str, version: int) -> pb.Manifest:
        """Another table's manifest (a Clone's source), opened with this store's options."""
        source = self.store.sibling(uri)
        return read_manifest(source, location_of(source, version, detect_naming(source)))
