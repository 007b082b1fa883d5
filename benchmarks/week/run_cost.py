"""What one maintenance run and one sensor tick of the week cost, this tree against a peer tree, interleaved.

``python -m benchmarks.week.run_cost --peer /work/main --rounds 5`` runs, alternately for this tree and the
peer (a checkout of the code before a change), a worker process that builds the week's tables (a few appends
of the week's events and of the outside writer's feed, benchmarks/week/simulation.py), a Dagster instance with that
tree's ``benchmarks/week/simulation.py`` settings (its ``dagster.yaml``), and measures in CPU seconds of that process:
the nightly maintenance run (``mvcc_maintenance__<table>``, executed as the week executes runs) and the
retention run of each table, and the health and version sensors' ticks with nothing new. Each figure is the
median of ``--runs`` runs (after one warm-up) in a round; the report gives the medians over the rounds and the
ratio this / peer (benchmarks/results.md, "The week"), and the events each run
wrote to the event log (``..., events``: Dagster events and log lines, of the last run).

``--one-run`` also measures the prototype of one nightly run for every table
(docs/integrations/dagster/maintenance.md, "What a
nightly run costs"): the four tables' nightly graphs composed into one job (`one_run_job`), against the four
nightly runs one after the other (``nightly runs, four tables`` / ``one run, four tables``). The week's two
daily tables are stood in for by small tables of a few versions (their maintenance work is milliseconds).
``--event-log consolidated`` gives both trees' instances one event-log database (Dagster's
``ConsolidatedSqliteEventLogStorage``, as a Postgres instance has one) instead of sqlite's database per run.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TABLES = ("raw_events", "partner_feed")
ALL_TABLES = ("raw_events", "partner_feed", "user_latest", "daily_revenue")
ONE_RUN_JOB = "mvcc_maintenance__every_table"


def one_run_job() -> Any:
    """The prototype: every table's nightly graph (the schedule's job) as one subgraph of one job.

    Returns:
        The job (one process, the nightly jobs' tags but ``mvcc/table``).
    """
    import dagster as dg

    from benchmarks.week import simulation as week
    from mvcc_dagster.maintenance.target import maintenance_job

    defs = week.week_definitions()
    graphs = {t: defs.resolve_job_def(f"mvcc_maintenance__{t}").graph for t in ALL_TABLES}

    @dg.graph(name=ONE_RUN_JOB)
    def every_table() -> None:
        for table, graph in graphs.items():
            graph.alias(table)()

    job = maintenance_job(
        every_table,
        name=ONE_RUN_JOB,
        table_tag="*",
        description="prototype: every table's nightly maintenance in one run",
        executor_def=dg.in_process_executor,
    )
    return dg.Definitions(jobs=[job], resources=defs.resources).resolve_job_def(ONE_RUN_JOB)  # binds ``mvcc``


def run_events(instance: Any, run_id: str) -> int:
    """The records the run wrote to the event log (Dagster events and log lines)."""
    return len(instance.all_logs(run_id))


CONSOLIDATED_EVENT_LOG = """\
event_log_storage:
  module: dagster._core.storage.event_log
  class: ConsolidatedSqliteEventLogStorage
  config:
    base_dir: {home}/history
"""
EVENT_LOG_ENV = "MVCC_RUN_COST_EVENT_LOG"  # "consolidated": the worker's instance gets CONSOLIDATED_EVENT_LOG


def quick_home(week: Any, prefix: str) -> dict[str, Any]:
    """A temporary ``DAGSTER_HOME`` with `week`'s ``dagster.yaml`` and its ``--quick`` settings (warehouse in the
    same directory), both set in the environment as `week.main` sets them.

    Args:
        week: A tree's benchmarks/week/simulation.py module.
        prefix: The temporary directory's prefix.

    Returns:
        The settings.
    """
    home = Path(tempfile.mkdtemp(prefix=prefix))
    (home / "dagster").mkdir()
    consolidated = os.environ.get(EVENT_LOG_ENV) == "consolidated"
    extra = CONSOLIDATED_EVENT_LOG.format(home=home / "dagster") if consolidated else ""
    (home / "dagster" / "dagster.yaml").write_text(week.DAGSTER_YAML + extra)
    os.environ["DAGSTER_HOME"] = str(home / "dagster")
    s = {**week.QUICK, "executor": "default", "warehouse": str(home / "warehouse"), "delete_share": 0.01}
    s.update(delete_hour=3, amplification_warn=3.0, removable_share=0.3)
    os.environ[week.SETTINGS_ENV] = json.dumps(s)
    return s


def launch_cpu(instance: Any, module: str, fn: str, args: tuple, job_def: Any, run_config: dict) -> tuple[float, int]:
    """Create a run of `job_def` and execute it as `week.execute_run` does (instance, code load, run): CPU, events."""
    import dagster as dg
    from dagster._core.execution.api import execute_run as launch

    run = instance.create_run_for_job(
        job_def, run_config=run_config, tags=dict(job_def.tags), status=dg.DagsterRunStatus.NOT_STARTED
    )
    started = time.process_time()
    worker_instance = dg.DagsterInstance.get()
    recon = dg.build_reconstructable_job(
        module, fn, reconstructable_args=args, reconstructor_working_directory=str(HERE.parents[1])
    )
    result = launch(recon, worker_instance.get_run_by_id(run.run_id), worker_instance)
    assert result.success
    return time.process_time() - started, run_events(instance, run.run_id)


def one_run_rounds(week: Any, instance: Any, defs: Any, runs: int, cutoff: str) -> dict[str, float]:
    """The four tables' nightly runs one after the other against the prototype's one run, alternately."""
    import mvcc_core as mvcc

    s = week.settings()
    for table in ("user_latest", "daily_revenue"):  # stand-ins of a few versions (the week's are KB tables)
        uri = f"{s['warehouse']}/{table}"
        for i in range(3):
            rows = week.pa.table({"key": list(range(i * 10, i * 10 + 10)), "value": [float(i)] * 10})
            mvcc.write_table(rows, uri) if i == 0 else mvcc.open_table(uri).append(rows)
    one = one_run_job()
    config = {"cleanup_old_versions": {"config": {"cutoff": cutoff}}}
    separate, together, events = [], [], 0
    for _ in range(runs + 1):
        cpu = 0.0
        for table in ALL_TABLES:
            job = f"mvcc_maintenance__{table}"
            cpu += launch_cpu(
                instance, "benchmarks.week.simulation", "job_named", (job,), defs.resolve_job_def(job), {"ops": config}
            )[0]
        separate.append(cpu)
        all_config = {"ops": {t: {"ops": config} for t in ALL_TABLES}}
        cpu, events = launch_cpu(instance, "benchmarks.week.run_cost", "one_run_job", (), one, all_config)
        together.append(cpu)
    return {
        "nightly runs, four tables": statistics.median(separate[1:]),
        "one run, four tables": statistics.median(together[1:]),
        "one run, four tables, events": events,
    }


def measure(tree: Path, runs: int, ticks: int, one_run: bool = False) -> dict[str, float]:
    """In a worker: build the tables and an instance under a temporary home, time the runs and ticks."""
    sys.path.insert(0, str(tree))
    import mvcc_core as mvcc
    from benchmarks.week import simulation as week  # the measured tree's: its dagster.yaml, definitions, runs

    s = quick_home(week, "mvcc-run-cost-")
    for hour in range(0, 24, 4):
        rows = week.event_rows(hour, s["rows_per_hour"])
        uri = f"{s['warehouse']}/raw_events"
        mvcc.write_table(rows, uri) if hour == 0 else mvcc.open_table(uri).append(rows)
    for hour in range(0, 24, 3):
        feed = week.pa.table({"feed_id": list(range(hour * 100, hour * 100 + 100)), "value": [1.0] * 100})
        uri = f"{s['warehouse']}/partner_feed"
        mvcc.write_table(feed, uri) if hour == 0 else mvcc.open_table(uri).append(feed)

    import dagster as dg

    instance = dg.DagsterInstance.get()
    defs = week.week_definitions()
    out: dict[str, float] = {}
    cutoff = {"ops": {"cleanup_old_versions": {"config": {"cutoff": ""}}}}
    for table in TABLES:
        for kind, job in (("nightly", f"mvcc_maintenance__{table}"), ("retention", f"mvcc_retention__{table}")):
            job_def = defs.resolve_job_def(job)
            cpu, run_id = [], ""
            for _ in range(runs + 1):
                cutoff["ops"]["cleanup_old_versions"]["config"]["cutoff"] = (
                    datetime.now(UTC) - timedelta(seconds=1)
                ).isoformat()
                run = instance.create_run_for_job(
                    job_def, run_config=cutoff, tags=dict(job_def.tags), status=dg.DagsterRunStatus.NOT_STARTED
                )
                result = week.execute_run(job, run.run_id, dict(job_def.tags))
                assert result["success"], result["errors"]
                cpu.append(result["cpu_seconds"])
                run_id = run.run_id
            out[f"{kind} run, {table}"] = statistics.median(cpu[1:])
            out[f"{kind} run, {table}, events"] = run_events(instance, run_id)
    if one_run:
        out.update(one_run_rounds(week, instance, defs, runs, (datetime.now(UTC) - timedelta(seconds=1)).isoformat()))
    resources = {"mvcc": week.MvccResource(root_uri=s["warehouse"])}
    for sensor in defs.get_repository_def().sensor_defs:
        cursor, cpu = None, []
        for _ in range(ticks + 1):
            started = time.process_time()
            context = dg.build_sensor_context(
                instance=instance, cursor=cursor, definitions=defs, sensor_name=sensor.name, resources=resources
            )
            cursor = sensor.evaluate_tick(context).cursor
            cpu.append(time.process_time() - started)
        out[f"{sensor.name} tick"] = statistics.median(cpu[1:])
    return out


def main() -> None:
    """Alternate this tree and the peer, print the medians and ratios (JSON)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--peer", type=Path, required=True, help="the other tree (its benchmarks/week/simulation.py and packages)"
    )
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--runs", type=int, default=5, help="runs of each job per round (after a warm-up run)")
    p.add_argument("--ticks", type=int, default=20, help="ticks of each sensor per round (after the first)")
    p.add_argument("--one-run", action="store_true", help="also the prototype of one nightly run for every table")
    p.add_argument(
        "--event-log", choices=("per-run", "consolidated"), default="per-run", help="sqlite's event-log databases"
    )
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        print(json.dumps(measure(a.peer, a.runs, a.ticks, a.one_run)))
        return
    trees = {"this": HERE.parents[1], "peer": a.peer.resolve()}
    results: dict[str, list[dict[str, float]]] = {"this": [], "peer": []}
    for _ in range(a.rounds):
        for name, tree in trees.items():
            env = {**os.environ, "PYTHONPATH": str(tree), EVENT_LOG_ENV: a.event_log}  # the tree's packages
            args = [sys.executable, "-m", "benchmarks.week.run_cost", "--worker", "--peer", str(tree)]
            args += ["--runs", str(a.runs), "--ticks", str(a.ticks)] + (["--one-run"] if a.one_run else [])
            done = subprocess.run(args, env=env, capture_output=True, text=True, check=True, cwd=tree)
            results[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    report = {}
    for key in results["this"][0]:
        this = statistics.median(r[key] for r in results["this"])
        peer = statistics.median(r[key] for r in results["peer"])
        report[key] = {"this_cpu_s": round(this, 4), "peer_cpu_s": round(peer, 4), "ratio": round(this / peer, 3)}
    settings = {"rounds": a.rounds, "runs": a.runs, "ticks": a.ticks, "event_log": a.event_log}
    print(json.dumps({**settings, "medians": report}, indent=1))


if __name__ == "__main__":
    main()
