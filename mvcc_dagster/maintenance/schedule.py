"""The maintenance schedule: compaction, index optimize and retention of one table, in that order."""

from datetime import UTC, datetime, timedelta

import dagster as dg

import mvcc_core as mvcc

from ..metadata import RESOURCE_KEY
from ..resources import MvccResource, TableName
from .compaction import RETRY_TAGS, SPARK_RESOURCE_KEY, check_executor, compaction_ops
from .due import maintenance_work, retention_run_config, retention_tags
from .indices import index_op
from .retention import cleanup_op
from .target import MaintenanceTarget, maintenance_job


def build_maintenance_schedule(
    table: TableName,
    cron: str = "0 3 * * *",
    *,
    options: mvcc.compaction.CompactionOptions | None = None,
    optimize_indices: bool = True,
    older_than: timedelta = timedelta(days=14),
    retain_versions: int | None = None,
    delete_unverified: bool = False,
    executor: str = "auto",
    rewrite_steps: int | None = None,
    spark_resource_key: str = SPARK_RESOURCE_KEY,
    execution_timezone: str = "UTC",
    default_status: dg.DefaultScheduleStatus = dg.DefaultScheduleStatus.STOPPED,
    asset_key: TableName | None = None,
    name: str | None = None,
    error_if_tagged_old_versions: bool = False,
) -> dg.ScheduleDefinition:
    """A schedule running one maintenance job of `table` on `cron`: compaction, index optimize, retention.

    One job rather than three so the order holds: retention after the Rewrite removes the replaced files
    once they are old enough, and the index catches up with the new fragments before readers miss it. An
    empty compaction still runs the later steps. Default stopped, as Dagster's schedules are. A tick skips
    (no run) while the table does not exist yet, and when the job would do nothing: no compaction task in
    its plan, no fragment an index misses, no version older than `older_than` (`maintenance_work`, from the
    manifests; a run costs Dagster's per-run work even when it has none to do). Retention is measured to the
    tick's scheduled time, and the run removes the versions committed before that time minus `older_than`
    (its ``cleanup_old_versions`` step's ``cutoff``), never one younger than `older_than`.

    Many tables on one nightly budget (the highest-ranked first, within a byte budget, a run limit and quiet
    hours) are one schedule instead: `build_fleet_maintenance` (docs/integrations/dagster/fleet.md).

    Args:
        table: An asset key or a table uri.
        cron: When it runs.
        options: What to compact (default `CompactionOptions()`).
        optimize_indices: Whether the job has the ``optimize_indices`` step.
        older_than: Retention: versions older than this go.
        retain_versions: Retention: keep at least the newest this many versions.
        delete_unverified: Retention: also remove files no version references that are younger than the
            7-day unverified window (the core's and the CLI's `delete_unverified`; also op config).
        executor: Where the compaction's rewrite runs (`build_compaction_job`; default ``"auto"``: one
            process). The job runs in one process unless it is ``"dagster"``.
        rewrite_steps: The most rewrite steps (`build_compaction_job`).
        spark_resource_key: With ``executor="spark"``: the resource with the ``spark_session``.
        execution_timezone: The cron's time zone.
        default_status: The schedule's status when first loaded.
        asset_key: The asset the reports go to.
        name: The schedule's name.
        error_if_tagged_old_versions: Retention: fail on a tagged version older than `older_than` instead of
            keeping it and removing the rest (the default; `build_retention_job`; also op config).

    Returns:
        The schedule (its job is ``mvcc_maintenance__<asset key>``).

    Raises:
        ValueError: A cron that does not parse (naming the table and `cron`), a bad executor or retention
            setting.
    """
    target = MaintenanceTarget(table, asset_key)
    options = options or mvcc.compaction.CompactionOptions()
    executor_def = check_executor(executor, rewrite_steps)
    reserve, rewrite, commit = compaction_ops(
        target,
        options,
        "maintenance__",
        executor=executor,
        rewrite_steps=rewrite_steps,
        spark_resource_key=spark_resource_key,
        signal_indices=optimize_indices,
        version_output=False,  # nothing reads it: the observation carries the version
    )
    index = index_op(target, "", "", "", "optimize", "maintenance__", gated=True) if optimize_indices else None
    cleanup = cleanup_op(
        target,
        older_than,
        retain_versions,
        False,
        "maintenance__",
        delete_unverified,
        output_on_dry_run_only=True,
        error_if_tagged_old_versions=error_if_tagged_old_versions,
    )

    @dg.graph(name=f"mvcc_maintenance__{target.suffix}")
    def maintenance_graph() -> None:
        reserved = reserve.alias("reserve_fragments")()
        work = reserved.result if index is not None else reserved
        if executor == "spark":
            done = rewrite.alias("rewrite_fragments")(work)
        else:
            done = work.map(rewrite.alias("rewrite_fragments")).collect()
        committed = commit.alias("commit_rewrite")(done)
        if index is None:
            cleanup.alias("cleanup_old_versions")(after=committed)
            return
        # optimize_indices runs after the commit and only when the table has an index (the reserve step's
        # optional output); retention waits for both, and runs when the index step is skipped (a fan-in
        # input is skipped only when every source is)
        indexed = index.alias("optimize_indices")(after=committed, due=reserved.indexed)
        cleanup.alias("cleanup_old_versions")(after=[committed, indexed])

    job = maintenance_job(
        maintenance_graph,
        name=f"mvcc_maintenance__{target.suffix}",
        table_tag=target.label,
        description=f"Scheduled maintenance of {target.label}: compaction, index optimize, retention.",
        executor_def=executor_def,
        # its compaction can lose to a concurrent change like the compaction job's
        tags={**RETRY_TAGS, **retention_tags(older_than, retain_versions)},
    )

    def maintain_if_due(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        # A table not written yet (a new deployment's first night) has nothing to maintain: a skipped tick,
        # not a run that fails on TableNotFoundError (seen in benchmarks/week.py's first simulated night).
        resource: MvccResource = getattr(context.resources, RESOURCE_KEY)
        try:
            table = resource.open(target.table)
        except mvcc.TableNotFoundError:
            return dg.SkipReason(f"no table {target.label} yet: nothing to maintain")
        # retention measured to the tick's time, and the run removes to the same cutoff: what the tick saw
        # due is what the run does, however late the run starts (a queue, a run retry)
        tick = context.scheduled_execution_time or datetime.now(UTC)
        work = maintenance_work(
            table,
            options,
            optimize_indices=optimize_indices,
            older_than=older_than,
            retain_versions=retain_versions,
            now=tick,
        )
        if not work:
            return dg.SkipReason(f"{target.label} at version {table.version}: nothing to do ({work.describe()})")
        return dg.RunRequest(run_config=retention_run_config(tick - older_than), tags={"mvcc/work": work.describe()})

    try:
        return dg.ScheduleDefinition(
            name=name or f"mvcc_maintenance_schedule__{target.suffix}",
            cron_schedule=cron,
            job=job,
            execution_fn=maintain_if_due,
            required_resource_keys={RESOURCE_KEY},
            execution_timezone=execution_timezone,
            default_status=default_status,
        )
    except (dg.DagsterInvalidDefinitionError, dg.DagsterInvariantViolationError, ValueError) as exc:
        raise ValueError(f"maintenance schedule of {target.label}: cron {cron!r} does not parse ({exc})") from exc
