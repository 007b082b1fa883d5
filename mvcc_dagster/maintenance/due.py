"""Whether a maintenance job has work on a table now, decided from its manifests (no data file is read).

The nightly schedule and the health sensor ask before they request a run: a run with nothing to do still
costs Dagster's per-run work (its events in the event log, the step set-up), which at small scale is most of
what maintenance costs (docs/operations/running.md, "A week of traffic").
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import mvcc_core as mvcc

OLDER_THAN_TAG = "mvcc/older_than_seconds"
"""The run tag of the jobs that remove old versions: their `older_than`, in seconds (the health sensor reads
it to tell whether retention could remove anything yet)."""
RETAIN_VERSIONS_TAG = "mvcc/retain_versions"
"""Beside `OLDER_THAN_TAG` when the job keeps a floor of newest versions."""


def retention_tags(older_than: timedelta, retain_versions: int | None) -> dict[str, str]:
    """The run tags saying a job's retention setting (read back by `retention_setting`).

    Args:
        older_than: The retention setting.
        retain_versions: The floor of newest versions (None: none).

    Returns:
        The tags.
    """
    tags = {OLDER_THAN_TAG: str(older_than.total_seconds())}
    if retain_versions is not None:
        tags[RETAIN_VERSIONS_TAG] = str(retain_versions)
    return tags


def retention_setting(tags: Mapping[str, str]) -> tuple[timedelta, int | None] | None:
    """The retention setting a job's tags say (`retention_tags`), None for a job without them.

    Args:
        tags: The job's tags.

    Returns:
        ``(older_than, retain_versions)`` or None.
    """
    if OLDER_THAN_TAG not in tags:
        return None
    floor = tags.get(RETAIN_VERSIONS_TAG)
    return timedelta(seconds=float(tags[OLDER_THAN_TAG])), int(floor) if floor is not None else None


RETENTION_STEP = "cleanup_old_versions"
"""The retention step's name in every job that has one (the retention job, the maintenance schedule's)."""


def retention_run_config(cutoff: datetime) -> dict[str, Any]:
    """The run config making a run's retention step remove the versions committed before `cutoff`.

    The schedule and the health sensor decide that a run is due from the time of their tick, and give the
    run the same cutoff (tick time - ``older_than``): the run then removes what the request was for, not more
    because it started later (a queued run, a run retry).

    Args:
        cutoff: A timezone-aware instant.

    Returns:
        ``{"ops": {"cleanup_old_versions": {"config": {"cutoff": <ISO-8601>}}}}``.
    """
    return {"ops": {RETENTION_STEP: {"config": {"cutoff": cutoff.isoformat()}}}}


def window_to(cutoff: str, older_than: timedelta, *, now: datetime | None = None) -> timedelta:
    """The retention window that removes the versions committed before `cutoff`, never a shorter one than
    `older_than` (a cutoff later than ``now - older_than`` cannot remove a version inside the window).

    Args:
        cutoff: An ISO-8601 instant with its offset (``""``: none, `older_than` as it is).
        older_than: The job's retention setting.
        now: The time the window is measured back from (default: now).

    Returns:
        The window to give `Table.cleanup_old_versions`.

    Raises:
        ValueError: `cutoff` does not parse or has no UTC offset.
    """
    if not cutoff:
        return older_than
    return max(older_than, (now or datetime.now(UTC)) - aware_instant(cutoff, "retention cutoff"))


def aware_instant(text: str, what: str) -> datetime:
    """An ISO-8601 time with its UTC offset, parsed (run config of the retention and restore jobs).

    Args:
        text: The time, e.g. ``2026-11-27T03:00:00+00:00`` or ``...Z``.
        what: What it is, for the error (e.g. ``"retention cutoff"``).

    Returns:
        The instant, timezone-aware.

    Raises:
        ValueError: `text` does not parse, or has no offset.
    """
    try:
        instant = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"{what} {text!r} is not ISO 8601 ({exc})") from exc
    if instant.tzinfo is None:
        raise ValueError(f"{what} {text!r} has no UTC offset (write it as ...Z or +00:00)")
    return instant


def removable_versions(
    table: mvcc.Table,
    older_than: timedelta,
    retain_versions: int | None = None,
    *,
    now: datetime | None = None,
    versions: Sequence[mvcc.VersionInfo] | None = None,
) -> list[int]:
    """The versions `Table.cleanup_old_versions(older_than, retain_versions)` would remove now.

    The rule is the core's: every version older than `older_than` except the latest and the newest
    `retain_versions`. A version that cannot be read (no timestamp) counts as not removable, and tagged
    versions count as removable (a retention run then reports the tag that pins them).

    Args:
        table: The table (any version of it).
        older_than: The retention setting.
        retain_versions: Keep at least the newest this many versions (None: no such floor).
        now: The time the age is measured to (default: now).
        versions: `table.versions()`, when the caller has listed them already.

    Returns:
        The version numbers, oldest first.
    """
    listed = list(versions if versions is not None else table.versions())
    if not listed:
        return []
    cutoff = (now or datetime.now(UTC)) - older_than
    kept_newest = {v.version for v in listed[-retain_versions:]} if retain_versions else set()
    latest = listed[-1].version
    return [
        v.version
        for v in listed
        if v.version != latest and v.version not in kept_newest and v.timestamp is not None and v.timestamp < cutoff
    ]


def data_bytes(table: mvcc.Table) -> int:
    """Bytes of the data files of the handle's version (from its manifest).

    Args:
        table: The table at the version to weigh.

    Returns:
        The bytes.
    """
    return sum(int(df.file_size_bytes) for f in table.get_fragments() for df in f.data_files())


def removable_bytes(table: mvcc.Table, removable: Sequence[int], versions: Sequence[int] | None = None) -> int:
    """Bytes of the data files only the `removable` versions reference (what their removal frees).

    Args:
        table: The table (any version of it; its manifests are read through it).
        removable: The versions to be removed (`removable_versions`).
        versions: Every version kept now (default: `table.versions()`, readable ones).

    Returns:
        The bytes.
    """
    listed = list(versions) if versions is not None else [v.version for v in table.versions() if v.error is None]
    gone = set(removable)

    def files(version: int) -> dict[str, int]:
        fragments = table.checkout(version).get_fragments()
        return {df.path: int(df.file_size_bytes) for f in fragments for df in f.data_files()}

    kept: set[str] = set()
    for version in listed:
        if version not in gone:
            kept |= files(version).keys()
    freed: dict[str, int] = {}
    for version in gone:
        freed.update({path: size for path, size in files(version).items() if path not in kept})
    return sum(freed.values())


@dataclass(frozen=True)
class MaintenanceWork:
    """What a maintenance run of one table would do now.

    Attributes:
        compaction_tasks: Rewrite tasks compaction would plan.
        unindexed_fragments: Fragments an index does not cover (what an index optimize would add).
        removable_versions: Versions retention would remove.
    """

    compaction_tasks: int
    unindexed_fragments: int
    removable_versions: int

    def __bool__(self) -> bool:
        return bool(self.compaction_tasks or self.unindexed_fragments or self.removable_versions)

    def describe(self) -> str:
        """The work in words, for a tick's reason.

        Returns:
            E.g. ``"2 compaction tasks, 0 unindexed fragments, 1 removable version"``.
        """
        return (
            f"{self.compaction_tasks} compaction task(s), {self.unindexed_fragments} unindexed fragment(s), "
            f"{self.removable_versions} removable version(s)"
        )


def maintenance_work(
    table: mvcc.Table,
    options: mvcc.compaction.CompactionOptions,
    *,
    optimize_indices: bool,
    older_than: timedelta,
    retain_versions: int | None = None,
    now: datetime | None = None,
) -> MaintenanceWork:
    """What the maintenance job (compaction, index optimize, retention) would do on `table` now.

    Args:
        table: The table at its latest version.
        options: The compaction's options (its plan is made without committing anything).
        optimize_indices: Whether the job optimizes indices.
        older_than: The retention setting.
        retain_versions: Retention's floor of newest versions.
        now: The time retention's age is measured to (default: now).

    Returns:
        The work.
    """
    tasks = len(mvcc.compaction.plan_unreserved(table, options).tasks)
    unindexed = sum(int(i.get("num_unindexed_fragments", 0)) for i in table.list_indices()) if optimize_indices else 0
    removable = removable_versions(table, older_than, retain_versions, now=now)
    return MaintenanceWork(tasks, unindexed, len(removable))
