"""What one tick of the week's sensors and schedules costs, idle and after a commit (docs/operations.md, "Round 5").

``python benchmarks/week_tick_cost.py [--profile mvcc_version_sensor|mvcc_health_sensor|schedule]`` builds the
week's four tables (six commits each) and a Dagster instance with benchmarks/week.py's ``dagster.yaml`` and
definitions under a temporary home, and measures in CPU seconds of this process the median of `--ticks` idle
ticks of each sensor, of `--commits` ticks each after one commit to ``partner_feed`` (runless events reported
to the instance as the daemon does), and of three evaluations of each nightly schedule. ``--profile`` then
prints a cProfile of 20 ticks of one of them.
"""

import argparse
import cProfile
import json
import pstats
import statistics
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
    a = p.parse_args()
    sys.path.insert(0, str(HERE))
    import week  # its dagster.yaml, definitions and settings
    from week_run_cost import quick_home

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
    for sensor in repo.sensor_defs:
        out[f"{sensor.name} idle ms"] = statistics.median(cpu_of(tick, sensor) for _ in range(a.ticks)) * 1000
        after = []
        for i in range(a.commits):
            mvcc.open_table(feed).append(pa.table({"feed_id": [i], "value": [1.0]}))
            after.append(cpu_of(tick, sensor))
        out[f"{sensor.name} after one commit ms"] = statistics.median(after) * 1000
    evaluations = [cpu_of(evaluate, schedule) for schedule in repo.schedule_defs for _ in range(3)]
    out["schedule evaluation ms"] = statistics.median(evaluations) * 1000
    print(json.dumps({k: round(v, 2) for k, v in out.items()}))
    if a.profile:
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(20):
            if a.profile == "schedule":
                evaluate(repo.schedule_defs[0])
            else:
                tick(next(x for x in repo.sensor_defs if x.name == a.profile))
        profile.disable()
        pstats.Stats(profile).sort_stats("cumtime").print_stats(30)


if __name__ == "__main__":
    main()
