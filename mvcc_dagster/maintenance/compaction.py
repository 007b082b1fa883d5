"""The compaction job: the specification's three steps, reserve -> rewrite -> commit, on a chosen executor.

Where the rewrite runs, and why the default is one process: docs/integrations/dagster/maintenance.md ("Compaction,
step by step").
"""

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any

import dagster as dg

import mvcc_core as mvcc

from ..error_mapping import conflict_metadata, mvcc_conflicts, no_retry_failure
from ..metadata import MAINTENANCE_IO_KEY, RESOURCE_KEY
from ..resources import TableName
from .due import RETENTION_STEP, retention_tags
from .retention import cleanup_op
from .target import MaintenanceTarget, maintenance_job, observe

EXECUTORS = ("auto", "in_process", "dagster", "spark")
SPARK_RESOURCE_KEY = "pyspark"
#: Run tags of the jobs that compact: a Rewrite lost to a concurrent change fails the run (retrying the step
#: would lose again), and the daemon's run retries re-plan it from the new version (docs/integrations/dagster/index.md).
RETRY_TAGS = {"dagster/max_retries": "2", "dagster/retry_strategy": "ALL_STEPS"}
DEFAULT_REWRITE_STEPS = 4
"""``executor="auto"``: at most this many rewrite steps (one per `TASKS_PER_AUTO_STEP` tasks)."""
TASKS_PER_AUTO_STEP = 16
"""``executor="auto"``: a rewrite step takes at least this many tasks (when the plan has them)."""


def check_executor(executor: str, rewrite_steps: int | None) -> dg.ExecutorDefinition | None:
    """The Dagster executor of a compaction job, after checking the factory's arguments.

    Args:
        executor: ``"auto"``, ``"in_process"``, ``"dagster"`` or ``"spark"``.
        rewrite_steps: The most rewrite steps (None: the executor's default), a positive int.

    Returns:
        Dagster's in-process executor, or None (the code location's executor) for ``"dagster"``.

    Raises:
        ValueError: An unknown executor or a `rewrite_steps` that is not a positive int.
    """
    if executor not in EXECUTORS:
        raise ValueError(
            f"executor must be one of {EXECUTORS} (auto: one process, the plan's tasks in a few batched steps; "
            f"in_process: one process, a step per task; dagster: the deployment's executor, a step per task; "
            f"spark: the tasks on Spark inside one step), got {executor!r}"
        )
    if rewrite_steps is not None and (
        isinstance(rewrite_steps, bool) or not isinstance(rewrite_steps, int) or rewrite_steps < 1
    ):
        raise ValueError(f"rewrite_steps must be a positive int (the most rewrite steps), got {rewrite_steps!r}")
    if executor == "spark" and rewrite_steps is not None:
        raise ValueError("rewrite_steps is not for executor='spark': Spark runs every task in one step")
    return None if executor == "dagster" else dg.in_process_executor


def batches(
    tasks: Sequence[mvcc.compaction.CompactionTask], max_steps: int, min_tasks_per_step: int = 1
) -> list[list[mvcc.compaction.CompactionTask]]:
    """The plan's tasks dealt, in order, into at most `max_steps` batches of at least `min_tasks_per_step` each.

    Args:
        tasks: The plan's tasks.
        max_steps: The most batches.
        min_tasks_per_step: The fewest tasks a batch takes (a plan of fewer tasks is one batch).

    Returns:
        The batches (none for no task), as even as the counts allow.
    """
    if not tasks:
        return []
    steps = max(1, min(max_steps, len(tasks) // min_tasks_per_step))
    size = math.ceil(len(tasks) / steps)
    return [list(tasks[i : i + size]) for i in range(0, len(tasks), size)]


SCOPE_FIELDS = ("where", "sort_by", "zorder_by", "max_bytes")
"""The reserve step's config: what one run compacts (`CompactionOptions`' fields of the same names)."""


def scope_config(
    options: mvcc.compaction.CompactionOptions | None, scope: Mapping[str, Any] | None = None
) -> dict[str, dg.Field]:
    """The reserve step's config schema, each field's default the job's (`scope`, else `options`', else none:
    the table's policy's).

    Args:
        options: The job's options (None: the table's policy decides what is not in the run config).
        scope: The job's defaults of the fields (`build_compaction_job`'s ``where`` ...), over `options`'.

    Returns:
        ``where``, ``sort_by``, ``zorder_by``, ``max_bytes``.
    """

    def default(name: str) -> Any:
        if scope is not None and scope.get(name) is not None:
            value = scope[name]
        else:
            value = getattr(options, name) if options is not None else None
        return list(value) if isinstance(value, tuple | list) else value

    return {
        "where": dg.Field(
            dg.Noneable(str),
            default_value=default("where"),
            description="A SQL filter: only fragments whose statistics may hold a matching row are rewritten "
            "(e.g. \"day = '2026-11-01'\").",
        ),
        "sort_by": dg.Field(
            dg.Noneable([str]),
            default_value=default("sort_by"),
            description="Rewrite every fragment in scope globally sorted by these columns (clustering).",
        ),
        "zorder_by": dg.Field(
            dg.Noneable([str]),
            default_value=default("zorder_by"),
            description="Rewrite every fragment in scope in z-order of these 2 to 4 columns (clustering).",
        ),
        "max_bytes": dg.Field(
            dg.Noneable(int),
            default_value=default("max_bytes"),
            description="Rewrite about this many on-disk bytes at most (the groups with the most benefit per "
            "byte first); the rest waits for the next run.",
        ),
    }


def run_options(
    options: mvcc.compaction.CompactionOptions | None, config: Mapping[str, Any]
) -> tuple[mvcc.compaction.CompactionOptions | None, dict[str, Any]]:
    """What a run plans with: the job's `options` with the run config's scope over them, or (no options) the
    run config's scope as keywords over the table's policy (`compaction.plan(t, **fields)`).

    A layout in the run config (``sort_by`` or ``zorder_by``) replaces the job's, whichever it was.

    Args:
        options: The job's options.
        config: The reserve step's config (`scope_config`).

    Returns:
        ``(options, {})`` or ``(None, fields)``: the two ways `compaction.plan` takes them.

    Raises:
        ValueError: The fields do not make valid options (both layouts, a z-order of one column, ...).
    """
    given: dict[str, Any] = {name: config[name] for name in SCOPE_FIELDS if config.get(name) is not None}
    for name in ("sort_by", "zorder_by"):
        if name in given:
            given[name] = tuple(given[name])
    if options is None:
        mvcc.compaction.CompactionOptions(**given)  # checked here, in the user's words, before the table is read
        return None, given
    if given.get("sort_by") is not None or given.get("zorder_by") is not None:
        given = {"sort_by": None, "zorder_by": None, **given}
    return dataclasses.replace(options, **given), {}


def _rewrite_metadata(results: Sequence[mvcc.compaction.RewriteResult]) -> dict[str, Any]:
    metrics = mvcc.compaction.summarize(results)
    return {
        "tasks": len(results),
        "fragments_read": metrics.fragments_removed,
        "fragments_written": metrics.fragments_added,
        "rows": metrics.rows,
        "bytes_read": metrics.bytes_read,
        "bytes_written": metrics.bytes_written,
    }


def _reserve(
    context: Any,
    target: MaintenanceTarget,
    options: mvcc.compaction.CompactionOptions | None,
    split: Callable[[Sequence[Any]], list[Any]] | None = None,
) -> tuple[Any, list[Any]]:
    """Plan the compaction of `target` (one ReserveFragments, carrying the run's properties) and report it.

    The plan's options are the job's with the step's config (`run_options`); without options of the job, the
    table's policy (``mvcc.compaction.*``) decides what the config does not give.
    Returns the plan and the work of the rewrite steps: `split(tasks)` (batches), or one task each.
    """
    config = getattr(context, "op_config", None) or {}
    try:
        chosen, fields = run_options(options, config)
    except ValueError as exc:
        raise no_retry_failure(
            f"compaction of {target.label}: the reserve_fragments config ({', '.join(SCOPE_FIELDS)}) is not "
            f"valid: {exc}",
            {"config": dg.MetadataValue.json({k: config.get(k) for k in SCOPE_FIELDS})},
        ) from exc
    t = target.open(context)
    with mvcc_conflicts(context, what=f"compaction of {target.label}"):
        try:
            plan = mvcc.compaction.plan(
                t,
                chosen,
                commit_message=f"dagster: compaction of {target.label} (reserve fragment ids)",
                transaction_properties=target.properties(context, "compaction"),
                **fields,
            )
        except (ValueError, mvcc.errors.PredicateError) as exc:
            raise no_retry_failure(
                f"compaction of {target.label}: the table refuses this compaction ({exc}); check the "
                "reserve_fragments config (where, sort_by, zorder_by, max_bytes) and the table's "
                "mvcc.compaction.* configuration",
                {"config": dg.MetadataValue.json({k: config.get(k) for k in SCOPE_FIELDS})},
            ) from exc
    work = split(plan.tasks) if split is not None else list(plan.tasks)
    if plan.reserved_version is None:
        context.log.info("%s: nothing to compact at version %d", target.label, plan.read_version)
        return plan, work
    metrics = {
        "mvcc/read_version": plan.read_version,
        "tasks": len(plan.tasks),
        "fragments_planned": plan.fragments,
        "fragment_ids_reserved": plan.new_fragment_ids,
        "rewrite_steps": len(work),
        **_scope_metadata(plan.options),
    }
    observe(context, target, t.checkout(plan.reserved_version), metrics)
    return plan, work


def _scope_metadata(options: mvcc.compaction.CompactionOptions) -> dict[str, Any]:
    """What the plan was scoped and laid out by (text; empty when not set)."""
    layout = options.clustering
    return {
        "where": options.where or "",
        "layout": f"{layout[0]} by {', '.join(layout[1])}" if layout is not None else "",
        "max_bytes": options.max_bytes if options.max_bytes is not None else 0,
    }


INDEXED_OUTPUT = "indexed"
"""The reserve op's optional output (with ``signal_indices``): yielded only when the table has an index."""


def _indexed_out(signal_indices: bool) -> dict[str, dg.Out]:
    return {INDEXED_OUTPUT: dg.Out(dg.Nothing, is_required=False)} if signal_indices else {}


def _indexed(signal_indices: bool, state: Any) -> Iterator[dg.Output]:
    """The ``indexed`` output when asked for and the table (at the version the plan read) has an index."""
    if signal_indices and mvcc.Table.from_state(state).list_indices():
        yield dg.Output(None, INDEXED_OUTPUT)


def _flatten(collected: Sequence[Any]) -> list[mvcc.compaction.RewriteResult]:
    """The results of every rewrite step: one result per step (a step per task) or a list (a batch)."""
    return [r for item in collected for r in (item if isinstance(item, list) else [item])]


def _commit(
    context: Any,
    target: MaintenanceTarget,
    options: mvcc.compaction.CompactionOptions | None,
    collected: list[Any],
    partial: bool = False,
) -> Any:
    """The Rewrite of every task's result on the state the tasks read, reported as an observation.

    Without `partial`, one Rewrite of every result: a `RetryableConflictError` (a concurrent delete or update
    of a rewritten fragment) fails the step without a step retry: re-committing the same results loses again,
    so a new run plans again (run retries). With `partial`, `compaction.commit(..., partial=True)`: every
    group (task) that does not conflict lands, the others are dropped (their files removed) and reported in
    the observation (``groups_committed``, ``groups_dropped``, ``dropped_reasons``); the step fails, as
    without it, only when no group landed.
    """
    results = _flatten(collected)
    if not results:
        return None
    read = target.open(context, results[0].read_version)  # the version the tasks read
    what = f"compaction of {target.label}"
    common: dict[str, Any] = {
        "commit_message": f"dagster: compaction of {target.label}",
        "transaction_properties": target.properties(context, "compaction"),
        "defer_index_remap": options.defer_index_remap if options is not None else False,
    }
    extra: dict[str, Any] = {}
    with mvcc_conflicts(context, what=what):
        if partial:
            outcome = mvcc.compaction.commit(read.state, results, partial=True, **common)
            if not outcome.committed:
                raise no_retry_failure(
                    f"{what}: every one of its {len(results)} groups lost to a concurrent commit "
                    f"({'; '.join(dict.fromkeys(outcome.reasons))}); the files it wrote were removed. A new run "
                    "plans again (run retries).",
                    {"groups_dropped": len(outcome.conflicted)},
                )
            committed = outcome.state
            landed = list(outcome.committed)
            extra = {
                "partial_progress": True,
                "groups_committed": len(outcome.committed),
                "groups_dropped": len(outcome.conflicted),
                "dropped_reasons": dg.MetadataValue.json(list(outcome.reasons)),
                "rewrite_versions": dg.MetadataValue.json(list(outcome.versions)),
            }
            if outcome.conflicted:
                context.log.warning(
                    "%s: %d of %d groups lost to concurrent commits and were dropped (%s); the other %d landed",
                    what,
                    len(outcome.conflicted),
                    len(results),
                    "; ".join(dict.fromkeys(outcome.reasons)),
                    len(outcome.committed),
                )
        else:
            try:
                committed = mvcc.compaction.commit(read.state, results, **common)
            except mvcc.RetryableConflictError as exc:
                raise no_retry_failure(
                    f"{what} lost to a concurrent commit ({exc}); the files it wrote were removed. Re-committing "
                    "the same results would lose again, so the job is to be re-planned by a new run (run retries). "
                    "With partial_progress (the commit_rewrite step's config) the groups that do not conflict land.",
                    conflict_metadata(exc),
                ) from exc
            landed = results
    metrics = mvcc.compaction.summarize(landed, read_state=read.state, committed=committed)
    observe(
        context,
        target,
        mvcc.Table.from_state(committed),
        {
            "mvcc/read_version": read.version,
            "fragments_before": metrics.fragments_before,
            "fragments_after": metrics.fragments_after,
            "fragments_removed": metrics.fragments_removed,
            "fragments_added": metrics.fragments_added,
            "rows_rewritten": metrics.rows,
            "bytes_read": metrics.bytes_read,
            "bytes_written": metrics.bytes_written,
            **extra,
        },
    )
    return committed.version


PARTIAL_CONFIG = "partial_progress"


def _commit_config(partial_progress: bool) -> dict[str, dg.Field]:
    return {
        PARTIAL_CONFIG: dg.Field(
            bool,
            default_value=partial_progress,
            description="Commit every group (task) that does not conflict with a concurrent commit and drop "
            "the others (reported), instead of failing the whole Rewrite.",
        )
    }


def _compaction_ops(
    target: MaintenanceTarget,
    options: mvcc.compaction.CompactionOptions | None,
    prefix: str,
    *,
    rewrite_steps: int | None = None,
    min_tasks_per_step: int = 1,
    signal_indices: bool = False,
    version_output: bool = True,
    partial_progress: bool = False,
    scope: Mapping[str, Any] | None = None,
) -> tuple[dg.OpDefinition, dg.OpDefinition, dg.OpDefinition]:
    """The three compaction ops of `target`, composed as ``reserve().map(rewrite).collect()`` -> ``commit``.

    Args:
        target: The table.
        options: The compaction options (None: the table's policy); the reserve op's config (`scope_config`)
            scopes each run.
        prefix: Put before the op names (Dagster refuses two different op definitions of one name in a code
            location, so each job kind has its own).
        rewrite_steps: None: one ``rewrite_fragments`` step per task; an int: the tasks dealt into at most this
            many steps (`batches`), each running its batch on the core's thread pool (`run_tasks`).
        min_tasks_per_step: With `rewrite_steps`, the fewest tasks a step takes.
        signal_indices: Give the reserve op a second, optional output ``indexed`` (`INDEXED_OUTPUT`), yielded
            only when the table has an index: the maintenance schedule's ``optimize_indices`` step waits on
            it, so a table without indices skips that step (a skipped step costs one event, a run step
            about ten).
        version_output: The commit op's output is the committed version (None: nothing committed), stored
            by the pickling IO manager; False: a ``Nothing`` output that only orders the later steps (the
            maintenance schedule's job, where nothing reads it: two events fewer a run, and the observation
            carries the version).
        partial_progress: The default of the commit op's ``partial_progress`` config (`_commit`).
        scope: The defaults of the reserve op's config (`scope_config`), over `options`'.

    Returns:
        The reserve, rewrite and commit ops.
    """

    def split(tasks: Sequence[Any]) -> list[list[Any]]:
        return batches(tasks, rewrite_steps or 1, min_tasks_per_step)

    tasks_out = dg.DynamicOut(io_manager_key=MAINTENANCE_IO_KEY)

    @dg.op(
        name=f"reserve_fragments__{prefix}{target.suffix}",
        required_resource_keys={RESOURCE_KEY},
        pool=target.pool,
        out={"result": tasks_out, **_indexed_out(signal_indices)},
        config_schema=scope_config(options, scope),
    )
    def reserve_fragments(context: dg.OpExecutionContext) -> Iterator[dg.DynamicOutput | dg.Output]:
        if rewrite_steps is None:
            plan, tasks = _reserve(context, target, options)
            yield from (dg.DynamicOutput((t, plan.state), mapping_key=f"task_{i}") for i, t in enumerate(tasks))
        else:
            plan, groups = _reserve(context, target, options, split)
            yield from (
                dg.DynamicOutput((tuple(g), plan.state), mapping_key=f"batch_{i}") for i, g in enumerate(groups)
            )
        yield from _indexed(signal_indices, plan.state)

    @dg.op(name=f"rewrite_fragments__{prefix}{target.suffix}", out=dg.Out(io_manager_key=MAINTENANCE_IO_KEY))
    def rewrite_fragments(context: dg.OpExecutionContext, work: Any) -> dg.Output:
        tasks, state = work
        with mvcc_conflicts(context, what=f"compaction of {target.label}"):
            if isinstance(tasks, tuple):  # a batch: its tasks on threads in this step
                results = mvcc.compaction.run_tasks(tasks, state)
                return dg.Output(results, metadata=_rewrite_metadata(results))
            result = tasks.execute(state)
        return dg.Output(result, metadata=_rewrite_metadata([result]))

    @dg.op(
        name=f"commit_rewrite__{prefix}{target.suffix}",
        required_resource_keys={RESOURCE_KEY},
        pool=target.pool,
        out=dg.Out(io_manager_key=MAINTENANCE_IO_KEY) if version_output else dg.Out(dg.Nothing),
        config_schema=_commit_config(partial_progress),
    )
    def commit_rewrite(context: dg.OpExecutionContext, results: Any) -> int | None:
        committed = _commit(context, target, options, results, bool(context.op_config[PARTIAL_CONFIG]))
        return committed if version_output else None

    return reserve_fragments, rewrite_fragments, commit_rewrite


def _spark_compaction_ops(
    target: MaintenanceTarget,
    options: mvcc.compaction.CompactionOptions | None,
    prefix: str,
    spark_resource_key: str,
    signal_indices: bool = False,
    version_output: bool = True,
    partial_progress: bool = False,
    scope: Mapping[str, Any] | None = None,
) -> tuple[dg.OpDefinition, dg.OpDefinition, dg.OpDefinition]:
    """The compaction ops of `target` whose tasks run on Spark: the same reserve and commit, and one
    ``rewrite_fragments`` step handing every task to the core's `SparkExecutor` on the session of the resource
    `spark_resource_key` (anything with a ``spark_session``: dagster-pyspark's `PySparkResource` or
    `LazyPySparkResource`); `signal_indices` and `version_output` as `_compaction_ops`'."""
    commit_rewrite = _compaction_ops(
        target, options, f"{prefix}spark__", version_output=version_output, partial_progress=partial_progress
    )[2]

    @dg.op(
        name=f"reserve_fragments__{prefix}spark__{target.suffix}",
        required_resource_keys={RESOURCE_KEY},
        pool=target.pool,
        out={"result": dg.Out(io_manager_key=MAINTENANCE_IO_KEY), **_indexed_out(signal_indices)},
        config_schema=scope_config(options, scope),
    )
    def reserve_fragments(context: dg.OpExecutionContext) -> Iterator[dg.Output]:
        plan, tasks = _reserve(context, target, options, lambda tasks: [tasks] if tasks else [])
        yield dg.Output(([t for batch in tasks for t in batch], plan.state), "result")
        yield from _indexed(signal_indices, plan.state)

    @dg.op(
        name=f"rewrite_fragments__{prefix}spark__{target.suffix}",
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
            results = mvcc.compaction.run_tasks(tasks, state, executor=executor)
        return dg.Output(results, metadata={**_rewrite_metadata(results), "spark_method": executor.method})

    return reserve_fragments, rewrite_fragments, commit_rewrite


def compaction_ops(
    target: MaintenanceTarget,
    options: mvcc.compaction.CompactionOptions | None,
    prefix: str,
    *,
    executor: str = "auto",
    rewrite_steps: int | None = None,
    spark_resource_key: str = SPARK_RESOURCE_KEY,
    signal_indices: bool = False,
    version_output: bool = True,
    partial_progress: bool = False,
    scope: Mapping[str, Any] | None = None,
) -> tuple[dg.OpDefinition, dg.OpDefinition, dg.OpDefinition]:
    """The three compaction ops of `target` for `executor` (see `build_compaction_job`).

    Args:
        target: The table.
        options: The compaction options.
        prefix: Put before the op names (each job kind has its own ops).
        executor: ``"auto"``, ``"in_process"``, ``"dagster"`` or ``"spark"``.
        rewrite_steps: The most rewrite steps (None: the executor's default).
        spark_resource_key: With ``"spark"``: the resource whose ``spark_session`` runs the tasks.
        signal_indices: The reserve op also has the optional output `INDEXED_OUTPUT` (`_compaction_ops`).
        version_output: False: the commit op's output is ``Nothing`` (`_compaction_ops`).
        partial_progress: The default of the commit op's ``partial_progress`` config.
        scope: The defaults of the reserve op's config (`scope_config`).

    Returns:
        The reserve, rewrite and commit ops; all but ``"spark"``'s compose as
        ``reserve().map(rewrite).collect()`` -> ``commit``, Spark's as ``commit(rewrite(reserve()))`` (the
        reserve's output ``result``).
    """
    if executor == "spark":
        return _spark_compaction_ops(
            target, options, prefix, spark_resource_key, signal_indices, version_output, partial_progress, scope
        )
    if executor == "auto":
        return _compaction_ops(
            target,
            options,
            prefix,
            rewrite_steps=rewrite_steps or DEFAULT_REWRITE_STEPS,
            min_tasks_per_step=TASKS_PER_AUTO_STEP,
            signal_indices=signal_indices,
            version_output=version_output,
            partial_progress=partial_progress,
            scope=scope,
        )
    return _compaction_ops(
        target,
        options,
        prefix,
        rewrite_steps=rewrite_steps,
        signal_indices=signal_indices,
        version_output=version_output,
        partial_progress=partial_progress,
        scope=scope,
    )


def build_compaction_job(
    table: TableName,
    *,
    options: mvcc.compaction.CompactionOptions | None = None,
    executor: str = "auto",
    rewrite_steps: int | None = None,
    asset_key: TableName | None = None,
    name: str | None = None,
    spark_resource_key: str = SPARK_RESOURCE_KEY,
    older_than: timedelta | None = None,
    retain_versions: int | None = None,
    where: str | None = None,
    sort_by: Sequence[str] | None = None,
    zorder_by: Sequence[str] | None = None,
    max_bytes: int | None = None,
    partial_progress: bool = False,
) -> dg.JobDefinition:
    """A job compacting `table` in the specification's three steps (and, given `older_than`, retention).

    ``reserve_fragments`` (pool of the table) plans with the core's `compaction.plan`, which commits
    ReserveFragments so the new fragments' ids are fixed before any task runs; ``rewrite_fragments`` writes
    the new fragments and commits nothing; ``commit_rewrite`` (pool of the table) lands one Rewrite of every
    result, reported as an observation. Where the rewrite runs is `executor`:

    - ``"auto"`` (default): the whole run in one process (Dagster's in-process executor, whatever the code
      location's default), the plan's tasks dealt into one ``rewrite_fragments[batch_i]`` step per 16 tasks,
      at most `rewrite_steps` (default 4), each running its batch on the core's thread pool. What
      `compact_files()` costs, plus the run's own events.
    - ``"dagster"``: the code location's executor (multiprocess, Kubernetes), one
      ``rewrite_fragments[task_i]`` step per task, or at most `rewrite_steps` batched steps: for tables whose
      tasks take much longer than a step process's start (seconds), spread over processes or pods.
    - ``"in_process"``: one process, one step per task (or at most `rewrite_steps` batched steps).
    - ``"spark"``: one process, every task on Spark in one ``rewrite_fragments`` step (the core's
      `SparkExecutor`), on the session of the resource `spark_resource_key` (default ``pyspark``:
      dagster-pyspark's `PySparkResource`).

    What a run compacts is ``reserve_fragments``' config: ``where`` (a SQL filter: only the fragments that may
    hold a matching row), ``sort_by`` / ``zorder_by`` (rewrite every fragment in scope in that layout) and
    ``max_bytes`` (a budget; the rest waits for the next run), defaulting to this job's; what neither gives
    is the table's policy (its ``mvcc.compaction.*`` configuration), unless `options` fixes it.

    A concurrent delete or update of a rewritten fragment makes the Rewrite lose: the core removes the files
    the tasks wrote and the step fails without a step retry; the job carries ``dagster/max_retries`` and
    ``dagster/retry_strategy: ALL_STEPS``, so run retries plan again. With ``partial_progress``
    (``commit_rewrite``'s config, default this job's `partial_progress`) every group that does not conflict
    lands and only the conflicting ones are dropped, reported in the observation (``groups_committed``,
    ``groups_dropped``, ``dropped_reasons``).

    With `older_than`, a fourth step ``cleanup_old_versions`` (the retention job's op, with its config:
    ``dry_run``, ``delete_unverified``, ``cutoff``) follows ``commit_rewrite``, and the job carries the
    retention tags: the health sensor, when a table needs compaction and has versions to remove, then
    requests this one run instead of a compaction run and a retention run (each run costs Dagster's per-run
    work, docs/operations/running.md). The replaced files stay until their versions leave the window, as always.

    Args:
        table: An asset key or a table uri.
        options: What to compact (default: the table's policy, its ``mvcc.compaction.*`` configuration, then
            the core's defaults, read when each run plans).
        executor: Where the rewrite runs (above).
        rewrite_steps: The most rewrite steps (above); not with ``"spark"``.
        asset_key: The asset the reports go to (default: `table`, or a uri's last segment).
        name: The job's name (default ``mvcc_compaction__<asset key>``).
        spark_resource_key: With ``"spark"``: the resource with the ``spark_session``.
        older_than: Retention after the compaction: versions older than this go (None: no retention step).
        retain_versions: That retention's floor of newest versions (None: none).
        where: The default of the ``where`` config (None: every fragment).
        sort_by: The default of the ``sort_by`` config (None: the table's policy's layout, if any).
        zorder_by: The default of the ``zorder_by`` config (2 to 4 columns; not with `sort_by`).
        max_bytes: The default of the ``max_bytes`` config (None: no budget, or the policy's).
        partial_progress: The default of ``commit_rewrite``'s ``partial_progress`` config.

    Returns:
        The job.

    Raises:
        ValueError: An unknown executor, a `rewrite_steps` that is not a positive int, a retention setting
            out of range, or a scope that does not make valid options (both layouts, ...).
    """
    target = MaintenanceTarget(table, asset_key)
    scope = {
        k: v
        for k, v in {"where": where, "sort_by": sort_by, "zorder_by": zorder_by, "max_bytes": max_bytes}.items()
        if v is not None
    }
    try:
        run_options(options, scope)  # checked now, at definition time, in the user's words
    except ValueError as exc:
        raise ValueError(f"compaction job of {target.label}: {exc}") from exc
    executor_def = check_executor(executor, rewrite_steps)
    job_name = name or f"mvcc_compaction__{target.suffix}"
    reserve_fragments, rewrite_fragments, commit_rewrite = compaction_ops(
        target,
        options,
        "",
        executor=executor,
        rewrite_steps=rewrite_steps,
        spark_resource_key=spark_resource_key,
        partial_progress=partial_progress,
        scope=scope,
    )
    cleanup = None if older_than is None else cleanup_op(target, older_than, retain_versions, False, "compaction__")

    def then_retention(committed: Any) -> None:
        if cleanup is not None:
            cleanup.alias(RETENTION_STEP)(after=committed)

    if executor == "spark":

        @dg.graph(name=job_name)
        def compaction_job() -> None:
            planned = reserve_fragments.alias("reserve_fragments")()
            then_retention(
                commit_rewrite.alias("commit_rewrite")(rewrite_fragments.alias("rewrite_fragments")(planned))
            )

        shape = "rewrite_fragments (every task on Spark)"
    else:

        @dg.graph(name=job_name)
        def compaction_job() -> None:
            work = reserve_fragments.alias("reserve_fragments")()
            results = work.map(rewrite_fragments.alias("rewrite_fragments"))
            then_retention(commit_rewrite.alias("commit_rewrite")(results.collect()))

        shape = "rewrite_fragments (batched)" if executor == "auto" or rewrite_steps else "rewrite_fragments (mapped)"

    return maintenance_job(
        compaction_job,
        name=job_name,
        table_tag=target.label,
        description=f"Compaction of {target.label}: reserve_fragments -> {shape} -> commit_rewrite"
        + ("." if cleanup is None else f" -> cleanup_old_versions (older_than={older_than})."),
        executor_def=executor_def,
        tags={**RETRY_TAGS, **(retention_tags(older_than, retain_versions) if older_than is not None else {})},
    )
