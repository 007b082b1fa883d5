"""Table health as Dagster asset checks, read from manifests only (no data file is read).

The checks, their thresholds and repairs: docs/integrations/dagster/sensors_and_health.md ("Health checks").
"""

from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import dagster as dg

import mvcc_core as mvcc
from mvcc_core.verify import verify

from ..error_mapping import mvcc_conflicts
from ..maintenance.target import MaintenanceTarget
from ..metadata import RESOURCE_KEY
from ..resources import MvccResource, TableName

CHECKS = (
    "small_fragments",
    "deleted_rows",
    "unindexed_rows",
    "versions_kept",
    "version_age",
    "storage_amplification",
    "maintenance_advice",
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
    - `advice_score`: the core's advice (`Table.optimize.recommend()`) scoring above this makes the
      ``maintenance_advice`` check WARN, and makes the health sensor request the job that does it (a score is
      the share of the table's cost the maintenance removes, in [0, 1]);
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
    advice_score: float = 0.5
    retention_removable_share: float | None = None
    retention_min_removable_bytes: int = 8 * 1024 * 1024

    def __post_init__(self) -> None:
        score = self.advice_score
        if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score < 1:
            raise ValueError(f"advice_score must be a number in [0, 1), got {score!r}")
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

    if "maintenance_advice" in checks:
        figures = HealthFigures(
            fragments=len(fragments),
            small_fragments=small_count,
            deleted_share=round(ratio, 6),
            stored_bytes=total,
            live_bytes=latest_bytes,
            versions_kept=len(versions),
        )
        yield advice_result(target, mvcc.compaction.recommend(table, now=now), figures, thresholds.advice_score)

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


@dataclass(frozen=True)
class HealthFigures:
    """The table's figures the ``maintenance_advice`` check carries as numeric metadata (the UI plots each
    over the check's evaluations): fragments, small ones (`HealthThresholds.small_fragment_rows`), the deleted
    share of physical rows, bytes stored for every kept version and for the latest one, versions kept."""

    fragments: int
    small_fragments: int
    deleted_share: float
    stored_bytes: int
    live_bytes: int
    versions_kept: int


def advice_result(
    target: MaintenanceTarget,
    advice: Sequence[mvcc.compaction.MaintenanceAdvice],
    figures: HealthFigures,
    min_score: float,
) -> dg.AssetCheckResult:
    """The ``maintenance_advice`` check: WARN when the core's best advice scores above `min_score`, with its
    reason, effect and call in the description; the figures and every kind's score as numeric metadata.

    Args:
        target: The table.
        advice: `recommend`'s answer, best first.
        figures: The table's figures.
        min_score: `HealthThresholds.advice_score`.

    Returns:
        The check's result (never ERROR: advice is what would pay, not a failure).
    """
    best = advice[0] if advice else None
    score = round(best.score, 6) if best is not None else 0.0
    metadata: dict[str, Any] = {
        "value": score,
        "warn_at": min_score,
        "fragments": figures.fragments,
        "small_fragments": figures.small_fragments,
        "deleted_share": figures.deleted_share,
        "stored_bytes": figures.stored_bytes,
        "live_bytes": figures.live_bytes,
        "versions_kept": figures.versions_kept,
        "top_advice_score": score,
        "top_advice_kind": best.kind if best is not None else "",
        "bytes_to_rewrite": best.bytes_to_rewrite if best is not None else 0,
    }
    for kind in ("compact", "materialize_deletions", "optimize_indices", "retention"):
        metadata[f"score_{kind}"] = round(max((a.score for a in advice if a.kind == kind), default=0.0), 6)
    due = best is not None and best.score > min_score
    description = None
    if due and best is not None:
        description = (
            f"{target.label}: {best.kind} (score {best.score:.2f} > {min_score:g}): {best.reason}. "
            f"Expected: {best.effect}. Run: {best.call}"
        )
    return dg.AssetCheckResult(
        asset_key=target.asset_key,
        check_name="maintenance_advice",
        passed=not due,
        severity=dg.AssetCheckSeverity.WARN,
        metadata=metadata,
        description=description,
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
        "maintenance_advice": (
            "The core's advice (Table.optimize.recommend(): compaction, deletions, indices, retention under the "
            f"table's policy): WARN when the best scores above {t.advice_score:g} (the share of the table's cost "
            "it removes), naming it and the call to run; the table's figures are the check's metadata. Repaired "
            "by the job of the advice's kind."
        ),
        "files_exist": (
            f"A random sample of up to {t.sample_files} of the latest version's files, each checked to exist "
            "(a HEAD request): a missing file makes reads fail. ERROR at 1 missing file."
        ),
    }


def health_automation_condition(
    *, on_update: bool = True, cron: str | None = None, timezone: str = "UTC"
) -> dg.AutomationCondition:
    """When Dagster's automation sensor runs a table's health checks (declarative automation).

    `on_update`: after each new materialization of the table's asset, a run's or a runless one (the version
    sensor records every outside data-changing commit as one); Dagster counts only materializations as an
    update of an asset that is not observable, so a maintenance commit (an observation) does not trigger it.
    `cron`: on each tick of the schedule whatever happened (ages grow, retention leaves the window). Either
    waits while the checks are already running.

    Args:
        on_update: Run after each new materialization of the asset.
        cron: Also run on each tick of this cron schedule (None: no clock).
        timezone: The cron's time zone.

    Returns:
        The condition (``(any_deps_updated | cron_tick_passed) & ~in_progress``).

    Raises:
        ValueError: Neither `on_update` nor `cron` (the condition would never be true).
    """
    parts: list[dg.AutomationCondition] = []
    if on_update:
        parts.append(dg.AutomationCondition.any_deps_updated().with_label("table updated"))
    if cron is not None:
        parts.append(dg.AutomationCondition.cron_tick_passed(cron, timezone).with_label(f"cron {cron}"))
    if not parts:
        raise ValueError("a health automation condition needs on_update or a cron (otherwise it never runs)")
    when = parts[0] if len(parts) == 1 else parts[0] | parts[1]
    return (when & ~dg.AutomationCondition.in_progress()).with_label("mvcc health")


def health_checks(
    target: MaintenanceTarget,
    thresholds: HealthThresholds,
    *,
    resource_key: str,
    open_table: Callable[[Any], mvcc.Table],
    automation_condition: dg.AutomationCondition | None = None,
) -> dg.AssetChecksDefinition:
    """The multi-asset check of `target`: every check of `CHECKS`, described with `thresholds`, on the table
    `open_table(resource)` returns (`resource`: the resource bound under `resource_key`).

    Args:
        target: The table.
        thresholds: The WARN / ERROR levels.
        resource_key: The resource the check opens the table through.
        open_table: Opens the table from that resource.
        automation_condition: When Dagster's automation sensor runs the checks (every check of the table
            together: one op); None: only when someone runs them (`health_automation_condition`).

    Returns:
        The checks definition.
    """
    descriptions = check_descriptions(thresholds)
    specs = [
        dg.AssetCheckSpec(
            name, asset=target.asset_key, description=descriptions[name], automation_condition=automation_condition
        )
        for name in CHECKS
    ]

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
    automation_condition: dg.AutomationCondition | None = None,
) -> list[dg.AssetChecksDefinition]:
    """One multi-asset check per table evaluating every check in `CHECKS` (names are the contract).

    Args:
        tables: Asset keys or table uris (opened through the ``mvcc`` resource).
        thresholds: The WARN / ERROR levels (default `HealthThresholds()`).
        asset_keys: The asset of each table named by uri (default: its last path segment).
        automation_condition: When Dagster's automation sensor runs them (e.g.
            `health_automation_condition(cron="0 * * * *")`); None: only when someone runs them.

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

        out.append(
            health_checks(
                target,
                thresholds,
                resource_key=RESOURCE_KEY,
                open_table=open_table,
                automation_condition=automation_condition,
            )
        )
    return out


#: Which job repairs which failing check (the measurement checks; the sensor itself decides from the advice).
REPAIRS = {
    "small_fragments": "compaction",
    "deleted_rows": "compaction",
    "unindexed_rows": "index",
    "versions_kept": "retention",
    "version_age": "retention",
    "storage_amplification": "retention",
}
VERSION_CHECKS = {"versions_kept", "version_age"}
"""The retention checks not about bytes: while neither is reached, a retention request must free
`HealthThresholds.retention_min_removable_bytes`."""
REPAIRABLE = tuple(c for c in CHECKS if c in REPAIRS)
"""The measurement checks with a repair (not ``maintenance_advice``, nor ``files_exist``, never automatic)."""


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


#: The health sensor, kept importable from here (it moved to `repair`).
_MOVED = ("build_health_sensor",)


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        from . import repair

        return getattr(repair, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
