"""Dagster benchmark: the same 100k-row asset materialized 20 times through `MvccIOManager` and
through dagster-deltalake's `DeltaLakePyarrowIOManager` (both overwrite, same instance, same process,
interleaved), the ratio of the median step times, and the plugin's overhead over a bare `Table.append` of the
same data: an append-mode asset's step time minus (a) a bare append's time and (b) the step time of an asset
that does the same bare append itself (no IO manager; what Dagster's step machinery costs), all medians. (b)
is the plugin's own cost: opening the table, the transaction properties, the metadata and the data version.

Step time = the STEP_SUCCESS event's duration (the asset's compute, which returns a prepared table, plus the
IO manager's write and its metadata). Not a test: run it by hand or through benchmarks/run.py.

Also: one version-sensor tick over 100 unchanged tables (target < 1 s), and the compaction job
(`build_compaction_job` as a user builds it: default executor choice and options, in a code location whose
executor is Dagster's default, multiprocess; a real run through `execute_job`) against the core's
`compact_files()` in this process, on 1,000 fragments x 100 rows and 200 fragments x 50,000 rows, each side on a
fresh copy of the same table, shapes and sides interleaved, medians (targets: at most 3 s more than
`compact_files()` for the first, at most 1.3x for the second). The run's time is split from its event log:
start-up before the first step, step processes started, each step's compute. CPU counts step processes too
(`RUSAGE_CHILDREN`). `--mapped` adds one run of the explicit mapped multiprocess form (a step process per task).

    python -m benchmarks.suite.bench_dagster                    # 20 materializations each; compaction medians of 3
    python -m benchmarks.suite.bench_dagster --quick            # 8 materializations each; compaction once
    python -m benchmarks.suite.bench_dagster --compaction-only  # only the compaction comparison (with --mapped)
"""

import argparse
import json
import logging
import os
import shutil
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
from benchmarks.harness import cpu_seconds
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
COMPACTION_TABLE = "fragmented"
# (fragments, rows per fragment): many small appends, and fewer fragments of real size (the week's shapes)
COMPACTION_SHAPES = ((1000, 100), (200, 50_000))


def compaction_defs() -> dg.Definitions:
    """The code location the runs rebuild (`reconstructable`): Dagster's default executor (multiprocess), the
    compaction job as a user builds it (default executor choice, default options), and the explicit mapped
    multiprocess form for comparison."""
    return dg.Definitions(
        jobs=[
            build_compaction_job(COMPACTION_TABLE),
            build_compaction_job(COMPACTION_TABLE, executor="dagster", name="mapped_compaction"),
        ],
        executor=dg.multiprocess_executor.configured({"max_concurrent": 2}),
        resources={"mvcc": MvccResource(root_uri=dg.EnvVar(COMPACTION_WAREHOUSE_ENV))},
    )


def compaction_job() -> dg.JobDefinition:
    """The default job, for `reconstructable`."""
    return compaction_defs().resolve_job_def(f"mvcc_compaction__{COMPACTION_TABLE}")


def mapped_compaction_job() -> dg.JobDefinition:
    """The explicit mapped form (``executor="dagster"``: a step process per task), for `reconstructable`."""
    return compaction_defs().resolve_job_def("mapped_compaction")


def fragmented_table(uri: str, fragments: int, rows_per_fragment: int) -> mvcc.Table:
    """A table of `fragments` one-file fragments (the labels taken from 997 strings, not built per row)."""
    rows = fragments * rows_per_fragment
    rng = np.random.default_rng(7)
    labels = pa.array([f"item-{i}" for i in range(997)]).take(pa.array(np.arange(rows) % 997))
    table = pa.table(
        {
            "id": np.arange(rows, dtype=np.int64),
            "user": rng.integers(0, 1000, rows),
            "amount": rng.random(rows),
            "label": labels,
        }
    )
    return mvcc.write_table(table, uri, max_rows_per_file=rows_per_fragment)


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
        "step_processes": len(worker_start),
        "to_first_step_ms": (step_start - started) * 1000,
        "step_process_start_ms_sum": sum(worker_start) * 1000,
        "reserve_ms": durations["reserve_fragments"],
        "rewrite_ms_sum": sum(durations[k] for k in rewrites),
        "commit_ms": durations["commit_rewrite"],
        "run_ms": (run_end - started) * 1000,
    }


def _timed_job(job: Any, instance: dg.DagsterInstance, root: Path) -> dict[str, float]:
    os.environ[COMPACTION_WAREHOUSE_ENV] = str(root)
    cpu, start, wall = cpu_seconds(), time.time(), time.perf_counter()
    with dg.execute_job(job, instance=instance) as result:
        assert result.success
        run_id = result.run_id
    sample = {"wall_ms": (time.perf_counter() - wall) * 1000, "cpu_ms": (cpu_seconds() - cpu) * 1000}
    return {**sample, **run_breakdown(instance, run_id, start)}


def _timed_compact_files(uri: str) -> dict[str, float]:
    t = mvcc.open_table(uri)
    cpu, wall = cpu_seconds(), time.perf_counter()
    t.optimize.compact_files()
    return {"wall_ms": (time.perf_counter() - wall) * 1000, "cpu_ms": (cpu_seconds() - cpu) * 1000}


def run_compaction(
    shapes: tuple[tuple[int, int], ...] = COMPACTION_SHAPES, repeats: int = 3, mapped: bool = False
) -> dict[str, Any]:
    """The compaction job (default executor choice, in a code location whose executor is Dagster's default,
    multiprocess) against `compact_files()` in this process, default options, on a fresh copy of the same
    fragmented table each time; the shapes and the two sides interleaved (the side going first alternates).
    With `mapped`, the explicit mapped multiprocess form too (slow: a step process per task)."""
    job = dg.reconstructable(compaction_job)
    mapped_job = dg.reconstructable(mapped_compaction_job)
    samples: dict[str, dict[str, list[dict[str, float]]]] = {}
    with tempfile.TemporaryDirectory(prefix="mvcc-bench-compaction-") as tmp, dg.instance_for_test() as instance:
        sources = {}
        for fragments, rows in shapes:
            source = Path(tmp) / f"source-{fragments}x{rows}"
            fragmented_table(str(source), fragments, rows)
            sources[(fragments, rows)] = source
        for i in range(repeats):
            for (fragments, rows), source in sources.items():
                shape = samples.setdefault(f"{fragments}x{rows}", {"job": [], "compact_files": [], "mapped": []})
                root = Path(tmp) / f"run{i}-{fragments}x{rows}"
                shutil.copytree(source, root / "job" / COMPACTION_TABLE)
                shutil.copytree(source, root / "core" / COMPACTION_TABLE)
                sides = [
                    ("job", lambda r=root: _timed_job(job, instance, r / "job")),
                    ("compact_files", lambda r=root: _timed_compact_files(str(r / "core" / COMPACTION_TABLE))),
                ]
                for side, measure in sides if i % 2 == 0 else sides[::-1]:
                    shape[side].append(measure())
                job_after = mvcc.open_table(str(root / "job" / COMPACTION_TABLE)).get_fragments()
                core_after = mvcc.open_table(str(root / "core" / COMPACTION_TABLE)).get_fragments()
                assert len(job_after) == len(core_after) < fragments
                if mapped and i == 0:
                    shutil.copytree(source, root / "mapped" / COMPACTION_TABLE)
                    shape["mapped"].append(_timed_job(mapped_job, instance, root / "mapped"))
                shutil.rmtree(root)
    result: dict[str, Any] = {"repeats": repeats, "shapes": {}}
    for name, shape in samples.items():
        fragments, rows = (int(x) for x in name.split("x"))
        job_ms = statistics.median(s["wall_ms"] for s in shape["job"])
        core_ms = statistics.median(s["wall_ms"] for s in shape["compact_files"])
        best = min(shape["job"], key=lambda s: s["wall_ms"])
        result["shapes"][name] = {
            "fragments": fragments,
            "rows_per_fragment": rows,
            "job_ms": job_ms,
            "compact_files_ms": core_ms,
            "job_cpu_ms": statistics.median(s["cpu_ms"] for s in shape["job"]),
            "compact_files_cpu_ms": statistics.median(s["cpu_ms"] for s in shape["compact_files"]),
            "extra_ms": job_ms - core_ms,
            "ratio": job_ms / core_ms,
            "breakdown": best,
            "mapped_ms": shape["mapped"][0]["wall_ms"] if shape["mapped"] else None,
            "samples": shape,
        }
    return result


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


def print_compaction(c: dict[str, Any]) -> None:
    for r in c["shapes"].values():
        b = r["breakdown"]
        mapped = f"; mapped multiprocess form {r['mapped_ms']:.0f} ms" if r["mapped_ms"] is not None else ""
        print(
            f"compaction of {r['fragments']:,} fragments x {r['rows_per_fragment']:,} rows, median of {c['repeats']}: "
            f"job (default executor) {r['job_ms']:.0f} ms wall / {r['job_cpu_ms']:.0f} ms CPU vs compact_files() "
            f"{r['compact_files_ms']:.0f} ms / {r['compact_files_cpu_ms']:.0f} ms CPU: +{r['extra_ms']:.0f} ms, "
            f"{r['ratio']:.2f}x. Best run: {b['steps']} steps ({b['rewrite_steps']} rewrite), {b['step_processes']} "
            f"step processes, to first step {b['to_first_step_ms']:.0f} ms, reserve {b['reserve_ms']:.0f} ms, "
            f"rewrite {b['rewrite_ms_sum']:.0f} ms, commit {b['commit_ms']:.0f} ms{mapped}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    parser.add_argument("--compaction-only", action="store_true", help="only the compaction job vs compact_files()")
    parser.add_argument("--mapped", action="store_true", help="also the mapped multiprocess form (slow)")
    args = parser.parse_args()
    logging.getLogger("dagster").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore")
    if args.compaction_only:
        result = {"compaction": run_compaction(repeats=1 if args.quick else 3, mapped=args.mapped)}
        print_compaction(result["compaction"])
        if args.out:
            Path(args.out).write_text(json.dumps(result))
        return
    result = run(8 if args.quick else 20, ROWS)
    result["sensor_tick"] = run_sensor_tick(100, 5 if args.quick else 20)
    result["compaction"] = run_compaction(repeats=1 if args.quick else 3, mapped=args.mapped)
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
    print_compaction(result["compaction"])
    if args.out:
        Path(args.out).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
