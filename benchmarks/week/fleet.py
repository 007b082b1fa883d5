"""The fleet week: N tables on one nightly budget (``python -m benchmarks.week --tables N``).

The week's traffic shapes (benchmarks/week/simulation.py) on 10 hot tables, cycling events (an append every
``24 / --appends-per-day`` hours and the daily GDPR-style delete at ``--delete-hour``), upsert (a daily merge
on ``user_id`` of its events table's day), aggregate (a daily one-row merge on ``day``) and feed (a small
append every 3 hours); the other N - 10 tables idle: one small first write, and 0 to 3 small appends at random
hours of the week (seed 7). Every writer commits with `mvcc_core` alone, outside Dagster (the week measures
the pipeline as Dagster runs; 10 tables of it would be some 500 runs a week of Dagster's fixed cost).

Maintenance on one nightly budget: at 03:00 a plan (`mvcc_core.compaction.plan_fleet` over every table,
``max_bytes=--budget-bytes``, ``max_tables=--max-tables``, default N / 10: it cannot cover every table that
asks every night) picks what runs, and the chosen tables are maintained

- ``--fleet-runs dagster`` (default): by the plugin's per-table nightly job (``build_maintenance_schedule``'s
  job ``mvcc_maintenance__<table>``: compaction, index optimize, retention), one run per chosen table,
  created on the Dagster instance and executed by Dagster's ``execute_run`` in the run pool as the week does
  (one run per ``mvcc/table`` at a time); the plan's byte share cannot be handed to the job (the plugin's
  jobs take no ``max_bytes`` at run time), so a chosen table compacts whole;
- ``--fleet-runs core``: by ``run_fleet`` on the plan, in this process (each table with its byte share).

Every hour the version sensor (every table: each outside commit becomes a runless event on the instance) and
the health sensor (every table, no repair job: it evaluates the checks and requests nothing, the plan decides)
are ticked with Dagster's tick functions, as the week ticks them. ``--instance postgres`` puts the instance
(runs, event logs, schedules) on PostgreSQL (``MVCC_WEEK_POSTGRES``, default
``postgresql://postgres@127.0.0.1:5432/postgres``: a fresh database for the run, dropped at its end);
default sqlite in the temporary ``DAGSTER_HOME``.

Per table and day (``days``, the week's keys): fragments, small fragments, live rows, ``stored_data_bytes``
(data and deletion files only), ``live_data_bytes`` (a compacted copy's data files; also ``live_bytes``),
the day's maintenance CPU and runs. Per tick (``fleet.ticks``): CPU of each sensor's ticks and of the plans.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from concurrent.futures import Future, ProcessPoolExecutor
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

import mvcc_core as mvcc
from benchmarks.harness import cpu_seconds
from benchmarks.week import simulation as week
from benchmarks.week.clock import SimulatedClock
from benchmarks.week.metrics import best_scans, dir_bytes, scan_once
from benchmarks.week.report import targets
from mvcc_dagster import (
    HealthThresholds,
    MvccResource,
    build_health_sensor,
    build_maintenance_schedule,
    build_version_sensor,
)
from mvcc_dagster.health import Level

HOT = 10
SHAPES = ("events", "upsert", "aggregate", "feed")
POSTGRES_ENV = "MVCC_WEEK_POSTGRES"
POSTGRES_YAML = """\
storage:
  postgres:
    postgres_db:
      username: {username}
      password: "{password}"
      hostname: {hostname}
      port: {port}
      db_name: {db_name}
      scheme: postgresql+psycopg2
"""


def names(n: int) -> list[str]:
    """The fleet's table names: ``hot_00``..``hot_09``, then ``idle_010``...."""
    return [f"hot_{i:02d}" if i < HOT else f"idle_{i:03d}" for i in range(n)]


def shape(name: str) -> str:
    """A table's traffic: a hot table's shape (``SHAPES`` in turn), or ``idle``."""
    return SHAPES[int(name[4:]) % len(SHAPES)] if name.startswith("hot_") else "idle"


def options(s: dict[str, Any], name: str) -> mvcc.compaction.CompactionOptions:
    """Compaction of a hot events table as the week's raw_events (a day's rows a fragment); the rest default."""
    if shape(name) == "events":
        return mvcc.compaction.CompactionOptions(
            target_rows_per_fragment=s["rows_per_hour"] * s["appends_per_day"],
            materialize_deletions_threshold=s.get("materialize_deletions", 0.1),
        )
    return mvcc.compaction.CompactionOptions()


def fleet_job(name: str) -> dg.JobDefinition:
    """The nightly job of table `name`, bound to the warehouse (what a run worker rebuilds: one table's job)."""
    s = week.settings()
    window = week.retention_window(s)
    schedule = build_maintenance_schedule(name, cron=week.MAINTENANCE_CRON, options=options(s, name), older_than=window)
    defs = dg.Definitions(jobs=[schedule.job], resources={"mvcc": MvccResource(root_uri=s["warehouse"])})
    return defs.resolve_job_def(schedule.job.name)


def idle_appends(tables: list[str], hours: int) -> dict[int, list[str]]:
    """The idle tables' few small appends: hour -> tables appended to (0 to 3 each, seed 7)."""
    rng = random.Random(7)
    out: dict[int, list[str]] = defaultdict(list)
    for name in tables:
        if shape(name) == "idle":
            for hour in rng.sample(range(1, hours), rng.choice([0, 0, 1, 1, 2, 3])):
                out[hour].append(name)
    return out


def postgres_database() -> tuple[str, dict[str, Any]]:
    """A fresh database on the server of ``MVCC_WEEK_POSTGRES``: its dagster.yaml ``storage:`` and settings."""
    import psycopg2

    parts = urlsplit(os.environ.get(POSTGRES_ENV, "postgresql://postgres@127.0.0.1:5432/postgres"))
    server = {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 5432,
        "user": parts.username or "postgres",
        "password": parts.password or "",
    }
    db = f"mvcc_week_{uuid.uuid4().hex[:10]}"
    try:
        conn = psycopg2.connect(dbname=parts.path.lstrip("/") or "postgres", connect_timeout=5, **server)
    except psycopg2.OperationalError as exc:
        raise SystemExit(
            f"--instance postgres: no PostgreSQL server at {parts.hostname}:{server['port']} "
            f"(set {POSTGRES_ENV}): {str(exc).strip()}"
        ) from None
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
    conn.close()
    yaml = POSTGRES_YAML.format(
        username=server["user"], password=server["password"], hostname=server["host"], port=server["port"], db_name=db
    )
    return yaml, {**server, "db": db, "admin_db": parts.path.lstrip("/") or "postgres"}


def server_cpu_seconds() -> float | None:
    """CPU seconds of the local PostgreSQL server so far: its postmaster's and its ended backends' (``/proc``;
    every client's, not only this run's). None where no postmaster is visible (a remote server)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name, rest = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()
        if name == "postgres" and rest[1] == "1":  # the postmaster: a child of init
            return sum(int(x) for x in rest[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
    return None


def drop_database(server: dict[str, Any]) -> None:
    """Drop the run's database (its connections too)."""
    import psycopg2

    args = {k: server[k] for k in ("host", "port", "user", "password")}
    conn = psycopg2.connect(dbname=server["admin_db"], connect_timeout=5, **args)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {server['db']} WITH (FORCE)")
    conn.close()


class Fleet:
    """The fleet week: writers, hourly ticks, the nightly plan and its runs, the day's measurements."""

    def __init__(self, s: dict[str, Any], home: Path) -> None:
        self.s = s
        self.root = Path(s["warehouse"])
        self.tables = names(s["tables"])
        self.resource = MvccResource(root_uri=str(self.root))
        self.instance = dg.DagsterInstance.get()
        small = max(1, s["rows_per_hour"] * s["appends_per_day"] // 4)
        self.small_rows = small
        thresholds = HealthThresholds(small_fragment_rows=small, small_fragments=Level(8, 32))
        self.sensors = [
            build_version_sensor(self.tables, max_versions_per_tick=50),
            build_health_sensor(self.tables, thresholds=thresholds, clock=week.simulated_now),
        ]
        self.cursors: dict[str, str | None] = {}
        self.tick_cpu: dict[str, list[float]] = defaultdict(list)
        self.clock = week.CLOCK = SimulatedClock(s["hour_seconds"], s["retention_days"])
        self.pool = (
            ProcessPoolExecutor(max_workers=s["workers"], mp_context=get_context("spawn"))
            if s["fleet_runs"] == "dagster"
            else None
        )
        self.pending: list[tuple[str, str, int]] = []  # (table, run id, day)
        self.inflight: dict[Future, tuple[str, int]] = {}
        self.results: list[dict[str, Any]] = []
        self.writer_cpu = 0.0
        self.writes = 0
        self.nights: list[dict[str, Any]] = []
        self.days: list[dict[str, Any]] = []
        self.last: dict[str, dict[str, Any]] = {}  # table -> its figures at its last measured version
        self.held = 0.0
        self.scratch = home / "scratch"
        self.scratch.mkdir()
        self.idle = idle_appends(self.tables, s["days"] * 24)

    # -- writers (mvcc_core alone) --
    def uri(self, name: str) -> str:
        return str(self.root / name)

    def write(self, name: str, rows: pa.Table) -> None:
        try:
            mvcc.open_table(self.uri(name)).append(rows, commit_message="fleet writer")
        except mvcc.TableNotFoundError:
            t = mvcc.write_table(rows, self.uri(name), commit_message="fleet writer")
            window = f"{week.retention_window(self.s).total_seconds():.0f}s"  # the jobs' older_than: the plan's
            o = options(self.s, name)
            config: dict[str, str | None] = {"mvcc.retention.older_than": window}
            if o.target_rows_per_fragment is not None and shape(name) == "events":
                config["mvcc.compaction.target_rows_per_fragment"] = str(o.target_rows_per_fragment)
                config["mvcc.compaction.materialize_deletions_threshold"] = str(o.materialize_deletions_threshold)
            t.update_config(config)

    def merge(self, name: str, rows: pa.Table, on: str) -> None:
        try:
            table = mvcc.open_table(self.uri(name))
        except mvcc.TableNotFoundError:
            self.write(name, rows)
            return
        table.merge_insert(on).when_matched_update_all().when_not_matched_insert_all().execute(rows)

    def traffic(self, h: int) -> None:
        """Hour `h`'s commits of every table."""
        s, day = self.s, h // 24
        cpu = time.thread_time()
        for name in self.tables[:HOT]:
            kind = shape(name)
            source = f"hot_{int(name[4:]) - SHAPES.index(kind):02d}" if kind in ("upsert", "aggregate") else ""
            if kind == "events" and h % (24 // s["appends_per_day"]) == 0:
                self.write(name, week.event_rows(h, s["rows_per_hour"]))
            elif kind == "events" and day and h % 24 == s["delete_hour"]:
                ids = week.gdpr_ids(day, s["rows_per_hour"], s["delete_share"], 24 // s["appends_per_day"])
                mvcc.open_table(self.uri(name)).delete(f"event_id IN ({', '.join(map(str, ids))})")
            elif kind in ("upsert", "aggregate") and day and h % 24 == 1:
                rows = mvcc.open_table(self.uri(source)).to_table(filter=f"day = {day - 1}")
                if kind == "upsert":
                    rows = rows.sort_by([("user_id", "ascending"), ("event_id", "descending")])
                    users = rows.column("user_id").to_pylist()
                    first = [i for i, u in enumerate(users) if i == 0 or users[i - 1] != u]
                    latest = rows.take(pa.array(first, pa.int64())).select(["user_id", "event_id", "amount"])
                    self.merge(name, latest, "user_id")
                else:
                    total = pc.sum(rows.column("amount")).as_py() or 0.0
                    one = pa.table({"day": pa.array([day - 1], pa.int32()), "revenue": [total]})
                    self.merge(name, one, "day")
            elif kind == "feed" and h % 3 == 0:
                n = week.outside_rows(s)
                feed = pa.table({"feed_id": pa.array(range(h * n, h * n + n), pa.int64()), "value": [1.0] * n})
                self.write(name, feed)
            else:
                continue
            self.writes += 1
        if h == 0:  # the idle tables' first write: a few hundred rows each
            for name in self.tables[HOT:]:
                self.write(name, pa.table({"key": pa.array(range(200), pa.int64()), "value": [0.5] * 200}))
                self.writes += 1
        for name in self.idle.get(h, []):
            self.write(name, pa.table({"key": pa.array(range(h * 10, h * 10 + 10), pa.int64()), "value": [1.0] * 10}))
            self.writes += 1
        self.writer_cpu += time.thread_time() - cpu

    # -- ticks --
    def tick_sensors(self) -> None:
        for sensor in self.sensors:
            cpu = time.process_time()
            context = dg.build_sensor_context(
                instance=self.instance, cursor=self.cursors.get(sensor.name), resources={"mvcc": self.resource}
            )
            data = sensor.evaluate_tick(context)
            for event in data.asset_events or []:
                self.instance.report_runless_asset_event(event)
            self.cursors[sensor.name] = data.cursor
            self.tick_cpu[sensor.name].append(time.process_time() - cpu)

    def nightly(self, day: int) -> None:
        """The plan on the budget, then the chosen tables' maintenance."""
        s = self.s
        cpu = time.process_time()
        plan = mvcc.compaction.plan_fleet(
            {n: self.uri(n) for n in self.tables},
            max_bytes=s["budget_bytes"],
            max_tables=s["max_tables"],
            now=self.clock.now(),
        )
        self.tick_cpu["fleet plan"].append(time.process_time() - cpu)
        left: dict[str, int] = defaultdict(int)
        for entry in plan.left:
            left[entry.reason or ""] += 1
        self.nights.append(
            {
                "day": day,
                "chosen": [e.name for e in plan.chosen],
                "left": dict(left),
                "advised": len(plan.chosen) + sum(1 for e in plan.left if e.advice),
                "chosen_bytes": plan.chosen_bytes,
                "carried_bytes": plan.carried_bytes,
                "summary": plan.summary(),
            }
        )
        if s["fleet_runs"] == "core":
            for entry in plan.chosen:
                cpu, wall = cpu_seconds(), time.perf_counter()
                done = mvcc.compaction.run_fleet(dataclasses.replace(plan, chosen=(entry,)))
                self.results.append(
                    {
                        "table": entry.name,
                        "day": day,
                        "success": not done.failed,
                        "errors": [e.message for r in done.failed for e in r.errors],
                        "cpu_seconds": cpu_seconds() - cpu,
                        "wall_seconds": time.perf_counter() - wall,
                        "retries": 0,
                        "conflict_retries": 0,
                    }
                )
            return
        cutoff = {"ops": {"cleanup_old_versions": {"config": {"cutoff": self.clock.cutoff().isoformat()}}}}
        for entry in plan.chosen:
            job = fleet_job(entry.name)
            tags = {**job.tags, "week/kind": "fleet_nightly"}
            run = self.instance.create_run_for_job(
                job, run_config=cutoff, tags=tags, status=dg.DagsterRunStatus.NOT_STARTED
            )
            self.pending.append((entry.name, run.run_id, day))
        self.dispatch()

    def dispatch(self) -> None:
        """Collect finished runs; start pending ones, one per table at a time (the ``mvcc/table`` limit)."""
        if self.pool is None:
            return
        for fut in [f for f in self.inflight if f.done()]:
            table, day = self.inflight.pop(fut)
            self.results.append({**fut.result(), "table": table, "day": day})
        busy = {table for table, _ in self.inflight.values()}
        for item in list(self.pending):
            table, run_id, day = item
            if table in busy:
                continue
            self.pending.remove(item)
            busy.add(table)
            tags = dict(fleet_job(table).tags)
            self.inflight[
                self.pool.submit(week.execute_run, f"mvcc_maintenance__{table}", run_id, tags, __name__, "fleet_job_of")
            ] = (table, day)

    # -- the day's end --
    def end_of_day(self, day: int) -> None:
        ended = sum(1 for r in self.results if r["day"] == day - 1)  # the night's runs ended by now
        for name in self.tables:
            m = self.measure(name)
            if m is None:
                continue
            m["day"] = day
            self.days.append(m)
        hot = [d for d in self.days if d["day"] == day and d["kind"] != "idle"]
        idle = [d for d in self.days if d["day"] == day and d["kind"] == "idle"]
        print(
            f"day {day}: hot stored/live data {sum(d['stored_data_bytes'] for d in hot) / max(1, sum(d['live_data_bytes'] for d in hot)):.2f}, "  # noqa: E501
            f"small fragments max {max((d['small_fragments'] for d in hot), default=0)}; idle stored/live data "
            f"{sum(d['stored_data_bytes'] for d in idle) / max(1, sum(d['live_data_bytes'] for d in idle)):.2f}, "
            f"fragments max {max((d['fragments'] for d in idle), default=0)}; runs ended {ended}; "
            f"tick CPU so far {sum(sum(v) for v in self.tick_cpu.values()):.1f} s, writers {self.writer_cpu:.1f} s, "
            f"wall {time.perf_counter() - self.started:.0f} s",
            flush=True,
        )

    def measure(self, name: str) -> dict[str, Any] | None:
        """One table's day-end figures. What depends on the version only (fragments, live rows, the compacted
        copy's bytes, the scans) is measured again only when the version moved; stored bytes and versions kept
        every day (retention removes files without a new version)."""
        uri = self.uri(name)
        try:
            table = mvcc.open_table(uri)
        except mvcc.TableNotFoundError:
            return None
        root = Path(uri)
        stored_data = dir_bytes(root / "data") + (
            dir_bytes(root / "_deletions") if (root / "_deletions").exists() else 0
        )
        kept = self.last.get(name)
        if kept is None or kept["version"] != table.version:
            fragments = table.get_fragments()
            live = [f.count_rows() for f in fragments]
            physical = sum(int(f.physical_rows) for f in fragments)
            data = scan_once(uri)[0]
            copy = self.scratch / name
            shutil.rmtree(copy, ignore_errors=True)
            mvcc.write_table(data, str(copy))
            (scan, scan_cpu), (compacted, compacted_cpu) = best_scans(
                [uri, str(copy)], 1 if shape(name) == "idle" else 3
            )
            kept = self.last[name] = {
                "table": name,
                "kind": shape(name),
                "version": table.version,
                "fragments": len(fragments),
                "small_fragments": sum(1 for rows in live if rows < self.small_rows),
                "live_rows": data.num_rows,
                "live_bytes": dir_bytes(copy / "data"),
                "live_data_bytes": dir_bytes(copy / "data"),
                "deleted_share": round((physical - sum(live)) / physical, 4) if physical else 0.0,
                "scan_seconds": round(scan, 4),
                "compacted_scan_seconds": round(compacted, 4),
                "scan_cpu_seconds": round(scan_cpu, 4),
                "compacted_scan_cpu_seconds": round(compacted_cpu, 4),
            }
        return {
            **kept,
            "stored_bytes": dir_bytes(root),
            "stored_data_bytes": stored_data,
            "versions_kept": len(table.versions()),
        }

    # -- the week --
    def run(self) -> dict[str, Any]:
        s, hs = self.s, self.s["hour_seconds"]
        t0 = self.started = time.perf_counter()
        hours = s["days"] * 24
        for h in range(hours + 1):
            held = time.perf_counter()
            while len(self.inflight) + len(self.pending) > s["workers"]:  # the clock holds while the pool is full
                self.dispatch()
                time.sleep(0.05)
            t0 += time.perf_counter() - held
            self.held += time.perf_counter() - held
            while time.perf_counter() < t0 + h * hs:
                self.dispatch()
                time.sleep(min(0.05, hs / 10))
            self.clock.begin(h)
            if h and h % 24 == 0:
                self.end_of_day(h // 24)
            if h == hours:
                break
            self.traffic(h)
            self.tick_sensors()
            if h % 24 == 3:
                self.nightly(h // 24)
        while self.inflight or self.pending:
            self.dispatch()
            time.sleep(0.1)
        if self.pool is not None:
            self.pool.shutdown()
        return self.report(time.perf_counter() - t0)

    def report(self, wall: float) -> dict[str, Any]:
        # each day's maintenance: the runs of the night that began it (a run may end after the day's end)
        cpu_by: dict[tuple[str, int], float] = defaultdict(float)
        runs_by: dict[tuple[str, int], int] = defaultdict(int)
        for r in self.results:
            cpu_by[(r["table"], r["day"] + 1)] += r["cpu_seconds"]
            runs_by[(r["table"], r["day"] + 1)] += 1
        for d in self.days:
            key = (d["table"], d["day"])
            d.update(maintenance_cpu_seconds=round(cpu_by[key], 3), maintenance_runs=runs_by[key])

        def kind(**fields: Any) -> dict[str, Any]:
            return {"runs": 0, "failed": 0, "retries": 0, "conflict_retries": 0, **fields}

        runs = {
            "fleet_nightly": kind(
                runs=len(self.results),
                failed=sum(not r["success"] for r in self.results),
                retries=sum(r["retries"] for r in self.results),
                conflict_retries=sum(r["conflict_retries"] for r in self.results),
                wall_seconds=round(sum(r["wall_seconds"] for r in self.results), 3),
                cpu_seconds=round(sum(r["cpu_seconds"] for r in self.results), 3),
            ),
            "fleet_writers": kind(runs=self.writes, wall_seconds=None, cpu_seconds=round(self.writer_cpu, 3)),
            "sensor_and_schedule_ticks": kind(
                runs=sum(len(v) for v in self.tick_cpu.values()),
                wall_seconds=None,
                cpu_seconds=round(sum(sum(v) for v in self.tick_cpu.values()), 3),
            ),
        }
        per_run = [r["cpu_seconds"] for r in self.results]
        return {
            "days": self.days,
            "runs": runs,
            "pipeline_cpu_seconds": round(self.writer_cpu, 3),
            "maintenance_cpu_seconds": round(
                runs["fleet_nightly"]["cpu_seconds"] + sum(self.tick_cpu["fleet plan"]), 3
            ),
            "retention_days": self.s["retention_days"],
            "tick_cpu_seconds_by_name": {k: round(sum(v), 3) for k, v in self.tick_cpu.items()},
            "retention_older_than_seconds": week.retention_window(self.s).total_seconds(),
            "maintenance": True,
            "settings": {k: v for k, v in self.s.items() if k != "warehouse"},
            "maintenance_runs": [
                {
                    "hour": r["day"] * 24 + 3,
                    "kind": "fleet_nightly",
                    "job": f"mvcc_maintenance__{r['table']}",
                    "success": r["success"],
                }  # noqa: E501
                for r in self.results
            ],
            "duplicate_requests": [],
            "compactions_requested_twice_for_one_version": [],
            "failed_or_retried_runs": [r for r in self.results if not r["success"] or r["retries"]],
            "readers": {"scans": 0, "errors": []},
            "wall_seconds": round(wall, 1),
            "held_seconds": round(self.held, 1),
            "elapsed_seconds": round(time.perf_counter() - self.started, 1),  # real time: wall plus the holds
            "fleet": {
                "tables": len(self.tables),
                "hot": HOT,
                "idle": len(self.tables) - HOT,
                "instance": self.s["instance"],
                "runs_path": self.s["fleet_runs"],
                "budget": {"max_bytes": self.s["budget_bytes"], "max_tables": self.s["max_tables"]},
                "nights": self.nights,
                "run_cpu_seconds_median": round(statistics.median(per_run), 4) if per_run else None,
                "run_wall_seconds_median": (
                    round(statistics.median(r["wall_seconds"] for r in self.results), 4) if per_run else None
                ),
                "ticks": {
                    name: {
                        "ticks": len(v),
                        "cpu_seconds": round(sum(v), 3),
                        "median_ms": round(statistics.median(v) * 1000, 2),
                        "max_ms": round(max(v) * 1000, 2),
                    }
                    for name, v in self.tick_cpu.items()
                },
            },
        }


def fleet_job_of(job_name: str) -> dg.JobDefinition:
    """`fleet_job` by its job's name (``mvcc_maintenance__<table>``): the run worker's reconstructable target."""
    return fleet_job(job_name.removeprefix("mvcc_maintenance__"))


def main(a: Any, argv: list[str] | None) -> dict[str, Any]:
    """Run the fleet week of the parsed command line `a` (`benchmarks.week.cli`) and print its summary."""
    if a.tables < HOT + 1:
        raise SystemExit(
            f"--tables {a.tables}: a fleet has the {HOT} hot tables and at least one idle one (give 11 or more)"
        )
    home = Path(tempfile.mkdtemp(prefix="mvcc-fleet-", dir=a.keep))
    (home / "dagster").mkdir()
    storage, server = ("", None) if a.instance == "sqlite" else postgres_database()
    (home / "dagster" / "dagster.yaml").write_text(week.DAGSTER_YAML + storage)
    os.environ["DAGSTER_HOME"] = str(home / "dagster")
    s = {
        "tables": a.tables,
        "days": a.days,
        "hour_seconds": a.hour_seconds,
        "rows_per_hour": a.rows_per_hour,
        "retention_days": a.retention_days,
        "appends_per_day": a.appends_per_day,
        "workers": a.workers,
        "warehouse": str(home / "warehouse"),
        "delete_share": a.delete_share,
        "delete_hour": a.delete_hour,
        "materialize_deletions": a.materialize_deletions,
        "instance": a.instance,
        "fleet_runs": a.fleet_runs,
        "max_tables": a.max_tables or max(1, a.tables // 10),
        "budget_bytes": a.budget_bytes,
    }
    os.environ[week.SETTINGS_ENV] = json.dumps(s)
    sys.path.insert(0, str(week.ROOT))
    server_cpu = server_cpu_seconds() if server is not None else None
    try:
        fleet = Fleet(s, home)
        try:
            result = fleet.run()
        finally:
            fleet.instance.dispose()
        if server_cpu is not None:
            # the server's own CPU is outside this process tree: the instance's cost beside the runs' and ticks'
            time.sleep(1)  # the closed connections' backends end and are reaped (their CPU then counts)
            after = server_cpu_seconds()
            result["fleet"]["postgres_server_cpu_seconds"] = None if after is None else round(after - server_cpu, 2)
    finally:
        if server is not None:
            drop_database(server)
        if a.keep is None:
            shutil.rmtree(home, ignore_errors=True)
    result["targets"] = targets(result)
    result["command"] = " ".join(["python -m benchmarks.week", *(argv if argv is not None else sys.argv[1:])])
    result["date"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]
    summary = {k: result["fleet"][k] for k in ("tables", "instance", "runs_path", "budget", "run_cpu_seconds_median")}
    summary["ticks"] = result["fleet"]["ticks"]
    summary["nights"] = [
        {k: n[k] for k in ("day", "advised", "left", "chosen_bytes")} for n in result["fleet"]["nights"]
    ]
    print(
        json.dumps({"runs": result["runs"], "fleet": summary, "elapsed_seconds": result["elapsed_seconds"]}, indent=1)
    )
    if a.json:
        a.json.write_text(json.dumps(result, indent=1))
    return result
