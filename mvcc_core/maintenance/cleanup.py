"""Retention: remove old versions and the files only they reference (Lance's `cleanup_old_versions`).

Kept: the latest version, tagged versions, versions newer than `older_than`, and the newest
`retain_versions`. Removed: the other manifests, then the data, deletion, index and transaction files that
only removed versions reference. Files no manifest references at all (debris of failed or in-flight
commits, staged manifests, temporary files) are "unverified": removed only when older than a safety
window (7 days) or with `delete_unverified=True`, so a writer between writing its files and committing
never loses them. Files under other base paths (a shallow clone's source) are never touched.

Order matters for crash safety: manifests go first, so a crash leaves at most unreferenced files (which
a later run removes once they are older than the window), never a version that points at missing files.
Versions committed while the cleanup runs are read before anything is deleted and kept with their files.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from .._proto import table_pb2 as pb
from ..deletion import deletion_path
from ..errors import TagError
from ..manifest import (
    LATEST_HINT,
    ManifestLocation,
    latest_manifest_location,
    list_manifests,
    location_of,
    manifest_timestamp,
    read_manifest,
)
from ..naming import INDICES_DIR, VERSIONS_DIR, data_file_path
from ..storage import ObjectMeta, ObjectStore

if TYPE_CHECKING:
    from ..table import Table

UNVERIFIED_WINDOW = timedelta(days=7)
_DIRECTORIES = ("data", "_deletions", "_transactions", INDICES_DIR, VERSIONS_DIR)


@dataclass(frozen=True)
class CleanupStats:
    """What was (or, with dry_run, would be) removed."""

    old_versions: int = 0
    bytes_removed: int = 0
    data_files_removed: int = 0
    deletion_files_removed: int = 0
    transaction_files_removed: int = 0
    index_files_removed: int = 0
    unverified_files_removed: int = 0
    removed_versions: tuple[int, ...] = ()


def referenced_files(manifest: pb.Manifest) -> set[str]:
    """Paths (relative to the table root) of the table's own files a version needs, its manifest aside."""
    out: set[str] = set()
    for frag in manifest.fragments:
        for data_file in frag.files:
            if not data_file.HasField("base_id"):
                out.add(data_file_path(data_file.path))
        if frag.HasField("deletion_file") and not frag.deletion_file.HasField("base_id"):
            out.add(deletion_path(frag.id, frag.deletion_file))
    for index in manifest.indices:
        if not index.HasField("base_id"):
            for index_file in index.files:
                out.add(f"{INDICES_DIR}/{uuid.UUID(bytes=index.uuid.uuid)}/{index_file.path}")
    if manifest.transaction_file:
        out.add(f"_transactions/{manifest.transaction_file}")
    return out


def _read_all(store: ObjectStore, locations: Iterable[ManifestLocation]) -> dict[int, pb.Manifest]:
    locations = list(locations)
    if store.scheme == "file":
        return {loc.version: read_manifest(store, loc) for loc in locations}
    with ThreadPoolExecutor(max_workers=16) as pool:  # one GET each on S3: overlap them
        return dict(
            zip(
                (loc.version for loc in locations),
                pool.map(lambda loc: read_manifest(store, loc), locations),
                strict=True,
            )
        )


def cleanup_old_versions(
    table: Table,
    older_than: timedelta = timedelta(days=14),
    retain_versions: int | None = None,
    delete_unverified: bool = False,
    error_if_tagged_old_versions: bool = True,
    dry_run: bool = False,
) -> CleanupStats:
    """Remove versions older than `older_than` (but see the module docstring for what is always kept)."""
    if not isinstance(older_than, timedelta) or older_than < timedelta(0):
        raise ValueError(f"older_than must be a non-negative timedelta, got {older_than!r}")
    if retain_versions is not None and (isinstance(retain_versions, bool) or retain_versions < 1):
        raise ValueError(f"retain_versions must be a positive int, got {retain_versions!r}")
    store = table._store
    now = datetime.now(UTC)
    cutoff = now - older_than
    locations = list_manifests(store)
    manifests = _read_all(store, locations)
    versions = sorted(manifests)
    tags = {name: info["version"] for name, info in table.tags.list().items()}
    keep = {versions[-1]} | {v for v in versions if manifest_timestamp(manifests[v]) >= cutoff}
    if retain_versions is not None:
        keep |= set(versions[-retain_versions:])
    old_tags = {name: v for name, v in tags.items() if v in manifests and v not in keep}
    if old_tags and error_if_tagged_old_versions:
        raise TagError(
            f"cleanup of {store.uri} would pass over tagged versions older than {older_than}: {old_tags}; delete "
            "the tags, or call with error_if_tagged_old_versions=False to keep those versions and go on"
        )
    keep |= set(tags.values()) & set(manifests)
    removed = [v for v in versions if v not in keep]
    by_version = {loc.version: loc for loc in locations}

    files: list[ObjectMeta] = []
    for directory in _DIRECTORIES:
        files.extend(store.list(directory))
    # Versions committed meanwhile are kept, with everything they reference (read before any delete).
    # Versions are contiguous: look for the latest from the newest one listed (a few stats locally, one
    # LIST on S3) instead of listing every manifest again.
    newest = by_version[versions[-1]]
    latest = latest_manifest_location(store, newest)
    for version in range(newest.version + 1, latest.version + 1):
        loc = location_of(store, version, newest.naming)
        manifests[version] = read_manifest(store, loc)
        by_version[version] = loc
        keep.add(version)
    needed: set[str] = {by_version[v].path for v in keep} | {LATEST_HINT}
    for v in keep:
        needed |= referenced_files(manifests[v])
    verified: set[str] = {by_version[v].path for v in removed}
    for v in removed:
        verified |= referenced_files(manifests[v])
    window_start = now - UNVERIFIED_WINDOW

    doomed: list[ObjectMeta] = []
    unverified = 0
    for meta in files:
        if meta.path in needed:
            continue
        if meta.path in verified:
            doomed.append(meta)
        elif delete_unverified or (meta.last_modified is not None and meta.last_modified < window_start):
            doomed.append(meta)
            unverified += 1
    stats = CleanupStats(
        old_versions=len(removed),
        bytes_removed=sum(m.size for m in doomed),
        data_files_removed=sum(1 for m in doomed if m.path.startswith("data/")),
        deletion_files_removed=sum(1 for m in doomed if m.path.startswith("_deletions/")),
        transaction_files_removed=sum(1 for m in doomed if m.path.startswith("_transactions/")),
        index_files_removed=sum(1 for m in doomed if m.path.startswith(f"{INDICES_DIR}/")),
        unverified_files_removed=unverified,
        removed_versions=tuple(removed),
    )
    if not dry_run:
        manifest_paths = {by_version[v].path for v in removed}
        # versions first, oldest first: a reader walking up from the latest-version hint then never
        # mistakes a hole for the end (see manifest._latest_from_hint)
        doomed_paths = {m.path for m in doomed}
        store.delete_many([by_version[v].path for v in removed if by_version[v].path in doomed_paths])
        store.delete_many([m.path for m in doomed if m.path not in manifest_paths])
        table._committer.cache.manifests.clear()
    return stats
