"""Fleet maintenance: one nightly plan over many tables on one budget, as a Dagster schedule and the job it runs.

Each tick plans every table it manages with the core's `plan_fleet` (advice ranked by benefit per byte, the byte
budget and the run limit filled greedily, quiet hours in a zone) and requests one run of the fleet job per chosen
table, highest rank first. What does not fit is carried to the next night and named in the tick's log (or its
skip reason when nothing runs); idle tables request nothing; a table that cannot be opened is reported and the
others are planned. Why one job with one run per table, and how a run is never requested twice for one table
version: docs/integrations/dagster/fleet.md.
"""

from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, cast

import dagster as dg
from pydantic import Field

import mvcc_core as mvcc
from mvcc_core.compaction import FleetEntry, FleetPlan, QuietHours, plan_fleet

from .._dagster_internals import deferred_resources_job, reuse_sensor_resources
from ..metadata import RESOURCE_KEY, TABLE_TAG
from ..resources import MvccResource, TableName, is_uri
from .compaction import RETRY_TAGS
from .target import MaintenanceTarget, observe

__all__ = [
    "FLEET_BYTES_TAG",
    "FLEET_RANK_TAG",
    "FLEET_TAG",
    "MAINTAIN_STEP",
    "FleetTableConfig",
    "build_fleet_maintenance",
    "fleet_run_key",
]

FLEET_TAG = "mvcc/fleet"
"""Run tag of every run a fleet schedule requests: the schedule's name."""
FLEET_RANK_TAG = "mvcc/fleet_rank"
"""Run tag: the table's rank in the tick's plan (1 = the most benefit per byte)."""
FLEET_BYTES_TAG = "mvcc/fleet_bytes"
"""Run tag: the bytes the run's compaction may read (its share of the budget; 0 = no compaction)."""
MAINTAIN_STEP = "maintain_table"
"""The fleet job's one step."""
RUN_KEY_TAG = "dagster/run_key"
"""Where the daemon stores a run request's `run_key` on the run it creates (Dagster's tag)."""
_COMPACTION_KINDS = ("compact", "materialize_deletions")
_KINDS = (*_COMPACTION_KINDS, "optimize_indices", "retention")
_IDLE = ("nothing_advised",)


def fleet_run_key(uri: str, version: int | None) -> str:
    """The run key of a fleet run: one table version is maintained by at most one run.

    Args:
        uri: The table's uri.
        version: The version the plan advised on.

    Returns:
        ``mvcc-fleet:<uri>@v<version>``.
    """
    return f"mvcc-fleet:{uri}@v{version}"


class FleetTableConfig(dg.Config):
    """The config of the fleet job's step: which table, and what the plan gave it.

    A run started by hand needs only `table`: the step then does what the table's advice says now, without a
    byte bound beyond the table's own policy.
    """

    table: str = Field(description="The table's name in the fleet: its asset key (a/b) or its uri.")
    max_bytes: int = Field(
        default=0, description="The most on-disk bytes the compaction reads (its share of the night's budget; 0: none)."
    )
    kinds: list[str] = Field(
        default=[],
        description="The advice to act on: compact, materialize_deletions, optimize_indices, retention "
        "(empty: the table's advice when the step runs).",
    )
    planned_version: int = Field(default=-1, description="The version the plan advised on (-1: not planned).")
    rank: int = Field(default=0, description="The table's rank in the plan (0: not planned).")


def _maintain(context: Any, target: MaintenanceTarget, config: FleetTableConfig) -> dict[str, Any]:
    """The advised steps on one table, each its own try; returns the observation's metadata, with ``errors``."""
    unknown = sorted(set(config.kinds) - set(_KINDS))
    if unknown:
        raise dg.Failure(
            f"kinds {', '.join(map(repr, unknown))} of table {target.label} are not advice kinds: give some of "
            f"{', '.join(_KINDS)} (or none: the table's advice when the step runs)",
            allow_retries=False,
        )
    table = target.open(context)
    kinds = set(config.kinds) or {a.kind for a in mvcc.compaction.recommend(table)}
    done: list[str] = []
    errors: dict[str, str] = {}
    meta: dict[str, Any] = {
        "mvcc/fleet_rank": config.rank,
        "mvcc/fleet_planned_version": config.planned_version,
        "mvcc/fleet_bytes": config.max_bytes,
        "mvcc/read_version": table.version,
    }

    def step(name: str, fn: Any) -> Any:
        try:
            out = fn()
        except Exception as exc:  # noqa: BLE001 - one step failing does not stop the others; the run then fails
            context.log.warning("%s: %s failed: %s: %s", target.label, name, type(exc).__name__, exc)
            errors[name] = f"{type(exc).__name__}: {exc}"
            return None
        done.append(name)
        return out

    if kinds & set(_COMPACTION_KINDS):
        metrics = step(
            "compact",
            lambda: table.optimize.compact_files(
                max_bytes=config.max_bytes or None,
                commit_message=f"dagster: fleet compaction of {target.label}",
                transaction_properties=target.properties(context, "compaction"),
            ),
        )
        if metrics is not None:
            meta.update(
                {
                    "fragments_removed": metrics.fragments_removed,
                    "fragments_added": metrics.fragments_added,
                    "rows_rewritten": metrics.rows,
                    "bytes_read": metrics.bytes_read,
                    "bytes_written": metrics.bytes_written,
                    "deferred_bytes": metrics.deferred_bytes,
                }
            )
    if "optimize_indices" in kinds:
        updated = step(
            "optimize_indices",
            lambda: table.optimize.optimize_indices(
                commit_message=f"dagster: fleet index optimize of {target.label}",
                transaction_properties=target.properties(context, "index:optimize"),
            ),
        )
        if updated is not None:
            meta["indices_updated"] = updated
    if "retention" in kinds:
        # the table's retention policy; a tagged old version is kept and the rest removed
        stats = step("retention", lambda: table.cleanup_old_versions(error_if_tagged_old_versions=False))
        if stats is not None:
            meta.update({"versions_removed": stats.old_versions, "bytes_removed": stats.bytes_removed})
    meta["mvcc/fleet_steps"] = ", ".join(done) or "none"
    observe(context, target, table, meta)
    meta["errors"] = errors
    return meta


def _fleet_job(name: str, targets: Mapping[str, MaintenanceTarget], tags: Mapping[str, str]) -> dg.JobDefinition:
    """The job a fleet schedule requests runs of: one step, `MAINTAIN_STEP`, on the table its config names."""

    @dg.op(
        name=f"{MAINTAIN_STEP}__{name}",
        required_resource_keys={RESOURCE_KEY},
        description="Compaction (within the run's byte share), index optimize and retention of one table of the "
        "fleet, as its plan advised; each under the table's own policy.",
    )
    def maintain_table(context: dg.OpExecutionContext, config: FleetTableConfig) -> None:
        target = targets.get(config.table)
        if target is None:
            raise dg.Failure(
                f"table {config.table!r} is not one of this fleet's tables ({', '.join(sorted(targets)[:10])}"
                + (", ..." if len(targets) > 10 else "")
                + "): give its name as the fleet lists it",
                allow_retries=False,
            )
        meta = _maintain(context, target, config)
        if meta["errors"]:
            raise dg.Failure(
                f"fleet maintenance of {target.label}: {', '.join(meta['errors'])} failed (the other steps ran)",
                metadata={step: dg.MetadataValue.text(why) for step, why in meta["errors"].items()},
            )

    @dg.graph(name=name)
    def fleet_graph() -> None:
        maintain_table.alias(MAINTAIN_STEP)()

    return deferred_resources_job(
        graph_def=fleet_graph,
        name=name,
        description=f"Maintenance of one table of the fleet {name} (one run per table, tagged {TABLE_TAG}).",
        executor_def=dg.in_process_executor,  # one step: a step process would cost more than the step
        tags={**RETRY_TAGS, **tags},
    )


def _requested(context: dg.ScheduleEvaluationContext, job_name: str, keys: Mapping[str, str]) -> dict[str, str]:
    """Of `keys` (table -> run key), the tables a run of `job_name` was created for already: table -> run id.

    The tick's instance is built (from its reference, tens of ms in the daemon) only when some table is
    advised; a context without a persistent instance deduplicates nothing. The run named is the newest
    with the key."""
    if not keys:
        return {}
    try:
        instance = context.instance
    except dg.DagsterInvariantViolationError:
        return {}
    by_key = {key: name for name, key in keys.items()}
    found: dict[str, str] = {}
    # one query for every advised table (a tag filter with a list of values is SQL's IN)
    for run in instance.get_runs(dg.RunsFilter(job_name=job_name, tags={RUN_KEY_TAG: list(by_key)})):
        name = by_key.get(run.tags.get(RUN_KEY_TAG, ""))
        if name is not None and name not in found:
            found[name] = run.run_id
    return found


def _left_lines(plan: FleetPlan, requested: Mapping[str, tuple[FleetEntry, str]]) -> list[str]:
    """The tables not requested, each with why (idle tables counted, not listed)."""
    lines = [
        f"{name}: already requested at version {entry.version} (run {run_id}), not requested again"
        for name, (entry, run_id) in sorted(requested.items())
    ]
    idle = 0
    for entry in plan.left:
        if entry.reason in _IDLE:
            idle += 1
        else:
            assert entry.reason is not None
            lines.append(f"{entry.name}: {entry.reason.replace('_', ' ')}: {entry.detail}")
    if idle:
        lines.append(f"{idle} table(s) with nothing to do")
    return lines


def _sources(resource: MvccResource, targets: Mapping[str, MaintenanceTarget]) -> dict[str, Any]:
    """What `plan_fleet` reads: each table's uri (opened by the plan, on its threads when the store is remote),
    or with an external commit store a handle opened through the resource (a table that does not open is given
    as its uri, and the plan reports it)."""
    if resource.external_store is None:
        return {name: resource.uri(t.table) for name, t in targets.items()}

    def one(target: MaintenanceTarget) -> Any:
        try:
            return resource.open(target.table)
        except Exception:  # noqa: BLE001 - the plan opens it again and reports why it cannot
            return resource.uri(target.table)

    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="mvcc-fleet-open") as pool:
        handles = list(pool.map(one, targets.values()))
    return dict(zip(targets, handles, strict=True))


def _merged(again: FleetPlan, first: FleetPlan, replanned: set[str]) -> FleetPlan:
    """The second plan, with the first's entries of the tables it did not plan again (idle, broken)."""
    kept = tuple(e for e in first.left if e.name not in replanned)
    return FleetPlan(
        planned_at=again.planned_at,
        chosen=again.chosen,
        left=(*again.left, *kept),
        max_bytes=again.max_bytes,
        max_tables=again.max_tables,
        window=again.window,
        window_closes=again.window_closes,
        next_window=again.next_window,
        seconds=first.seconds + again.seconds,
    )


def _request(entry: FleetEntry, target: MaintenanceTarget, tags: Mapping[str, str]) -> dg.RunRequest:
    """The run of one chosen table: its share and advice in the config, its table in the tags."""
    share = entry.byte_share or 0
    config = FleetTableConfig(
        table=entry.name,
        max_bytes=share,
        kinds=list(entry.kinds),
        planned_version=entry.version if entry.version is not None else -1,
        rank=entry.rank or 0,
    )
    return dg.RunRequest(
        run_key=fleet_run_key(entry.uri, entry.version),
        run_config={"ops": {MAINTAIN_STEP: {"config": config.model_dump()}}},
        tags={
            **tags,
            TABLE_TAG: target.label,  # the per-table jobs' tag: one queue limit over all of them
            FLEET_RANK_TAG: str(entry.rank),
            FLEET_BYTES_TAG: str(share),
            "mvcc/work": ", ".join(entry.kinds),
        },
    )


def build_fleet_maintenance(
    tables: Sequence[TableName],
    *,
    max_bytes: int | str | None = None,
    max_runs: int | None = None,
    quiet_hours: QuietHours | None = None,
    cron_schedule: str = "0 2 * * *",
    execution_timezone: str = "UTC",
    name: str = "mvcc_fleet_maintenance",
    job_name: str | None = None,
    default_status: dg.DefaultScheduleStatus = dg.DefaultScheduleStatus.STOPPED,
    tags: Mapping[str, str] | None = None,
    run_cost_bytes: int | None = None,
    max_workers: int | None = None,
    description: str | None = None,
) -> dg.Definitions:
    """A schedule maintaining many tables on one nightly budget, and the job whose runs it requests.

    On each tick the schedule plans every table in `tables` with `mvcc_core.compaction.plan_fleet` (each
    table's manifest and one listing of its versions, no data file) and returns one `RunRequest` per chosen
    table, highest rank (benefit per byte) first, within `max_bytes` and `max_runs`. Each run is tagged
    ``mvcc/table`` (the run queue's per-table limit, and the table's run history in the UI), carries its byte
    share and advice in its config, and has the run key `fleet_run_key` of the table's version: a table
    version already requested (its run queued, done or failed) is not requested again, and the budget goes to
    the next table. What does not fit is carried to the next night; the tick's log (or its skip reason, when
    nothing runs) names those tables and why, and the tables that are missing or cannot be read. Outside
    `quiet_hours` the tick requests nothing. Default stopped, as Dagster's schedules are.

    Args:
        tables: The tables of the fleet: asset keys (``"sales/orders"``, `AssetKey`, path parts) or uris.
        max_bytes: The most on-disk bytes the night's compactions read together: an int or a size such as
            ``"20GiB"`` (None: no byte budget). A table bigger than the whole budget gets it all as its share
            when it ranks first (a partial compaction; the rest next night).
        max_runs: The most runs (tables) a tick requests (None: no limit).
        quiet_hours: The daily window in which maintenance may start, in a time zone
            (``QuietHours("22:00", "06:00", "Europe/Amsterdam")``); None: any time.
        cron_schedule: When the schedule ticks (inside `quiet_hours` when given).
        execution_timezone: The time zone of `cron_schedule`.
        name: The schedule's name.
        job_name: The job's name (default: `name` with ``_job`` appended).
        default_status: The schedule's status when first loaded.
        tags: More run tags on every requested run.
        run_cost_bytes: The fixed cost of one run in bytes of rewrite, in the ranking (None: the core's 4 MiB,
            about 0.3 s of CPU).
        max_workers: Threads reading the tables at a tick (None: the core's choice, 8 on an object store and 1
            on a local disk).
        description: The schedule's description.

    Returns:
        `Definitions` with the schedule and the job; merge them into the code location's
        (``dg.Definitions.merge(defs, fleet)``), which binds the ``mvcc`` resource.

    Raises:
        ValueError: No tables, a table named twice, a bad name, budget, limit or cron.
    """
    if isinstance(tables, str) or not isinstance(tables, Sequence) or not tables:
        raise ValueError(f"tables must be a non-empty list of asset keys or uris, got {tables!r}")
    targets: dict[str, MaintenanceTarget] = {}
    for table in tables:
        target = MaintenanceTarget(table)
        label = table if isinstance(table, str) and is_uri(table) else target.label
        if label in targets:
            raise ValueError(f"table {label!r} is named twice in the fleet's tables")
        targets[label] = target
    if quiet_hours is not None and not isinstance(quiet_hours, QuietHours):
        raise ValueError(f"quiet_hours must be a QuietHours('22:00', '06:00', 'Europe/Amsterdam'), got {quiet_hours!r}")
    plan_args: dict[str, Any] = {"max_bytes": max_bytes, "max_tables": max_runs, "window": quiet_hours}
    if run_cost_bytes is not None:
        plan_args["run_cost_bytes"] = run_cost_bytes
    if max_workers is not None:
        plan_args["max_workers"] = max_workers
    try:  # the budget, the limit and the knobs checked when the definitions load, by planning no table
        plan_fleet({}, **plan_args)
    except ValueError as exc:
        raise ValueError(f"fleet maintenance {name}: {str(exc).replace('max_tables', 'max_runs')}") from None
    job_name = job_name or f"{name}_job"
    extra = {FLEET_TAG: name, **(tags or {})}
    job = _fleet_job(job_name, targets, {})

    def plan_tick(context: dg.ScheduleEvaluationContext) -> Iterator[dg.RunRequest | dg.SkipReason]:
        # a generator: Dagster takes a returned list as one item
        # the resource built by an earlier tick of this process when it may serve again (Dagster builds it,
        # and the tick's instance it asks for, on every tick)
        reuse_sensor_resources(cast(Any, context), lambda cls: issubclass(cls, MvccResource))
        resource: MvccResource = getattr(context.resources, RESOURCE_KEY)
        try:
            now = context.scheduled_execution_time
        except Exception:  # noqa: BLE001 - a context built without one (a test, the UI's preview): now
            now = datetime.now(UTC)
        sources = _sources(resource, targets)
        plan = plan_fleet(sources, now=now, storage_options=resource.options(), **plan_args)
        advised = [e for e in (*plan.chosen, *plan.left) if e.advice]
        requested = _requested(context, job_name, {e.name: fleet_run_key(e.uri, e.version) for e in advised})
        already: dict[str, tuple[FleetEntry, str]] = {}
        if any(e.name in requested for e in plan.chosen):
            # the budget goes to the tables not requested at their version yet: those planned again on their own
            already = {e.name: (e, requested[e.name]) for e in advised if e.name in requested}
            rest = {e.name: sources[e.name] for e in advised if e.name not in already}
            again = plan_fleet(rest, now=now, storage_options=resource.options(), **plan_args)
            plan = _merged(again, plan, {e.name for e in advised})
        report = plan.summary() + (f"; {len(already)} already requested at their version" if already else "")
        lines = _left_lines(plan, already)
        if lines:
            report += "\n" + "\n".join(lines)
        if not plan.chosen:
            yield dg.SkipReason(report)
            return
        context.log.info("%s", report)
        for entry in plan.chosen:
            yield _request(entry, targets[entry.name], extra)

    try:
        schedule = dg.ScheduleDefinition(
            name=name,
            cron_schedule=cron_schedule,
            job=job,
            execution_fn=plan_tick,
            required_resource_keys={RESOURCE_KEY},
            execution_timezone=execution_timezone,
            default_status=default_status,
            metadata={
                "mvcc/tables": len(targets),
                "mvcc/max_bytes": str(max_bytes) if max_bytes is not None else "none",
                "mvcc/max_runs": max_runs if max_runs is not None else "none",
                "mvcc/quiet_hours": str(quiet_hours) if quiet_hours is not None else "none",
            },
            description=description
            or f"Nightly maintenance of {len(targets)} tables on one budget "
            f"(max_bytes={max_bytes}, max_runs={max_runs}, quiet hours {quiet_hours or 'none'}).",
        )
    except (dg.DagsterInvalidDefinitionError, dg.DagsterInvariantViolationError, ValueError) as exc:
        raise ValueError(
            f"fleet maintenance schedule {name}: cron_schedule {cron_schedule!r} is not valid ({exc})"
        ) from exc
    return dg.Definitions(schedules=[schedule], jobs=[job])
