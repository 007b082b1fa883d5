"""Reading and writing manifests, and finding the versions of a table.

The manifest protobuf (`protos/table.proto`) is the model: it is what is on disk and what the commit
loop transforms. Writes go through put-if-not-exists so that exactly one writer creates a version.
"""

from __future__ import annotations

import contextlib
import json
import weakref
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from google.protobuf.message import DecodeError

from . import features, framing
from ._proto import table_pb2 as pb
from .errors import CorruptManifestError, ObjectNotFoundError, StorageError, TableNotFoundError, VersionNotFoundError
from .naming import VERSIONS_DIR, ManifestNaming, manifest_path, parse_manifest_name
from .storage import ObjectStore

if TYPE_CHECKING:
    from .external_store import ExternalManifestStore

WRITER_LIBRARY = "mvcc"

# The external manifest store of an ObjectStore, if its table commits through one. Kept beside the store (not
# in it) so that every reader of this module -- latest version, reading a version, listing versions -- runs
# the store's synchronization protocol without each caller passing the store around.
_EXTERNAL: weakref.WeakKeyDictionary[ObjectStore, ExternalManifestStore] = weakref.WeakKeyDictionary()


def attach_external_store(store: ObjectStore, external: ExternalManifestStore | None) -> None:
    """Make `store`'s manifests resolve through `external` (None detaches)."""
    if external is None:
        _EXTERNAL.pop(store, None)
    else:
        _EXTERNAL[store] = external


def external_store_of(store: ObjectStore) -> ExternalManifestStore | None:
    """The external manifest store attached to `store`, if any."""
    return _EXTERNAL.get(store)


def writer_version() -> str:
    from . import __version__

    return __version__


@dataclass(frozen=True)
class ManifestLocation:
    version: int
    naming: ManifestNaming
    path: str  # relative to the table root


def decode_manifest(data: bytes, where: str) -> pb.Manifest:
    """Decode a manifest file's bytes, refusing torn files and unknown reader features."""
    try:
        payload = framing.unframe(data)
        manifest = pb.Manifest.FromString(payload)
    except (framing.FramingError, DecodeError) as exc:
        raise CorruptManifestError(f"manifest {where} is corrupt: {exc}") from exc
    features.check_reader_flags(manifest.reader_feature_flags, f"manifest {where}")
    return manifest


def encode_manifest(manifest: pb.Manifest) -> bytes:
    return framing.frame(manifest.SerializeToString(deterministic=True))


def read_manifest(store: ObjectStore, location: ManifestLocation) -> pb.Manifest:
    """Read one version. With an external store, a version not yet finalized is synchronized first.

    A final-named manifest exists only once its version is committed to the external store (step 3 copies
    the winner's staged file), so the store is asked only when the final name is missing.
    """
    try:
        data = store.get(location.path)
    except ObjectNotFoundError:
        data = _read_through_external_store(store, location)
        if data is None:
            raise VersionNotFoundError(f"table {store.uri} has no version {location.version}") from None
    manifest = decode_manifest(data, f"{store.uri}/{location.path}")
    if manifest.version != location.version:
        raise CorruptManifestError(
            f"manifest {store.uri}/{location.path} says version {manifest.version}, its name says {location.version}"
        )
    return manifest


def write_manifest(store: ObjectStore, manifest: pb.Manifest, naming: ManifestNaming) -> bool:
    """Create the manifest of `manifest.version`; False if another writer created it first."""
    return store.put_if_not_exists(manifest_path(manifest.version, naming), encode_manifest(manifest))


def _read_through_external_store(store: ObjectStore, location: ManifestLocation) -> bytes | None:
    external = external_store_of(store)
    if external is None:
        return None
    from .external_store import synchronize

    path = external.get(store.uri, location.version)
    if path is None:
        return None
    rel = synchronize(store, external, location.version, path)
    try:
        return store.get(rel)
    except ObjectNotFoundError:
        from .external_store import ExternalStoreSyncError

        raise ExternalStoreSyncError(
            f"table {store.uri}: the external store names {path} for version {location.version}, "
            "and that manifest does not exist"
        ) from None


def _latest_from_external_store(store: ObjectStore) -> ManifestLocation | None:
    """Reader protocol: the store's latest version, synchronized; None if the store knows no version."""
    external = external_store_of(store)
    if external is None:
        return None
    from .external_store import relative_path, synchronize

    entry = external.get_latest_version(store.uri)
    if entry is None:
        return None
    version, path = entry
    _, naming = relative_path(store, version, path)
    rel = synchronize(store, external, version, path)
    return ManifestLocation(version, naming, rel)


def list_manifests(store: ObjectStore) -> list[ManifestLocation]:
    """Every committed version, oldest first (one full listing of `_versions/`, plus the external store's latest)."""
    found: dict[int, ManifestLocation] = {}
    for meta in store.list(VERSIONS_DIR):
        parsed = parse_manifest_name(meta.path)
        if parsed is None:
            continue  # temporary or staged files
        version, naming = parsed
        found.setdefault(version, ManifestLocation(version, naming, f"{VERSIONS_DIR}/{meta.path.rsplit('/', 1)[-1]}"))
    latest = _latest_from_external_store(store)
    if latest is not None:
        found.setdefault(latest.version, latest)
    return [found[v] for v in sorted(found)]


# A local directory listing grows with the number of versions. Like Iceberg's version-hint.text, a
# small hint names a recent version; the reader then checks that its successor does not exist, so a
# stale hint costs one more stat per missed version and is never trusted blindly.
LATEST_HINT = f"{VERSIONS_DIR}/_latest_version_hint.json"


def _uses_hint(store: ObjectStore) -> bool:
    return store.scheme == "file"


# The hint is rewritten every HINT_EVERY versions (and for a new table): a reader then checks at most
# that many successors, each one stat, while a commit rarely pays for the extra write.
HINT_EVERY = 32


def write_latest_hint(store: ObjectStore, version: int, naming: ManifestNaming) -> None:
    """Best effort: a missing or stale hint only makes the next lookup slower."""
    if not _uses_hint(store) or (version % HINT_EVERY and version != 1):
        return
    with contextlib.suppress(StorageError, OSError):
        store.put(LATEST_HINT, json.dumps({"version": version, "naming": naming.value}).encode())


def _latest_from_hint(store: ObjectStore, known: ManifestLocation | None = None) -> ManifestLocation | None:
    """Walk forward from the hint, or from `known` (a version the caller saw exist) when it is newer."""
    start: tuple[int, ManifestNaming] | None = None
    try:
        hint = json.loads(store.get(LATEST_HINT))
        start = int(hint["version"]), ManifestNaming(hint["naming"])
    except (ObjectNotFoundError, ValueError, KeyError, TypeError):
        pass
    if known is not None and (start is None or known.version > start[0]):
        start = known.version, known.naming
    if start is None:
        return None
    version, naming = start
    if not store.exists(manifest_path(version, naming)):
        return None
    while store.exists(manifest_path(version + 1, naming)):
        version += 1
    # Retention deletes old manifests in ascending order: if the walk stopped at a hole it made, the
    # version we stopped at is gone by now too. The latest is never deleted, so it passes this check.
    if not store.exists(manifest_path(version, naming)):
        return None
    return location_of(store, version, naming)


def latest_manifest_location(store: ObjectStore, known: ManifestLocation | None = None) -> ManifestLocation:
    """The newest version. With V2 naming this is a single LIST request asking for one key.

    `known`: a version the caller has seen (its read version, or the one it just lost the race for);
    on a local disk the walk starts there when it is newer than the hint, instead of up to
    HINT_EVERY stats from the hint.

    With an external store the store decides (its latest entry, synchronized); the object store is listed
    only for a table the store does not know yet (created before the store was used).
    """
    external = _latest_from_external_store(store)
    if external is not None:
        return external
    if _uses_hint(store):
        hinted = _latest_from_hint(store, known)
        if hinted is not None:
            return hinted
    first = store.list_first(VERSIONS_DIR)
    if first is not None:
        parsed = parse_manifest_name(first.path)
        if parsed is not None and parsed[1] is ManifestNaming.V2:
            name = first.path.rsplit("/", 1)[-1]
            return ManifestLocation(parsed[0], parsed[1], f"{VERSIONS_DIR}/{name}")
    # V1 tables (or a temporary file sorting first): a full listing.
    locations = list_manifests(store)
    if not locations:
        raise TableNotFoundError(f"no table at {store.uri}: {VERSIONS_DIR}/ holds no manifest")
    return locations[-1]


def detect_naming(store: ObjectStore) -> ManifestNaming:
    return latest_manifest_location(store).naming


def location_of(store: ObjectStore, version: int, naming: ManifestNaming) -> ManifestLocation:
    return ManifestLocation(version, naming, manifest_path(version, naming))


def manifest_timestamp(manifest: pb.Manifest) -> datetime:
    return manifest.timestamp.ToDatetime(tzinfo=UTC)


def table_exists(store: ObjectStore) -> bool:
    try:
        latest_manifest_location(store)
    except TableNotFoundError:
        return False
    return True
