"""Write-audit-publish benchmark: what the branch, the audit and the publish add to a materialization.

The same 100k-row asset materialized through `MvccIOManager` as a plain overwrite and with
``mvcc/write_audit_publish: true`` and one blocking branch check (a count from the manifest, so the figure is
the flow's cost, not the audit's), interleaved in one process on one instance; the median STEP_SUCCESS
duration of each, the median CPU time of each run in this process, and their ratios. Also the publish
alone: `create_branch` + overwrite on the branch + `publish_branch` against a plain `overwrite`, bare core
calls, interleaved. Not a test.

    python -m benchmarks.suite.bench_wap                        # 15 rounds, in-memory then sqlite instance
    python -m benchmarks.suite.bench_wap --instance sqlite --rounds 5
"""

import argparse
import contextlib
import json
import logging
import statistics
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import numpy as np
import pyarrow as pa

import mvcc_core as mvcc
from mvcc_dagster import BranchAudit, MvccIOManager, audited_output, branch_check
from mvcc_dagster.metadata import WRITE_AUDIT_PUBLISH

ROWS = 100_000


def data(rows: int) -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table({"id": np.arange(rows, dtype=np.int64), "amount": rng.random(rows)})


def step_ms(result: dg.ExecuteInProcessResult) -> float:
    (event,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_SUCCESS]
    return float(event.event_specific_data.duration_ms)


def run(rounds: int, rows: int, ephemeral: bool = False) -> dict[str, Any]:
    table = data(rows)

    @branch_check("audited")
    def has_rows(audit: BranchAudit) -> bool:
        return audit.table.count_rows() == rows

    @dg.asset(name="plain")
    def plain() -> pa.Table:
        return table

    @dg.asset(name="audited", metadata={WRITE_AUDIT_PUBLISH: True}, check_specs=[has_rows.spec])
    def audited(context: dg.AssetExecutionContext) -> Iterator[Any]:
        yield from audited_output(context, table)

    steps: dict[str, list[float]] = {"plain": [], "wap": []}
    cpu: dict[str, list[float]] = {"plain": [], "wap": []}  # the whole run's CPU time in this process
    core: dict[str, list[float]] = {"overwrite": [], "branch_publish": []}
    instances = contextlib.nullcontext(dg.DagsterInstance.ephemeral()) if ephemeral else dg.instance_for_test()
    with tempfile.TemporaryDirectory() as root, instances as instance:
        io = {"io_manager": MvccIOManager(root_uri=root)}
        for asset in (plain, audited):  # first writes (table creation) not measured
            dg.materialize([asset], instance=instance, resources=io)
        bare = mvcc.write_table(table, f"{root}/bare")
        for i in range(rounds):
            order = [("plain", plain), ("wap", audited)][:: 1 if i % 2 == 0 else -1]
            for name, asset in order:
                started = time.process_time()
                steps[name].append(step_ms(dg.materialize([asset], instance=instance, resources=io)))
                cpu[name].append((time.process_time() - started) * 1000)
            for name in ("overwrite", "branch_publish")[:: 1 if i % 2 == 0 else -1]:
                start = time.perf_counter()
                if name == "overwrite":
                    bare.overwrite(table)
                else:
                    bare.create_branch(f"b{i}").overwrite(table)
                    bare.publish_branch(f"b{i}", delete_branch=True)
                core[name].append((time.perf_counter() - start) * 1000)
                bare = bare.checkout_latest()
    med = {k: statistics.median(v) for k, v in {**steps, **core}.items()}
    return {
        "rows": rows,
        "rounds": rounds,
        "instance": "ephemeral (in-memory event log)" if ephemeral else "sqlite (instance_for_test)",
        "step_ms": {"plain": med["plain"], "wap": med["wap"], "ratio": med["wap"] / med["plain"]},
        "run_cpu_ms": {
            "plain": statistics.median(cpu["plain"]),
            "wap": statistics.median(cpu["wap"]),
            "ratio": statistics.median(cpu["wap"]) / statistics.median(cpu["plain"]),
        },
        "core_ms": {
            "overwrite": med["overwrite"],
            "branch_publish": med["branch_publish"],
            "ratio": med["branch_publish"] / med["overwrite"],
        },
        "samples": {**steps, **core},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument(
        "--instance", choices=("both", "ephemeral", "sqlite"), default="both", help="the Dagster instance(s)"
    )
    parser.add_argument("--quick", action="store_true", help="5 rounds (benchmarks/run.py --quick)")
    parser.add_argument("--out", help="write the results as JSON here (benchmarks/run.py)")
    args = parser.parse_args()
    logging.getLogger("dagster").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    rounds = 5 if args.quick else args.rounds
    kinds = ("ephemeral", "sqlite") if args.instance == "both" else (args.instance,)
    results = {kind: run(rounds, args.rows, kind == "ephemeral") for kind in kinds}
    print(json.dumps({k: {n: v for n, v in r.items() if n != "samples"} for k, r in results.items()}, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(results))


if __name__ == "__main__":
    main()
