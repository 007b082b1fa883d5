"""Catalog write-audit-publish benchmark: what the catalog branch, the audit and the publish add to a catalog
asset's step.

The same multi_asset (two tables, `--rows` rows appended to each per run) through `MvccCatalogResource`, plain
(one catalog version on main) and with ``mvcc/write_audit_publish: true`` and one blocking branch check that
only counts rows (so the figure is the flow's cost, not the audit's), each on its own catalog, interleaved in
one process on one in-memory Dagster instance; the median STEP_SUCCESS duration of each, the median CPU time
of each run in this process, and their ratios. Not a test.

    python -m benchmarks.suite.bench_catalog_wap                # 9 rounds, 10,000 rows per table
    python -m benchmarks.suite.bench_catalog_wap --rounds 5 --rows 1000
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

from mvcc_dagster import BranchAudit, MvccCatalogResource, branch_check
from mvcc_dagster.metadata import WRITE_AUDIT_PUBLISH

ORDERS, CUSTOMERS = dg.AssetKey(["sales", "orders"]), dg.AssetKey(["sales", "customers"])


def step_ms(result: dg.ExecuteInProcessResult) -> float:
    (event,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_SUCCESS]
    return float(event.event_specific_data.duration_ms)


def build(rows: int, wap: bool) -> dg.AssetsDefinition:
    rng = np.random.default_rng(7)
    orders = pa.table({"id": np.arange(rows, dtype=np.int64), "amount": rng.random(rows)})
    customers = pa.table({"id": np.arange(rows, dtype=np.int64), "name": [f"c{i}" for i in range(rows)]})
    meta = {WRITE_AUDIT_PUBLISH: True} if wap else {}
    checks = []
    if wap:

        @branch_check(ORDERS, name="has_rows")
        def has_rows(audit: BranchAudit) -> bool:
            return audit.table.count_rows() > 0

        checks = [has_rows.spec]

    @dg.multi_asset(
        specs=[dg.AssetSpec(ORDERS, metadata=meta), dg.AssetSpec(CUSTOMERS, metadata=meta)],
        check_specs=checks,
        name="load",
    )
    def load(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
        with mvcc_catalog.transaction(context) as tx:
            tx.append(ORDERS, orders)
            tx.append(CUSTOMERS, customers)
        return tx.materialize_results()

    return load


def run(rounds: int, rows: int) -> dict[str, Any]:
    assets = {"plain": build(rows, False), "wap": build(rows, True)}
    steps: dict[str, list[float]] = {"plain": [], "wap": []}
    cpu: dict[str, list[float]] = {"plain": [], "wap": []}
    instance = dg.DagsterInstance.ephemeral()
    with tempfile.TemporaryDirectory() as root:
        resources = {name: {"mvcc_catalog": MvccCatalogResource(root_uri=f"{root}/{name}")} for name in assets}
        for name, asset in assets.items():  # first writes (catalog and table creation) not measured
            dg.materialize([asset], instance=instance, resources=resources[name])
        for i in range(rounds):
            for name in ("plain", "wap")[:: 1 if i % 2 == 0 else -1]:
                started = time.process_time()
                result = dg.materialize([assets[name]], instance=instance, resources=resources[name])
                steps[name].append(step_ms(result))
                cpu[name].append((time.process_time() - started) * 1000)
    step = {k: statistics.median(v) for k, v in steps.items()}
    run_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    return {
        "rows_per_table": rows,
        "rounds": rounds,
        "instance": "ephemeral (in-memory event log)",
        "step_ms": {**step, "ratio": step["wap"] / step["plain"]},
        "run_cpu_ms": {**run_cpu, "ratio": run_cpu["wap"] / run_cpu["plain"]},
        "samples": steps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="3 rounds of 2,000 rows")
    parser.add_argument("--out", type=Path, help="also write the JSON results here (benchmarks/run.py reads them)")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.rows = 3, 2_000
    logging.getLogger("dagster").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    results = run(args.rounds, args.rows)
    print(json.dumps(results, indent=2))
    if args.out:
        args.out.write_text(json.dumps(results))


if __name__ == "__main__":
    main()
