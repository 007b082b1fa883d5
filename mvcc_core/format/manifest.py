"""Reading and writing manifests, and finding the versions of a table.

The manifest protobuf (`protos/table.proto`) is the model: it is what is on disk and what the commit
loop transforms. Writes go through put-if-not-exists so that exactly one writer creates a version.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from google.protobuf.message import DecodeError

from mvcc_core._proto import table_pb2 as pb
from mvcc_core._version import __version__
from mvcc_core.errors import (
    CorruptManifestError,
    ObjectNotFoundError,
    StorageError,
    TableNotFoundError,
    VersionNotFoundError,
)
from mvcc_core.failpoints import failpoint
from mvcc_core.format import checked_manifests, features, framing
from mvcc_core.format.checked_manifests import RowTotals, row_totals
from mvcc_core.format.invariants import check_manifest, derive_fields, describe, violations
from mvcc_core.format.naming import (
    MAX_VERSION,
    VERSIONS_DIR,
    ManifestNaming,
    manifest_name_out_of_range,
    manifest_path,
    parse_manifest_name,
)
from mvcc_core.io import ObjectMeta, ObjectStore

log = logging.getLogger("mvcc.manifest")

WRITER_LIBRARY = "mvcc"


def writer_version() -> str:
    """The version of mvcc recorded in every manifest it writes."""
    return __version__


@dataclass(frozen=True)
class ManifestLocation:
    version: int
    naming: ManifestNaming
    path: str  # relative to the table root


def decode_manifest(data: bytes, where: str) -> pb.Manifest:
    """Decode a manifest file's bytes, refusing torn files and unknown reader features.

    Args:
        data: the manifest file's bytes
        where: the manifest's location, for error messages

    Raises:
        CorruptManifestError: the file is torn or not a manifest
        UnsupportedFeatureError: the table needs reader features this mvcc lacks
    """
    try:
        payload = framing.unframe(data)
        manifest = pb.Manifest.FromString(payload)
    except (framing.FramingError, DecodeError) as exc:
        raise CorruptManifestError(f"manifest {where} is corrupt: {exc}") from exc
    features.check_reader_flags(manifest.reader_feature_flags, f"manifest {where}")
    return manifest


def encode_manifest(manifest: pb.Manifest) -> bytes:
    """The bytes of a manifest file: the manifest, serialized deterministically and framed.

    Args:
        manifest: the manifest to store
    """
    return framing.frame(manifest.SerializeToString(deterministic=True))


def read_manifest(
    store: ObjectStore,
    location: ManifestLocation,
    handler: CommitHandler | None = None,
    *,
    totals: dict[int, tuple[pb.Manifest, RowTotals]] | None = None,
) -> pb.Manifest:
    """Read one version. With an external store, a version not yet finalized is synchronized first.

    Args:
        store: the table's store (its root)
        location: the version's manifest location
        handler: the table's commit handler; None for the default (put-if-not-exists on the object store), an external
            store's handler to also see versions it has committed but not yet published
        totals: where to note the manifest read and its row totals, under its version (a committer's cache)

    Raises:
        VersionNotFoundError: the version does not exist
        CorruptManifestError: the file is torn or holds another version
    """
    manifest, found = read_checked_manifest(store, location, handler)
    if totals is not None:
        totals[location.version] = (manifest, found)
    return manifest


def read_checked_manifest(
    store: ObjectStore, location: ManifestLocation, handler: CommitHandler | None = None
) -> tuple[pb.Manifest, RowTotals]:
    """Read one version, with its row totals (`read_manifest`). Its invariants are checked on the first read
    of these bytes in this process only (`checked_manifests`): the same file read again is decoded, not checked.

    A final-named manifest exists only once its version is committed to the external store (step 3 copies
    the winner's staged file), so the handler is asked only when the final name is missing.

    Args:
        store: the table's store (its root)
        location: the version's manifest location
        handler: the table's commit handler; None for the default (put-if-not-exists on the object store), an external
            store's handler to also see versions it has committed but not yet published

    Raises:
        VersionNotFoundError: the version does not exist
        CorruptManifestError: the file is torn or holds another version
    """
    try:
        data = store.get(location.path)
    except ObjectNotFoundError:
        unpublished = (handler or PUT_IF_NOT_EXISTS).read_unpublished(store, location)
        if unpublished is None:
            raise VersionNotFoundError(f"table {store.uri} has no version {location.version}") from None
        data = unpublished
    where = f"{store.uri}/{location.path}"
    key = checked_manifests.file_key(where, data)
    manifest = decode_manifest(data, where)
    if manifest.version != location.version:
        raise CorruptManifestError(
            f"manifest {where} says version {manifest.version}, its name says {location.version}"
        )
    totals = checked_manifests.passed(key)
    if totals is None:
        check_manifest(manifest, where)
        totals = row_totals(manifest)
        checked_manifests.remember(key, totals)
    else:
        derive_fields(manifest)
    return manifest, totals


def manifest_problems(
    store: ObjectStore, location: ManifestLocation, handler: CommitHandler | None = None
) -> list[str]:
    """Every problem of one version's manifest in plain words (empty: it reads and holds every invariant).

    Unlike `read_manifest`, which stops at the first, this lists each broken invariant (`mvcc verify`).

    Args:
        store: the table's store
        location: the version's manifest
        handler: the table's commit handler (an external store's unpublished versions)
    """
    where = f"{store.uri}/{location.path}"
    try:
        data = store.get(location.path)
    except ObjectNotFoundError:
        unpublished = (handler or PUT_IF_NOT_EXISTS).read_unpublished(store, location)
        if unpublished is None:
            return [f"table {store.uri} has no version {location.version}"]
        data = unpublished
    try:
        manifest = decode_manifest(data, where)
    except CorruptManifestError as exc:
        return [str(exc)]
    return [describe(where, field, value, problem) for field, value, problem in violations(manifest)]


def write_manifest(store: ObjectStore, manifest: pb.Manifest, naming: ManifestNaming) -> bool:
    """Create the manifest of `manifest.version`; False if another writer created it first.

    Args:
        store: the table's store (its root)
        manifest: the new version's manifest
        naming: the table's manifest naming scheme
    """
    return store.put_if_not_exists(manifest_path(manifest.version, naming), encode_manifest(manifest))


class CommitHandler:
    """How one table finds its latest version and publishes the next one exactly once (Lance's CommitHandler).

    This base class is the object store's own protocol: a manifest is published with put-if-not-exists
    (S3's conditional PUT, a local link), and the latest version is the newest manifest listed. The external
    manifest store's four-step protocol (`external_store.ExternalStoreHandler`) overrides it. A handler is
    chosen once, when a table is opened, and passed to every read and commit of that table: nothing is
    attached to a store behind the caller's back.
    """

    #: The latest version is found by listing the store, so the commit loop may overlap that LIST with
    #: the transaction file's PUT.
    lists_latest = True

    def check_supported(self, store: ObjectStore) -> None:
        """Raise CommitNotSupportedError if commits to `store` cannot be atomic under this handler.

        Args:
            store: the table's store (its root)
        """
        store.check_commit_supported()

    def latest_location(self, store: ObjectStore) -> ManifestLocation | None:
        """The latest version when the handler knows it better than a listing does (None: list the store).

        Args:
            store: the table's store (its root)
        """
        return None

    def read_unpublished(self, store: ObjectStore, location: ManifestLocation) -> bytes | None:
        """The manifest of a committed version whose final name does not exist yet (None: no such version).

        Args:
            store: the table's store (its root)
            location: the version's expected manifest location
        """
        return None

    def publish(self, store: ObjectStore, manifest: pb.Manifest, naming: ManifestNaming) -> bool:
        """Make `manifest` the next version; False if another writer published this version first.

        Args:
            store: the table's store (its root)
            manifest: the new version's manifest
            naming: the table's manifest naming scheme
        """
        failpoint("commit.before_manifest_put")
        won = write_manifest(store, manifest, naming)
        if won:
            write_latest_hint(store, manifest.version, naming)
        return won

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


#: The default handler: the object store's put-if-not-exists.
PUT_IF_NOT_EXISTS = CommitHandler()


def list_manifests(store: ObjectStore, handler: CommitHandler | None = None) -> list[ManifestLocation]:
    """Every committed version, oldest first (one full listing of `_versions/`, plus the handler's latest).

    Args:
        store: the table's store (its root)
        handler: the table's commit handler; None for the default (put-if-not-exists on the object store), an external
            store's handler to also see versions it has committed but not yet published
    """
    return manifests_listed(store, store.list(VERSIONS_DIR), handler)


def manifests_listed(
    store: ObjectStore, listing: Iterable[ObjectMeta], handler: CommitHandler | None = None
) -> list[ManifestLocation]:
    """`list_manifests` from a listing of `_versions/` the caller already has (retention lists it once for both).

    Args:
        store: the table's store (its root)
        listing: the objects below `_versions/`, as `store.list(VERSIONS_DIR)` returns them
        handler: the table's commit handler (see `list_manifests`)
    """
    found: dict[int, ManifestLocation] = {}
    for meta in listing:
        parsed = parse_manifest_name(meta.path)
        if parsed is None:
            if manifest_name_out_of_range(meta.path):
                log.warning(
                    "%s/%s: skipped: names a version outside 0..%d, which no writer commits",
                    store.uri,
                    meta.path,
                    MAX_VERSION,
                )
            continue  # temporary or staged files
        version, naming = parsed
        found.setdefault(version, ManifestLocation(version, naming, f"{VERSIONS_DIR}/{meta.path.rsplit('/', 1)[-1]}"))
    latest = (handler or PUT_IF_NOT_EXISTS).latest_location(store)
    if latest is not None:
        found.setdefault(latest.version, latest)
    return [found[v] for v in sorted(found)]


# A local directory listing grows with the number of versions. Like Iceberg's version-hint.text, a
# small hint names a recent version; the reader then searches its successors (doubling steps, then a
# binary search: about 2 log2(n) stats for n versions past the hint) and never trusts it blindly.
LATEST_HINT = f"{VERSIONS_DIR}/_latest_version_hint.json"


def _uses_hint(store: ObjectStore) -> bool:
    return store.scheme == "file"


# The hint is rewritten every HINT_EVERY versions (and for a new table): a reader then searches at most
# that many successors (at most ~10 stats), while a commit rarely pays for the extra write.
HINT_EVERY = 32


def write_latest_hint(store: ObjectStore, version: int, naming: ManifestNaming) -> None:
    """Best effort: a missing or stale hint only makes the next lookup slower.

    Args:
        store: the table's store (its root)
        version: the version just committed
        naming: the table's manifest naming scheme
    """
    if not _uses_hint(store) or (version % HINT_EVERY and version != 1):
        return
    with contextlib.suppress(StorageError, OSError):
        store.put(LATEST_HINT, json.dumps({"version": version, "naming": naming.value}).encode())


def move_latest_hint(store: ObjectStore, version: int, naming: ManifestNaming) -> None:
    """Point the hint at `version`, an existing version with every later version present, before retention
    removes versions that would leave a hole above the hint (a kept tagged version with removed successors):
    the forward search from the hint would stop at that hole and take an old version for the latest.

    Args:
        store: the table's store (its root)
        version: the latest version (retention never removes it)
        naming: the table's manifest naming scheme

    Raises:
        StorageError: the hint could not be written (retention must not remove versions then).
    """
    if _uses_hint(store):
        store.put(LATEST_HINT, json.dumps({"version": version, "naming": naming.value}).encode())


def latest_from_hint(store: ObjectStore, known: ManifestLocation | None = None) -> ManifestLocation | None:
    """The latest version, searched forward from the hint, or from `known` (a version the caller saw exist) when
    it is newer (`_last_present`); None when the start is gone (the caller then lists the versions).

    Args:
        store: the table's store (its root)
        known: a version the caller saw exist (None: start from the hint alone)
    """
    start: tuple[int, ManifestNaming] | None = None
    try:
        hint = json.loads(store.get(LATEST_HINT))
        start = int(hint["version"]), ManifestNaming(hint["naming"])
    except (ObjectNotFoundError, ValueError, KeyError, TypeError):
        pass
    if start is not None and not 0 <= start[0] <= MAX_VERSION:
        start = None  # a hint out of range is ignored like a garbled one
    if known is not None and (start is None or known.version > start[0]):
        start = known.version, known.naming
    if start is None:
        return None
    version, naming = start
    if not store.exists(manifest_path(version, naming)):
        return None
    version = _last_present(store, version, naming)
    # Retention deletes old manifests in ascending order: if the search stopped at a hole it made, the
    # version we stopped at is gone by now too. The latest is never deleted, so it passes this check.
    if not store.exists(manifest_path(version, naming)):
        return None
    return location_of(store, version, naming)


def _last_present(store: ObjectStore, present: int, naming: ManifestNaming) -> int:
    """The newest version from `present` (a version seen to exist) on, in O(log n) stats: versions are committed
    one after another, so above a committed version every version exists up to the latest and none after it.
    Doubling steps find a missing version, then a binary search the last present one before it."""
    missing = None
    step = 1
    while missing is None and present < MAX_VERSION:
        probe = min(present + step, MAX_VERSION)
        if store.exists(manifest_path(probe, naming)):
            present, step = probe, 2 * step
        else:
            missing = probe
    while missing is not None and missing - present > 1:
        middle = (present + missing) // 2
        if store.exists(manifest_path(middle, naming)):
            present = middle
        else:
            missing = middle
    return present


def latest_manifest_location(
    store: ObjectStore, known: ManifestLocation | None = None, handler: CommitHandler | None = None
) -> ManifestLocation:
    """The newest version. With V2 naming this is a single LIST request asking for one key.

    `known`: a version the caller has seen (its read version, or the one it just lost the race for);
    on a local disk the search starts there when it is newer than the hint.

    With an external store the store decides (its latest entry, synchronized); the object store is listed
    only for a table the store does not know yet (created before the store was used).

    Args:
        store: the table's store (its root)
        known: a version the caller has seen (its read version, or the one it just lost the race for); on a local disk
            the walk starts there when it is newer than the hint
        handler: the table's commit handler; None for the default (put-if-not-exists on the object store), an external
            store's handler to also see versions it has committed but not yet published

    Raises:
        TableNotFoundError: the store holds no version
    """
    external = (handler or PUT_IF_NOT_EXISTS).latest_location(store)
    if external is not None:
        return external
    if _uses_hint(store):
        hinted = latest_from_hint(store, known)
        if hinted is not None:
            return hinted
    first = store.list_first(VERSIONS_DIR)
    if first is not None:
        parsed = parse_manifest_name(first.path)
        if parsed is not None and parsed[1] is ManifestNaming.V2:
            name = first.path.rsplit("/", 1)[-1]
            return ManifestLocation(parsed[0], parsed[1], f"{VERSIONS_DIR}/{name}")
    # V1 tables (or a temporary file sorting first): a full listing.
    locations = list_manifests(store, handler)
    if not locations:
        raise TableNotFoundError(f"no table at {store.uri}: {VERSIONS_DIR}/ holds no manifest")
    return locations[-1]


def detect_naming(store: ObjectStore, handler: CommitHandler | None = None) -> ManifestNaming:
    """The manifest naming scheme of an existing table (read from its latest version's name).

    Args:
        store: the table's store (its root)
        handler: the table's commit handler; None for the default (put-if-not-exists on the object store), an external
            store's handler to also see versions it has committed but not yet published
    """
    return latest_manifest_location(store, handler=handler).naming


def location_of(store: ObjectStore, version: int, naming: ManifestNaming) -> ManifestLocation:
    """Where a version's manifest is, given the table's naming scheme.

    Args:
        store: the table's store (its root)
        version: the version
        naming: the table's manifest naming scheme
    """
    return ManifestLocation(version, naming, manifest_path(version, naming))


def manifest_timestamp(manifest: pb.Manifest) -> datetime:
    """When a version was committed, as an aware UTC datetime.

    Args:
        manifest: the version's manifest
    """
    return manifest.timestamp.ToDatetime(tzinfo=UTC)


def table_exists(store: ObjectStore, handler: CommitHandler | None = None) -> bool:
    """Whether the store holds a table (at least one committed version).

    Args:
        store: the store to look in
        handler: the table's commit handler; None for the default (put-if-not-exists on the object store), an external
            store's handler to also see versions it has committed but not yet published
    """
    try:
        latest_manifest_location(store, handler=handler)
    except TableNotFoundError:
        return False
    return True
