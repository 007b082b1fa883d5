"""`MvccTableComponent`: one mvcc table as a Dagster Component, configured from a ``defs.yaml``.

Why a Component, and an example ``defs.yaml``: docs/integrations/dagster/component.md ("A Component per table").
"""

from __future__ import annotations

import dataclasses
import functools
from datetime import timedelta
from typing import Any, Literal

import dagster as dg
from pydantic import Field, model_validator

import mvcc_core as mvcc

from .. import maintenance as table_jobs
from ..health.checks import HealthThresholds, Level, build_table_health_checks, health_automation_condition
from ..health.repair import build_health_sensor
from ..health.sensors import build_version_sensor
from ..maintenance.due import DEFAULT_OLDER_THAN
from ..metadata import RESOURCE_KEY
from ..resources import MvccResource, resolve_uri, table_key_problem
from ..write_audit_publish.publish_job import RowAudit, build_publish_branch_job


class LevelModel(dg.Model):
    """WARN and ERROR thresholds of one health measurement (a value at or above a threshold fails at it)."""

    warn: float
    error: float


class HealthAutomationModel(dg.Model):
    """When Dagster's automation sensor runs the table's health checks (`health_automation_condition`)."""

    on_update: bool = Field(
        default=True, description="after each new materialization of the table's asset (a run's or the sensor's)"
    )
    cron: str | None = Field(default=None, description="also on each tick of this cron schedule")
    timezone: str = "UTC"

    def condition(self) -> dg.AutomationCondition:
        return health_automation_condition(on_update=self.on_update, cron=self.cron, timezone=self.timezone)


class HealthModel(dg.Model):
    """Thresholds of the health checks (`HealthThresholds`); a field left out keeps its default."""

    small_fragment_rows: int | None = Field(default=None, description="a fragment with fewer live rows is small")
    small_fragments: LevelModel | None = None
    deleted_ratio: LevelModel | None = None
    unindexed_rows: LevelModel | None = None
    versions_kept: LevelModel | None = None
    version_age_days: LevelModel | None = None
    storage_amplification: LevelModel | None = None
    sample_files: int | None = Field(default=None, description="files of the latest version HEADed per check run")
    advice_score: float | None = Field(
        default=None,
        description="the core's advice scoring above this (default 0.5) makes maintenance_advice WARN and the "
        "health sensor request its job",
    )
    retention_removable_share: float | None = Field(
        default=None,
        description="the sensor also requests retention when the data files it would remove weigh this share of "
        "the latest version's",
    )
    retention_min_removable_bytes: int | None = Field(
        default=None, description="and only when they weigh at least this many bytes (default 8 MiB)"
    )
    sensor: bool = Field(default=True, description="a sensor requesting the repair jobs of failing checks")
    sensor_interval_seconds: int = 300
    automation_condition: HealthAutomationModel | None = Field(
        default=None,
        description="run the checks by declarative automation (Dagster's automation sensor): on each new "
        "materialization and/or a cron; none: only when someone runs them",
    )

    def thresholds(self) -> HealthThresholds:
        given: dict[str, Any] = {}
        for name in (f.name for f in dataclasses.fields(HealthThresholds)):
            value = getattr(self, name)
            if value is None:
                continue
            given[name] = Level(value.warn, value.error) if isinstance(value, LevelModel) else value
        return HealthThresholds(**given)


class MaintenanceModel(dg.Model):
    """The maintenance schedule (compaction, index optimize, retention) and the compaction's options.

    The tuning fields (`target_rows_per_fragment` ... `defer_index_remap`) left out, the compaction follows the
    table's policy (its ``mvcc.compaction.*`` configuration) when each run plans; any of them given, the
    compaction takes them with the core's defaults for the rest, as `CompactionOptions` does."""

    cron: str = Field(default="0 3 * * *", description="when the maintenance job runs (cron, in `timezone`)")
    timezone: str = "UTC"
    running: bool = Field(default=False, description="start the schedule running (Dagster's default: stopped)")
    optimize_indices: bool = True
    executor: Literal["auto", "dagster", "in_process", "spark"] = Field(
        default="auto",
        description="where the compaction's rewrite tasks run (auto: one process, batched steps; dagster: the "
        "code location's executor, a step per task, for big tables; spark: on the `pyspark` resource's session)",
    )
    rewrite_steps: int | None = Field(default=None, description="the most rewrite steps (build_compaction_job)")
    target_rows_per_fragment: int | None = None
    max_rows_per_task: int | None = None
    max_bytes_per_task: int | None = None
    materialize_deletions: bool = True
    materialize_deletions_threshold: float | None = None
    defer_index_remap: bool = False
    where: str | None = Field(
        default=None, description="the compaction job compacts only fragments that may hold rows matching this"
    )
    sort_by: list[str] | None = Field(default=None, description="the compaction job's layout: sorted by these")
    zorder_by: list[str] | None = Field(default=None, description="or z-ordered by these 2 to 4 columns")
    max_bytes: int | None = Field(default=None, description="the compaction job's budget of bytes per run")
    partial_progress: bool = Field(
        default=False, description="commit the groups that do not conflict, drop the others (reported)"
    )

    def options(self) -> mvcc.compaction.CompactionOptions | None:
        """The compaction's options: this model's tuning fields named as `CompactionOptions`' (the rest its
        defaults), or None when none is given (the table's policy decides).

        Returns:
            The options the compaction job and the schedule's compaction step run with.
        """
        given = {
            name: getattr(self, name)
            for name in (
                "target_rows_per_fragment",
                "max_rows_per_task",
                "max_bytes_per_task",
                "materialize_deletions_threshold",
            )
            if getattr(self, name) is not None
        }
        if not self.materialize_deletions:
            given["materialize_deletions"] = False
        if self.defer_index_remap:
            given["defer_index_remap"] = True
        return mvcc.compaction.CompactionOptions(**given) if given else None


class FreshnessModel(dg.Model):
    """The table asset's freshness policy (Dagster's `FreshnessPolicy`): a time window, or a cron deadline."""

    fail_after_hours: float | None = Field(
        default=None, description="FAIL when the last materialization is older than this (a time window)"
    )
    warn_after_hours: float | None = Field(default=None, description="WARN when older than this (below fail)")
    deadline_cron: str | None = Field(default=None, description="or: a new version is due by each tick of this")
    lower_bound_hours: float | None = Field(
        default=None, description="with deadline_cron: a materialization counts from this long before the tick"
    )
    timezone: str = "UTC"

    @model_validator(mode="after")
    def _check(self) -> FreshnessModel:
        window = self.fail_after_hours is not None
        cron = self.deadline_cron is not None
        if window == cron:
            raise ValueError("freshness: give fail_after_hours (a time window) or deadline_cron, exactly one")
        if cron and self.lower_bound_hours is None:
            raise ValueError("freshness: deadline_cron needs lower_bound_hours")
        if window and (self.lower_bound_hours is not None or self.timezone != "UTC"):
            raise ValueError("freshness: lower_bound_hours and timezone go with deadline_cron, not fail_after_hours")
        if self.warn_after_hours is not None and not window:
            raise ValueError("freshness: warn_after_hours goes with fail_after_hours")
        return self

    def policy(self) -> dg.FreshnessPolicy:
        if self.fail_after_hours is not None:
            warn = timedelta(hours=self.warn_after_hours) if self.warn_after_hours is not None else None
            return dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=self.fail_after_hours), warn_window=warn)
        return dg.FreshnessPolicy.cron(
            deadline_cron=self.deadline_cron or "",
            lower_bound_delta=timedelta(hours=self.lower_bound_hours or 0),
            timezone=self.timezone,
        )


class RetentionModel(dg.Model):
    """What the retention job (and the schedule's retention step) keeps."""

    older_than_days: float | None = Field(
        default=None,
        description="versions older than this are removed (default: the table's mvcc.retention.older_than, else "
        "14 days; the schedule's retention step: 14 days)",
    )
    retain_versions: int | None = Field(default=None, description="always keep this many newest versions")
    delete_unverified: bool = Field(
        default=False,
        description="also remove files no version references that are younger than the 7-day unverified window "
        "(a killed writer's); run it only when no writer is at work",
    )
    error_if_tagged_old_versions: bool = Field(
        default=False,
        description="fail retention on a tagged version older than the window (default: keep it, remove the rest)",
    )

    def older_than(self) -> timedelta | None:
        return timedelta(days=self.older_than_days) if self.older_than_days is not None else None


class IndexModel(dg.Model):
    """An index the component keeps a job for (``mode: create`` builds it, ``optimize`` catches it up)."""

    column: str
    type: str = "BTREE"
    name: str | None = None


class RowAuditModel(dg.Model):
    """One audit of the write-audit-publish job: the branch's rows matching `filter` are at most `max_rows`."""

    name: str
    filter: str = Field(description="the rows that fail the audit, e.g. 'amount <= 0'")
    max_rows: int = Field(default=0, description="how many such rows are tolerated (0 or more)")
    blocking: bool = True
    description: str | None = None

    @model_validator(mode="after")
    def _check(self) -> RowAuditModel:
        if self.max_rows < 0:
            raise ValueError(f"write_audit_publish audit {self.name}: max_rows must be 0 or more, got {self.max_rows}")
        return self


class WriteAuditPublishModel(dg.Model):
    """Write-audit-publish for the table's outside writer: it commits to a branch, the component's publish job
    audits the branch and publishes it to main when every blocking audit passes."""

    audits: list[RowAuditModel] = Field(description="evaluated on the branch before the publish (at least one)")

    @model_validator(mode="after")
    def _check(self) -> WriteAuditPublishModel:
        if not self.audits:
            raise ValueError("write_audit_publish: audits must name at least one audit (a publish needs an audit)")
        return self

    def row_audits(self) -> list[RowAudit]:
        return [RowAudit(a.name, a.filter, a.max_rows, a.blocking, a.description) for a in self.audits]


class VersionSensorModel(dg.Model):
    """The sensor recording every new version of the table as a materialization / observation."""

    enabled: bool = True
    running: bool = False
    minimum_interval_seconds: int = 30
    max_versions_per_tick: int = 50


@functools.cache
def shared_resource(
    root_uri: str, storage_options: tuple[tuple[str, str], ...], external_store: str | None
) -> MvccResource:
    """One `MvccResource` object per warehouse setting.

    Why shared: `Definitions.merge` (what a defs folder of several components becomes) refuses two different
    resource objects under one key, so two tables of one warehouse must bind the *same* object as ``mvcc``.
    Two components naming different warehouses in one code location are refused by Dagster with the key
    named; bind ``mvcc`` once for the code location instead (leave `root_uri` out of the components).

    Args:
        root_uri: The warehouse.
        storage_options: Its storage options, as sorted pairs (hashable).
        external_store: Its external commit store.

    Returns:
        The resource (the same object for the same settings).
    """
    return MvccResource(root_uri=root_uri, storage_options=dict(storage_options), external_store=external_store)


class MvccTableComponent(dg.Component, dg.Resolvable, dg.Model):
    """One mvcc table: its asset, health checks, maintenance jobs and schedule, and version / health sensors.

    Where the table is: `uri` (a full uri) or ``{root_uri}/{key}``. With `root_uri` the component binds the
    ``mvcc`` resource itself (one shared object per warehouse setting); without it the code location must bind
    ``mvcc`` (an `MvccResource`), as code-first deployments do.
    """

    key: str = Field(description="the table's asset key, e.g. 'sales/orders'")
    uri: str | None = Field(default=None, description="the table's full uri (default: {root_uri}/{key})")
    root_uri: str | None = Field(default=None, description="the warehouse root; binds the `mvcc` resource")
    storage_options: dict[str, str] = Field(default_factory=dict, description="object store options (S3 ...)")
    external_store: str | None = None
    define_asset: bool = Field(
        default=True, description="declare the table's asset (external); false when an @asset writes it"
    )
    deps: list[str] = Field(default_factory=list, description="upstream asset keys of the table's asset")
    description: str | None = None
    group_name: str | None = None
    freshness: FreshnessModel | None = Field(
        default=None, description="the asset's freshness policy (a time window or a cron deadline)"
    )
    maintenance: MaintenanceModel | None = Field(default_factory=MaintenanceModel)
    retention: RetentionModel = Field(default_factory=RetentionModel)
    health: HealthModel | None = Field(default_factory=HealthModel)
    indices: list[IndexModel] = Field(default_factory=list)
    version_sensor: VersionSensorModel | None = Field(default_factory=VersionSensorModel)
    write_audit_publish: WriteAuditPublishModel | None = Field(
        default=None, description="a job auditing a branch the outside writer committed to, then publishing it"
    )

    @model_validator(mode="after")
    def _check(self) -> MvccTableComponent:
        if not self.key.strip("/"):
            raise ValueError("key: the table's asset key must not be empty")
        if self.uri is not None and not self.uri.strip():
            raise ValueError(f"table {self.key}: uri must not be empty")
        if self.uri is None:
            reason = table_key_problem(dg.AssetKey.from_user_string(self.key))
            if reason is not None:  # the key is the table's path under the root: it must stay there
                raise ValueError(f"key: {reason}")
        return self

    # ---- the parts -------------------------------------------------------------------------------------

    @property
    def table(self) -> str:
        """How the factories name the table: its uri when given, else its asset key (resolved by ``mvcc``)."""
        return self.uri or self.key

    @property
    def asset_key(self) -> dg.AssetKey:
        return dg.AssetKey.from_user_string(self.key)

    def resource(self) -> MvccResource | None:
        if self.root_uri is None:
            return None
        return shared_resource(self.root_uri, tuple(sorted(self.storage_options.items())), self.external_store)

    def asset_spec(self) -> dg.AssetSpec:
        metadata = {}
        if self.uri or self.root_uri:
            metadata["dagster/uri"] = dg.MetadataValue.path(self.uri or resolve_uri(self.root_uri or "", self.key))
        return dg.AssetSpec(
            self.asset_key,
            deps=[dg.AssetKey.from_user_string(d) for d in self.deps],
            description=self.description or f"mvcc table {self.key}; every version is recorded by its sensor.",
            group_name=self.group_name,
            kinds={"mvcc"},
            metadata=metadata,
            freshness_policy=self.freshness.policy() if self.freshness is not None else None,
        )

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        """The table's definitions, built with the same factories code-first users call.

        Args:
            context: Dagster's component load context.

        Returns:
            The asset (unless ``define_asset: false``), checks, jobs, schedule, sensors and the ``mvcc`` resource.
        """
        target = table_jobs.MaintenanceTarget(self.table, self.asset_key)
        key = self.asset_key
        retention = self.retention
        m = self.maintenance
        compaction = table_jobs.build_compaction_job(
            self.table,
            options=m.options() if m else None,
            executor=m.executor if m else "auto",
            rewrite_steps=m.rewrite_steps if m else None,
            asset_key=key,
            where=m.where if m else None,
            sort_by=m.sort_by if m else None,
            zorder_by=m.zorder_by if m else None,
            max_bytes=m.max_bytes if m else None,
            partial_progress=m.partial_progress if m else False,
        )
        retention_job = table_jobs.build_retention_job(
            self.table,
            older_than=retention.older_than(),
            retain_versions=retention.retain_versions,
            delete_unverified=retention.delete_unverified,
            asset_key=key,
            error_if_tagged_old_versions=retention.error_if_tagged_old_versions,
        )
        index_jobs = [
            table_jobs.build_index_job(self.table, i.column, i.type, index_name=i.name, asset_key=key)
            for i in self.indices
        ]
        optimize_job = table_jobs.build_index_optimize_job(self.table, asset_key=key) if self.indices else None
        jobs = [
            compaction,
            retention_job,
            table_jobs.build_restore_job(self.table, asset_key=key),
            table_jobs.build_tag_job(self.table, asset_key=key),
            *index_jobs,
            *([optimize_job] if optimize_job is not None else []),
        ]
        if self.write_audit_publish is not None:
            jobs.append(build_publish_branch_job(self.table, self.write_audit_publish.row_audits(), asset_key=key))
        schedules = []
        if self.maintenance is not None:
            schedules.append(
                table_jobs.build_maintenance_schedule(
                    self.table,
                    self.maintenance.cron,
                    options=self.maintenance.options(),
                    optimize_indices=self.maintenance.optimize_indices,
                    # the schedule's retention step takes a window of its own (14 days unless given)
                    older_than=retention.older_than() or DEFAULT_OLDER_THAN,
                    retain_versions=retention.retain_versions,
                    delete_unverified=retention.delete_unverified,
                    error_if_tagged_old_versions=retention.error_if_tagged_old_versions,
                    executor=self.maintenance.executor,
                    rewrite_steps=self.maintenance.rewrite_steps,
                    execution_timezone=self.maintenance.timezone,
                    default_status=dg.DefaultScheduleStatus.RUNNING
                    if self.maintenance.running
                    else dg.DefaultScheduleStatus.STOPPED,
                    asset_key=key,
                )
            )
        checks = []
        sensors = []
        if self.health is not None:
            thresholds = self.health.thresholds()
            automation = self.health.automation_condition
            checks = build_table_health_checks(
                [self.table],
                thresholds=thresholds,
                asset_keys=[key],
                automation_condition=automation.condition() if automation is not None else None,
            )
            if self.health.sensor:
                sensors.append(
                    build_health_sensor(
                        [self.table],
                        compaction_job=compaction,
                        retention_job=retention_job,
                        index_job=optimize_job,
                        thresholds=thresholds,
                        asset_keys=[key],
                        minimum_interval_seconds=self.health.sensor_interval_seconds,
                        name=f"mvcc_health_sensor__{target.suffix}",
                    )
                )
        if self.version_sensor is not None and self.version_sensor.enabled:
            sensors.append(
                build_version_sensor(
                    [self.table],
                    minimum_interval_seconds=self.version_sensor.minimum_interval_seconds,
                    max_versions_per_tick=self.version_sensor.max_versions_per_tick,
                    asset_keys=[key],
                    name=f"mvcc_version_sensor__{target.suffix}",
                    default_status=dg.DefaultSensorStatus.RUNNING
                    if self.version_sensor.running
                    else dg.DefaultSensorStatus.STOPPED,
                )
            )
        resource = self.resource()
        return dg.Definitions(
            assets=[self.asset_spec()] if self.define_asset else None,
            asset_checks=checks or None,
            jobs=jobs,
            schedules=schedules or None,
            sensors=sensors or None,
            resources={RESOURCE_KEY: resource} if resource is not None else None,
        )
