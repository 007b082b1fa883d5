"""A week of pipeline traffic kept healthy by Dagster alone (docs/operations/running.md).

``python -m benchmarks.week --quick --json week.json --plot week.png`` replays a simulated week against a real
Dagster instance (sqlite in a temporary ``DAGSTER_HOME`` whose ``dagster.yaml`` is the operations page's:
pools of one slot, run retries on):

- the pipeline, as Dagster runs: an hourly append to ``raw_events`` (``--appends-per-day``; ``--quick``: every 4
  simulated hours; pyarrow, through `MvccIOManager`), a daily
  upsert (``user_latest``, merge on ``user_id``) and a daily aggregate (``daily_revenue``, merge on ``day``),
  and a daily GDPR-style delete of old rows (``event_id IN (...)``, ids taken from every hour written so far,
  so every file gets a deletion vector); an outside writer appending to ``partner_feed`` with `mvcc_core`
  alone; readers scanning every table throughout;
- maintenance as the daemon runs it: the example's nightly schedule (``build_maintenance_schedule``, cron
  ``0 3 * * *``), the version sensor and the health sensor, evaluated once per simulated hour at the simulated
  time with Dagster's own tick functions (``ScheduleDefinition.evaluate_tick`` on a
  ``build_schedule_context(scheduled_execution_time=...)``, ``SensorDefinition.evaluate_tick`` on a
  ``build_sensor_context(instance=..., cursor=...)``, the cursor carried from tick to tick, runless events
  reported to the instance as the daemon does). Every requested run is created on the instance at once (status
  NOT_STARTED, so a sensor sees it as it would see a queued run) and executed in a pool of worker processes
  by Dagster's ``execute_run`` (what the default run launcher's ``dagster api execute_run`` calls), with the
  jobs' default executors, overlapping with the pipeline's runs; the daily delete runs at 03:00 with the
  nightly maintenance, so maintenance and writers conflict for real.

What the harness does in the daemon's place, and says so: the queued run coordinator's limit of one run per
``mvcc/table`` value (a maintenance run waits while another maintenance run of its table is in flight; with
the pools' ``granularity: run`` of its ``dagster.yaml`` that is also what holds the table's pool);
the event-log consumer's run retries (a failed run whose job carries ``dagster/max_retries`` is re-executed
from its parent, all steps, up to that many times); run-key de-duplication (a run key a sensor returned
before is not launched again, and is counted as a duplicate request).

Simulated time: one hour lasts ``--hour-seconds`` real seconds; commit timestamps are real, so the jobs'
retention is ``older_than = retention_days * 24 * hour_seconds`` real seconds (2 days at 1 s an hour: 48 s).
The clock holds while the run pool is full, so the ticks measure ages on the simulated clock
(`SimulatedClock`: the schedule's tick time, the health sensor's ``clock``), and their runs remove the
versions committed before the real instant the simulated hour ``now - retention`` began (the retention
step's ``cutoff``), as a deployment's runs remove to their tick's time.
``--executor in_process`` gives the code location Dagster's in-process executor (default: the jobs' own).
``--tables N`` runs the fleet instead: N tables on one nightly budget (week/fleet.py).
``--report week.json --baseline bare.json`` prints docs/operations/running.md's tables (week/report.py); ``--scaling``
measures the per-table costs of that page's last section (week/scaling.py).
"""

import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import defaultdict
from concurrent.futures import Future, ProcessPoolExecutor
from datetime import UTC, datetime, timedelta
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

import mvcc_core as mvcc
from benchmarks.harness import cpu_seconds
from benchmarks.week.cli import parse_arguments
from benchmarks.week.clock import SimulatedClock
from benchmarks.week.metrics import table_metrics
from benchmarks.week.report import markdown, plot, targets
from mvcc_dagster import (
    HealthThresholds,
    MvccIOManager,
    MvccResource,
    build_compaction_job,
    build_health_sensor,
    build_maintenance_schedule,
    build_retention_job,
    build_version_sensor,
    conflict_retry_policy,
    mvcc_conflicts,
)
from mvcc_dagster.health import Level

HERE = Path(__file__).resolve().parent
#: The checkout's root: run and step processes import this module from there as `benchmarks.week.simulation`.
ROOT = HERE.parents[1]
SETTINGS_ENV = "MVCC_WEEK_SETTINGS"  # JSON of `Settings`, read by every process that rebuilds the definitions
START = datetime(2026, 11, 1, tzinfo=UTC)
PIPELINE_TABLES = ["raw_events", "user_latest", "daily_revenue"]
OUTSIDE_TABLE = "partner_feed"
TABLES = [*PIPELINE_TABLES, OUTSIDE_TABLE]
MAINTENANCE_CRON = "0 3 * * *"
PIPELINE_KINDS = ("append", "upsert", "aggregate", "delete", "outside_writer")
DAGSTER_YAML = """\
concurrency:
  runs:
    tag_concurrency_limits:
      - key: mvcc/table
        value: {applyLimitPerUniqueValue: true}
        limit: 1
  pools:
    default_limit: 1
    granularity: run
run_retries:
  enabled: true
telemetry:
  enabled: false
"""


# ---- settings and the definitions every process rebuilds -----------------------------------------------------


def settings() -> dict[str, Any]:
    """The run's settings (`SETTINGS_ENV`): warehouse, scale, retention; shared with the worker processes."""
    return json.loads(os.environ[SETTINGS_ENV])


def retention_window(s: dict[str, Any]) -> timedelta:
    """The real-time retention setting of `s["retention_days"]` simulated days."""
    return timedelta(seconds=s["retention_days"] * 24 * s["hour_seconds"])


CLOCK: SimulatedClock | None = None
"""The main process's simulated clock (set by `Week`); the worker processes' runs get their cutoff in config."""


def simulated_now() -> datetime:
    """`CLOCK.now()`, or the wall clock where there is no week running (a worker process, a test)."""
    return CLOCK.now() if CLOCK is not None else datetime.now(UTC)


def thresholds(s: dict[str, Any]) -> HealthThresholds:
    """Health thresholds for this traffic (docs/operations/running.md "Thresholds"): small means under a quarter of a
    day's rows; the sensor repairs at `--small-fragments-warn` (8) small fragments: a day's end sees at most 10."""
    return HealthThresholds(
        small_fragment_rows=max(1, s["rows_per_hour"] * s["appends_per_day"] // 4),
        small_fragments=Level(s.get("small_fragments_warn", 8), 32),
        deleted_ratio=Level(s.get("deleted_warn", 0.1), max(0.3, s.get("deleted_warn", 0.1))),
        storage_amplification=Level(s["amplification_warn"], 10.0),
        retention_removable_share=s.get("removable_share"),
        **({} if s.get("min_removable_bytes") is None else {"retention_min_removable_bytes": s["min_removable_bytes"]}),
    )


def compaction_options(s: dict[str, Any], table: str) -> mvcc.compaction.CompactionOptions:
    """Fragments of about one simulated day of the pipeline's tables: older full fragments are left alone by
    later compactions (a fragment below the target is a candidate at every compaction, so a target above a
    table's daily volume rewrites the whole table every time). The outside writer's table is a few KB a day
    (two narrow columns): a day's fragment is a file of about 3 KB whose per-file cost is most of what a scan
    of it costs (benchmarks/results.md, "The week"), so it gets Lance's default
    target and compacts whole."""
    if table == OUTSIDE_TABLE:
        return mvcc.compaction.CompactionOptions()
    return mvcc.compaction.CompactionOptions(
        target_rows_per_fragment=max(1, s["rows_per_hour"] * s["appends_per_day"]),
        materialize_deletions_threshold=s.get("materialize_deletions", 0.1),
    )


def outside_rows(s: dict[str, Any]) -> int:
    """Rows per commit of the outside writer (every 3 simulated hours)."""
    return max(1, s["rows_per_hour"] // 4)


class HourConfig(dg.Config):
    """The simulated hour (hours since `START`) an append writes."""

    hour: int


class DayConfig(dg.Config):
    """The simulated day (0 = `START`'s day) a daily run processes."""

    day: int


def event_rows(hour: int, n: int) -> pa.Table:
    """`n` click events of simulated `hour` (event ids hour * n + i)."""
    first = hour * n
    ids = pa.array(range(first, first + n), pa.int64())
    return pa.table(
        {
            "event_id": ids,
            "user_id": pc.cast(pc.multiply(ids, 7919), pa.int64()).to_numpy() % 997,
            "event_time": pa.array([START + timedelta(hours=hour)] * n, pa.timestamp("us", "UTC")),
            "day": pa.array([hour // 24] * n, pa.int32()),
            "amount": pa.array([float((i * 37) % 1000) / 10 for i in range(n)]),
            "payload": pa.array(
                [f"page-{(first + i) % 5000:05d}-session-{(first + i) * 31 % 100003}" for i in range(n)]
            ),
        }
    )


@dg.asset(metadata={"mvcc/write_mode": "append"}, retry_policy=conflict_retry_policy())
def raw_events(config: HourConfig) -> pa.Table:
    """One simulated hour of click events."""
    return event_rows(config.hour, settings()["rows_per_hour"])


def _day_rows(mvcc_resource: MvccResource, day: int) -> pa.Table:
    return mvcc_resource.open("raw_events").to_table(filter=f"day = {day}")


@dg.asset(
    deps=[raw_events],
    metadata={"mvcc/write_mode": "merge", "mvcc/merge_on": "user_id"},
    retry_policy=conflict_retry_policy(),
)
def user_latest(config: DayConfig, mvcc: MvccResource) -> pa.Table:
    """Each user's latest event of the day (an upsert on user_id)."""
    rows = _day_rows(mvcc, config.day).sort_by([("user_id", "ascending"), ("event_id", "descending")])
    users = rows.column("user_id").to_pylist()
    first = [i for i, u in enumerate(users) if i == 0 or users[i - 1] != u]
    return rows.take(pa.array(first, pa.int64())).select(["user_id", "event_id", "event_time", "amount"])


@dg.asset(
    deps=[raw_events],
    metadata={"mvcc/write_mode": "merge", "mvcc/merge_on": "day"},
    retry_policy=conflict_retry_policy(),
)
def daily_revenue(config: DayConfig, mvcc: MvccResource) -> pa.Table:
    """Revenue and event count of the day (an upsert on day)."""
    rows = _day_rows(mvcc, config.day)
    return pa.table(
        {
            "day": pa.array([config.day], pa.int32()),
            "revenue": pa.array([pc.sum(rows.column("amount")).as_py() or 0.0]),
            "events": pa.array([rows.num_rows], pa.int64()),
        }
    )


def gdpr_ids(day: int, rows_per_hour: int, share: float, every: int = 1) -> list[int]:
    """The ids the delete of `day` removes: `share` of every append (one every `every` hours) written before
    that day, so every file of those days gets a deletion vector."""
    rng = random.Random(day)
    per_hour = max(1, int(rows_per_hour * share))
    hours = range(0, day * 24, every)
    return [h * rows_per_hour + k for h in hours for k in rng.sample(range(rows_per_hour), per_hour)]


@dg.op(retry_policy=conflict_retry_policy())
def gdpr_delete(context: dg.OpExecutionContext, config: DayConfig, mvcc: MvccResource) -> None:
    """Delete the day's requested ids from raw_events (one commit; a conflict is retried)."""
    s = settings()
    ids = gdpr_ids(config.day, s["rows_per_hour"], s["delete_share"], 24 // s["appends_per_day"])
    with mvcc_conflicts(context, what="gdpr delete of raw_events"):
        table = mvcc.open("raw_events")
        table.delete(
            f"event_id IN ({', '.join(map(str, ids))})", transaction_properties={"dagster/run_id": context.run_id}
        )
    context.log.info("deleted %d ids from raw_events", len(ids))


@dg.job(executor_def=dg.in_process_executor)
def gdpr_delete_job() -> None:
    """The daily delete of old rows."""
    gdpr_delete()


def week_definitions() -> dg.Definitions:
    """The benchmark's code location: the example's shape (the same factories), scaled by `settings()`."""
    s = settings()
    window = retention_window(s)
    # a compaction the health sensor requests also takes the retention due then (one run, not two)
    compaction = {t: build_compaction_job(t, options=compaction_options(s, t), older_than=window) for t in TABLES}
    retention = {t: build_retention_job(t, older_than=window) for t in TABLES}
    schedules = [
        build_maintenance_schedule(t, cron=MAINTENANCE_CRON, options=compaction_options(s, t), older_than=window)
        for t in TABLES
    ]
    root = s["warehouse"]
    return dg.Definitions(
        assets=[raw_events, user_latest, daily_revenue, dg.AssetSpec(OUTSIDE_TABLE)],
        jobs=[
            dg.define_asset_job("append", selection=[raw_events], executor_def=dg.in_process_executor),
            dg.define_asset_job("upsert", selection=[user_latest], executor_def=dg.in_process_executor),
            dg.define_asset_job("aggregate", selection=[daily_revenue], executor_def=dg.in_process_executor),
            gdpr_delete_job,
            *compaction.values(),
            *retention.values(),
        ],
        schedules=schedules,
        sensors=[
            build_version_sensor(TABLES),
            build_health_sensor(
                TABLES,
                compaction_job=compaction,
                retention_job=retention,
                thresholds=thresholds(s),
                clock=simulated_now,
            ),
        ],
        resources={"mvcc": MvccResource(root_uri=root), "io_manager": MvccIOManager(root_uri=root)},
        # "default": the jobs' own default (the code location's executor, Dagster's multiprocess one, unless a
        # job picks its own); "in_process": the code location runs every job in one process
        executor=dg.in_process_executor if s.get("executor") == "in_process" else None,
    )


def job_named(name: str) -> dg.JobDefinition:
    """The job `name` of `week_definitions()` (what the run and step processes rebuild)."""
    return week_definitions().resolve_job_def(name)


# ---- running one run (in a worker process), as the run launcher and the retry daemon would ------------------


def _run_events(instance: dg.DagsterInstance, run_id: str) -> tuple[int, list[str]]:
    retries, errors = 0, []
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None:
            continue
        if event.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY:
            retries += 1
        elif event.event_type == dg.DagsterEventType.STEP_FAILURE:
            error = event.step_failure_data.error
            errors.append(f"{event.step_key}: {error.message.strip()[:300] if error else 'failed'}")
    return retries, errors


def execute_run(
    job_name: str, run_id: str, tags: dict[str, str], module: str = __name__, fn: str = "job_named"
) -> dict[str, Any]:
    """Execute the created run `run_id` of `job_name` (as a run launcher does); a failed run is re-executed
    (all steps) up to its job's ``dagster/max_retries`` times, as the daemon's run retries would. Returns the
    run's measurements. The run worker rebuilds the job as ``module.fn(job_name)`` (the fleet: one table's)."""
    from dagster._core.execution.api import execute_run as launch  # what `dagster api execute_run` calls

    instance = dg.DagsterInstance.get()
    recon = dg.build_reconstructable_job(
        module,
        fn,
        reconstructable_args=(job_name,),
        reconstructor_working_directory=str(ROOT),
    )
    # the run's tags carry its job's (`Week.submit` merges them): rebuilding the definitions here as well would
    # cost every run a second load of the code location, which a run worker does once
    max_retries = int(tags.get("dagster/max_retries", 0))
    cpu, wall, started = cpu_seconds(), time.perf_counter(), time.time()
    run_ids, retries = [], 0
    result = launch(recon, instance.get_run_by_id(run_id), instance)
    success, run_ids = result.success, [run_id]
    while not success and retries < max_retries:
        retries += 1
        options = dg.ReexecutionOptions(parent_run_id=run_ids[-1])
        retry_tags = {**tags, "dagster/retry_number": str(retries)}
        with dg.execute_job(recon, instance=instance, tags=retry_tags, reexecution_options=options) as result:
            success = result.success
            run_ids.append(result.run_id)
    conflict_retries, errors = 0, []
    for run_id in run_ids:
        n, e = _run_events(instance, run_id)
        conflict_retries += n
        errors += e
    return {
        "job": job_name,
        "success": success,
        "retries": retries,
        "conflict_retries": conflict_retries,
        "errors": errors,
        "started": started,
        "wall_seconds": time.perf_counter() - wall,
        "cpu_seconds": cpu_seconds() - cpu,
    }


# ---- the week (main process) ----------------------------------------------------------------------------------


class Readers(threading.Thread):
    """Readers scanning the tables' latest versions throughout the week (errors are counted, never raised)."""

    def __init__(self, root: Path, pause: float) -> None:
        super().__init__(daemon=True)
        self.root, self.pause, self.stop = root, pause, threading.Event()
        self.running = threading.Event()  # cleared while the day's end is measured
        self.running.set()
        self.scans, self.errors = 0, []

    def run(self) -> None:
        i = 0
        while not self.stop.wait(self.pause):
            self.running.wait()
            name = TABLES[i % len(TABLES)]
            i += 1
            try:
                mvcc.open_table(str(self.root / name)).to_table()
                self.scans += 1
            except mvcc.TableNotFoundError:
                continue
            except Exception as exc:  # a reader's failure is a finding of the week: recorded, the week goes on
                self.errors.append(f"{name}: {type(exc).__name__}: {exc}"[:300])


class Week:
    """The simulated week: the clock, the run pool, the ticks and the measurements."""

    def __init__(self, s: dict[str, Any], home: Path, maintenance: bool) -> None:
        self.s, self.maintenance = s, maintenance
        self.root = Path(s["warehouse"])
        self.resource = MvccResource(root_uri=str(self.root))
        self.instance = dg.DagsterInstance.get()
        self.defs = week_definitions()
        self.repo = self.defs.get_repository_def()
        self.pool = ProcessPoolExecutor(max_workers=s["workers"], mp_context=get_context("spawn"))
        self.pending: list[tuple[str, str, dict[str, str], str, float]] = []  # (kind, run id, ...) waiting
        self.inflight: dict[Future, tuple[str, str, float]] = {}  # future -> (kind, mvcc/table value, sim hour)
        self.results: list[dict[str, Any]] = []
        self.cursors: dict[str, str | None] = {}
        self.run_keys: dict[str, set[str]] = defaultdict(set)
        self.duplicate_requests: list[str] = []
        self.compactions_requested: dict[tuple[str, int], list[str]] = defaultdict(list)
        self.tick_cpu = 0.0
        self.tick_cpu_by: dict[str, float] = defaultdict(float)  # per schedule / sensor name
        self.held = 0.0
        self.ticks = 0
        self.outside_cpu = 0.0
        self.outside_commits = 0
        self.days: list[dict[str, Any]] = []
        self.scratch = home / "scratch"
        self.scratch.mkdir()
        global CLOCK
        CLOCK = self.clock = SimulatedClock(s["hour_seconds"], s["retention_days"])

    # -- runs --
    def submit(self, kind: str, job: str, run_config: dict[str, Any], tags: dict[str, str], hour: float) -> None:
        """Queue a run; maintenance runs of one table wait for each other (the `mvcc/table` run limit). The
        job's own tags are merged first, as the run's creation does (the limit reads the run's tags)."""
        job_def = self.defs.resolve_job_def(job)
        tags = {**job_def.tags, **tags, "week/kind": kind}
        # a nightly run whose work has no compaction task (retention only: versions that left the window since
        # the last night, at the same table version when no commit came between) is new work, not a compaction
        retention_only = tags.get("mvcc/work", "").startswith("0 compaction task")
        if kind == "health_compaction" or (kind == "maintenance_schedule" and not retention_only):
            # a compaction requested twice for one table version (by the schedule and the sensor, or by a
            # sensor twice) is the waste the targets forbid: counted by (table, version)
            try:
                version = mvcc.open_table(str(self.root / tags["mvcc/table"])).version
            except mvcc.TableNotFoundError:
                version = 0
            self.compactions_requested[(tags["mvcc/table"], version)].append(f"{kind}@{hour}")
        # the run exists on the instance from its request on, as a queued run does (sensors see it)
        run = self.instance.create_run_for_job(
            job_def, run_config=run_config, tags=tags, status=dg.DagsterRunStatus.NOT_STARTED
        )
        self.pending.append((kind, run.run_id, tags, job, hour))
        self.dispatch()

    def dispatch(self) -> None:
        for fut in [f for f in self.inflight if f.done()]:
            kind, _, hour = self.inflight.pop(fut)
            self.results.append({**fut.result(), "kind": kind, "hour": hour})
        busy = {table for _, table, _ in self.inflight.values() if table}
        for item in list(self.pending):
            kind, run_id, tags, job, hour = item
            table = tags.get("mvcc/table", "")
            if table and table in busy:
                continue
            self.pending.remove(item)
            busy.add(table)
            self.inflight[self.pool.submit(execute_run, job, run_id, tags)] = (kind, table, hour)

    # -- ticks --
    def tick_schedules(self, at: datetime, hour: float) -> None:
        for schedule in self.repo.schedule_defs:
            times = dg_cron_times(schedule.cron_schedule, at - timedelta(hours=1), at)
            if not times:
                continue
            cpu = time.thread_time()
            # the tick's time as the retention setting sees it (`SimulatedClock`): the daemon gives the
            # cron's time; the cron itself fired on the simulated clock (`at`)
            context = dg.build_schedule_context(
                instance=self.instance, scheduled_execution_time=self.clock.now(), resources={"mvcc": self.resource}
            )
            data = schedule.evaluate_tick(context)
            self.tick_cpu += time.thread_time() - cpu
            self.tick_cpu_by["maintenance schedules"] += time.thread_time() - cpu
            for request in data.run_requests or []:
                tags = {**request.tags, "dagster/schedule_name": schedule.name}
                self.submit("maintenance_schedule", schedule.job_name, request.run_config or {}, tags, hour)

    def tick_sensors(self, hour: float) -> None:
        for sensor in self.repo.sensor_defs:
            cpu = time.thread_time()
            context = dg.build_sensor_context(
                instance=self.instance,
                cursor=self.cursors.get(sensor.name),
                definitions=self.defs,
                sensor_name=sensor.name,
                resources={"mvcc": self.resource},
            )
            data = sensor.evaluate_tick(context)
            for event in data.asset_events or []:
                self.instance.report_runless_asset_event(event)
            self.cursors[sensor.name] = data.cursor
            self.tick_cpu += time.thread_time() - cpu
            self.tick_cpu_by[sensor.name] += time.thread_time() - cpu
            self.ticks += 1
            for request in data.run_requests or []:
                if request.run_key in self.run_keys[sensor.name]:
                    self.duplicate_requests.append(f"{sensor.name}: {request.run_key}")
                    continue
                self.run_keys[sensor.name].add(request.run_key)
                job = request.job_name or sensor.job_name
                kind = "health_compaction" if "compaction" in job else "health_retention"
                tags = {**request.tags, "dagster/run_key": request.run_key, "dagster/sensor_name": sensor.name}
                self.submit(kind, job, request.run_config or {}, tags, hour)

    # -- the outside writer --
    def outside_write(self, hour: int) -> None:
        cpu = time.thread_time()
        n = outside_rows(self.s)
        batch = pa.table(
            {"feed_id": pa.array(range(hour * n, hour * n + n), pa.int64()), "value": [float(i) for i in range(n)]}
        )
        uri = str(self.root / OUTSIDE_TABLE)
        try:
            mvcc.open_table(uri).append(batch, commit_message="partner feed")
        except mvcc.TableNotFoundError:
            mvcc.write_table(batch, uri, commit_message="partner feed")
        self.outside_commits += 1
        self.outside_cpu += time.thread_time() - cpu

    # -- the week --
    def run(self) -> dict[str, Any]:
        s, hs = self.s, self.s["hour_seconds"]
        readers = self.readers = Readers(self.root, pause=hs / 2)
        readers.start()
        t0 = time.perf_counter()
        hours = s["days"] * 24
        for h in range(hours + 1):
            # The clock waits while the pool is saturated (more runs than workers): the simulated day keeps
            # its order of events on a slow machine, at the cost of wall time (`held_seconds`).
            held = time.perf_counter()
            while len(self.inflight) + len(self.pending) > self.s["workers"]:
                self.dispatch()
                time.sleep(0.05)
            t0 += time.perf_counter() - held
            self.held += time.perf_counter() - held
            while time.perf_counter() < t0 + h * hs:
                self.dispatch()
                time.sleep(min(0.05, hs / 10))
            at = START + timedelta(hours=h)
            self.clock.begin(h)
            if h and h % 24 == 0:
                self.end_of_day(h // 24)
            if h == hours:
                break
            day = h // 24
            if h % (24 // s["appends_per_day"]) == 0:
                self.submit("append", "append", {"ops": {"raw_events": {"config": {"hour": h}}}}, {}, h)
            if h % 24 == 1 and day:
                cfg = {"config": {"day": day - 1}}
                self.submit("upsert", "upsert", {"ops": {"user_latest": cfg}}, {}, h)
                self.submit("aggregate", "aggregate", {"ops": {"daily_revenue": cfg}}, {}, h)
            if h % 24 == s["delete_hour"] and day:
                self.submit("delete", "gdpr_delete_job", {"ops": {"gdpr_delete": {"config": {"day": day}}}}, {}, h)
            if h % 3 == 0:
                self.outside_write(h)
            if self.maintenance:
                self.tick_schedules(at, h)
                self.tick_sensors(h)
        while self.inflight or self.pending:
            self.dispatch()
            time.sleep(0.1)
        readers.stop.set()
        readers.join()
        self.pool.shutdown()
        return self.report(time.perf_counter() - t0, readers)

    def end_of_day(self, day: int) -> None:
        small = thresholds(self.s).small_fragment_rows
        self.readers.running.clear()
        time.sleep(0.05)  # a scan in flight ends
        for name in TABLES:
            m = table_metrics(self.root, name, small, self.scratch, self.clock.cutoff())
            if m is not None:
                self.days.append({"day": day, **m})
                print(
                    f"day {day} {name:14s} fragments {m['fragments']:3d} small {m['small_fragments']:3d} "
                    f"stored/live {m['stored_bytes'] / max(1, m['live_bytes']):5.2f} "
                    f"scan CPU {m['scan_cpu_seconds'] * 1000:6.1f} ms "
                    f"/ compacted {m['compacted_scan_cpu_seconds'] * 1000:6.1f} ms",
                    flush=True,
                )
        self.readers.running.set()

    def report(self, wall: float, readers: Readers) -> dict[str, Any]:
        runs: dict[str, dict[str, Any]] = {}
        failures = []
        for r in self.results:
            k = runs.setdefault(
                r["kind"],
                {"runs": 0, "failed": 0, "retries": 0, "conflict_retries": 0, "wall_seconds": 0.0, "cpu_seconds": 0.0},
            )
            k["runs"] += 1
            k["failed"] += 0 if r["success"] else 1
            k["retries"] += r["retries"]
            k["conflict_retries"] += r["conflict_retries"]
            k["wall_seconds"] = round(k["wall_seconds"] + r["wall_seconds"], 3)
            k["cpu_seconds"] = round(k["cpu_seconds"] + r["cpu_seconds"], 3)
            if not r["success"] or r["retries"]:
                failures.append({k2: r[k2] for k2 in ("kind", "job", "hour", "success", "retries", "errors")})
        runs["outside_writer"] = {
            "runs": self.outside_commits,
            "failed": 0,
            "retries": 0,
            "conflict_retries": 0,
            "wall_seconds": None,
            "cpu_seconds": round(self.outside_cpu, 3),
        }
        runs["sensor_and_schedule_ticks"] = {
            "runs": self.ticks,
            "failed": 0,
            "retries": 0,
            "conflict_retries": 0,
            "wall_seconds": None,
            "cpu_seconds": round(self.tick_cpu, 3),
        }
        pipeline = sum(v["cpu_seconds"] for k, v in runs.items() if k in PIPELINE_KINDS)
        maintenance = sum(v["cpu_seconds"] for k, v in runs.items() if k not in PIPELINE_KINDS)
        return {
            "days": self.days,
            "runs": runs,
            "pipeline_cpu_seconds": round(pipeline, 3),
            "maintenance_cpu_seconds": round(maintenance, 3),
            "retention_days": self.s["retention_days"],
            "tick_cpu_seconds_by_name": {k: round(v, 3) for k, v in self.tick_cpu_by.items()},
            "retention_older_than_seconds": retention_window(self.s).total_seconds(),
            "maintenance": self.maintenance,
            "settings": {k: v for k, v in self.s.items() if k != "warehouse"},
            "maintenance_runs": sorted(
                [
                    {"hour": r["hour"], "kind": r["kind"], "job": r["job"], "success": r["success"]}
                    for r in self.results
                    if r["kind"].startswith(("health", "maintenance"))
                ],
                key=lambda r: r["hour"],
            ),
            "duplicate_requests": self.duplicate_requests,
            "compactions_requested_twice_for_one_version": [
                {"table": t, "version": v, "requests": r}
                for (t, v), r in self.compactions_requested.items()
                if len(r) > 1
            ],
            "failed_or_retried_runs": failures,
            "readers": {"scans": readers.scans, "errors": readers.errors},
            "wall_seconds": round(wall, 1),
            "held_seconds": round(self.held, 1),
        }


def dg_cron_times(cron: str, after: datetime, until: datetime) -> list[datetime]:
    """The cron's fire times in (after, until], as the scheduler daemon iterates them."""
    from dagster._utils.schedules import cron_string_iterator  # the daemon's own iterator (no public one)

    out = []
    for t in cron_string_iterator(after.timestamp(), cron, "UTC"):
        if t.timestamp() > until.timestamp():
            break
        if t.timestamp() > after.timestamp():
            out.append(t)
    return out


# ---- scaling, command line (week/cli.py) -----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the week and print its targets; ``--json`` and ``--plot`` write the result and the chart."""
    a = parse_arguments(argv, __doc__.splitlines()[0])
    if a.report:
        result = json.loads(a.report.read_text())
        baseline = json.loads(a.baseline.read_text()) if a.baseline else None
        print(markdown(result, baseline))
        if a.plot:
            plot(result, a.plot, baseline)
        return result
    if a.tables:
        from benchmarks.week.fleet import main as fleet  # N tables on one nightly budget (week/fleet.py)

        return fleet(a, argv)
    if a.scaling:
        from benchmarks.week.scaling import measure_scaling  # it uses this module's traffic: imported when asked for

        scaling = measure_scaling()
        print(json.dumps(scaling, indent=1))
        if a.json:
            a.json.write_text(json.dumps(scaling, indent=1))
        return scaling
    given = {
        "days": a.days,
        "hour_seconds": a.hour_seconds,
        "rows_per_hour": a.rows_per_hour,
        "retention_days": a.retention_days,
        "appends_per_day": a.appends_per_day,
        "workers": a.workers,
    }
    home = Path(tempfile.mkdtemp(prefix="mvcc-week-", dir=a.keep))
    (home / "dagster").mkdir()
    (home / "dagster" / "dagster.yaml").write_text(DAGSTER_YAML)
    os.environ["DAGSTER_HOME"] = str(home / "dagster")
    s = {
        **given,
        "executor": a.executor,
        "warehouse": str(home / "warehouse"),
        "delete_share": a.delete_share,
        "delete_hour": a.delete_hour,
        "amplification_warn": a.amplification_warn,
        "removable_share": a.removable_share if a.removable_share >= 0 else None,
        "min_removable_bytes": a.min_removable_bytes,
        "small_fragments_warn": a.small_fragments_warn,
        "deleted_warn": a.deleted_warn,
        "materialize_deletions": a.materialize_deletions,
    }
    os.environ[SETTINGS_ENV] = json.dumps(s)
    sys.path.insert(0, str(ROOT))  # the worker and step processes import this module from the checkout's root
    try:
        result = Week(s, home, maintenance=not a.no_maintenance).run()
    finally:
        if a.keep is None:
            shutil.rmtree(home, ignore_errors=True)
    result["targets"] = targets(result)
    result["command"] = " ".join(["python -m benchmarks.week", *(argv if argv is not None else sys.argv[1:])])
    result["date"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(
        json.dumps(
            {
                "runs": result["runs"],
                "targets": result["targets"],
                "wall_seconds": result["wall_seconds"],
                "duplicate_requests": result["duplicate_requests"][:5],
                "readers": result["readers"],
            },
            indent=1,
        )
    )
    if a.json:
        a.json.write_text(json.dumps(result, indent=1))
    if a.plot:
        plot(result, a.plot, json.loads(a.baseline.read_text()) if a.baseline else None)
    return result


if __name__ == "__main__":
    main()
