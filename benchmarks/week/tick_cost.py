"""What one tick of the week's sensors and schedules costs, idle and after a commit (benchmarks/results.md,
"The week").

``python -m benchmarks.week.tick_cost [--profile mvcc_version_sensor|mvcc_health_sensor|schedule]`` builds the
week's four tables (six commits each) and a Dagster instance with benchmarks/week/simulation.py's ``dagster.yaml`` and
definitions under a temporary home, and measures in CPU seconds of this process the median of `--ticks` idle
ticks of each sensor, of `--commits` ticks each after one commit to ``partner_feed`` (runless events reported
to the instance as the daemon does), and of three evaluations of each nightly schedule. Each sensor is ticked
two ways: as benchmarks/week/simulation.py does (``build_sensor_context`` with the instance and the ``mvcc`` resource),
and as the daemon's code server does (``daemon``: a context with the instance's reference, the repository and
its top-level resources the sensor requires, as `dagster._grpc.impl` builds it). ``--profile`` then prints a
cProfile of 20 ticks of one of them (week.py's way; ``--after-commit``: each after a commit).

``--peer TREE --rounds N``: the same measurement of this tree and of TREE (another worktree: its ``mvcc_core``
and ``mvcc_dagster``, this script and this tree's benchmarks/week/simulation.py), each round one worker process per
tree,
the order alternating; prints each tree's medians over the rounds and this tree's / TREE's ratios.
"""

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

import mvcc_core as mvcc

HERE = Path(__file__).resolve().parent


def main() -> None:
    """Print the medians (JSON), then the profile asked for."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ticks", type=int, default=30)
    p.add_argument("--commits", type=int, default=10)
    p.add_argument("--profile", help="a sensor's name, or 'schedule'")
    p.add_argument("--after-commit", action="store_true", help="with --profile: a commit before each profiled tick")
    p.add_argument("--peer", type=Path, help="another worktree to measure in the same run, interleaved")
    p.add_argument("--rounds", type=int, default=3, help="with --peer: worker processes per tree")
    a = p.parse_args()
    if a.peer is not None:
        compare(a)
        return
    measure(a)


def compare(a: argparse.Namespace) -> None:
    """This tree against `a.peer`, one worker a tree a round, alternating which goes first."""
    trees = {"this": HERE.parents[1], "peer": a.peer.resolve()}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for r in range(a.rounds):
        for name in list(trees)[:: 1 if r % 2 == 0 else -1]:
            env = {**os.environ, "PYTHONPATH": str(trees[name])}
            argv = [
                sys.executable,
                "-m",
                "benchmarks.week.tick_cost",
                "--ticks",
                str(a.ticks),
                "--commits",
                str(a.commits),
            ]
            out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True, cwd=trees[name]).stdout
            runs[name].append(json.loads(out.strip().splitlines()[-1]))
            print(f"round {r + 1} {name}: {runs[name][-1]}", file=sys.stderr)
    medians = {name: {k: statistics.median(m[k] for m in ms) for k in ms[0]} for name, ms in runs.items()}
    ratios = {k: round(medians["this"][k] / medians["peer"][k], 3) for k in medians["this"] if medians["peer"][k]}
    print(json.dumps({"trees": {n: str(t) for n, t in trees.items()}, "medians ms": medians, "this / peer": ratios}))


def measure(a: argparse.Namespace) -> None:
    """Build the tables and the instance, tick, print the medians (JSON, one line) and the profile asked for."""
    from benchmarks.week import simulation as week  # its dagster.yaml, definitions and settings
    from benchmarks.week.run_cost import quick_home

    s = quick_home(week, "mvcc-tick-cost-")
    for name in week.TABLES:
        for i in range(6):
            rows = pa.table({"feed_id": list(range(i * 100, i * 100 + 100)), "value": [1.0] * 100})
            uri = f"{s['warehouse']}/{name}"
            mvcc.write_table(rows, uri) if i == 0 else mvcc.open_table(uri).append(rows)

    import dagster as dg

    instance = dg.DagsterInstance.get()
    defs = week.week_definitions()
    repo = defs.get_repository_def()
    resources = {"mvcc": week.MvccResource(root_uri=s["warehouse"])}
    cursors: dict[str, Any] = {}

    def tick(sensor: dg.SensorDefinition) -> None:
        context = dg.build_sensor_context(
            instance=instance,
            cursor=cursors.get(sensor.name),
            definitions=defs,
            sensor_name=sensor.name,
            resources=resources,
        )
        data = sensor.evaluate_tick(context)
        for event in data.asset_events or []:
            instance.report_runless_asset_event(event)
        cursors[sensor.name] = data.cursor

    instance_ref = instance.get_ref()
    top_level = repo.get_top_level_resources()

    def daemon_tick(sensor: dg.SensorDefinition) -> None:
        # what dagster._grpc.impl.get_external_sensor_execution does in the code server, per tick
        with dg.SensorEvaluationContext(
            instance_ref,
            last_tick_completion_time=None,
            last_run_key=None,
            cursor=cursors.get(sensor.name),
            log_key=["week", sensor.name, "tick"],
            repository_name=repo.name,
            repository_def=repo,
            sensor_name=sensor.name,
            resources={k: v for k, v in top_level.items() if k in sensor.required_resource_keys},
        ) as context:
            data = sensor.evaluate_tick(context)
        for event in data.asset_events or []:
            instance.report_runless_asset_event(event)
        cursors[sensor.name] = data.cursor

    def evaluate(schedule: dg.ScheduleDefinition) -> None:
        context = dg.build_schedule_context(
            instance=instance, scheduled_execution_time=datetime.now(UTC), resources=resources
        )
        schedule.evaluate_tick(context)

    def cpu_of(fn: Any, *args: Any) -> float:
        started = time.process_time()
        fn(*args)
        return time.process_time() - started

    for sensor in repo.sensor_defs:
        tick(sensor)
    out = {}
    feed = f"{s['warehouse']}/{week.OUTSIDE_TABLE}"
    commits = 0
    for how, ticker in (("", tick), ("daemon ", daemon_tick)):
        for sensor in repo.sensor_defs:
            idle = [cpu_of(ticker, sensor) for _ in range(a.ticks)]
            out[f"{how}{sensor.name} idle ms"] = statistics.median(idle) * 1000
            after = []
            for _ in range(a.commits):
                mvcc.open_table(feed).append(pa.table({"feed_id": [commits], "value": [1.0]}))
                commits += 1
                after.append(cpu_of(ticker, sensor))
            out[f"{how}{sensor.name} after one commit ms"] = statistics.median(after) * 1000
    evaluations = [cpu_of(evaluate, schedule) for schedule in repo.schedule_defs for _ in range(3)]
    out["schedule evaluation ms"] = statistics.median(evaluations) * 1000
    print(json.dumps({k: round(v, 2) for k, v in out.items()}))
    if a.profile:
        profile = cProfile.Profile()
        for _ in range(20):
            if a.after_commit:
                mvcc.open_table(feed).append(pa.table({"feed_id": [commits], "value": [1.0]}))
                commits += 1
            profile.enable()
            if a.profile == "schedule":
                evaluate(repo.schedule_defs[0])
            else:
                tick(next(x for x in repo.sensor_defs if x.name == a.profile))
            profile.disable()
        pstats.Stats(profile).sort_stats("cumtime").print_stats(30)


if __name__ == "__main__":
    main()
