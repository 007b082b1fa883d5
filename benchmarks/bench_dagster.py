"""Dagster benchmark (issue 14): the same 100k-row asset materialized 20 times through `MvccIOManager` and
through dagster-deltalake's `DeltaLakePyarrowIOManager` (both overwrite, same instance, same process,
interleaved), the ratio of the median step times, and the plugin's overhead over a bare `Table.append` of the
same data: an append-mode asset's step time minus (a) a bare append's time and (b) the step time of an asset
that does the same bare append itself (no IO manager; what Dagster's step machinery costs), all medians. (b)
is the plugin's own cost: opening the table, the transaction properties, the metadata and the data version.

Step time = the STEP_SUCCESS event's duration (the asset's compute, which returns a prepared table, plus the
IO manager's write and its metadata). Not a test: run it by hand or through benchmarks/run.py.

    python benchmarks/bench_dagster.py            # 100k rows, 20 materializations each
    python benchmarks/bench_dagster.py --quick    # 100k rows, 8 materializations each
"""

import argparse
import json
import logging
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
from mvcc_dagster import MvccIOManager

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    args = parser.parse_args()
    logging.getLogger("dagster").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore")
    result = run(8 if args.quick else 20, ROWS)
    print(
        f"{result['rows']:,} rows x {result['times']}: MvccIOManager {result['mvcc_ms']:.1f} ms, "
        f"DeltaLakePyarrowIOManager {result['deltalake_ms']:.1f} ms (ratio {result['ratio']:.2f}); "
        f"append step {result['append_step_ms']:.1f} ms vs bare append {result['bare_append_ms']:.1f} ms "
        f"(overhead {result['overhead_ms']:.1f} ms); a Dagster step doing the bare append "
        f"{result['bare_append_step_ms']:.1f} ms (plugin's own overhead {result['plugin_overhead_ms']:.1f} ms)"
    )
    if args.out:
        Path(args.out).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
