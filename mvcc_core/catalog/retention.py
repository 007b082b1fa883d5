"""Catalog-level retention: old catalog versions, the table versions only they publish, dropped tables' directories and
dead writers' debris (docs/guide/catalog.md "Retention").

Design notes: docs/guide/catalog.md, "Catalog retention, as implemented".
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from mvcc_core import names
from mvcc_core.catalog.entries import TABLE, Entry, format_of, invalid, live, read_rows
from mvcc_core.catalog.forks import fork_of
from mvcc_core.catalog.format_version import check_writable
from mvcc_core.catalog.refs import sweep_refs
from mvcc_core.catalog.services import CatalogServices
from mvcc_core.format.branches import branch_store
from mvcc_core.io import open_store
from mvcc_core.maintenance.cleanup import UNVERIFIED_WINDOW, CleanupStats
from mvcc_core.table import open_table

log = logging.getLogger("mvcc.catalog")

#: A table directory as `create_table` makes it: `<schema>/<table>-<12 hex>`.
_TABLE_DIRECTORY = re.compile(r"([^/]+)/([^/]+)-[0-9a-f]{12}")


def table_directory(directory: str) -> bool:
    """Whether `directory` (two segments under the root) is one `create_table` makes: only those are ever
    reclaimed as a dropped table's or a dead writer's; anything else under the root is left alone.

    Args:
        directory: `<first>/<second>` under the catalog's root.

    Returns:
        Whether it has a table directory's shape, with names the rules accept.
    """
    match = _TABLE_DIRECTORY.fullmatch(directory)
    if match is None:
        return False
    schema, table = match.groups()
    return names.problem(names.CATALOG_SCHEMA, schema) is None and names.problem(names.CATALOG_TABLE, table) is None


def _held_by(entry: Entry) -> str | None:
    """The directory under the root an invalid row names, when it names one (kept: never cleaned, never removed)."""
    normal = posixpath.normpath(entry.path) if entry.path else ""
    parts = normal.split("/")
    if not entry.path or normal.startswith(("/", "..")) or len(parts) < 2:
        return None
    return f"{parts[0]}/{parts[1]}"


@dataclass(frozen=True)
class CatalogCleanupStats:
    """What `Catalog.cleanup` removed (or, with `dry_run`, would remove)."""

    catalog_versions_removed: tuple[int, ...] = ()
    tables: dict[str, CleanupStats] = field(default_factory=dict)  # by table directory
    directories_removed: tuple[str, ...] = ()
    forks_removed: tuple[str, ...] = ()  # table branches no catalog branch placed its table on ("path@branch")


def cleanup(
    catalog: CatalogServices,
    older_than: timedelta = timedelta(days=14),
    retain_versions: int | None = None,
    *,
    delete_unverified: bool = False,
    dry_run: bool = False,
    branch_entries: Sequence[Entry] = (),
) -> CatalogCleanupStats:
    """See the module docstring. Raises on any read error before deleting anything.

    Args:
        catalog: the catalog to clean
        older_than: catalog versions committed longer ago than this are removed (the newest always stays)
        retain_versions: keep at least this many newest catalog versions (None: no such floor)
        delete_unverified: remove dead writers' debris without waiting for the core's unverified window (only when no
            writer is running)
        dry_run: count what would be removed, remove nothing
        branch_entries: the tables every live catalog branch reads at its newest version: their directories
            stay, and so does main's version a branch reads where it never wrote the table (a fork's own
            versions are the core's to keep: `txn.branches.protected_versions`)

    Raises:
        ValueError: `older_than` is negative or `retain_versions` is not a positive int
    """
    if not isinstance(older_than, timedelta) or older_than < timedelta(0):
        raise ValueError(f"older_than must be a non-negative timedelta, got {older_than!r}")
    if retain_versions is not None and (isinstance(retain_versions, bool) or retain_versions < 1):
        raise ValueError(f"retain_versions must be a positive int, got {retain_versions!r}")
    manifest = catalog.manifest_table()
    check_writable(format_of(manifest), catalog.root)
    now = datetime.now(UTC)
    infos = manifest.versions()
    versions = [info["version"] for info in infos]
    keep = {versions[-1]} | {info["version"] for info in infos if info["timestamp"] >= now - older_than}
    if retain_versions is not None:
        keep |= set(versions[-retain_versions:])
    oldest_kept = min(keep)
    keep = {v for v in versions if v >= oldest_kept}  # a suffix: timestamps grow with versions
    removed = [v for v in versions if v not in keep]

    # Read everything first (an error here propagates: nothing has been deleted).
    kept_tables: dict[str, Entry] = {}  # directory -> the newest entry naming it
    oldest_needed: dict[str, int] = {}  # directory -> the oldest table version a kept catalog version publishes
    held: set[str] = set()  # directories invalid rows of kept versions name: nothing in them is touched
    for v in sorted(keep):
        rows = read_rows(manifest.checkout_version(v))
        held |= {d for entry, _ in invalid(rows).values() if (d := _held_by(entry)) is not None}
        for (kind, _), entry in live(rows).items():
            if kind != TABLE:
                continue
            kept_tables[entry.path] = entry
            oldest_needed[entry.path] = min(oldest_needed.get(entry.path, entry.table_version), entry.table_version)
    for entry in branch_entries:
        kept_tables.setdefault(entry.path, entry)
        oldest = entry.table_version if fork_of(entry) is None else 1 << 62
        oldest_needed[entry.path] = min(oldest_needed.get(entry.path, oldest), oldest)
    named_by_removed: set[str] = set()
    for v in removed:
        named_by_removed |= {e.path for e in read_rows(manifest.checkout_version(v)) if e.object_type == TABLE}
    root = open_store(catalog.root, catalog.options or None)
    directories: dict[str, datetime | None] = {}  # table directory -> its newest file's time
    for meta in root.list(""):
        parts = meta.path.split("/")
        if len(parts) < 3 or parts[0] == "__manifest":
            continue
        directory = f"{parts[0]}/{parts[1]}"
        newest = directories.get(directory)
        stamp = meta.last_modified
        directories[directory] = stamp if newest is None or (stamp is not None and stamp > newest) else newest

    if not dry_run:
        for entry in kept_tables.values():  # roll forward what is published before anything goes
            catalog.finalize(entry)
    # a ref write killed half-way leaves a temporary file in `_refs/branches/`: gone before the core lists refs
    for store in [manifest.state.store, *(catalog.store(path) for path in sorted(kept_tables))]:
        sweep_refs(branch_store(store, None), delete_unverified=delete_unverified, dry_run=dry_run)
    manifest_stats = manifest.cleanup_old_versions(
        older_than=timedelta(0),
        retain_versions=len(keep),
        delete_unverified=delete_unverified,
        error_if_tagged_old_versions=False,
        dry_run=dry_run,
    )
    table_stats: dict[str, CleanupStats] = {"__manifest": manifest_stats}
    for path, entry in sorted(kept_tables.items()):
        table = open_table(catalog.table_uri(entry), storage_options=catalog.options or None)
        table_stats[path] = table.cleanup_old_versions(
            older_than=timedelta(0),
            retain_versions=max(1, table.version - oldest_needed[path] + 1),
            delete_unverified=delete_unverified,
            error_if_tagged_old_versions=False,
            dry_run=dry_run,
        )
    window_start = now - UNVERIFIED_WINDOW
    gone = []
    for directory, newest in sorted(directories.items()):
        if directory in kept_tables or directory in held:
            continue
        if not table_directory(directory):
            log.info("catalog %s: %s is no table directory; left alone", catalog.root, directory)
            continue
        dropped = directory in named_by_removed
        unverified_old = delete_unverified or (newest is not None and newest < window_start)
        if dropped or unverified_old:
            gone.append(directory)
            if not dry_run:
                store = open_store(f"{catalog.root}/{directory}", catalog.options or None)
                with contextlib.suppress(FileNotFoundError):
                    store.delete_many([m.path for m in store.list("")])
    return CatalogCleanupStats(
        catalog_versions_removed=tuple(removed),
        tables=table_stats,
        directories_removed=tuple(gone),
    )
