"""Dagster catalog benchmark: what publishing two tables in one catalog version costs a run.

Three ways to land the same two appends (10k rows into a fact table, 100 into a dimension), interleaved,
each repeated: (a) a `multi_asset` through `MvccCatalogResource` (one catalog version), (b) two assets through
`MvccIOManager` (two independent table commits, no atomicity), (c) the bare catalog transaction without
Dagster. Reported per landing: the process CPU time (`time.process_time`, the machine is shared) and the wall
time, min and median. Not a test; not in benchmarks/run.py yet:

    python -m benchmarks.suite.bench_dagster_catalog [--repeat 10]
"""

import argparse
import json
import logging
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa

import mvcc_core as mvcc
from mvcc_dagster import MvccCatalogResource, MvccIOManager

FACT, DIM = dg.AssetKey(["sales", "orders"]), dg.AssetKey(["sales", "customers"])


def frames(n: int) -> tuple[pa.Table, pa.Table]:
    fact = pa.table({"order_id": pa.array(range(n * 10_000, (n + 1) * 10_000), pa.int64()), "batch": [n] * 10_000})
    dim = pa.table({"customer_id": pa.array(range(n * 100, (n + 1) * 100), pa.int64()), "batch": [n] * 100})
    return fact, dim


@dg.multi_asset(specs=[dg.AssetSpec(FACT), dg.AssetSpec(DIM)], config_schema={"n": int})
def catalog_load(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
    fact, dim = frames(context.op_execution_context.op_config["n"])
    with mvcc_catalog.transaction(context) as tx:
        tx.append(FACT, fact)
        tx.append(DIM, dim)
    return tx.materialize_results()


@dg.asset(key=FACT, metadata={"mvcc/write_mode": "append"}, config_schema={"n": int})
def io_fact(context: dg.AssetExecutionContext) -> pa.Table:
    return frames(context.op_execution_context.op_config["n"])[0]


@dg.asset(key=DIM, metadata={"mvcc/write_mode": "append"}, config_schema={"n": int})
def io_dim(context: dg.AssetExecutionContext) -> pa.Table:
    return frames(context.op_execution_context.op_config["n"])[1]


def measure(fn: Callable[[int], None], n: int) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    fn(n)
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=None, help="runs per variant (default 10, --quick 3)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, help="also write the results as JSON here (benchmarks/run.py)")
    args = parser.parse_args()
    args.repeat = args.repeat or (3 if args.quick else 10)
    warnings.simplefilter("ignore")
    logging.getLogger("dagster").setLevel(logging.ERROR)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, dg.instance_for_test() as instance:
        cat_root, io_root, bare_root = f"{tmp}/cat", f"{tmp}/io", f"{tmp}/bare"
        catalog_res = {"mvcc_catalog": MvccCatalogResource(root_uri=cat_root)}
        io_res = {"io_manager": MvccIOManager(root_uri=io_root)}
        bare = mvcc.Catalog.create(bare_root)
        bare.create_schema("sales")
        bare.create_table("sales.orders", frames(0)[0].schema)
        bare.create_table("sales.customers", frames(0)[1].schema)

        def via_catalog(n: int) -> None:
            config = {"ops": {"catalog_load": {"config": {"n": n}}}}
            assert dg.materialize([catalog_load], instance=instance, resources=catalog_res, run_config=config).success

        def via_io_manager(n: int) -> None:
            config = {"ops": {"sales__orders": {"config": {"n": n}}, "sales__customers": {"config": {"n": n}}}}
            assert dg.materialize([io_fact, io_dim], instance=instance, resources=io_res, run_config=config).success

        def bare_transaction(n: int) -> None:
            fact, dim = frames(n)
            with bare.transaction() as tx:
                tx.table("sales.orders").append(fact)
                tx.table("sales.customers").append(dim)

        variants = {"catalog_multi_asset": via_catalog, "io_manager_two_assets": via_io_manager}
        variants["bare_catalog_transaction"] = bare_transaction
        for fn in variants.values():  # warm-up (creates the tables)
            fn(0)
        samples: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
        for n in range(1, args.repeat + 1):
            for name, fn in variants.items():
                samples[name].append(measure(fn, n))
        for name, values in samples.items():
            cpu, wall = [v[0] for v in values], [v[1] for v in values]
            out[name] = {
                "cpu_min_ms": round(min(cpu) * 1000, 1),
                "cpu_median_ms": round(statistics.median(cpu) * 1000, 1),
                "wall_min_ms": round(min(wall) * 1000, 1),
                "wall_median_ms": round(statistics.median(wall) * 1000, 1),
            }
        out["catalog_versions"] = mvcc.Catalog.open(cat_root).latest_version
    print(json.dumps(out, indent=2))
    if args.out:
        args.out.write_text(json.dumps(out))


if __name__ == "__main__":
    main()
