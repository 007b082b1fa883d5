"""What the week's per-table costs grow with (benchmarks/week/simulation.py ``--scaling``; docs/operations/running.md
"How the
numbers scale"): one local table of the week's events, its health-sensor ticks, compaction and retention."""

import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import dagster as dg

import mvcc_core as mvcc
from benchmarks.harness import cpu_seconds
from benchmarks.week.metrics import dir_bytes
from benchmarks.week.simulation import event_rows
from mvcc_dagster import MvccResource, build_health_sensor


def measure_scaling(rows_per_commit: int = 20_000, commits: int = 168) -> dict[str, Any]:
    """What the per-table costs grow with, measured on one local table (docs/operations/running.md "How the numbers
    scale"): the health sensor's work for one table per tick against the versions kept, and compaction's and
    retention's CPU for the bytes they process."""
    out: dict[str, Any] = {"rows_per_commit": rows_per_commit}
    with tempfile.TemporaryDirectory(prefix="mvcc-week-scaling-") as tmp:
        uri = str(Path(tmp) / "t")
        resources = {"mvcc": MvccResource(root_uri=tmp)}
        instance = dg.DagsterInstance.ephemeral()  # the sensor looks up maintenance runs on its instance
        running = build_health_sensor(["t"])  # no repair jobs: it evaluates the checks and requests nothing
        cold: dict[int, float] = {}
        warm: dict[int, float] = {}

        def tick_cpu(sensor: dg.SensorDefinition) -> float:
            cpu = time.process_time()
            sensor.evaluate_tick(dg.build_sensor_context(instance=instance, resources=resources))
            return round(time.process_time() - cpu, 4)

        for i in range(commits):
            batch = event_rows(i, rows_per_commit)
            mvcc.write_table(batch, uri, mode="create" if i == 0 else "append")
            running_cpu = tick_cpu(running)  # the long-lived sensor sees every version once (one tick per commit)
            if i + 1 in (1, 24, 72, commits):
                warm[i + 1] = running_cpu
                cold[i + 1] = tick_cpu(build_health_sensor(["t"]))  # a sensor's first tick: every version read
        out["health_tick_cpu_seconds_by_versions_kept"] = cold
        out["health_tick_cpu_seconds_by_versions_kept_one_new_version"] = warm
        data_bytes = dir_bytes(Path(uri) / "data")
        cpu, wall = cpu_seconds(), time.perf_counter()
        mvcc.open_table(uri).optimize.compact_files(target_rows_per_fragment=rows_per_commit * 24)
        out["compaction"] = {
            "bytes": data_bytes,
            "rows": rows_per_commit * commits,
            "cpu_seconds": round(cpu_seconds() - cpu, 3),
            "wall_seconds": round(time.perf_counter() - wall, 3),
        }
        cpu = cpu_seconds()
        stats = mvcc.open_table(uri).cleanup_old_versions(older_than=timedelta(0))
        out["retention"] = {"cpu_seconds": round(cpu_seconds() - cpu, 3), "stats": str(stats)[:300]}
    return out
