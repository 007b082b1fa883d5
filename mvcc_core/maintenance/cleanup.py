"""Retention: remove old versions and the files only they reference (Lance's `cleanup_old_versions`).

How it scales (on an object store every request costs a round trip, so the rounds are what is counted):

1. One round of listings, concurrently: `_versions/`, `data/`, `_deletions/`, `_transactions/`, `_indices/` and
   `_refs/`, each listed once. Tags and branch refs are read only when `_refs/` holds them (a second round).
2. Every manifest is read once, `READ_WORKERS` at a time, streamed in version order: each one is judged (kept or
   removed) as it arrives and only the paths it names are kept, so memory holds the listings and at most
   `2 * READ_WORKERS` manifests, not the table's whole history.
3. Deletions go in `DeleteObjects` batches of at most `DELETE_CHUNK` keys, `DELETE_WORKERS` batches in flight.

The order of deletion, for crash safety: first the removed versions' manifests (oldest first), then the data,
deletion, index and transaction files only they referenced, then unreferenced files past the safety window.
A version is therefore always whole or gone: a process killed at any point leaves every version that is still
listed readable, the kept ones and the not-yet-removed ones alike (files any kept version references are never
in the batches at all). Deleting files first would leave the manifests of half-removed versions behind, naming
files that are gone, which a tag, a restore or a branch created before the rerun could pin for good. The price:
files whose manifests a killed run already removed are named by no manifest, so the rerun cannot verify them;
it removes them as unverified files once they are older than `UNVERIFIED_WINDOW` (or at once with
`delete_unverified=True`), and removes the versions and files the killed run did not reach as usual.

Design notes: docs/operations/maintenance.md, "Retention, as implemented".
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import islice
from typing import TypeVar

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.durations import age_problem
from mvcc_core.errors import CorruptManifestError, TagError
from mvcc_core.failpoints import failpoint
from mvcc_core.format.branches import BRANCHES_DIR, branch_of
from mvcc_core.format.manifest import (
    LATEST_HINT,
    ManifestLocation,
    latest_manifest_location,
    location_of,
    manifest_timestamp,
    manifests_listed,
    move_latest_hint,
    read_manifest,
)
from mvcc_core.format.naming import (
    DATA_DIR,
    DELETIONS_DIR,
    INDICES_DIR,
    REFS_DIR,
    TAGS_DIR,
    TRANSACTIONS_DIR,
    VERSIONS_DIR,
)
from mvcc_core.format.referenced_files import referenced_files
from mvcc_core.format.tags import TagListing, Tags
from mvcc_core.io import ObjectMeta, ObjectStore, is_temporary
from mvcc_core.maintenance.policy import retention_settings
from mvcc_core.progress import Progress
from mvcc_core.txn.branches import fork_pins, protected_versions, referenced_elsewhere
from mvcc_core.txn.state import TableState

log = logging.getLogger("mvcc.maintenance")

UNVERIFIED_WINDOW = timedelta(days=7)
_DIRECTORIES = (DATA_DIR, DELETIONS_DIR, TRANSACTIONS_DIR, INDICES_DIR, VERSIONS_DIR)
#: Manifests read at once on an object store (one GET each).
READ_WORKERS = 32
#: Keys per `delete_many` call (S3's DeleteObjects takes at most 1000).
DELETE_CHUNK = 1000
#: `delete_many` calls in flight at once on an object store.
DELETE_WORKERS = 8

T = TypeVar("T")


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


def _remote(store: ObjectStore) -> bool:
    """Requests overlap on an object store; on the local disk one thread does as well and keeps the order."""
    return store.scheme != "file"


def _all_at_once(store: ObjectStore, calls: dict[str, Callable[[], T]]) -> dict[str, T]:
    """Each call's result, the calls run concurrently on an object store (one round trip for all of them)."""
    if not _remote(store) or len(calls) < 2:
        return {name: call() for name, call in calls.items()}
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = {name: pool.submit(call) for name, call in calls.items()}
        return {name: future.result() for name, future in futures.items()}


def _manifests(
    store: ObjectStore, locations: Iterable[ManifestLocation], read: Callable[[ManifestLocation], pb.Manifest | str]
) -> Iterator[tuple[ManifestLocation, pb.Manifest | str]]:
    """`(location, manifest or why it does not decode)` in the order of `locations`, read `READ_WORKERS` at a time
    on an object store with at most `2 * READ_WORKERS` read ahead (so memory does not grow with the history)."""
    if not _remote(store):
        for loc in locations:
            yield loc, read(loc)
        return
    pending = iter(locations)
    with ThreadPoolExecutor(max_workers=READ_WORKERS) as pool:
        window: deque[tuple[ManifestLocation, Future[pb.Manifest | str]]] = deque(
            (loc, pool.submit(read, loc)) for loc in islice(pending, 2 * READ_WORKERS)
        )
        try:
            while window:
                loc, future = window.popleft()
                following = next(pending, None)
                if following is not None:
                    window.append((following, pool.submit(read, following)))
                yield loc, future.result()
        finally:
            for _, future in window:
                future.cancel()


def _delete(store: ObjectStore, paths: list[str], done: Callable[[int], None]) -> None:
    """Delete `paths` in batches of `DELETE_CHUNK`, `DELETE_WORKERS` at once on an object store (in order, one at
    a time, on the local disk); `done(n)` after each batch of n. The first error stops the rest and is raised."""
    chunks = [paths[i : i + DELETE_CHUNK] for i in range(0, len(paths), DELETE_CHUNK)]
    if not _remote(store):
        for chunk in chunks:
            store.delete_many(chunk)
            done(len(chunk))
        return
    with ThreadPoolExecutor(max_workers=DELETE_WORKERS) as pool:
        queued = iter(chunks)
        running = {pool.submit(store.delete_many, c): len(c) for c in islice(queued, DELETE_WORKERS)}
        try:
            while running:
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    future.result()  # raises the batch's error: the batches not yet started are not sent
                    done(running.pop(future))
                    following = next(queued, None)
                    if following is not None:
                        running[pool.submit(store.delete_many, following)] = len(following)
        finally:
            for future in running:
                future.cancel()


@dataclass
class _Refs:
    """What protects versions and files beyond their age: tags, branches, forks."""

    listing: TagListing
    protected: set[int] = field(default_factory=set)
    pins: set[int] = field(default_factory=set)
    elsewhere: set[str] = field(default_factory=set)


def _read_refs(state: TableState, refs_listing: list[ObjectMeta], version_exists: Callable[[int], bool]) -> _Refs:
    """Tags and branch refs, read (concurrently) only when there are any: on the main tree a `_refs/` listing
    without tags or branches says there is nothing to read. A branch's store reads them all, as always."""
    store = state.store
    on_main = branch_of(store) is None
    has_tags = any(m.path.startswith(f"{TAGS_DIR}/") for m in refs_listing)
    has_branches = any(m.path.startswith(f"{BRANCHES_DIR}/") for m in refs_listing)
    calls: dict[str, Callable[[], object]] = {}
    if has_tags or not on_main:
        calls["tags"] = lambda: Tags(store, version_exists).read_all()
    if has_branches or not on_main:
        calls["protected"] = lambda: protected_versions(state)
        calls["pins"] = lambda: fork_pins(state)
        calls["elsewhere"] = lambda: referenced_elsewhere(state)
    got = _all_at_once(store, calls)
    listing = got.get("tags")
    return _Refs(
        listing=listing if isinstance(listing, TagListing) else TagListing({}, {}, {}),
        protected=got.get("protected", set()),  # type: ignore[arg-type]
        pins=got.get("pins", set()),  # type: ignore[arg-type]
        elsewhere=got.get("elsewhere", set()),  # type: ignore[arg-type]
    )


def _check_settings(older_than: timedelta | None, retain_versions: int | None) -> None:
    """Refuse an age or a floor retention cannot use (None: not given, the table's policy decides)."""
    if older_than is not None and (not isinstance(older_than, timedelta) or older_than < timedelta(0)):
        raise ValueError(f"older_than must be a non-negative timedelta, got {older_than!r}")
    if older_than is not None and (too_long := age_problem(older_than)) is not None:
        raise ValueError(f"older_than={older_than!r} {too_long}")
    if retain_versions is not None and (
        not isinstance(retain_versions, int) or isinstance(retain_versions, bool) or retain_versions < 1
    ):
        raise ValueError(f"retain_versions must be a positive int, got {retain_versions!r}")


def _latest_config(state: TableState, newest: ManifestLocation) -> Mapping[str, str]:
    """The configuration of the newest version listed: the handle's own when it is at that version (no request),
    else that manifest's (one GET); the handle's when that manifest is corrupt (the run reports it)."""
    if newest.version == state.version:
        return state.manifest.config
    try:
        return read_manifest(state.store, newest, state.committer.handler).config
    except CorruptManifestError:
        return state.manifest.config


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
    _check_settings(older_than, retain_versions)
    store, handler = state.store, state.committer.handler
    now = datetime.now(UTC)

    # 1. every directory listed once, in one round
    def lister(directory: str) -> Callable[[], list[ObjectMeta]]:
        return lambda: store.list(directory)

    listed = _all_at_once(store, {d: lister(d) for d in (*_DIRECTORIES, REFS_DIR)})
    refs_listing = listed.pop(REFS_DIR)
    files: dict[str, ObjectMeta] = {m.path: m for d in _DIRECTORIES for m in listed[d]}
    locations = manifests_listed(store, listed[VERSIONS_DIR], handler)
    del listed
    by_version = {loc.version: loc for loc in locations}
    versions = [loc.version for loc in locations]
    if not versions:
        return CleanupStats()
    if older_than is None or retain_versions is None:  # the policy of the table's latest version
        older_than, retain_versions = retention_settings(
            _latest_config(state, locations[-1]), older_than, retain_versions
        )
        _check_settings(older_than, retain_versions)
    cutoff = now - older_than
    refs = _read_refs(state, refs_listing, by_version.__contains__)
    listing = refs.listing
    tags = listing.on_branch(branch_of(store))
    tagged = {v for v in tags.values() if v in by_version}

    # What keeps a version whatever its age (its timestamp is read with its manifest, below).
    floor: set[int] = {versions[-1]}
    if listing.problems:  # a tag we cannot read may protect any version: keep them all
        log.warning(
            "%s: keeping every version: tags that cannot be read: %s", store.uri, "; ".join(listing.problems.values())
        )
        floor = set(versions)
    if retain_versions is not None:
        floor |= set(versions[-retain_versions:])
    low = min(refs.protected, default=None)  # branches: publish bases (docs/guide/branches.md, "Retention")
    pinned = refs.pins & set(versions)  # forks whose first manifest a killed create_branch did not write

    def read(loc: ManifestLocation) -> pb.Manifest | str:
        try:
            return read_manifest(store, loc, handler)
        except CorruptManifestError as exc:
            return str(exc)

    # 2. every manifest read once, streamed: only the paths of existing files are remembered
    needed: set[str] = {by_version[versions[-1]].path, LATEST_HINT} | refs.elsewhere
    verified: set[str] = set()
    keep: set[int] = set()
    removed: list[int] = []
    old_tags_versions: set[int] = set()
    corrupt: dict[int, str] = {}
    for loc, result in _manifests(store, locations, read):
        v = loc.version
        if isinstance(result, str):
            corrupt[v] = result
            meta = files.get(loc.path)
            when = (meta.last_modified if meta is not None else None) or now  # unknown age: treated as new, kept
        else:
            when = manifest_timestamp(result)
        kept = when >= cutoff or v in floor or (low is not None and v >= low) or v in pinned
        if not kept and v in tagged:
            old_tags_versions.add(v)
            kept = True
        if kept:
            keep.add(v)
        else:
            removed.append(v)
        into = needed if kept else verified
        into.add(loc.path)
        if not isinstance(result, str):
            into.update(p for p in referenced_files(result) if p in files)
    old_tags = {name: v for name, v in tags.items() if v in old_tags_versions}
    if old_tags and error_if_tagged_old_versions:
        raise TagError(
            f"cleanup of {store.uri} would pass over tagged versions older than {older_than}: {old_tags}; delete "
            "the tags, or call with error_if_tagged_old_versions=False to keep those versions and go on",
            tags=old_tags,
        )
    if corrupt:
        log.warning(
            "%s: corrupt manifests of versions %s (%s)", store.uri, sorted(corrupt), next(iter(corrupt.values()))
        )

    # Versions committed meanwhile are kept, with everything they reference (read before any delete).
    # Versions are contiguous: look for the latest from the newest one listed (a few stats locally, one
    # LIST on S3) instead of listing every manifest again.
    newest = by_version[versions[-1]]
    latest = latest_manifest_location(store, newest, handler)
    since = [location_of(store, v, newest.naming) for v in range(newest.version + 1, latest.version + 1)]
    for loc, result in _manifests(store, since, read):
        keep.add(loc.version)
        needed.add(loc.path)
        if isinstance(result, str):
            corrupt[loc.version] = result
        else:
            needed |= referenced_files(result)
    verified -= needed
    window_start = now - UNVERIFIED_WINDOW

    def stale(meta: ObjectMeta) -> bool:
        return delete_unverified or (meta.last_modified is not None and meta.last_modified < window_start)

    # temporary files of ref and tag writes a killed process left (never read as refs or tags)
    unverified_refs = [m for m in refs_listing if is_temporary(m.path) and stale(m)]
    manifests_doomed = [by_version[v].path for v in removed if by_version[v].path in files]
    verified_doomed = [m for p, m in files.items() if p in verified and p not in needed]
    unverified_doomed = [m for p, m in files.items() if p not in verified and p not in needed and stale(m)]
    doomed = [*verified_doomed, *unverified_doomed, *unverified_refs]
    stats = CleanupStats(
        old_versions=len(removed),
        bytes_removed=sum(m.size for m in doomed),
        data_files_removed=sum(1 for m in doomed if m.path.startswith(f"{DATA_DIR}/")),
        deletion_files_removed=sum(1 for m in doomed if m.path.startswith(f"{DELETIONS_DIR}/")),
        transaction_files_removed=sum(1 for m in doomed if m.path.startswith(f"{TRANSACTIONS_DIR}/")),
        index_files_removed=sum(1 for m in doomed if m.path.startswith(f"{INDICES_DIR}/")),
        unverified_files_removed=len(unverified_doomed) + len(unverified_refs),
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
    if dry_run:
        return stats
    if removed and any(v < max(removed) for v in keep):
        # a kept version below a removed one (a tag, a branch's base): a hint left there would end its
        # forward search at the hole; point it at the latest first (manifest.move_latest_hint)
        move_latest_hint(store, latest.version, latest.naming)
    # 3. the manifests first, oldest first (a reader walking up from the latest-version hint then never
    # mistakes a hole for the end, manifest.latest_from_hint), then the files only they named (module docstring)
    manifest_set = set(manifests_doomed)
    others = [m.path for m in doomed if m.path not in manifest_set]
    total, done = len(manifests_doomed) + len(others), 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        failpoint("cleanup.after_delete_batch")
        if progress is not None:
            progress(done, total)

    _delete(store, manifests_doomed, advance)
    failpoint("cleanup.after_manifests")
    _delete(store, others, advance)
    return stats
