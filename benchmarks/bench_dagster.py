"""Dagster benchmark: the same 100k-row asset materialized 20 times through `MvccIOManager` and
through dagster-deltalake's `DeltaLakePyarrowIOManager` (both overwrite, same instance, same process,
interleaved), the ratio of the median step times, and the plugin's overhead over a bare `Table.append` of the
same data: an append-mode asset's step time minus (a) a bare append's time and (b) the step time of an asset
that does the same bare append itself (no IO manager; what Dagster's step machinery costs), all medians. (b)
is the plugin's own cost: opening the table, the transaction properties, the metadata and the data version.

Step time = the STEP_SUCCESS event's duration (the asset's compute, which returns a prepared table, plus the
IO manager's write and its metadata). Not a test: run it by hand or through benchmarks/run.py.

Also: one version-sensor tick over 100 unchanged tables (target < 1 s), and the compaction job
(`build_compaction_job`, the specification's three steps) over 1,000 small fragments on Dagster's multiprocess
executor (2 processes) against the core's `compact_files()` in process (thread executor), same table shape and
options, alternated, best of N. The Dagster run's overhead is split from its event log: the run's start-up before
the first step, each step process's start (STEP_WORKER_STARTING -> STEP_START: a fresh interpreter importing
dagster and rebuilding the job), the steps' own compute, and what remains (event writes, the pickled handoffs
between steps). CPU time counts the step processes too (`RUSAGE_CHILDREN`).

    python benchmarks/bench_dagster.py            # 100k rows, 20 materializations each; 1,000 fragments x 3
    python benchmarks/bench_dagster.py --quick    # 100k rows, 8 materializations each; 200 fragments x 1
"""

import argparse
import json
import logging
import os
import resource
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import dagster as dg
import numpy as np
import pyarrow as pa
from dagster_deltalake import DeltaLakePyarrowIOManager, LocalConfig

import mvcc_core as mvcc
from mvcc_dagster import MvccIOManager, MvccResource, build_compaction_job, build_version_sensor

ROWS = 100_000


def data(rows: int) -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table(
        {
            "id": np.arange(rows, dtype=np.int64),
            "user": rng.integers(0, 1000, rows),
            "amount": rng.random(rows),
            "label": pa.array([f"item-{i % 997}" for i in range(rows)]),
        }
    )


def step_ms(result: dg.ExecuteInProcessResult) -> float:
    (event,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_SUCCESS]
    return float(event.event_specific_data.duration_ms)


def run(times: int, rows: int) -> dict[str, Any]:
    table = data(rows)

    @dg.asset(name="events")
    def mvcc_events() -> pa.Table:
        return table

    @dg.asset(name="events_appended", metadata={"mvcc/write_mode": "append"})
    def mvcc_appended() -> pa.Table:
        return table

    @dg.asset(name="events", key_prefix=["delta"])
    def delta_events() -> pa.Table:
        return table

    samples: dict[str, list[float]] = {
        "mvcc": [],
        "deltalake": [],
        "mvcc_append_step": [],
        "bare_append": [],
        "bare_append_step": [],
    }
    with tempfile.TemporaryDirectory(prefix="mvcc-bench-dagster-") as tmp, dg.instance_for_test() as instance:
        root = Path(tmp)
        mvcc_io = {"io_manager": MvccIOManager(root_uri=str(root / "mvcc"))}
        delta_io = {
            "io_manager": DeltaLakePyarrowIOManager(root_uri=str(root / "delta"), storage_options=LocalConfig())
        }
        bare = mvcc.write_table(table, str(root / "bare"))
        in_step = mvcc.write_table(table, str(root / "in_step"))

        @dg.asset(name="bare_append_in_step")
        def bare_in_step() -> None:
            in_step.append(table)

        for _ in range(times):
            samples["mvcc"].append(step_ms(dg.materialize([mvcc_events], instance=instance, resources=mvcc_io)))
            samples["deltalake"].append(step_ms(dg.materialize([delta_events], instance=instance, resources=delta_io)))
            samples["mvcc_append_step"].append(
                step_ms(dg.materialize([mvcc_appended], instance=instance, resources=mvcc_io))
            )
            samples["bare_append_step"].append(step_ms(dg.materialize([bare_in_step], instance=instance)))
            start = time.perf_counter()
            bare.append(table)
            samples["bare_append"].append((time.perf_counter() - start) * 1000)
    med = {k: statistics.median(v) for k, v in samples.items()}
    return {
        "rows": rows,
        "times": times,
        "mvcc_ms": med["mvcc"],
        "deltalake_ms": med["deltalake"],
        "ratio": med["mvcc"] / med["deltalake"],
        "append_step_ms": med["mvcc_append_step"],
        "bare_append_ms": med["bare_append"],
        "bare_append_step_ms": med["bare_append_step"],
        "overhead_ms": med["mvcc_append_step"] - med["bare_append"],
        "plugin_overhead_ms": med["mvcc_append_step"] - med["bare_append_step"],
        "samples": samples,
    }


# ---- the compaction job vs compact_files() ---------------------------------------------------------------

COMPACTION_WAREHOUSE_ENV = "MVCC_BENCH_WAREHOUSE"
COMPACTION_TARGET_ENV = "MVCC_BENCH_TARGET_ROWS"
COMPACTION_TABLE = "fragmented"
ROWS_PER_FRAGMENT = 100
TASKS = 8


def compaction_job() -> dg.JobDefinition:
    """The job the step processes rebuild (`reconstructable`): the table and sizes come from the environment."""
    options = mvcc.CompactionOptions(target_rows_per_fragment=int(os.environ[COMPACTION_TARGET_ENV]))
    defs = dg.Definitions(
        jobs=[build_compaction_job(COMPACTION_TABLE, options=options)],
        executor=dg.multiprocess_executor.configured({"max_concurrent": 2}),
        resources={"mvcc": MvccResource(root_uri=dg.EnvVar(COMPACTION_WAREHOUSE_ENV))},
    )
    return defs.resolve_job_def(f"mvcc_compaction__{COMPACTION_TABLE}")


def fragmented_table(uri: str, fragments: int) -> mvcc.Table:
    rows = fragments * ROWS_PER_FRAGMENT
    return mvcc.write_table(data(rows), uri, max_rows_per_file=ROWS_PER_FRAGMENT)


def cpu_seconds() -> float:
    """CPU of this process and of its finished children (the step processes)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def run_breakdown(instance: dg.DagsterInstance, run_id: str, started: float) -> dict[str, float]:
    """Where the run's time went, in ms, from its event log (timestamps are seconds since the epoch)."""
    events = [(r.timestamp, r.dagster_event) for r in instance.all_logs(run_id) if r.dagster_event is not None]
    first = {}
    for ts, e in events:
        first.setdefault((e.event_type, e.step_key), ts)
    steps = {e.step_key for _, e in events if e.event_type == dg.DagsterEventType.STEP_SUCCESS}
    durations = {
        e.step_key: float(e.event_specific_data.duration_ms)
        for _, e in events
        if e.event_type == dg.DagsterEventType.STEP_SUCCESS
    }
    worker_start = [
        first[(dg.DagsterEventType.STEP_START, k)] - first[(dg.DagsterEventType.STEP_WORKER_STARTING, k)]
        for k in steps
        if (dg.DagsterEventType.STEP_WORKER_STARTING, k) in first
    ]
    rewrites = sorted(k for k in steps if k.startswith("rewrite_fragments["))
    step_start = min(first[(dg.DagsterEventType.STEP_START, k)] for k in steps)
    run_end = max(ts for ts, e in events if e.event_type == dg.DagsterEventType.RUN_SUCCESS)
    return {
        "steps": len(steps),
        "rewrite_steps": len(rewrites),
        "to_first_step_ms": (step_start - started) * 1000,
        "step_process_start_ms_mean": statistics.mean(worker_start) * 1000 if worker_start else 0.0,
        "step_process_start_ms_sum": sum(worker_start) * 1000,
        "reserve_ms": durations["reserve_fragments"],
        "rewrite_ms_sum": sum(durations[k] for k in rewrites),
        "rewrite_span_ms": (
            max(first[(dg.DagsterEventType.STEP_SUCCESS, k)] for k in rewrites)
            - min(first[(dg.DagsterEventType.STEP_START, k)] for k in rewrites)
        )
        * 1000,
        "commit_ms": durations["commit_rewrite"],
        "run_ms": (run_end - started) * 1000,
    }


def run_compaction(fragments: int, repeats: int) -> dict[str, Any]:
    target = fragments * ROWS_PER_FRAGMENT // TASKS
    os.environ[COMPACTION_TARGET_ENV] = str(target)
    job = dg.reconstructable(compaction_job)
    dagster_runs: list[dict[str, float]] = []
    in_process: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="mvcc-bench-compaction-") as tmp, dg.instance_for_test() as instance:
        for i in range(repeats):
            root = Path(tmp) / f"dagster{i}"
            fragmented_table(str(root / COMPACTION_TABLE), fragments)
            os.environ[COMPACTION_WAREHOUSE_ENV] = str(root)
            cpu, start, wall = cpu_seconds(), time.time(), time.perf_counter()
            with dg.execute_job(job, instance=instance) as result:
                assert result.success
                run_id = result.run_id
            sample = {"wall_ms": (time.perf_counter() - wall) * 1000, "cpu_ms": (cpu_seconds() - cpu) * 1000}
            dagster_runs.append({**sample, **run_breakdown(instance, run_id, start)})
            assert len(mvcc.open_table(str(root / COMPACTION_TABLE)).get_fragments()) == TASKS

            t = fragmented_table(str(Path(tmp) / f"inproc{i}"), fragments)
            cpu, wall = cpu_seconds(), time.perf_counter()
            metrics = t.optimize.compact_files(target_rows_per_fragment=target)
            in_process.append({"wall_ms": (time.perf_counter() - wall) * 1000, "cpu_ms": (cpu_seconds() - cpu) * 1000})
            assert metrics.fragments_removed == fragments
    best = min(dagster_runs, key=lambda r: r["wall_ms"])
    best_in_process = min(in_process, key=lambda r: r["wall_ms"])
    step_compute = best["reserve_ms"] + best["rewrite_span_ms"] + best["commit_ms"]
    return {
        "fragments": fragments,
        "rows": fragments * ROWS_PER_FRAGMENT,
        "tasks": TASKS,
        "repeats": repeats,
        "dagster_ms": best["wall_ms"],
        "dagster_cpu_ms": min(r["cpu_ms"] for r in dagster_runs),
        "in_process_ms": best_in_process["wall_ms"],
        "in_process_cpu_ms": min(r["cpu_ms"] for r in in_process),
        "ratio": best["wall_ms"] / best_in_process["wall_ms"],
        "cpu_ratio": min(r["cpu_ms"] for r in dagster_runs) / min(r["cpu_ms"] for r in in_process),
        "breakdown": best,
        "outside_steps_ms": best["wall_ms"] - step_compute,
        "samples": {"dagster": dagster_runs, "in_process": in_process},
    }


# ---- a version-sensor tick with nothing new ---------------------------------------------------------------


def run_sensor_tick(tables: int, ticks: int) -> dict[str, Any]:
    """One tick of `build_version_sensor` over `tables` local tables none of which has a new version (after a
    first tick that recorded their first versions), median of `ticks`; target < 1 s for 100 tables."""
    with tempfile.TemporaryDirectory(prefix="mvcc-bench-sensor-") as tmp, dg.instance_for_test() as instance:
        names = [f"t{i:03d}" for i in range(tables)]
        for name in names:
            mvcc.write_table(pa.table({"n": [1]}), f"{tmp}/{name}")
        sensor = build_version_sensor(names)
        resources = {"mvcc": MvccResource(root_uri=tmp)}
        cursor = sensor(dg.build_sensor_context(instance=instance, resources=resources)).cursor
        wall, cpu = [], []
        for _ in range(ticks):
            context = dg.build_sensor_context(instance=instance, resources=resources, cursor=cursor)
            w, c = time.perf_counter(), time.process_time()
            result = sensor(context)
            wall.append((time.perf_counter() - w) * 1000)
            cpu.append((time.process_time() - c) * 1000)
            assert not result.asset_events and not result.run_requests and result.cursor == cursor
    return {"tables": tables, "ticks": ticks, "tick_ms": statistics.median(wall), "tick_cpu_ms": statistics.median(cpu)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    args = parser.parse_args()
    logging.getLogger("dagster").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore")
    result = run(8 if args.quick else 20, ROWS)
    result["sensor_tick"] = run_sensor_tick(100, 5 if args.quick else 20)
    result["compaction"] = run_compaction(200 if args.quick else 1000, 1 if args.quick else 3)
    print(
        f"{result['rows']:,} rows x {result['times']}: MvccIOManager {result['mvcc_ms']:.1f} ms, "
        f"DeltaLakePyarrowIOManager {result['deltalake_ms']:.1f} ms (ratio {result['ratio']:.2f}); "
        f"append step {result['append_step_ms']:.1f} ms vs bare append {result['bare_append_ms']:.1f} ms "
        f"(overhead {result['overhead_ms']:.1f} ms); a Dagster step doing the bare append "
        f"{result['bare_append_step_ms']:.1f} ms (plugin's own overhead {result['plugin_overhead_ms']:.1f} ms)"
    )
    t = result["sensor_tick"]
    print(
        f"version sensor tick over {t['tables']} unchanged tables: {t['tick_ms']:.1f} ms "
        f"({t['tick_cpu_ms']:.1f} ms CPU, median of {t['ticks']})"
    )
    c = result["compaction"]
    b = c["breakdown"]
    print(
        f"compaction of {c['fragments']:,} fragments ({c['rows']:,} rows, {c['tasks']} tasks): Dagster job on the "
        f"multiprocess executor {c['dagster_ms']:.0f} ms wall / {c['dagster_cpu_ms']:.0f} ms CPU vs compact_files() "
        f"in process {c['in_process_ms']:.0f} ms / {c['in_process_cpu_ms']:.0f} ms CPU (ratio {c['ratio']:.1f}x wall, "
        f"{c['cpu_ratio']:.1f}x CPU). Run: to first step {b['to_first_step_ms']:.0f} ms, {b['steps']} step processes "
        f"starting {b['step_process_start_ms_mean']:.0f} ms each ({b['step_process_start_ms_sum']:.0f} ms in all), "
        f"reserve {b['reserve_ms']:.0f} ms, rewrite steps {b['rewrite_ms_sum']:.0f} ms of compute over "
        f"{b['rewrite_span_ms']:.0f} ms, commit {b['commit_ms']:.0f} ms"
    )
    if args.out:
        Path(args.out).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
