"""Catalog branch benchmark: what a catalog branch adds over writing main, on the same catalog, as ratios.

On a catalog of `tables` tables (1,000 rows each), each round takes a fresh copy and times, interleaved:
a catalog transaction on main appending 100 rows to two tables (the peer); the first transaction on a new
catalog branch doing the same (it forks both tables); a second transaction on that branch (the forks exist);
and `publish_branch` of the two tables' changes onto main. Then, on two more fresh copies, a publish after main
moved: the branch deletes five rows of two tables and appends one; main deletes another row (published as it
is) or one of the same rows (the branch's writes run again): `publish_after_main_moved_ms`, the second's ratio
to the first. Medians of the rounds; the machine is shared, so read the ratios. Not a test: run it by hand.

    python -m benchmarks.suite.bench_catalog_branches            # 10 tables, median of 7 rounds
    python -m benchmarks.suite.bench_catalog_branches --quick    # 4 tables, median of 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from mvcc_core.catalog import Catalog

IDS = pa.schema([("id", pa.int64())])


def build(root: Path, tables: int) -> None:
    cat = Catalog.create(str(root))
    cat.create_schema("s")
    with cat.transaction() as tx:
        for i in range(tables):
            tx.create_table(f"s.t{i}", IDS)
            tx.table(f"s.t{i}").append(pa.table({"id": list(range(1000))}))


def write(cat: Catalog, branch: str | None, start: int) -> None:
    with cat.transaction(branch=branch) as tx:
        for name in ("s.t0", "s.t1"):
            tx.table(name).append(pa.table({"id": list(range(start, start + 100))}))


def moved_publish(cat: Catalog, same_row: bool) -> float:
    """Milliseconds of a publish after main deleted a row (the branch's own `same_row`, or another)."""
    cat.create_branch("m")
    with cat.transaction(branch="m") as tx:
        for name in ("s.t0", "s.t1"):
            for i in range(5):
                tx.table(name).delete(f"id = {i}")
            tx.table(name).append(pa.table({"id": [50_000]}))
    with cat.transaction() as tx:
        tx.table("s.t0").delete("id = 0" if same_row else "id = 500")
    took = timed(lambda: cat.publish_branch("m"))
    replayed = cat.versions()[-1].properties.get("mvcc.published_branch_replayed") == "true"
    assert replayed == same_row, "the publish did not take the path this case measures"
    return took


def timed(fn: object) -> float:
    began = time.perf_counter()
    fn()  # type: ignore[operator]
    return (time.perf_counter() - began) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, help="also write the JSON results here (benchmarks/run.py reads them)")
    args = parser.parse_args()
    tables, rounds = (4, 3) if args.quick else (10, 7)
    with tempfile.TemporaryDirectory() as tmp:
        seed = Path(tmp) / "seed"
        build(seed, tables)
        times: dict[str, list[float]] = {"main": [], "first_branch_write": [], "next_branch_write": [], "publish": []}
        moved: dict[str, list[float]] = {"as_is": [], "run_again": []}
        for r in range(rounds):
            root = Path(tmp) / f"r{r}"
            shutil.copytree(seed, root)
            cat = Catalog.open(str(root))
            times["main"].append(timed(lambda cat=cat: write(cat, None, 10_000)))
            cat.create_branch("b")
            times["first_branch_write"].append(timed(lambda cat=cat: write(cat, "b", 20_000)))
            times["next_branch_write"].append(timed(lambda cat=cat: write(cat, "b", 30_000)))
            times["publish"].append(timed(lambda cat=cat: cat.publish_branch("b")))
            for case, same_row in (("as_is", False), ("run_again", True)):
                shutil.copytree(seed, Path(tmp) / f"r{r}{case}")
                moved[case].append(moved_publish(Catalog.open(str(Path(tmp) / f"r{r}{case}")), same_row))
    medians = {k: round(statistics.median(v), 2) for k, v in times.items()}
    ratios = {k: round(medians[k] / medians["main"], 2) for k in medians if k != "main"}
    after_moved = {k: round(statistics.median(v), 2) for k, v in moved.items()}
    results = {
        "tables": tables,
        "rounds": rounds,
        "median_ms": medians,
        "ratio_to_main": ratios,
        "publish_after_main_moved_ms": after_moved,
        "run_again_ratio": round(after_moved["run_again"] / after_moved["as_is"], 2),
    }
    print(json.dumps(results))
    if args.out:
        args.out.write_text(json.dumps(results))


if __name__ == "__main__":
    main()
