"""The health sensor: requests the maintenance job the core's advice calls for on each table.

What it requests and when: docs/integrations/dagster/sensors_and_health.md ("Health sensor").
"""

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import dagster as dg

import mvcc_core as mvcc
from mvcc_core import TableNotFoundError

from ..maintenance.due import (
    advice_tags,
    data_bytes,
    due_advice,
    job_retention,
    removable_bytes,
    removable_versions,
    retention_run_config,
    retention_setting,
)
from ..maintenance.target import MaintenanceTarget
from ..metadata import TABLE_TAG
from ..resources import MvccResource, TableName
from .checks import HealthThresholds, TableHandles
from .sensors import job_sensor


@dataclass(frozen=True)
class _Settled:
    """A table's last health evaluation that asked for nothing new: the kept versions it read (number and
    commit time of each, the latest among them), when it was made, until when no age it reads crosses a
    threshold (None: never, until a new version), and the run keys it named.

    The kept versions are what decide the checks besides the clock: a version's manifest never changes, so
    the latest version number says the fragments, deletions and indices, and the kept list says what
    retention left (versions, ages, the files they reference). A table dropped and written again under the
    same uri has other commit times, so it is never taken for the one evaluated."""

    versions: tuple[tuple[int, datetime | None], ...]
    evaluated: datetime
    until: datetime | None
    keys: tuple[str, ...]

    def holds(self, table: mvcc.Table, versions: Sequence[mvcc.VersionInfo], now: datetime, seen: set[str]) -> bool:
        """Whether evaluating `table` (its kept `versions`) at `now` with the keys `seen` would give the same."""
        in_time = self.evaluated <= now and (self.until is None or now < self.until)
        kept = _kept(versions)
        same = bool(kept) and kept[-1][0] == table.version and kept == self.versions  # retention may have run
        return in_time and set(self.keys) <= seen and same


def _kept(versions: Sequence[mvcc.VersionInfo]) -> tuple[tuple[int, datetime | None], ...]:
    return tuple((v.version, v.timestamp) for v in versions if v.error is None)


_IN_PROGRESS = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


def _tables_in_maintenance(context: dg.SensorEvaluationContext, labels: Sequence[str]) -> set[str]:
    """The tables (their `TABLE_TAG` values) with a maintenance run queued or in progress on the instance."""
    runs = context.instance.get_runs(filters=dg.RunsFilter(tags={TABLE_TAG: list(labels)}, statuses=_IN_PROGRESS))
    return {run.tags[TABLE_TAG] for run in runs if TABLE_TAG in run.tags}


ADVICE_KINDS = {
    "compaction": ("compact", "materialize_deletions"),
    "index": ("optimize_indices",),
    "retention": ("retention",),
}
"""Which kinds of `MaintenanceAdvice` each repair job does."""


def build_health_sensor(
    tables: Sequence[TableName],
    *,
    compaction_job: dg.JobDefinition | Mapping[str, dg.JobDefinition] | None = None,
    retention_job: dg.JobDefinition | Mapping[str, dg.JobDefinition] | None = None,
    index_job: dg.JobDefinition | Mapping[str, dg.JobDefinition] | None = None,
    thresholds: HealthThresholds | None = None,
    asset_keys: Sequence[TableName | None] | None = None,
    minimum_interval_seconds: int = 300,
    name: str = "mvcc_health_sensor",
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
    clock: Callable[[], datetime] | None = None,
) -> dg.SensorDefinition:
    """A sensor requesting, for each table, the job that does what the core's advice says is worth doing.

    A job argument is one job (one table) or a mapping from each table's asset key string to its job. Each
    tick asks the core (`Table.optimize.recommend()`: manifests and a listing of the versions only) and
    requests the job of each kind of advice scoring above `HealthThresholds.advice_score`: compaction for
    ``compact`` / ``materialize_deletions``, the index job for ``optimize_indices``, retention for
    ``retention``. Retention is measured with the retention job's own window when it was built with one (its
    tags say it), else with the table's retention policy (``mvcc.retention.*``), which is what the job then
    follows; the advice's score is the share of the kept versions it would remove. The run's tags name the
    advice (``mvcc/advice``, ``mvcc/advice_score``, ``mvcc/advice_reason``). It needs no check run to have
    happened and sees the table as it is now. Run key ``"{uri}@{version}:{job}"``: a table that stays at a
    version never gets a second run of a job for it (Dagster dedupes run keys, and the cursor remembers the
    keys already requested, so a tick does not even return them); a new version after the repair may request
    it again if the advice still says so.
    Retention's key also names the newest version it would remove (``...:{job}<={version}``).
    A table with a maintenance run (any run tagged `TABLE_TAG` with its name: the nightly schedule's, a repair
    requested before) queued or in progress gets no request on that tick: that run may repair the version the
    sensor sees, and a second one would plan the same fragments (seen in benchmarks/week.py at 03:00). A
    retention job is requested only when it would remove a version, and (unless the versions kept reach the
    ``versions_kept`` or ``version_age`` WARN level, which cost manifests whatever they free) when it frees
    `HealthThresholds.retention_min_removable_bytes`; `HealthThresholds.retention_removable_share` also
    requests it when what it frees weighs that share of the latest version's, whatever the score.
    Table handles are kept from tick to tick (`TableHandles`), so a tick reads only the new versions.
    A compaction job built with a retention step (`build_compaction_job(older_than=...)`, the same setting
    as the retention job's) that is requested on a tick also takes that tick's retention: one run, not two.

    Args:
        tables: Asset keys or table uris (opened through the ``mvcc`` resource).
        compaction_job: The repair of ``small_fragments`` and ``deleted_rows``.
        retention_job: The repair of ``versions_kept``, ``version_age`` and ``storage_amplification``.
        index_job: The repair of ``unindexed_rows``.
        thresholds: The WARN / ERROR levels (default `HealthThresholds()`).
        asset_keys: The asset of each table named by uri (default: its last path segment).
        minimum_interval_seconds: Between ticks.
        name: The sensor's name.
        default_status: Stopped by default, as Dagster's sensors are.
        clock: The time a tick measures ages to (default: the wall clock, in UTC); a simulation gives its
            own (benchmarks/week.py). A retention run it requests removes the versions committed before the
            tick's time minus the job's ``older_than`` (the step's ``cutoff``), what the tick saw removable.

    Returns:
        The sensor.
    """
    thresholds = thresholds or HealthThresholds()
    keys = list(asset_keys) if asset_keys is not None else [None] * len(tables)
    targets = [MaintenanceTarget(t, k) for t, k in zip(tables, keys, strict=True)]

    def job_for(kind: str, target: MaintenanceTarget) -> dg.JobDefinition | None:
        given = {"compaction": compaction_job, "retention": retention_job, "index": index_job}[kind]
        if isinstance(given, Mapping):
            return given.get(target.label)
        return given

    jobs = {
        j.name: j
        for t in targets
        for kind in ("compaction", "retention", "index")
        if (j := job_for(kind, t)) is not None
    }

    handles = TableHandles()
    settled: dict[str, _Settled] = {}  # uri -> the last evaluation that asked for nothing new

    def health_sensor(context: dg.SensorEvaluationContext, mvcc: MvccResource) -> dg.SensorResult:
        requested: dict[str, list[str]] = json.loads(context.cursor) if context.cursor else {}
        now = clock() if clock is not None else datetime.now(UTC)
        wanted: dict[str, tuple[str, list[str], list[dg.RunRequest]]] = {}  # label -> (uri, keys, requests)
        for target in targets:
            uri = mvcc.uri(target.table)
            try:
                table = handles.latest(uri, functools.partial(mvcc.open, target.table))
            except TableNotFoundError:
                continue
            seen = set(requested.get(uri, []))
            versions = handles.versions(uri)
            last = settled.pop(uri, None)
            if last is not None and last.holds(table, versions, now, seen):
                # the same version, every key already asked for, and no age threshold crossed since: the
                # evaluation would say the same (it reads only the manifests, and time only through ages)
                settled[uri] = last
                wanted[target.label] = uri, list(last.keys), []
                continue
            keys_now, table_requests = _repairs(table, target, uri, versions, now, seen)
            if not table_requests:
                until = _next_change(table, target, versions, now)
                settled[uri] = _Settled(_kept(versions), now, until, tuple(keys_now))
            wanted[target.label] = uri, keys_now, table_requests
        # the run storage is asked only on a tick that would request something (most ticks request nothing)
        asking = [label for label, (_, _, table_requests) in wanted.items() if table_requests]
        busy = _tables_in_maintenance(context, asking) if asking else set()
        requests = []
        for label, (uri, keys_now, table_requests) in wanted.items():
            if label in busy:
                # a maintenance run of the table (the nightly schedule's, a repair requested before) is queued
                # or running: it may repair this very version; the next tick sees what it left
                continue
            requests += table_requests
            requested[uri] = sorted(keys_now)  # a repaired (passing) table forgets its keys
        cursor = json.dumps(requested, sort_keys=True)
        if not requests:
            return dg.SensorResult(skip_reason=dg.SkipReason("no table needs repair"), cursor=cursor)
        return dg.SensorResult(run_requests=requests, cursor=cursor)

    def _next_change(
        table: mvcc.Table, target: MaintenanceTarget, versions: Sequence[mvcc.VersionInfo], now: datetime
    ) -> datetime | None:
        """The first instant after `now` at which an age the evaluation reads crosses a threshold: a version
        leaving a repair job's retention window, or the oldest version's age reaching `version_age_days`."""
        stamps = [v.timestamp for v in versions if v.error is None and v.timestamp is not None]
        if not stamps:
            return None
        windows = [s[0] for k in ("compaction",) if (j := job_for(k, target)) and (s := retention_setting(j.tags))]
        retention = job_for("retention", target)
        if retention is not None:
            windows.append(job_retention(table, retention_setting(retention.tags))[0])
        days = thresholds.version_age_days
        # the age check rounds to 3 decimals of a day (≈ 43 s): its thresholds are taken a minute early
        ahead = [t + w for t in stamps for w in windows] + [
            min(stamps) + timedelta(days=d, minutes=-1) for d in (days.warn, days.error)
        ]
        later = [t for t in ahead if t > now]
        return min(later) if later else None

    def _retention_advice(
        table: mvcc.Table,
        job: dg.JobDefinition,
        readable: list[int],
        versions: Sequence[mvcc.VersionInfo],
        now: datetime,
    ) -> tuple[mvcc.compaction.MaintenanceAdvice, list[int], tuple[timedelta, int | None]] | None:
        """The retention advice with the job's window (or the table's policy), the versions it removes and
        that window; None when it would remove nothing or is not worth a run."""
        setting = retention_setting(job.tags)
        window, floor = job_retention(table, setting)
        removable = removable_versions(table, window, floor, now=now, versions=versions)
        if not removable:
            return None  # every old version is still inside the window: a run would remove nothing
        score = len(removable) / max(len(readable), 1)
        stamps = [v.timestamp for v in versions if v.error is None and v.timestamp is not None]
        many = len(readable) >= thresholds.versions_kept.warn or (
            bool(stamps) and (now - min(stamps)).total_seconds() / 86400 >= thresholds.version_age_days.warn
        )
        share = thresholds.retention_removable_share
        floor_bytes = 0 if many else thresholds.retention_min_removable_bytes
        # the bytes it frees (a manifest read per kept version) only when a rule asks for them
        freed = removable_bytes(table, removable, readable) if share is not None or floor_bytes else None
        by_share = share is not None and bool(freed) and (freed or 0) >= share * data_bytes(table)
        if score <= thresholds.advice_score and not by_share:
            return None
        if freed is not None and freed < floor_bytes:
            return None  # for storage alone: worth a run once it frees enough bytes
        frees = f"; removing them frees {freed:,} bytes of data files" if freed is not None else ""
        advice = mvcc.compaction.MaintenanceAdvice(
            kind="retention",
            reason=(
                f"{len(removable)} of {len(readable)} versions are older than {window} (retain_versions "
                f"{floor or 'not set'}; {'the job' if setting is not None else 'the table policy'}'s){frees}"
            ),
            score=score,
            bytes_to_rewrite=0,
            fragments_before=len(table.get_fragments()),
            fragments_after=len(table.get_fragments()),
            effect=f"up to {len(removable)} manifests and the files only they reference removed",
            call="t.cleanup_old_versions()",
        )
        return advice, removable, (window, floor)

    def _repairs(
        table: mvcc.Table,
        target: MaintenanceTarget,
        uri: str,
        versions: Sequence[mvcc.VersionInfo],
        now: datetime,
        seen: set[str],
    ) -> tuple[list[str], list[dg.RunRequest]]:
        """The run keys the table's advice asks for now, and the requests among them not made before."""
        advice = mvcc.compaction.recommend(table, now=now)
        readable = [v.version for v in versions if v.error is None]
        keys_now: list[str] = []
        requests: list[dg.RunRequest] = []
        compaction_retention = None  # the retention setting of a compaction run requested on this tick
        for kind in ("compaction", "retention", "index"):
            job = job_for(kind, target)
            if job is None:
                continue
            run_key = f"{uri}@{table.version}:{job.name}"
            setting = retention_setting(job.tags)  # a compaction job built with older_than has one too
            cutoff_window: timedelta | None = setting[0] if setting is not None else None
            if kind == "retention":
                found = _retention_advice(table, job, readable, versions, now)
                if found is None:
                    continue
                due = [found[0]]
                cutoff_window = found[2][0]
                # the newest version it would remove: at one latest version, versions leave the window
                # as time passes, and each such step is new work (a new key), never the same run twice
                run_key += f"<={found[1][-1]}"
            else:
                due = due_advice(table, min_score=thresholds.advice_score, kinds=ADVICE_KINDS[kind], advice=advice)
                if not due:
                    continue
            keys_now.append(run_key)
            if run_key in seen:
                continue
            if kind == "retention" and setting is not None and setting == compaction_retention:
                continue  # the compaction run requested on this tick removes them (one run, not two)
            if kind == "compaction" and setting is not None:
                compaction_retention = setting
            requests.append(
                dg.RunRequest(
                    run_key=run_key,
                    job_name=job.name,
                    run_config=retention_run_config(now - cutoff_window) if cutoff_window is not None else None,
                    tags={TABLE_TAG: target.label, **advice_tags(due)},
                )
            )
        return keys_now, requests

    return job_sensor(
        health_sensor,
        name=name,
        jobs=list(jobs.values()),
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description=f"Repairs {', '.join(t.label for t in targets)} when their health checks fail.",
    )
