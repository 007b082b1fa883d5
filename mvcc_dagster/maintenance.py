"""Maintenance as Dagster jobs, built by factories: compaction, retention, indices, restore, and a schedule.

Why jobs of ops and not a script: the compaction job's steps are the specification's own
(`reserve_fragments` plans and commits ReserveFragments, `rewrite_fragments` is mapped over the tasks and
commits nothing, `commit_rewrite` lands one Rewrite), so the rewrite work runs on whatever executor the job
uses (multiprocess, Kubernetes) while the commits stay single steps. Every commit is reported on the
table's asset: maintenance as an `AssetObservation` (the data did not change, so downstream assets do not
become stale), a restore as an `AssetMaterialization` (the data did change).

Maintenance on one table never runs twice at once: the steps that commit share a concurrency pool per table
(`mvcc/<asset key>`), the mapped rewrite steps do not (they run in parallel and commit nothing); every job
also carries the run tag `mvcc/table` for run-level limits (docs/dagster.md gives the instance setting).

The ops' own outputs (tasks, rewrite results) go through a pickling IO manager bound by the job under
`mvcc_maintenance_io`, never through the `io_manager` a deployment binds (usually `MvccIOManager`, which
writes tables).
"""

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import dagster as dg

import mvcc_core as mvcc

from .conflicts import conflict_metadata, mvcc_conflicts
from .properties import ASSET_KEY_PROPERTY, MAINTENANCE_PROPERTY, RUN_ID_PROPERTY
from .resources import RESOURCE_KEY, MvccResource, TableName, is_uri, to_asset_key
from .versions import SIZE_BYTES, data_bytes, data_version, table_metadata, uri_value

MAINTENANCE_IO_KEY = "mvcc_maintenance_io"
TABLE_TAG = "mvcc/table"
RESTORED_FROM = "mvcc/restored_from"
EXECUTORS = ("dagster", "in_process", "spark")
SPARK_RESOURCE_KEY = "pyspark"
#: Run tags of the jobs that compact: a Rewrite lost to a concurrent delete fails the run (retrying the step
#: would lose again), and the daemon's run retries re-plan it from the new version (docs/dagster.md).
RETRY_TAGS = {"dagster/max_retries": "2", "dagster/retry_strategy": "ALL_STEPS"}


class MaintenanceTarget:
    """The table a maintenance job works on: its name (asset key or uri), asset key, pool and job suffix."""

    def __init__(self, table: TableName, asset_key: TableName | None = None) -> None:
        if isinstance(table, str) and is_uri(table):
            key = (
                to_asset_key(asset_key)
                if asset_key is not None
                else dg.AssetKey([table.rstrip("/").rsplit("/", 1)[-1]])
            )
        else:
            key = to_asset_key(asset_key if asset_key is not None else table)
        self.table = table
        self.asset_key = key
        self.label = key.to_user_string()
        self.suffix = "__".join(re.sub(r"[^A-Za-z0-9_]", "_", p) for p in key.path)
        # A uri names the table itself: its pool must not collide with another table's of the same basename.
        self.pool = f"mvcc/{table}" if isinstance(table, str) and is_uri(table) else f"mvcc/{self.label}"

    def open(self, context: Any) -> mvcc.Table:
        resource: MvccResource = getattr(context.resources, RESOURCE_KEY)
        with mvcc_conflicts(context, what=f"table {self.label}"):
            return resource.open(self.table)

    def properties(self, context: Any, job: str) -> dict[str, str]:
        """Commit properties: Dagster's (so the version sensor skips these commits) and the maintenance kind."""
        return {RUN_ID_PROPERTY: context.run_id, ASSET_KEY_PROPERTY: self.label, MAINTENANCE_PROPERTY: job}


def maintenance_job(
    graph: dg.GraphDefinition,
    *,
    name: str,
    table_tag: str,
    description: str,
    executor_def: dg.ExecutorDefinition | None = None,
    tags: Mapping[str, str] | None = None,
) -> dg.JobDefinition:
    """A job of `graph` that binds only the pickling IO manager of the ops' outputs and takes ``mvcc`` from
    the code location (or `execute_in_process(resources=)`); `table_tag` is its run tag `TABLE_TAG` (the run
    queue's per-table limit).

    `@dg.job(resource_defs=...)` would demand every resource at definition time (the resource ``mvcc`` is the
    deployment's); Dagster's own `_was_explicitly_provided_resources=False` (internal, no public equivalent in
    1.13) is how its jobs defer the check to `Definitions`, which then binds the top-level resources and keeps
    the job's own IO manager.
    """
    return dg.JobDefinition(
        graph_def=graph,
        name=name,
        description=description,
        resource_defs={MAINTENANCE_IO_KEY: dg.FilesystemIOManager().get_resource_definition()},
        executor_def=executor_def,
        tags={TABLE_TAG: table_tag, **(tags or {})},
        _was_explicitly_provided_resources=False,
    )


def _one_step_job(
    op: dg.OpDefinition, step: str, *, name: str, target: MaintenanceTarget, description: str
) -> dg.JobDefinition:
    """A job of one step: `op` run as `step` (retention, index, restore and tag jobs)."""

    @dg.graph(name=name)
    def graph() -> None:
        op.alias(step)()

    return maintenance_job(graph, name=name, table_tag=target.label, description=description)


def _executor(executor: str) -> dg.ExecutorDefinition | None:
    if executor not in EXECUTORS:
        raise ValueError(
            f"executor must be one of {EXECUTORS} (the Dagster executor the job runs on, one process, or the "
            f"tasks on Spark inside one step), got {executor!r}"
        )
    return dg.in_process_executor if executor == "in_process" else None


def manifest_metrics(table: mvcc.Table) -> dict[str, Any]:
    """Counts of the handle's version read from its manifest (no data file is read)."""
    fragments = table.get_fragments()
    return {
        "mvcc/version": table.version,
        "mvcc/fragments": len(fragments),
        SIZE_BYTES: data_bytes(fragments),
        "dagster/uri": uri_value(table.uri),
    }


def observe(context: Any, target: MaintenanceTarget, table: mvcc.Table, metrics: Mapping[str, Any]) -> None:
    """Report a maintenance commit (version `table.version`) on the table's asset, with its metrics."""
    txn = table.transaction()
    meta = {
        **manifest_metrics(table),
        "mvcc/operation": txn.operation.name if txn is not None else "",
        "mvcc/data_version": data_version(table),
        **metrics,
    }
    context.log_event(dg.AssetObservation(asset_key=target.asset_key, metadata=meta))


# ---- compaction ------------------------------------------------------------------------------------------


def _reserve(context: Any, target: MaintenanceTarget, options: mvcc.CompactionOptions) -> Any:
    """Plan the compaction of `target` (one ReserveFragments, carrying the run's properties) and report it."""
    t = target.open(context)
    with mvcc_conflicts(context, what=f"compaction of {target.label}"):
        plan = mvcc.compaction.plan(
            t,
            options,
            commit_message=f"dagster: compaction of {target.label} (reserve fragment ids)",
            transaction_properties=target.properties(context, "compaction"),
        )
    if not plan.tasks:
        context.log.info("%s: nothing to compact at version %d", target.label, plan.read_version)
        return plan
    # `plan` does not return the ReserveFragments' version: it is the one after the plan's read version that
    # carries this run's id (another run's reservation may land in between when the pools allow it).
    latest = t.checkout_latest()
    reserved = next(
        (
            v
            for v in range(plan.read_version + 1, latest.version + 1)
            if (txn := latest.transaction(v)) is not None
            and txn.operation.name == mvcc.ReserveFragments.name
            and txn.transaction_properties.get(RUN_ID_PROPERTY) == context.run_id
        ),
        None,
    )
    if reserved is not None:
        observe(
            context,
            target,
            latest.checkout(reserved),
            {
                "mvcc/read_version": plan.read_version,
                "tasks": len(plan.tasks),
                "fragments_planned": sum(len(task.fragments) for task in plan.tasks),
                "fragment_ids_reserved": sum(len(task.new_fragment_ids) for task in plan.tasks),
            },
        )
    return plan


def _commit(context: Any, target: MaintenanceTarget, options: mvcc.CompactionOptions, results: list[Any]) -> int | None:
    """One Rewrite of every task's result, reported as an observation (None when there was nothing to do)."""
    if not results:
        return None
    t = target.open(context)
    before = len(t.checkout(results[0].read_version).get_fragments())
    try:
        with mvcc_conflicts(context, what=f"compaction of {target.label}"):
            state = mvcc.compaction.commit(
                t,
                results,
                commit_message=f"dagster: compaction of {target.label}",
                transaction_properties=target.properties(context, "compaction"),
                defer_index_remap=options.defer_index_remap,
            )
    except dg.RetryRequested as retry:
        exc = retry.__cause__
        if not isinstance(exc, mvcc.RetryableConflictError):
            raise
        raise dg.Failure(
            description=(
                f"compaction of {target.label} lost to a concurrent commit ({exc}); the files it wrote were "
                "removed. Re-committing the same results would lose again, so the job is to be re-planned "
                "by a new run (run retries)."
            ),
            metadata=conflict_metadata(exc),
            allow_retries=False,
        ) from exc
    committed = mvcc.Table.from_state(state)
    old = [f for r in results for f in r.old_fragments]
    observe(
        context,
        target,
        committed,
        {
            "mvcc/read_version": results[0].read_version,
            "fragments_before": before,
            "fragments_after": len(committed.get_fragments()),
            "fragments_removed": len(old),
            "fragments_added": sum(len(r.new_fragments) for r in results),
            "rows_rewritten": sum(r.rows for r in results),
            "bytes_read": sum(r.bytes_read for r in results),
            "bytes_written": sum(r.bytes_written for r in results),
        },
    )
    return committed.version


def _compaction_ops(
    target: MaintenanceTarget, options: mvcc.CompactionOptions, prefix: str
) -> tuple[dg.OpDefinition, dg.OpDefinition, dg.OpDefinition]:
    """The three compaction ops of `target` (definition names made unique per table and job kind: Dagster
    refuses two different op definitions of one name in a code location)."""

    @dg.op(
        name=f"reserve_fragments__{prefix}{target.suffix}",
        required_resource_keys={RESOURCE_KEY},
        pool=target.pool,
        out=dg.DynamicOut(io_manager_key=MAINTENANCE_IO_KEY),
    )
    def reserve_fragments(context: dg.OpExecutionContext) -> list[dg.DynamicOutput]:
        plan = _reserve(context, target, options)
        return [dg.DynamicOutput((task, plan.state), mapping_key=f"task_{i}") for i, task in enumerate(plan.tasks)]

    @dg.op(name=f"rewrite_fragments__{prefix}{target.suffix}", out=dg.Out(io_manager_key=MAINTENANCE_IO_KEY))
    def rewrite_fragments(context: dg.OpExecutionContext, task_and_state: Any) -> dg.Output:
        task, state = task_and_state
        with mvcc_conflicts(context, what=f"compaction of {target.label}"):
            result = task.execute(state)
        return dg.Output(
            result,
            metadata={
                "fragments_read": len(result.old_fragments),
                "fragments_written": len(result.new_fragments),
                "rows": result.rows,
                "bytes_read": result.bytes_read,
                "bytes_written": result.bytes_written,
            },
        )

    @dg.op(
        name=f"commit_rewrite__{prefix}{target.suffix}",
        required_resource_keys={RESOURCE_KEY},
        pool=target.pool,
        out=dg.Out(io_manager_key=MAINTENANCE_IO_KEY),
    )
    def commit_rewrite(context: dg.OpExecutionContext, results: Any) -> int | None:
        return _commit(context, target, options, results)

    return reserve_fragments, rewrite_fragments, commit_rewrite


def _spark_compaction_ops(
    target: MaintenanceTarget, options: mvcc.CompactionOptions, spark_resource_key: str
) -> tuple[dg.OpDefinition, dg.OpDefinition, dg.OpDefinition]:
    """The compaction ops of `target` whose tasks run on Spark: the same reserve and commit, and one
    ``rewrite_fragments`` step handing every task to the core's `SparkExecutor` on the session of the resource
    `spark_resource_key` (anything with a ``spark_session``: dagster-pyspark's `PySparkResource` or
    `LazyPySparkResource`)."""
    commit_rewrite = _compaction_ops(target, options, "spark__")[2]

    @dg.op(
        name=f"reserve_fragments__spark__{target.suffix}",
        required_resource_keys={RESOURCE_KEY},
        pool=target.pool,
        out=dg.Out(io_manager_key=MAINTENANCE_IO_KEY),
    )
    def reserve_fragments(context: dg.OpExecutionContext) -> Any:
        plan = _reserve(context, target, options)
        return list(plan.tasks), plan.state

    @dg.op(
        name=f"rewrite_fragments__spark__{target.suffix}",
        required_resource_keys={spark_resource_key},
        out=dg.Out(io_manager_key=MAINTENANCE_IO_KEY),
    )
    def rewrite_fragments(context: dg.OpExecutionContext, planned: Any) -> dg.Output:
        tasks, state = planned
        if not tasks:
            return dg.Output([], metadata={"tasks": 0})
        # imported here: pyspark is needed only by jobs built with executor="spark" (extra `spark`)
        from mvcc_core.spark import SparkExecutor

        spark = getattr(context.resources, spark_resource_key).spark_session
        executor = SparkExecutor(spark)
        context.log.info("%s: %d compaction tasks on Spark (%s)", target.label, len(tasks), executor.method)
        with mvcc_conflicts(context, what=f"compaction of {target.label} on Spark"):
            results = list(executor.map(partial(mvcc.compaction.run_task, state=state), tasks))
        return dg.Output(
            results,
            metadata={
                "tasks": len(tasks),
                "spark_method": executor.method,
                "fragments_read": sum(len(r.old_fragments) for r in results),
                "fragments_written": sum(len(r.new_fragments) for r in results),
                "rows": sum(r.rows for r in results),
                "bytes_read": sum(r.bytes_read for r in results),
                "bytes_written": sum(r.bytes_written for r in results),
            },
        )

    return reserve_fragments, rewrite_fragments, commit_rewrite


def build_compaction_job(
    table: TableName,
    *,
    options: mvcc.CompactionOptions | None = None,
    executor: str = "dagster",
    asset_key: TableName | None = None,
    name: str | None = None,
    spark_resource_key: str = SPARK_RESOURCE_KEY,
) -> dg.JobDefinition:
    """A job compacting `table` in the specification's three steps.

    - ``reserve_fragments`` (pool of the table): plans with the core's `compaction.plan` (which commits
      ReserveFragments so the new fragments' ids are fixed before any task runs) and emits one dynamic output
      per task carrying the picklable task and the plan's `TableState`;
    - ``rewrite_fragments[task_i]`` (no pool, mapped): `CompactionTask.execute` writes the task's fragments and
      commits nothing, on whatever executor the job runs (``executor="dagster"``: the deployment's, by default
      multiprocess; ``"in_process"``: one process);
    - ``commit_rewrite`` (pool of the table): one Rewrite of every result, reported as an observation.

    With ``executor="spark"`` the tasks run on Spark instead, inside one ``rewrite_fragments`` step (the
    core's `SparkExecutor`: one Spark task per compaction task) on the session of the resource
    `spark_resource_key` (default ``pyspark``: dagster-pyspark's `PySparkResource`); ``reserve_fragments``
    passes it the whole plan, and the ReserveFragments and the one Rewrite are committed as above.

    A concurrent delete or update of a rewritten fragment makes the Rewrite lose (RetryableConflictError): the
    core removes the files the tasks wrote, and the step fails without a step retry (re-committing the same
    results can only lose again); the job is re-planned by a new run (run retries: the job carries
    ``dagster/max_retries`` and ``dagster/retry_strategy: ALL_STEPS``). Other errors go through the plugin's
    mapping (`mvcc_conflicts`).
    """
    target = MaintenanceTarget(table, asset_key)
    options = options or mvcc.CompactionOptions()
    executor_def = _executor(executor)
    job_name = name or f"mvcc_compaction__{target.suffix}"
    if executor == "spark":
        reserve_fragments, rewrite_fragments, commit_rewrite = _spark_compaction_ops(
            target, options, spark_resource_key
        )

        @dg.graph(name=job_name)
        def compaction_job() -> None:
            planned = reserve_fragments.alias("reserve_fragments")()
            commit_rewrite.alias("commit_rewrite")(rewrite_fragments.alias("rewrite_fragments")(planned))

        shape = "rewrite_fragments (every task on Spark)"
    else:
        reserve_fragments, rewrite_fragments, commit_rewrite = _compaction_ops(target, options, "")

        @dg.graph(name=job_name)
        def compaction_job() -> None:
            tasks = reserve_fragments.alias("reserve_fragments")()
            results = tasks.map(rewrite_fragments.alias("rewrite_fragments"))
            commit_rewrite.alias("commit_rewrite")(results.collect())

        shape = "rewrite_fragments (mapped)"

    return maintenance_job(
        compaction_job,
        name=job_name,
        table_tag=target.label,
        description=f"Compaction of {target.label}: reserve_fragments -> {shape} -> commit_rewrite.",
        executor_def=executor_def,
        tags=RETRY_TAGS,
    )


# ---- retention -------------------------------------------------------------------------------------------


def _cleanup_metadata(stats: mvcc.CleanupStats, *, dry_run: bool) -> dict[str, Any]:
    return {
        "dry_run": dry_run,
        "versions_removed": stats.old_versions,
        "removed_versions": dg.MetadataValue.json(list(stats.removed_versions)),
        "bytes_removed": stats.bytes_removed,
        "data_files_removed": stats.data_files_removed,
        "deletion_files_removed": stats.deletion_files_removed,
        "transaction_files_removed": stats.transaction_files_removed,
        "index_files_removed": stats.index_files_removed,
        "unverified_files_removed": stats.unverified_files_removed,
        "bad_tags": dg.MetadataValue.json(dict(stats.bad_tags)),
    }


def _cleanup_op(
    target: MaintenanceTarget,
    older_than: timedelta,
    retain_versions: int | None,
    dry_run: bool,
    prefix: str,
    delete_unverified: bool = False,
) -> dg.OpDefinition:
    """The retention op of `target`; its `after` input (Nothing) orders it after compaction in the schedule.

    :param target: the table
    :param older_than: versions older than this go (`Table.cleanup_old_versions`)
    :param retain_versions: keep at least the newest this many versions (None: no such floor)
    :param dry_run: the default of the op's `dry_run` config
    :param prefix: put before the op's name (the schedule's job has its own ops)
    :param delete_unverified: the default of the op's `delete_unverified` config
    """
    if not isinstance(delete_unverified, bool):
        raise TypeError(f"retention of {target.label}: delete_unverified must be a bool, got {delete_unverified!r}")
    if not isinstance(older_than, timedelta) or older_than < timedelta(0):
        raise ValueError(
            f"retention of {target.label}: older_than must be a non-negative timedelta, got {older_than!r}"
        )
    if retain_versions is not None and (isinstance(retain_versions, bool) or retain_versions < 1):
        raise ValueError(
            f"retention of {target.label}: retain_versions must be a positive int, got {retain_versions!r}"
        )

    @dg.op(
        name=f"cleanup_old_versions__{prefix}{target.suffix}",
        required_resource_keys={RESOURCE_KEY},
        pool=target.pool,
        ins={"after": dg.In(dg.Nothing)},
        config_schema={
            "dry_run": dg.Field(bool, default_value=dry_run),
            "delete_unverified": dg.Field(bool, default_value=delete_unverified),
        },
        out=dg.Out(io_manager_key=MAINTENANCE_IO_KEY),
    )
    def cleanup(context: dg.OpExecutionContext) -> dg.Output:
        dry = bool(context.op_config["dry_run"])
        t = target.open(context)
        with mvcc_conflicts(context, what=f"retention of {target.label} (older_than / retain_versions)"):
            stats = t.cleanup_old_versions(
                older_than,
                retain_versions,
                delete_unverified=bool(context.op_config["delete_unverified"]),
                dry_run=dry,
            )
        meta = _cleanup_metadata(stats, dry_run=dry)
        if not dry:
            observe(context, target, t.checkout_latest(), {**meta, "mvcc/operation": "Cleanup"})
        return dg.Output(list(stats.removed_versions), metadata=meta)

    return cleanup


def build_retention_job(
    table: TableName,
    *,
    older_than: timedelta = timedelta(days=14),
    retain_versions: int | None = None,
    dry_run: bool = False,
    delete_unverified: bool = False,
    asset_key: TableName | None = None,
    name: str | None = None,
) -> dg.JobDefinition:
    """A job removing old versions (`Table.cleanup_old_versions`; the latest and tagged versions are kept).

    `delete_unverified` has the core's meaning: files no version references (left by a killed or failed
    writer) are removed even when younger than the 7-day unverified window; otherwise they are kept until
    older. Like `dry_run` it is also op config (``config: {delete_unverified: true}``). A writer between
    writing its files and committing loses them with it: run it only when no writer is at work.

    A dry run reports what it would remove as the step's output metadata (visible in the run, not only in
    logs) and records nothing on the asset; a real run reports what it removed as an observation. `dry_run`
    is also op config (``ops: {cleanup_old_versions: {config: {dry_run: true}}}``), so one job serves both.
    A retention that would pass over a tagged version fails naming the table and the tags (nothing removed).
    """
    target = MaintenanceTarget(table, asset_key)
    cleanup = _cleanup_op(target, older_than, retain_versions, dry_run, "", delete_unverified)

    return _one_step_job(
        cleanup,
        "cleanup_old_versions",
        name=name or f"mvcc_retention__{target.suffix}",
        target=target,
        description=(
            f"Retention of {target.label}: older_than={older_than}, retain_versions={retain_versions}, "
            f"delete_unverified={delete_unverified}."
        ),
    )


# ---- indices ---------------------------------------------------------------------------------------------


def _unindexed_fragments(table: mvcc.Table, index_name: str) -> int | None:
    """Fragments the index named `index_name` does not cover (every index summed when the name is empty)."""
    found = [
        i
        for i in table.list_indices()
        if "num_unindexed_fragments" in i and (not index_name or i["name"] == index_name)
    ]
    return sum(int(i["num_unindexed_fragments"]) for i in found) if found else None


def _index_op(
    target: MaintenanceTarget, column: str, index_type: str, idx: str, mode: str, prefix: str
) -> dg.OpDefinition:
    """The index op of `target` (default `mode`: create, or optimize in the schedule)."""

    @dg.op(
        name=f"create_index__{prefix}{target.suffix}__{re.sub(r'[^A-Za-z0-9_]', '_', idx)}",
        required_resource_keys={RESOURCE_KEY},
        pool=target.pool,
        ins={"after": dg.In(dg.Nothing)},
        config_schema={"mode": dg.Field(str, default_value=mode, description="create | optimize")},
        out=dg.Out(io_manager_key=MAINTENANCE_IO_KEY),
    )
    def create_index(context: dg.OpExecutionContext) -> int:
        mode = context.op_config["mode"]
        if mode not in ("create", "optimize"):
            raise dg.Failure(f"index job of {target.label}: mode must be 'create' or 'optimize', got {mode!r}")
        t = target.open(context)
        before = _unindexed_fragments(t, idx)
        props = target.properties(context, f"index:{mode}")
        with mvcc_conflicts(context, what=f"index {idx} of {target.label} (column {column!r}, {index_type})"):
            if mode == "create":
                t.create_index(column, index_type, name=idx, transaction_properties=props)
                updated = 1
            else:
                start = t.version
                updated = t.optimize.optimize_indices(transaction_properties=props)
                if t.version == start:
                    context.log.info("%s: every index is up to date", target.label)
                    return 0
        observe(
            context,
            target,
            t,
            {
                "index": idx,
                "column": column,
                "index_type": index_type,
                "mode": mode,
                "indices_updated": updated,
                "unindexed_fragments_before": before if before is not None else len(t.get_fragments()),
                "unindexed_fragments_after": _unindexed_fragments(t, idx) or 0,
            },
        )
        return updated

    return create_index


def build_index_job(
    table: TableName,
    column: str,
    index_type: str = "BTREE",
    *,
    index_name: str | None = None,
    asset_key: TableName | None = None,
    name: str | None = None,
) -> dg.JobDefinition:
    """A job creating the `index_type` index on `column` (``mode: create``, the default) or bringing every
    index up to date with the fragments added or rewritten since it was built (``mode: optimize``, op config
    of the ``create_index`` step: what the maintenance schedule runs after a compaction). One CreateIndex,
    reported as an observation with the fragments left unindexed before and after."""
    target = MaintenanceTarget(table, asset_key)
    idx = index_name or f"{column}_idx"

    create_index = _index_op(target, column, index_type, idx, "create", "")

    return _one_step_job(
        create_index,
        "create_index",
        name=name or f"mvcc_index__{target.suffix}__{re.sub(r'[^A-Za-z0-9_]', '_', idx)}",
        target=target,
        description=f"Index {idx} ({index_type} on {column}) of {target.label}.",
    )


def build_index_optimize_job(
    table: TableName, *, asset_key: TableName | None = None, name: str | None = None
) -> dg.JobDefinition:
    """A job bringing every index of `table` up to date with the fragments added or rewritten since it was
    built (one ``optimize_indices`` step, one CreateIndex when any index changed, reported as an observation).

    Why a job of its own: it needs no run config (`build_index_job`'s default mode is ``create``, which fails
    on an index that exists), so a sensor can request it as it is — the health sensor's repair for
    ``unindexed_rows``.
    """
    target = MaintenanceTarget(table, asset_key)
    optimize = _index_op(target, "", "", "", "optimize", "optimize__")
    return _one_step_job(
        optimize,
        "optimize_indices",
        name=name or f"mvcc_index_optimize__{target.suffix}",
        target=target,
        description=f"Bring every index of {target.label} up to date (optimize_indices).",
    )


# ---- restore ---------------------------------------------------------------------------------------------


def _restore_ref(label: str, config: Mapping[str, Any]) -> int | str | datetime:
    given = {k: config.get(k) for k in ("version", "tag", "timestamp") if config.get(k) is not None}
    if len(given) != 1:
        raise dg.Failure(
            description=(
                f"restore of {label}: run config must give exactly one of version, tag or timestamp "
                f"(ISO 8601 with an offset), got {sorted(given) or 'none'}"
            ),
            allow_retries=False,
        )
    ((key, value),) = given.items()
    if key != "timestamp":
        return value
    try:
        when = datetime.fromisoformat(value)
    except ValueError as exc:
        raise dg.Failure(
            description=f"restore of {label}: timestamp {value!r} is not ISO 8601 ({exc})", allow_retries=False
        ) from exc
    if when.tzinfo is None:
        raise dg.Failure(
            description=f"restore of {label}: timestamp {value!r} has no UTC offset (write it as ...Z or +00:00)",
            allow_retries=False,
        )
    return when.astimezone(UTC)


def build_restore_job(
    table: TableName, *, asset_key: TableName | None = None, name: str | None = None
) -> dg.JobDefinition:
    """A job making an older version the latest again (one Restore commit; history is kept).

    Run config: ``ops: {restore: {config: {version: 3}}}`` or ``tag: "good"`` or ``timestamp:
    "2026-11-20T08:00:00+00:00"`` (the version current then), exactly one. The restore changes what readers
    see, so it is reported as a materialization of the table's asset (downstream assets become stale) with
    `mvcc/restored_from` and a new data version.
    """
    target = MaintenanceTarget(table, asset_key)

    @dg.op(
        name=f"restore__{target.suffix}",
        required_resource_keys={RESOURCE_KEY},
        pool=target.pool,
        config_schema={
            "version": dg.Field(dg.Noneable(int), default_value=None),
            "tag": dg.Field(dg.Noneable(str), default_value=None),
            "timestamp": dg.Field(dg.Noneable(str), default_value=None, description="ISO 8601 with an offset"),
        },
        out=dg.Out(io_manager_key=MAINTENANCE_IO_KEY),
    )
    def restore(context: dg.OpExecutionContext) -> int:
        ref = _restore_ref(target.label, context.op_config)
        t = target.open(context)
        with mvcc_conflicts(context, what=f"restore of {target.label} to {ref!r}"):
            source = t.checkout(ref).version
            read_version = t.version
            t.restore(
                source,
                commit_message=f"dagster: restore of {target.label} to version {source}",
                transaction_properties=target.properties(context, "restore"),
            )
        meta = table_metadata(t, table_name=target.label, read_version=read_version)
        context.log_event(
            dg.AssetMaterialization(
                asset_key=target.asset_key,
                metadata={**meta, RESTORED_FROM: source},
                tags={"dagster/data_version": str(meta["mvcc/data_version"])},
            )
        )
        return t.version

    return _one_step_job(
        restore,
        "restore",
        name=name or f"mvcc_restore__{target.suffix}",
        target=target,
        description=f"Restore {target.label} to a version, tag or timestamp (run config of the restore step).",
    )


# ---- schedule --------------------------------------------------------------------------------------------


def build_maintenance_schedule(
    table: TableName,
    cron: str = "0 3 * * *",
    *,
    options: mvcc.CompactionOptions | None = None,
    optimize_indices: bool = True,
    older_than: timedelta = timedelta(days=14),
    retain_versions: int | None = None,
    execution_timezone: str = "UTC",
    default_status: dg.DefaultScheduleStatus = dg.DefaultScheduleStatus.STOPPED,
    asset_key: TableName | None = None,
    name: str | None = None,
) -> dg.ScheduleDefinition:
    """A schedule running one maintenance job of `table` on `cron`: compaction (the same three steps), then
    ``optimize_indices`` (rewritten fragments back into the indices), then ``cleanup_old_versions``.

    One job rather than three so the order holds: retention after the Rewrite removes the replaced files
    once they are old enough, and the index catches up with the new fragments before readers miss it. An
    empty compaction still runs the later steps (a dynamic output of no tasks gives `commit_rewrite` an empty
    list). Default stopped, as Dagster's schedules are. A tick skips (no run) while the table does not exist
    yet. A cron that does not parse fails here, naming the table and `cron`.
    """
    target = MaintenanceTarget(table, asset_key)
    options = options or mvcc.CompactionOptions()
    reserve, rewrite, commit = _compaction_ops(target, options, "maintenance__")
    index = _index_op(target, "", "", "", "optimize", "maintenance__") if optimize_indices else None
    cleanup = _cleanup_op(target, older_than, retain_versions, False, "maintenance__")

    @dg.graph(name=f"mvcc_maintenance__{target.suffix}")
    def maintenance_graph() -> None:
        done = reserve.alias("reserve_fragments")().map(rewrite.alias("rewrite_fragments")).collect()
        committed = commit.alias("commit_rewrite")(done)
        if index is not None:
            committed = index.alias("optimize_indices")(after=committed)
        cleanup.alias("cleanup_old_versions")(after=committed)

    job = maintenance_job(
        maintenance_graph,
        name=f"mvcc_maintenance__{target.suffix}",
        table_tag=target.label,
        description=f"Scheduled maintenance of {target.label}: compaction, index optimize, retention.",
        tags=RETRY_TAGS,  # its compaction can lose to a concurrent delete like the compaction job's
    )

    def maintain_if_present(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        # A table not written yet (a new deployment's first night) has nothing to maintain: a skipped tick,
        # not a run that fails on TableNotFoundError (seen in benchmarks/week.py's first simulated night).
        resource: MvccResource = getattr(context.resources, RESOURCE_KEY)
        try:
            resource.open(target.table)
        except mvcc.TableNotFoundError:
            return dg.SkipReason(f"no table {target.label} yet: nothing to maintain")
        return dg.RunRequest()

    try:
        return dg.ScheduleDefinition(
            name=name or f"mvcc_maintenance_schedule__{target.suffix}",
            cron_schedule=cron,
            job=job,
            execution_fn=maintain_if_present,
            required_resource_keys={RESOURCE_KEY},
            execution_timezone=execution_timezone,
            default_status=default_status,
        )
    except (dg.DagsterInvalidDefinitionError, dg.DagsterInvariantViolationError, ValueError) as exc:
        raise ValueError(f"maintenance schedule of {target.label}: cron {cron!r} does not parse ({exc})") from exc


# ---- tags ------------------------------------------------------------------------------------------------


def build_tag_job(table: TableName, *, asset_key: TableName | None = None, name: str | None = None) -> dg.JobDefinition:
    """A job creating, moving or deleting a tag of `table` (run config of the ``tag`` step: ``action``
    create | update | delete, ``tag``, and ``version`` for create / update, default the latest).

    Why a job: a tag pins a version against retention (retention refuses to pass over a tagged version), so
    tagging before a risky backfill and restoring to the tag are both one click in the UI. A tag is not a
    commit: it is reported as an observation with `mvcc/tag` and `mvcc/tagged_version`, not a new version.
    """
    target = MaintenanceTarget(table, asset_key)

    @dg.op(
        name=f"tag__{target.suffix}",
        required_resource_keys={RESOURCE_KEY},
        pool=target.pool,
        config_schema={
            "action": dg.Field(str, default_value="create", description="create | update | delete"),
            "tag": dg.Field(str),
            "version": dg.Field(dg.Noneable(int), default_value=None, description="default: the latest"),
        },
        out=dg.Out(io_manager_key=MAINTENANCE_IO_KEY),
    )
    def tag(context: dg.OpExecutionContext) -> int | None:
        action, name_, version = (context.op_config[k] for k in ("action", "tag", "version"))
        if action not in ("create", "update", "delete"):
            raise dg.Failure(
                f"tag job of {target.label}: action must be create, update or delete, got {action!r}",
                allow_retries=False,
            )
        t = target.open(context)
        with mvcc_conflicts(context, what=f"tag {name_!r} of {target.label} ({action})"):
            if action == "delete":
                try:
                    version = t.tags.get_version(name_)
                except mvcc.CorruptTagError:
                    version = None  # a tag whose file does not read is deleted all the same
                t.tags.delete(name_)
            else:
                version = t.version if version is None else version
                getattr(t.tags, action)(name_, version)
        context.log_event(
            dg.AssetObservation(
                asset_key=target.asset_key,
                metadata={"mvcc/tag": name_, "mvcc/tag_action": action, "mvcc/tagged_version": version},
            )
        )
        return version

    return _one_step_job(
        tag,
        "tag",
        name=name or f"mvcc_tag__{target.suffix}",
        target=target,
        description=f"Create, move or delete a tag of {target.label} (run config of the tag step).",
    )
