"""Whether a maintenance job has work on a table now, decided from the core's advice and the table's policy
(its manifests and a listing of its versions; no data file is read).

The nightly schedule and the health sensor ask before they request a run: a run with nothing to do still
costs Dagster's per-run work (its events in the event log, the step set-up), which at small scale is most of
what maintenance costs (docs/operations/running.md, "A week of traffic"). What is worth doing is the core's
`Table.optimize.recommend()` (`MaintenanceAdvice`: kind, reason, score); the run's tags name the advice that
made it due (`advice_tags`). Rules: docs/integrations/dagster/maintenance.md ("When a table is due").
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import mvcc_core as mvcc
from mvcc_core.durations import parse_duration

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


#: The table configuration keys of the retention policy (the core's `mvcc.retention.*`, docs/operations/
#: maintenance.md, "Policy in the table's configuration"), and the core's window when the table sets none.
POLICY_OLDER_THAN = "mvcc.retention.older_than"
POLICY_RETAIN_VERSIONS = "mvcc.retention.retain_versions"
DEFAULT_OLDER_THAN = timedelta(days=14)


def policy_retention(table: mvcc.Table) -> tuple[timedelta, int | None]:
    """The table's retention policy: what `Table.cleanup_old_versions()` without arguments keeps.

    Args:
        table: The table (its latest version's configuration is read).

    Returns:
        ``(older_than, retain_versions)``: the configured keys, else 14 days and no floor.

    Raises:
        ValueError: A key set on the table does not parse (the message names the key and its value).
    """
    config = table.config
    older_than, retain = DEFAULT_OLDER_THAN, None
    if POLICY_OLDER_THAN in config:
        try:
            older_than = parse_duration(config[POLICY_OLDER_THAN])
        except ValueError as exc:
            raise ValueError(
                f"table configuration {POLICY_OLDER_THAN!r} = {config[POLICY_OLDER_THAN]!r} is not valid: {exc}"
            ) from None
    if POLICY_RETAIN_VERSIONS in config:
        text = config[POLICY_RETAIN_VERSIONS]
        if not text.strip().isdigit() or int(text) < 1:
            raise ValueError(f"table configuration {POLICY_RETAIN_VERSIONS!r} = {text!r} is not a positive number")
        retain = int(text)
    return older_than, retain


def job_retention(table: mvcc.Table, setting: tuple[timedelta, int | None] | None) -> tuple[timedelta, int | None]:
    """The retention a job runs with: its own setting (`retention_setting` of its tags) when it has one, else
    the table's policy (`policy_retention`), key by key as the core does (an explicit value wins).

    Args:
        table: The table.
        setting: The job's ``(older_than, retain_versions)``, or None for a job that follows the policy.

    Returns:
        ``(older_than, retain_versions)``.
    """
    if setting is None:
        return policy_retention(table)
    return setting


#: Which job repairs which kind of advice (`MaintenanceAdvice.kind`).
JOB_OF_ADVICE = {
    "compact": "compaction",
    "materialize_deletions": "compaction",
    "optimize_indices": "index",
    "retention": "retention",
}
ADVICE_TAG = "mvcc/advice"
"""The run tag naming the advice that made a run due (kinds, comma-separated, best first)."""
ADVICE_SCORE_TAG = "mvcc/advice_score"
ADVICE_REASON_TAG = "mvcc/advice_reason"
#: Dagster refuses run tag values over 63 KiB; a reason is a sentence, cut well below that.
_REASON_CHARS = 1000


def advice_tags(advice: Sequence[mvcc.compaction.MaintenanceAdvice]) -> dict[str, str]:
    """The run tags saying which advice made a run due: its kinds, the best score and its reason.

    Args:
        advice: The advice, best first (none: no tags).

    Returns:
        ``mvcc/advice``, ``mvcc/advice_score`` and ``mvcc/advice_reason``.
    """
    if not advice:
        return {}
    best = max(advice, key=lambda a: a.score)
    kinds = list(dict.fromkeys(a.kind for a in sorted(advice, key=lambda a: -a.score)))
    return {
        ADVICE_TAG: ",".join(kinds),
        ADVICE_SCORE_TAG: f"{best.score:.3f}",
        ADVICE_REASON_TAG: best.reason[:_REASON_CHARS],
    }


def due_advice(
    table: mvcc.Table,
    *,
    min_score: float,
    kinds: Sequence[str] | None = None,
    now: datetime | None = None,
    advice: Sequence[mvcc.compaction.MaintenanceAdvice] | None = None,
) -> list[mvcc.compaction.MaintenanceAdvice]:
    """The core's advice on `table` whose score is above `min_score` (what makes a table due), best first.

    Args:
        table: The table at its latest version.
        min_score: Advice scoring at or below this is not worth a run.
        kinds: Only these kinds of `MaintenanceAdvice` (None: every kind).
        now: The time retention ages are measured at (default: now).
        advice: `recommend`'s answer, when the caller has it already.

    Returns:
        The advice, best first.
    """
    given = advice if advice is not None else mvcc.compaction.recommend(table, now=now)
    return [a for a in given if a.score > min_score and (kinds is None or a.kind in kinds)]


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
    """What a maintenance run of one table would do now, and the core's advice about it.

    Attributes:
        compaction_tasks: Rewrite tasks compaction would plan.
        unindexed_fragments: Fragments an index does not cover (what an index optimize would add).
        removable_versions: Versions retention would remove.
        advice: The core's advice on the table (`Table.optimize.recommend()`), best first, of the kinds the
            run does.
    """

    compaction_tasks: int
    unindexed_fragments: int
    removable_versions: int
    advice: tuple[mvcc.compaction.MaintenanceAdvice, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.compaction_tasks or self.unindexed_fragments or self.removable_versions)

    def describe(self) -> str:
        """The work in words, for a tick's reason, with the advice that makes it due.

        Returns:
            E.g. ``"2 compaction task(s), 0 unindexed fragment(s), 1 removable version(s); advice: compact
            (score 0.95)"``.
        """
        text = (
            f"{self.compaction_tasks} compaction task(s), {self.unindexed_fragments} unindexed fragment(s), "
            f"{self.removable_versions} removable version(s)"
        )
        if self.advice:
            text += "; advice: " + ", ".join(f"{a.kind} (score {a.score:.2f})" for a in self.advice)
        return text

    def tags(self) -> dict[str, str]:
        """The run tags naming the advice (`advice_tags`).

        Returns:
            The tags (none without advice).
        """
        return advice_tags(self.advice)


def maintenance_work(
    table: mvcc.Table,
    options: mvcc.compaction.CompactionOptions,
    *,
    optimize_indices: bool,
    older_than: timedelta | None = None,
    retain_versions: int | None = None,
    now: datetime | None = None,
) -> MaintenanceWork:
    """What the maintenance job (compaction, index optimize, retention) would do on `table` now.

    The compaction's work is its plan with the job's `options` (they win over the table's policy, as in the
    core); the index's and retention's are the core's advice (`recommend`), retention measured with the job's
    setting or, without one, the table's retention policy. The advice of those kinds comes with the work (its
    tags name it).

    Args:
        table: The table at its latest version.
        options: The compaction's options (its plan is made without committing anything; None: the policy's).
        optimize_indices: Whether the job optimizes indices.
        older_than: The retention setting (None: the table's policy, `policy_retention`).
        retain_versions: Retention's floor of newest versions (None with `older_than` None: the policy's).
        now: The time retention's age is measured to (default: now).

    Returns:
        The work.
    """
    tasks = len(mvcc.compaction.plan_unreserved(table, options).tasks)
    advice = mvcc.compaction.recommend(table, now=now)
    kinds = {"compact", "materialize_deletions", "retention"} | ({"optimize_indices"} if optimize_indices else set())
    unindexed = sum(int(i.get("num_unindexed_fragments", 0)) for i in table.list_indices()) if optimize_indices else 0
    window, floor = (older_than, retain_versions) if older_than is not None else policy_retention(table)
    removable = removable_versions(table, window, floor, now=now)
    chosen = [
        a
        for a in advice
        if a.kind in kinds
        and (a.kind != "retention" or removable)
        and (a.kind not in ("compact", "materialize_deletions") or tasks)
    ]
    return MaintenanceWork(tasks, unindexed, len(removable), tuple(chosen))
