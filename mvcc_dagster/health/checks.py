"""Table health as Dagster asset checks, read from manifests only (no data file is read).

The checks, their thresholds and repairs: docs/integrations/dagster/sensors_and_health.md ("Health checks").
"""

import functools
import json
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg

import mvcc_core as mvcc
from mvcc_core import TableNotFoundError
from mvcc_core.verify import verify

from ..error_mapping import mvcc_conflicts
from ..maintenance.due import (
    data_bytes,
    removable_bytes,
    removable_versions,
    retention_run_config,
    retention_setting,
)
from ..maintenance.target import MaintenanceTarget
from ..metadata import RESOURCE_KEY, TABLE_TAG
from ..resources import MvccResource, TableName
from .sensors import job_sensor

CHECKS = (
    "small_fragments",
    "deleted_rows",
    "unindexed_rows",
    "versions_kept",
    "version_age",
    "storage_amplification",
    "files_exist",
)


@dataclass(frozen=True)
class Level:
    """WARN and ERROR thresholds of one measurement (a value at or above a threshold fails at that level)."""

    warn: float
    error: float

    def __post_init__(self) -> None:
        if self.error < self.warn:
            raise ValueError(f"an ERROR threshold ({self.error}) must not be below its WARN threshold ({self.warn})")


@dataclass(frozen=True)
class HealthThresholds:
    """The thresholds of the health checks (defaults fit tables of millions of rows; tests use small ones).

    - `small_fragment_rows`: a fragment with fewer live rows is small; `small_fragments`: how many small
      fragments the latest version may have (a table with a single fragment never fails);
    - `deleted_ratio`: deleted rows / physical rows of the latest version;
    - `unindexed_rows`: live rows in fragments an index does not cover (the worst index);
    - `versions_kept`: versions still listed; `version_age_days`: age of the oldest kept version;
    - `storage_amplification`: bytes of data files referenced by any kept version / bytes of the latest's;
    - `sample_files`: how many of the latest version's files the existence check HEADs (any missing: ERROR);
    - `retention_removable_share` (the health sensor's, not a check): also request retention when the data
      files it would remove now weigh at least this share of the latest version's (None: only when a check
      that retention repairs fails). Retention then keeps up with what leaves the window during the day
      instead of waiting for the nightly run; each such run costs a Dagster run (docs/operations/running.md);
    - `retention_min_removable_bytes` (the sensor's): a retention run requested for storage alone (the
      removable-share rule, or a failing `storage_amplification` while `versions_kept` and `version_age`
      pass) must free at least this many bytes (default 8 MiB): a run costs ≈ 0.3 s of CPU whatever it
      frees, and the nightly run removes the same files within a day (docs/operations/running.md, "Thresholds").
    """

    small_fragment_rows: int = 100_000
    small_fragments: Level = field(default_factory=lambda: Level(16, 64))
    deleted_ratio: Level = field(default_factory=lambda: Level(0.1, 0.3))
    unindexed_rows: Level = field(default_factory=lambda: Level(100_000, 1_000_000))
    versions_kept: Level = field(default_factory=lambda: Level(100, 1000))
    version_age_days: Level = field(default_factory=lambda: Level(30, 90))
    storage_amplification: Level = field(default_factory=lambda: Level(3.0, 10.0))
    sample_files: int = 20
    retention_removable_share: float | None = None
    retention_min_removable_bytes: int = 8 * 1024 * 1024

    def __post_init__(self) -> None:
        share = self.retention_removable_share
        if share is not None and (isinstance(share, bool) or not isinstance(share, int | float) or share < 0):
            raise ValueError(f"retention_removable_share must be a non-negative number or None, got {share!r}")
        floor = self.retention_min_removable_bytes
        if isinstance(floor, bool) or not isinstance(floor, int) or floor < 0:
            raise ValueError(f"retention_min_removable_bytes must be a non-negative whole number, got {floor!r}")


def _result(
    target: MaintenanceTarget, name: str, value: float, level: Level, metadata: dict[str, Any]
) -> dg.AssetCheckResult:
    failed = value >= level.warn
    severity = dg.AssetCheckSeverity.ERROR if value >= level.error else dg.AssetCheckSeverity.WARN
    return dg.AssetCheckResult(
        asset_key=target.asset_key,
        check_name=name,
        passed=not failed,
        severity=severity,
        metadata={"value": value, "warn_at": level.warn, "error_at": level.error, **metadata},
        description=None
        if not failed
        else f"{target.label}: {name} = {value} (WARN at {level.warn}, ERROR at {level.error})",
    )


def evaluate_health(
    table: mvcc.Table,
    target: MaintenanceTarget,
    thresholds: HealthThresholds,
    *,
    now: datetime | None = None,
    checks: Collection[str] = CHECKS,
    versions: Sequence[mvcc.VersionInfo] | None = None,
) -> Iterator[dg.AssetCheckResult]:
    """The health checks of `table`'s latest version (the function the checks run; usable on its own).

    Args:
        table: The table (its latest version is evaluated).
        target: The table's name, asset key and label.
        thresholds: The WARN / ERROR levels.
        now: The time `version_age` is measured to (default: now).
        checks: The checks to evaluate (default: all of `CHECKS`); the health sensor leaves out
            ``files_exist``, which has no repair and costs a HEAD request per sampled file.
        versions: `table.versions()`, when the caller has listed them already (one listing per tick).

    Returns:
        One `AssetCheckResult` per check of `checks`, in `CHECKS` order.

    Raises:
        ValueError: A name in `checks` that is not a check of `CHECKS`.
    """
    unknown = sorted(set(checks) - set(CHECKS))
    if unknown:
        raise ValueError(f"unknown health checks {unknown}: the checks are {list(CHECKS)}")
    for result in _evaluate(table, target, thresholds, now or datetime.now(UTC), set(checks), versions):
        if result.check_name in checks:
            yield result


def _evaluate(
    table: mvcc.Table,
    target: MaintenanceTarget,
    thresholds: HealthThresholds,
    now: datetime,
    checks: set[str],
    listed: Sequence[mvcc.VersionInfo] | None,
) -> Iterator[dg.AssetCheckResult]:
    fragments = table.get_fragments()
    live = {f.fragment_id: f.count_rows() for f in fragments}
    small = [fid for fid, rows in live.items() if rows < thresholds.small_fragment_rows]
    small_count = len(small) if len(fragments) > 1 else 0
    yield _result(
        target,
        "small_fragments",
        small_count,
        thresholds.small_fragments,
        {"fragments": len(fragments), "small_fragment_rows": thresholds.small_fragment_rows},
    )

    physical = sum(int(f.physical_rows) for f in fragments)
    deleted = physical - sum(live.values())
    ratio = deleted / physical if physical else 0.0
    yield _result(
        target, "deleted_rows", round(ratio, 6), thresholds.deleted_ratio, {"deleted_rows": deleted, "rows": physical}
    )

    covered = {i["name"]: set(i["fragment_ids"]) for i in table.list_indices() if "fragment_ids" in i}
    per_index = {name: sum(rows for fid, rows in live.items() if fid not in ids) for name, ids in covered.items()}
    worst = max(per_index.values(), default=0)
    yield _result(
        target, "unindexed_rows", worst, thresholds.unindexed_rows, {"per_index": dg.MetadataValue.json(per_index)}
    )

    versions = [v for v in (listed if listed is not None else table.versions()) if v.error is None]
    oldest = min((v.timestamp for v in versions if v.timestamp is not None), default=now)
    yield _result(
        target,
        "versions_kept",
        len(versions),
        thresholds.versions_kept,
        {"oldest_version": versions[0].version if versions else table.version},
    )
    age_days = round((now - oldest).total_seconds() / 86400, 3)
    yield _result(
        target, "version_age", age_days, thresholds.version_age_days, {"oldest": dg.MetadataValue.timestamp(oldest)}
    )

    referenced: dict[str, int] = {}
    for v in versions:
        for fragment in table.checkout(v.version).get_fragments():
            for data_file in fragment.data_files():
                referenced[data_file.path] = int(data_file.file_size_bytes)
    latest_bytes = sum(int(df.file_size_bytes) for f in fragments for df in f.data_files())
    total = sum(referenced.values())
    amplification = round(total / latest_bytes, 3) if latest_bytes else 1.0
    yield _result(
        target,
        "storage_amplification",
        amplification,
        thresholds.storage_amplification,
        {"bytes_referenced": total, "bytes_latest": latest_bytes},
    )

    if "files_exist" not in checks:
        return  # the last check: a HEAD request per sampled file, for nothing when it is not asked for
    report = verify(table, max_files=thresholds.sample_files)
    missing = report.missing
    yield _result(
        target,
        "files_exist",
        len(missing),
        Level(1, 1),
        {"sampled": report.files_checked, "files": report.files_referenced, "missing": dg.MetadataValue.json(missing)},
    )


def _levels(level: Level, unit: str = "") -> str:
    return f"WARN at {level.warn:g}{unit}, ERROR at {level.error:g}{unit}"


def check_descriptions(thresholds: HealthThresholds) -> dict[str, str]:
    """What each check of `CHECKS` measures and when it fails, with these thresholds (shown in the UI).

    Args:
        thresholds: The WARN / ERROR levels.

    Returns:
        Check name -> description.
    """
    t = thresholds
    return {
        "small_fragments": (
            f"Fragments of the latest version with fewer than {t.small_fragment_rows:,} live rows (a table of one "
            f"fragment never fails): many small files slow every scan. {_levels(t.small_fragments)} small "
            "fragments. Repaired by compaction."
        ),
        "deleted_rows": (
            "Deleted rows / physical rows of the latest version: deleted rows are still read and filtered out. "
            f"{_levels(t.deleted_ratio)}. Repaired by compaction."
        ),
        "unindexed_rows": (
            "Live rows in fragments an index does not cover (the worst index; 0 without indices): a filter on "
            f"the column scans them. {_levels(t.unindexed_rows)} rows. Repaired by an index optimize."
        ),
        "versions_kept": (
            f"Versions still listed (each keeps its manifest and files). {_levels(t.versions_kept)} versions. "
            "Repaired by retention."
        ),
        "version_age": (
            f"Age of the oldest kept version, in days. {_levels(t.version_age_days, ' days')}. Repaired by retention."
        ),
        "storage_amplification": (
            "Bytes of data files referenced by any kept version / bytes of the latest version's: what old "
            f"versions cost in storage. {_levels(t.storage_amplification, 'x')}. Repaired by retention."
        ),
        "files_exist": (
            f"A random sample of up to {t.sample_files} of the latest version's files, each checked to exist "
            "(a HEAD request): a missing file makes reads fail. ERROR at 1 missing file."
        ),
    }


def health_checks(
    target: MaintenanceTarget,
    thresholds: HealthThresholds,
    *,
    resource_key: str,
    open_table: Callable[[Any], mvcc.Table],
) -> dg.AssetChecksDefinition:
    """The multi-asset check of `target`: every check of `CHECKS`, described with `thresholds`, on the table
    `open_table(resource)` returns (`resource`: the resource bound under `resource_key`).

    Args:
        target: The table.
        thresholds: The WARN / ERROR levels.
        resource_key: The resource the check opens the table through.
        open_table: Opens the table from that resource.

    Returns:
        The checks definition.
    """
    descriptions = check_descriptions(thresholds)
    specs = [dg.AssetCheckSpec(name, asset=target.asset_key, description=descriptions[name]) for name in CHECKS]

    @dg.multi_asset_check(
        specs=specs,
        name=f"mvcc_health__{target.suffix}",
        required_resource_keys={resource_key},
        description=f"Health of table {target.label}, read from its manifests.",
    )
    def health(context: dg.AssetCheckExecutionContext) -> Iterator[dg.AssetCheckResult]:
        with mvcc_conflicts(context, what=f"health checks of {target.label}"):
            table = open_table(getattr(context.resources, resource_key))
        yield from evaluate_health(table, target, thresholds)

    return health


def build_table_health_checks(
    tables: Sequence[TableName],
    *,
    thresholds: HealthThresholds | None = None,
    asset_keys: Sequence[TableName | None] | None = None,
) -> list[dg.AssetChecksDefinition]:
    """One multi-asset check per table evaluating every check in `CHECKS` (names are the contract).

    Args:
        tables: Asset keys or table uris (opened through the ``mvcc`` resource).
        thresholds: The WARN / ERROR levels (default `HealthThresholds()`).
        asset_keys: The asset of each table named by uri (default: its last path segment).

    Returns:
        One checks definition per table.
    """
    thresholds = thresholds or HealthThresholds()
    keys = list(asset_keys) if asset_keys is not None else [None] * len(tables)
    out = []
    for table, key in zip(tables, keys, strict=True):
        target = MaintenanceTarget(table, key)

        def open_table(resource: MvccResource, name: TableName = table) -> mvcc.Table:
            return resource.open(name)

        out.append(health_checks(target, thresholds, resource_key=RESOURCE_KEY, open_table=open_table))
    return out


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


class TableHandles:
    """The sensor's table handles, kept from tick to tick: a tick reads only the manifests and transactions
    committed since the last one (versions are immutable), not every kept version again. A table dropped
    and written again under the same uri is noticed by the version the last tick saw, read again."""

    def __init__(self) -> None:
        self._handles: dict[str, mvcc.Table] = {}
        self._versions: dict[str, list[mvcc.VersionInfo]] = {}

    def latest(self, uri: str, open_table: Callable[[], mvcc.Table]) -> mvcc.Table:
        """The table at `uri` at its latest version, through the handle of the last tick when still valid.

        Args:
            uri: The table's uri (the key).
            open_table: Opens the table afresh (its latest manifest read now).

        Returns:
            The handle.

        Raises:
            TableNotFoundError: There is no table at `uri` (any kept handle is dropped).
        """
        known = self._handles.pop(uri, None)
        fresh = open_table()
        table = known.checkout(fresh.version) if known is not None and _same_table(known, fresh) else fresh
        # remember what the kept versions need, not every version read since the sensor started
        versions = table.versions()
        table.trim_version_cache(max(1, len(versions)))
        self._handles[uri] = table
        self._versions[uri] = versions
        return table

    def versions(self, uri: str) -> list[mvcc.VersionInfo]:
        """The versions of `uri` as the last `latest` listed them (one listing per tick, not one per use).

        Args:
            uri: The table's uri.

        Returns:
            ``table.versions()`` of the handle `latest` returned.
        """
        return self._versions[uri]


def _same_table(known: mvcc.Table, fresh: mvcc.Table) -> bool:
    """Whether `fresh` (read now) is the table `known` (the last tick's) with versions added: the version the
    last tick saw is still there with the same manifest (one manifest read when the table moved)."""
    if fresh.version < known.version:
        return False
    try:
        return fresh.checkout(known.version).manifest == known.manifest
    except (mvcc.VersionNotFoundError, mvcc.errors.CorruptManifestError):
        return False  # removed or unreadable since: read everything again rather than trust the cache


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


#: Which job repairs which failing check (the health sensor's map).
REPAIRS = {
    "small_fragments": "compaction",
    "deleted_rows": "compaction",
    "unindexed_rows": "index",
    "versions_kept": "retention",
    "version_age": "retention",
    "storage_amplification": "retention",
}
VERSION_CHECKS = {"versions_kept", "version_age"}
"""The retention checks not about bytes: while neither fails, a retention request is for storage alone
(`HealthThresholds.retention_min_removable_bytes`)."""
REPAIRABLE = tuple(c for c in CHECKS if c in REPAIRS)
"""The checks the health sensor evaluates: those with a repair (not ``files_exist``, which is never automatic)."""


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
    """A sensor requesting the repair job of each table whose health checks fail (`REPAIRS` says which).

    A job argument is one job (one table) or a mapping from each table's asset key string to its job. The
    sensor evaluates the same checks with the same thresholds (`evaluate_health`: manifests only) rather than
    reading the last check evaluations, so it needs no check run to have happened and sees the table as it
    is now. Run key ``"{uri}@{version}:{job}"``: a table that stays at a version never gets a second run of a
    job for it (Dagster dedupes run keys, and the cursor remembers the keys already requested, so a tick does
    not even return them); a new version after the repair may request it again if the check still fails.
    Retention's key also names the newest version it would remove (``...:{job}<={version}``).
    A table with a maintenance run (any run tagged `TABLE_TAG` with its name: the nightly schedule's, a repair
    requested before) queued or in progress gets no request on that tick: that run may repair the version the
    sensor sees, and a second one would plan the same fragments (seen in benchmarks/week.py at 03:00). A
    retention job built by `build_retention_job` (its tags say its window) is requested only when it would
    remove a version: a version-count or storage check failing inside the window waits for the window.
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
                until = _next_change(target, versions, now)
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

    def _next_change(target: MaintenanceTarget, versions: Sequence[mvcc.VersionInfo], now: datetime) -> datetime | None:
        """The first instant after `now` at which an age the evaluation reads crosses a threshold: a version
        leaving a repair job's retention window, or the oldest version's age reaching `version_age_days`."""
        stamps = [v.timestamp for v in versions if v.error is None and v.timestamp is not None]
        if not stamps:
            return None
        windows = [
            s[0] for k in ("compaction", "retention") if (j := job_for(k, target)) and (s := retention_setting(j.tags))
        ]
        days = thresholds.version_age_days
        # the age check rounds to 3 decimals of a day (≈ 43 s): its thresholds are taken a minute early
        ahead = [t + w for t in stamps for w in windows] + [
            min(stamps) + timedelta(days=d, minutes=-1) for d in (days.warn, days.error)
        ]
        later = [t for t in ahead if t > now]
        return min(later) if later else None

    def _repairs(
        table: mvcc.Table,
        target: MaintenanceTarget,
        uri: str,
        versions: Sequence[mvcc.VersionInfo],
        now: datetime,
        seen: set[str],
    ) -> tuple[list[str], list[dg.RunRequest]]:
        """The run keys the table's state asks for now, and the requests among them not made before."""
        failing = [
            r.check_name
            for r in evaluate_health(table, target, thresholds, now=now, checks=REPAIRABLE, versions=versions)
            if not r.passed
        ]
        readable = [v.version for v in versions if v.error is None]
        keys_now, requests = [], []
        by_checks = set(REPAIRS[c] for c in failing if c in REPAIRS)
        share = thresholds.retention_removable_share
        compaction_retention = None  # the retention setting of a compaction run requested on this tick
        for kind in [k for k in ("compaction", "retention", "index") if k in by_checks or k == "retention"]:
            job = job_for(kind, target)
            if job is None:
                continue
            run_key = f"{uri}@{table.version}:{job.name}"
            setting = retention_setting(job.tags)  # a compaction job built with older_than has one too
            if kind == "retention" and kind not in by_checks and (setting is None or share is None):
                continue  # no failing check asks for it, and no removable-share rule applies
            if kind == "retention" and setting is not None:
                removable = removable_versions(table, *setting, now=now, versions=versions)
                if not removable:
                    # every old version is still inside the job's window: a run would remove nothing (the
                    # week's daily tables asked for one at every new version); asked once one is older
                    continue
                if not VERSION_CHECKS.intersection(failing):
                    # asked for storage only (the share rule, a failing storage_amplification): worth a run
                    # once it frees enough bytes (and, by the share rule, enough of the table's)
                    freed = removable_bytes(table, removable, readable)
                    if freed < thresholds.retention_min_removable_bytes:
                        continue
                    if kind not in by_checks and share is not None and freed < share * data_bytes(table):
                        continue
                # the newest version it would remove: at one latest version, versions leave the window
                # as time passes, and each such step is new work (a new key), never the same run twice
                run_key += f"<={removable[-1]}"
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
                    run_config=retention_run_config(now - setting[0]) if setting is not None else None,
                    tags={TABLE_TAG: target.label, "mvcc/failing_checks": ",".join(c for c in failing if c)},
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
