"""Airflow benchmark: the compaction group (`mvcc_compaction_group`: reserve_fragments, rewrite_fragments
mapped over the tasks, commit_rewrite) run by `airflow dags test` against the core's `compact_files()` in
process (the floor), on the same table shape and options: 1,000 fragments of 100 rows, 8 tasks. Alternated,
a fresh table per run, best of N.

The Airflow run's time is split from its metadata database (task_instance start/end): the tasks' own
durations (each includes Airflow's per-task work: the task runner, the XCom reads and writes through the
execution API, the connection lookup, opening the table) and what remains of the run's wall time (the
`airflow` command's start-up, parsing the DAG file, serializing it, creating the run, scheduling each task).
Overhead per task = (sum of task durations - compact_files() wall) / task instances; overhead per run = run
wall - sum of task durations. CPU counts the `airflow` subprocess (`RUSAGE_CHILDREN`). Not a test: run it by
hand or through benchmarks/run.py.

    python -m benchmarks.suite.bench_airflow            # 1,000 fragments, best of 2
    python -m benchmarks.suite.bench_airflow --quick    # 200 fragments, one run
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import mvcc_core as mvcc
from benchmarks.harness import cpu_seconds

ROWS_PER_FRAGMENT = 100
TASKS = 8
TABLE = "events"
AIRFLOW = str(Path(sys.executable).with_name("airflow"))

DAG_SOURCE = """
from datetime import datetime
from airflow.sdk import DAG
from mvcc_airflow import mvcc_compaction_group

with DAG("bench_compaction", schedule=None, start_date=datetime(2026, 1, 1)):
    mvcc_compaction_group("events", group_id="compact", options={{"target_rows_per_fragment": {target}}})
"""


def fragmented_table(uri: str, fragments: int) -> mvcc.Table:
    rows = fragments * ROWS_PER_FRAGMENT
    rng = np.random.default_rng(7)
    data = pa.table(
        {
            "id": np.arange(rows, dtype=np.int64),
            "user": rng.integers(0, 1000, rows),
            "amount": rng.random(rows),
            "label": pa.array([f"item-{i % 997}" for i in range(rows)]),
        }
    )
    return mvcc.write_table(data, uri, max_rows_per_file=ROWS_PER_FRAGMENT)


def airflow_home(root: Path) -> dict[str, str]:
    """A migrated AIRFLOW_HOME with sqlite under `root`; the environment that uses it."""
    (root / "dags").mkdir(parents=True)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")},
        "AIRFLOW_HOME": str(root),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(root / "dags"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{root}/airflow.db",
    }
    subprocess.run([AIRFLOW, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    return env


def task_durations(db: Path, run_id: str | None = None) -> dict[str, float]:
    """Milliseconds per task instance of the latest run (`task_id[map_index]`), from the metadata database."""
    with sqlite3.connect(db) as conn:
        (latest,) = conn.execute("SELECT run_id FROM dag_run ORDER BY id DESC LIMIT 1").fetchone()
        rows = conn.execute(
            "SELECT task_id, map_index, start_date, end_date FROM task_instance WHERE run_id = ?", (run_id or latest,)
        ).fetchall()
    out = {}
    for task_id, map_index, start, end in rows:
        seconds = (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
        out[f"{task_id}[{map_index}]"] = seconds * 1000
    return out


def run_compaction(fragments: int, repeats: int) -> dict[str, Any]:
    target = fragments * ROWS_PER_FRAGMENT // TASKS
    airflow_runs: list[dict[str, Any]] = []
    in_process: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="mvcc-bench-airflow-") as tmp:
        home = Path(tmp) / "airflow_home"
        env = airflow_home(home)
        dag = home / "dags" / "bench_compaction.py"
        dag.write_text(textwrap.dedent(DAG_SOURCE.format(target=target)))
        for i in range(repeats):
            root = Path(tmp) / f"airflow{i}"
            fragmented_table(str(root / TABLE), fragments)
            run_env = {**env, "AIRFLOW_CONN_MVCC_DEFAULT": json.dumps({"conn_type": "mvcc", "host": str(root)})}
            cpu, wall = cpu_seconds(), time.perf_counter()
            done = subprocess.run(
                [AIRFLOW, "dags", "test", "bench_compaction", f"2026-01-{i + 1:02d}", "-f", str(dag)],
                env=run_env,
                capture_output=True,
                text=True,
                timeout=1800,
            )
            sample = {"wall_ms": (time.perf_counter() - wall) * 1000, "cpu_ms": (cpu_seconds() - cpu) * 1000}
            assert "state=success" in done.stdout + done.stderr, (done.stdout + done.stderr)[-3000:]
            assert len(mvcc.open_table(str(root / TABLE)).get_fragments()) == TASKS
            tasks = task_durations(home / "airflow.db")
            airflow_runs.append({**sample, "tasks": tasks, "task_ms_sum": sum(tasks.values())})

            t = fragmented_table(str(Path(tmp) / f"inproc{i}"), fragments)
            cpu, wall = cpu_seconds(), time.perf_counter()
            metrics = t.optimize.compact_files(target_rows_per_fragment=target)
            in_process.append({"wall_ms": (time.perf_counter() - wall) * 1000, "cpu_ms": (cpu_seconds() - cpu) * 1000})
            assert metrics.fragments_removed == fragments
    best = min(airflow_runs, key=lambda r: r["wall_ms"])
    floor = min(in_process, key=lambda r: r["wall_ms"])
    instances = len(best["tasks"])
    return {
        "fragments": fragments,
        "rows": fragments * ROWS_PER_FRAGMENT,
        "tasks": TASKS,
        "task_instances": instances,
        "repeats": repeats,
        "airflow_ms": best["wall_ms"],
        "airflow_cpu_ms": min(r["cpu_ms"] for r in airflow_runs),
        "in_process_ms": floor["wall_ms"],
        "in_process_cpu_ms": min(r["cpu_ms"] for r in in_process),
        "ratio": best["wall_ms"] / floor["wall_ms"],
        "cpu_ratio": min(r["cpu_ms"] for r in airflow_runs) / min(r["cpu_ms"] for r in in_process),
        "task_ms_sum": best["task_ms_sum"],
        "overhead_per_task_ms": (best["task_ms_sum"] - floor["wall_ms"]) / instances,
        "overhead_per_run_ms": best["wall_ms"] - best["task_ms_sum"],
        "breakdown": best["tasks"],
        "samples": {"airflow": airflow_runs, "in_process": in_process},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 fragments, one run")
    parser.add_argument("--out", help="write the results as JSON here (benchmarks/run.py)")
    args = parser.parse_args()
    result = {"compaction": run_compaction(200, 1) if args.quick else run_compaction(1000, 2)}
    c = result["compaction"]
    print(
        f"compaction group, {c['fragments']:,} fragments, {c['tasks']} tasks via `airflow dags test`: "
        f"{c['airflow_ms']:.0f} ms (CPU {c['airflow_cpu_ms']:.0f} ms); compact_files() in process "
        f"{c['in_process_ms']:.0f} ms (CPU {c['in_process_cpu_ms']:.0f} ms); ratio {c['ratio']:.1f}x "
        f"(CPU {c['cpu_ratio']:.1f}x); overhead per task {c['overhead_per_task_ms']:.0f} ms over "
        f"{c['task_instances']} task instances, per run {c['overhead_per_run_ms']:.0f} ms"
    )
    for name, ms in sorted(c["breakdown"].items()):
        print(f"  {name}: {ms:.0f} ms")
    if args.out:
        Path(args.out).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
