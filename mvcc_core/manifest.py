"""Reading and writing manifests, and finding the versions of a table.

The manifest protobuf (`protos/table.proto`) is the model: it is what is on disk and what the commit
loop transforms. Writes go through put-if-not-exists so that exactly one writer creates a version.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime

from google.protobuf.message import DecodeError

from . import features, framing
from ._proto import table_pb2 as pb
from .errors import CorruptManifestError, ObjectNotFoundError, StorageError, TableNotFoundError, VersionNotFoundError
from .naming import VERSIONS_DIR, ManifestNaming, manifest_path, parse_manifest_name
from .storage import ObjectStore

WRITER_LIBRARY = "mvcc"


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
    try:
        data = store.get(location.path)
    except ObjectNotFoundError:
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


def list_manifests(store: ObjectStore) -> list[ManifestLocation]:
    """Every committed version, oldest first (one full listing of `_versions/`)."""
    found: dict[int, ManifestLocation] = {}
    for meta in store.list(VERSIONS_DIR):
        parsed = parse_manifest_name(meta.path)
        if parsed is None:
            continue  # temporary or staged files
        version, naming = parsed
        found.setdefault(version, ManifestLocation(version, naming, f"{VERSIONS_DIR}/{meta.path.rsplit('/', 1)[-1]}"))
    return [found[v] for v in sorted(found)]


# A local directory listing grows with the number of versions. Like Iceberg's version-hint.text, a
# small hint names a recent version; the reader then checks that its successor does not exist, so a
# stale hint costs one more stat per missed version and is never trusted blindly.
LATEST_HINT = f"{VERSIONS_DIR}/_latest_version_hint.json"


def _uses_hint(store: ObjectStore) -> bool:
    return store.scheme == "file"


def write_latest_hint(store: ObjectStore, version: int, naming: ManifestNaming) -> None:
    """Best effort: a missing or stale hint only makes the next lookup slower."""
    if not _uses_hint(store):
        return
    with contextlib.suppress(StorageError, OSError):
        store.put(LATEST_HINT, json.dumps({"version": version, "naming": naming.value}).encode())


def _latest_from_hint(store: ObjectStore) -> ManifestLocation | None:
    try:
        hint = json.loads(store.get(LATEST_HINT))
        version, naming = int(hint["version"]), ManifestNaming(hint["naming"])
    except (ObjectNotFoundError, ValueError, KeyError, TypeError):
        return None
    if not store.exists(manifest_path(version, naming)):
        return None
    while store.exists(manifest_path(version + 1, naming)):
        version += 1
    return location_of(store, version, naming)


def latest_manifest_location(store: ObjectStore) -> ManifestLocation:
    """The newest version. With V2 naming this is a single LIST request asking for one key."""
    if _uses_hint(store):
        hinted = _latest_from_hint(store)
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
