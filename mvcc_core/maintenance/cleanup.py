"""Retention: remove old versions and the files only they reference (Lance's `cleanup_old_versions`).

Design notes: docs/operations/maintenance.md, "Retention, as implemented".
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.durations import age_problem
from mvcc_core.errors import CorruptManifestError, TagError
from mvcc_core.format.branches import branch_of
from mvcc_core.format.manifest import (
    LATEST_HINT,
    ManifestLocation,
    latest_manifest_location,
    list_manifests,
    location_of,
    manifest_timestamp,
    move_latest_hint,
    read_manifest,
)
from mvcc_core.format.naming import DATA_DIR, DELETIONS_DIR, INDICES_DIR, REFS_DIR, TRANSACTIONS_DIR, VERSIONS_DIR
from mvcc_core.format.referenced_files import referenced_files
from mvcc_core.format.tags import Tags
from mvcc_core.io import ObjectMeta, is_temporary
from mvcc_core.maintenance.policy import retention_settings
from mvcc_core.progress import Progress
from mvcc_core.txn.branches import fork_pins, protected_versions, referenced_elsewhere
from mvcc_core.txn.state import TableState

log = logging.getLogger("mvcc.maintenance")

UNVERIFIED_WINDOW = timedelta(days=7)
_DIRECTORIES = (DATA_DIR, DELETIONS_DIR, TRANSACTIONS_DIR, INDICES_DIR, VERSIONS_DIR)


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
    #: Versions whose manifest could not be decoded (reported, and removed when old enough).
    corrupt_versions: tuple[int, ...] = ()
    #: Tag files that could not be read, as (path, problem); while there is one, no version is removed.
    bad_tags: tuple[tuple[str, str], ...] = ()


def _read_all(
    state: TableState, locations: Iterable[ManifestLocation]
) -> tuple[dict[int, pb.Manifest], dict[int, str]]:
    """Every manifest that decodes, and for the others why not (a corrupt version must not wedge retention)."""
    locations = list(locations)

    def read(loc: ManifestLocation) -> pb.Manifest | str:
        try:
            return read_manifest(state.store, loc, state.committer.handler)
        except CorruptManifestError as exc:
            return str(exc)

    if state.store.scheme == "file":
        results = [read(loc) for loc in locations]
    else:
        with ThreadPoolExecutor(max_workers=16) as pool:  # one GET each on S3: overlap them
            results = list(pool.map(read, locations))
    manifests, corrupt = {}, {}
    for loc, result in zip(locations, results, strict=True):
        if isinstance(result, str):
            corrupt[loc.version] = result
        else:
            manifests[loc.version] = result
    return manifests, corrupt


#: Files removed per `delete_many` call when progress is reported.
_DELETE_CHUNK = 1000


def cleanup_old_versions(
    state: TableState,
    older_than: timedelta | None = None,
    retain_versions: int | None = None,
    *,
    delete_unverified: bool = False,
    error_if_tagged_old_versions: bool = True,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> CleanupStats:
    """Remove versions older than `older_than` (but see the module docstring for what is always kept).

    A version whose manifest is corrupt is dated by its file's modification time and removed like any
    other old version (the files only it referenced are unknown: they go as unverified files, after the
    safety window). `progress(done, total)` is called as files are removed.

    Args:
        state: the table, at any version (its latest is always kept)
        older_than: versions committed longer ago than this are removed (None: the table's
            `mvcc.retention.older_than`, else 14 days)
        retain_versions: keep at least this many newest versions, whatever their age (None: the table's
            `mvcc.retention.retain_versions`, else no such floor)
        delete_unverified: also remove files no version references that are younger than the safety window (only when no
            writer can be running)
        error_if_tagged_old_versions: raise instead of keeping an old version a tag names
        dry_run: count what would be removed, remove nothing
        progress: called as `progress(done, total)` as files are removed

    Raises:
        ValueError: `older_than` is negative or reaches back before the year 1, `retain_versions` is not a
            positive int, or a retention key of the table's policy does not parse
    """
    if older_than is None or retain_versions is None:  # the policy of the table's latest version
        try:
            config = state.latest().manifest.config
        except CorruptManifestError:  # reported by the run below; the version at hand has a policy too
            config = state.manifest.config
        older_than, retain_versions = retention_settings(config, older_than, retain_versions)
    if not isinstance(older_than, timedelta) or older_than < timedelta(0):
        raise ValueError(f"older_than must be a non-negative timedelta, got {older_than!r}")
    if (too_long := age_problem(older_than)) is not None:
        raise ValueError(f"older_than={older_than!r} {too_long}")
    if retain_versions is not None and (isinstance(retain_versions, bool) or retain_versions < 1):
        raise ValueError(f"retain_versions must be a positive int, got {retain_versions!r}")
    store, handler = state.store, state.committer.handler
    now = datetime.now(UTC)
    cutoff = now - older_than
    files: list[ObjectMeta] = []
    for directory in _DIRECTORIES:
        files.extend(store.list(directory))
    modified = {m.path: m.last_modified for m in files}
    locations = list_manifests(store, handler)
    manifests, corrupt = _read_all(state, locations)
    by_version = {loc.version: loc for loc in locations}
    versions = sorted(by_version)
    if not versions:
        return CleanupStats()

    def timestamp(version: int) -> datetime:
        if version in manifests:
            return manifest_timestamp(manifests[version])
        return modified.get(by_version[version].path) or now  # unknown age: treated as new, kept

    listing = Tags(store, lambda v: v in by_version).read_all()
    tags = listing.on_branch(branch_of(store))
    keep = {versions[-1]} | {v for v in versions if timestamp(v) >= cutoff}
    if listing.problems:  # a tag we cannot read may protect any version: keep them all
        log.warning(
            "%s: keeping every version: tags that cannot be read: %s", store.uri, "; ".join(listing.problems.values())
        )
        keep = set(versions)
    if retain_versions is not None:
        keep |= set(versions[-retain_versions:])
    for low in protected_versions(state):  # branches: publish bases (docs/guide/branches.md, "Retention")
        keep |= {v for v in versions if v >= low}
    keep |= fork_pins(state) & set(versions)  # forks whose first manifest a killed create_branch did not write
    old_tags = {name: v for name, v in tags.items() if v in by_version and v not in keep}
    if old_tags and error_if_tagged_old_versions:
        raise TagError(
            f"cleanup of {store.uri} would pass over tagged versions older than {older_than}: {old_tags}; delete "
            "the tags, or call with error_if_tagged_old_versions=False to keep those versions and go on",
            tags=old_tags,
        )
    keep |= set(tags.values()) & set(by_version)
    removed = [v for v in versions if v not in keep]
    if corrupt:
        log.warning(
            "%s: corrupt manifests of versions %s (%s)", store.uri, sorted(corrupt), next(iter(corrupt.values()))
        )

    # Versions committed meanwhile are kept, with everything they reference (read before any delete).
    # Versions are contiguous: look for the latest from the newest one listed (a few stats locally, one
    # LIST on S3) instead of listing every manifest again.
    newest = by_version[versions[-1]]
    latest = latest_manifest_location(store, newest, handler)
    for version in range(newest.version + 1, latest.version + 1):
        loc = location_of(store, version, newest.naming)
        by_version[version] = loc
        keep.add(version)
        try:
            manifests[version] = read_manifest(store, loc, handler)
        except CorruptManifestError as exc:
            corrupt[version] = str(exc)
    needed: set[str] = {by_version[v].path for v in keep} | {LATEST_HINT} | referenced_elsewhere(state)
    for v in keep:
        if v in manifests:
            needed |= referenced_files(manifests[v])
    verified: set[str] = {by_version[v].path for v in removed}
    for v in removed:
        if v in manifests:
            verified |= referenced_files(manifests[v])
    window_start = now - UNVERIFIED_WINDOW

    doomed: list[ObjectMeta] = []
    unverified = 0
    # temporary files of ref and tag writes a killed process left (never read as refs or tags)
    for meta in store.list(REFS_DIR):
        stale = delete_unverified or (meta.last_modified is not None and meta.last_modified < window_start)
        if is_temporary(meta.path) and stale:
            doomed.append(meta)
            unverified += 1
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
        data_files_removed=sum(1 for m in doomed if m.path.startswith(f"{DATA_DIR}/")),
        deletion_files_removed=sum(1 for m in doomed if m.path.startswith(f"{DELETIONS_DIR}/")),
        transaction_files_removed=sum(1 for m in doomed if m.path.startswith(f"{TRANSACTIONS_DIR}/")),
        index_files_removed=sum(1 for m in doomed if m.path.startswith(f"{INDICES_DIR}/")),
        unverified_files_removed=unverified,
        removed_versions=tuple(removed),
        corrupt_versions=tuple(sorted(corrupt)),
        bad_tags=tuple(sorted(listing.problems.items())),
    )
    log.info(
        "%s %s: %d old versions, %d files, %d bytes%s",
        "would remove from" if dry_run else "removing from",
        store.uri,
        stats.old_versions,
        len(doomed),
        stats.bytes_removed,
        f" (corrupt versions {list(stats.corrupt_versions)})" if corrupt else "",
    )
    if not dry_run:
        if removed and any(v < max(removed) for v in keep):
            # a kept version below a removed one (a tag, a branch's base): a hint left there would end its
            # forward search at the hole; point it at the latest first (manifest.move_latest_hint)
            move_latest_hint(store, latest.version, latest.naming)
        manifest_paths = {by_version[v].path for v in removed}
        # versions first, oldest first: a reader walking up from the latest-version hint then never
        # mistakes a hole for the end (see manifest.latest_from_hint)
        doomed_paths = {m.path for m in doomed}
        ordered = [by_version[v].path for v in removed if by_version[v].path in doomed_paths]
        ordered += [m.path for m in doomed if m.path not in manifest_paths]
        for start in range(0, len(ordered), _DELETE_CHUNK if progress else max(len(ordered), 1)):
            store.delete_many(ordered[start : start + (_DELETE_CHUNK if progress else len(ordered))])
            if progress is not None:
                progress(min(start + _DELETE_CHUNK, len(ordered)), len(ordered))
    return stats
