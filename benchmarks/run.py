"""Run every benchmark module (`benchmarks/suite/bench_*.py`) and print one table of all their measurements.

Each module runs in its own process (`python bench_X.py [--quick] --out FILE`) against the mvcc_core of the
checkout this file is in, and writes its results as JSON; this script reads them into one table: every
measurement, mvcc's number, each peer's number (pylance, Delta Lake, a plain-pyarrow floor) and the ratio
mvcc / peer. For milliseconds lower is better, for commits per second higher is better. Not a test.

    python -m benchmarks.run --quick    # every module's quick mode (a few minutes on 2 cores)
    python -m benchmarks.run            # full sizes (much longer)
    python -m benchmarks.run --quick --only foundation,row_level
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
from benchmarks.discard import TRASH_ENV  # noqa: E402

ROOT = HERE.parent
SUITE = HERE / "suite"


@dataclass(frozen=True)
class Row:
    """One measurement of mvcc beside one peer (peer empty when the measurement has none)."""

    benchmark: str
    measurement: str
    unit: str
    mvcc: float
    peer: str = ""
    peer_value: float | None = None

    @property
    def ratio(self) -> float | None:
        return None if not self.peer_value else self.mvcc / self.peer_value


# ---- one reader per module: its --out JSON -> rows -------------------------------------------------------


def _foundation(r: dict[str, Any]) -> Iterator[Row]:
    for workload, m in r.items():
        yield Row("foundation", workload, "ms", m["mvcc"], "pylance", m["lance"])
        if "floor" in m:
            yield Row("foundation", workload, "ms", m["mvcc"], "pyarrow floor", m["floor"])


def _concurrency(r: list[dict[str, Any]]) -> Iterator[Row]:
    for m in r:
        failed = f"; failed: mvcc {m['mvcc_failed']}, pylance {m['pylance_failed']}"
        name = f"{m['writers']} appenders, {m['backend']}{failed}"
        yield Row("concurrency", name, "commits/s", m["mvcc_tps"], "pylance", m["pylance_tps"])


def _row_level(r: dict[str, Any]) -> Iterator[Row]:
    for m in r["results"]:
        name = f"{m['workload']} ({r['rows']:,} rows)"
        yield Row("row_level", name, "ms", m["mvcc_ms"], "pylance", m["pylance_ms"])
        if "mvcc_cpu_ms" in m:  # CPU time of all threads: steadier than wall time on a shared machine
            yield Row("row_level", f"{name}, CPU", "ms", m["mvcc_cpu_ms"], "pylance, CPU", m["pylance_cpu_ms"])
        yield Row("row_level", name, "ms", m["mvcc_ms"], "pyarrow floor (read id column)", r["floor_ms"])


def _maintenance(r: dict[str, Any]) -> Iterator[Row]:
    size = r["sizes"]
    names = {
        "compaction": f"compaction of {size['fragments']:,} x 1,000 rows",
        "cleanup": f"cleanup of {size['versions']:,} versions",
    }
    for what, name in names.items():  # a run with `--only` holds some workloads
        if what not in r:
            continue
        m = r[what]
        yield Row("maintenance", name, "ms", m["mvcc_ms"], "pylance", m["pylance_ms"])
        yield Row("maintenance", name, "ms", m["mvcc_ms"], "deltalake", m["deltalake_ms"])
        if "floor_ms" in m:
            yield Row("maintenance", name, "ms", m["mvcc_ms"], "pyarrow floor", m["floor_ms"])
    if "compaction_cpu" in r:
        cpu = r["compaction_cpu"]
        yield Row("maintenance", f"{names['compaction']}, CPU time", "ms", cpu["mvcc_ms"], "pylance", cpu["pylance_ms"])
    if "lookups" not in r:
        return
    lookups = r["lookups"]
    for key, what in (("point", "point lookup"), ("range", "1% range")):
        label = f"{what} in {size['rows']:,} rows"
        without, with_ = lookups["without index"][key], lookups["with index"][key]
        yield Row("maintenance", f"{label}, no index", "ms", without, "pylance, no index",
                  lookups["pylance without index"][key])  # fmt: skip
        yield Row("maintenance", f"{label}, no index", "ms", without, "deltalake (no index)", lookups["deltalake"][key])
        yield Row("maintenance", f"{label}, BTREE", "ms", with_, "pylance, BTREE", lookups["pylance with index"][key])
        yield Row("maintenance", f"{label}, BTREE", "ms", with_, "deltalake (no index)", lookups["deltalake"][key])
        yield Row("maintenance", f"{label}, BTREE", "ms", with_, "mvcc full scan", lookups["full_scan_ms"])


def _spark(r: dict[str, Any]) -> Iterator[Row]:
    n = f"{r['rows']:,} rows"
    yield Row("spark", f"write {n}", "ms", r["write"]["mvcc_ms"], "spark parquet writer", r["write"]["parquet_ms"])
    if "native_ms" in r["write"]:
        yield Row("spark", f"write {n}, mvcc_core.spark.write", "ms", r["write"]["native_ms"], "spark parquet writer",
                  r["write"]["parquet_ms"])  # fmt: skip
    yield Row("spark", f"full read {n}", "ms", r["full_read"]["mvcc_ms"], "spark parquet reader",
              r["full_read"]["parquet_ms"])  # fmt: skip
    if "api_floor_ms" in r["full_read"]:
        yield Row("spark", f"full read {n}", "ms", r["full_read"]["mvcc_ms"], "python data source floor",
                  r["full_read"]["api_floor_ms"])  # fmt: skip
        yield Row("spark", f"read of every column {n}", "ms", r["every_column_read"]["mvcc_ms"],
                  "spark parquet reader", r["every_column_read"]["parquet_ms"])  # fmt: skip
    yield Row("spark", f"filtered read (1,000 of {n})", "ms", r["filtered_read"]["mvcc_ms"], "spark parquet reader",
              r["filtered_read"]["parquet_ms"])  # fmt: skip
    for key, what in (("full_read", "full read"), ("every_column_read", "read of every column"),
                      ("filtered_read", f"filtered read (1,000 of {n})")):  # fmt: skip
        if "native_ms" in r[key]:
            label = what if key == "filtered_read" else f"{what} {n}"
            yield Row("spark", f"{label}, mvcc_core.spark.read", "ms", r[key]["native_ms"], "spark parquet reader",
                      r[key]["parquet_ms"])  # fmt: skip
    yield Row("spark", f"compaction of {r['fragments']:,} x 1,000 rows on SparkExecutor", "ms",
              r["compaction"]["spark_ms"], "in-process executor", r["compaction"]["in_process_ms"])  # fmt: skip


def _cli(r: dict[str, Any]) -> Iterator[Row]:
    floor = "python -c 'import mvcc_core'"
    n = f"{r['versions']:,} versions"
    yield Row("cli", f"mvcc show ({n}), whole process", "ms", r["show_ms"], floor, r["import_floor_ms"])
    yield Row("cli", f"mvcc versions --limit 20 ({n})", "ms", r["versions_limit_20_ms"], floor, r["import_floor_ms"])
    yield Row("cli", f"mvcc versions --json (all {n})", "ms", r["versions_all_json_ms"], floor, r["import_floor_ms"])


def _dagster(r: dict[str, Any]) -> Iterator[Row]:
    name = f"materialize {r['rows']:,} rows (median of {r['times']})"
    yield Row("dagster", f"{name}, overwrite", "ms", r["mvcc_ms"], "DeltaLakePyarrowIOManager", r["deltalake_ms"])
    yield Row("dagster", f"{name}, append step", "ms", r["append_step_ms"], "bare Table.append", r["bare_append_ms"])
    yield Row("dagster", f"{name}, append step", "ms", r["append_step_ms"], "Dagster step doing the bare append",
              r["bare_append_step_ms"])  # fmt: skip
    if "sensor_tick" in r:
        t = r["sensor_tick"]
        yield Row("dagster", f"version sensor tick, {t['tables']} unchanged tables (median of {t['ticks']})", "ms",
                  t["tick_ms"])  # fmt: skip
    if "compaction" in r:
        for c in r["compaction"]["shapes"].values():
            job = f"compaction job, {c['fragments']:,} x {c['rows_per_fragment']:,} rows, default executor"
            yield Row("dagster", job, "ms", c["job_ms"], "compact_files() in process", c["compact_files_ms"])
            yield Row("dagster", f"{job}, CPU", "ms", c["job_cpu_ms"], "compact_files() in process, CPU",
                      c["compact_files_cpu_ms"])  # fmt: skip


def _catalog(r: dict[str, Any]) -> Iterator[Row]:
    for backend, m in r.items():
        single = m["latency"]["single-table commit"]
        for name in ("1-table catalog transaction", "5-table catalog transaction"):
            yield Row("catalog", f"{name}, {backend}", "ms", m["latency"][name]["wall_ms"], "single-table commit",
                      single["wall_ms"])  # fmt: skip
            yield Row("catalog", f"{name}, {backend}, CPU", "ms", m["latency"][name]["cpu_ms"],
                      "single-table commit, CPU", single["cpu_ms"])  # fmt: skip
        step = m["latency"]["single-table commit step"]
        for name in ("1-table catalog publish step", "5-table catalog publish step"):
            yield Row("catalog", f"{name}, {backend}", "ms", m["latency"][name]["wall_ms"],
                      "single-table commit step", step["wall_ms"])  # fmt: skip
        for writers in (2, 4):
            t = m[f"{writers} processes"]
            yield Row("catalog", f"{writers} processes, 2-table append(+delete) transactions, {backend}", "commits/s",
                      t["commits_per_s"])  # fmt: skip


def _dagster_catalog(r: dict[str, Any]) -> Iterator[Row]:
    name = "a multi_asset landing two tables in one catalog version (median)"
    m = r["catalog_multi_asset"]
    for peer, key in (
        ("two assets via MvccIOManager", "io_manager_two_assets"),
        ("the bare catalog transaction", "bare_catalog_transaction"),
    ):
        yield Row("dagster_catalog", name, "ms", m["wall_median_ms"], peer, r[key]["wall_median_ms"])
        yield Row("dagster_catalog", f"{name}, CPU", "ms", m["cpu_median_ms"], f"{peer}, CPU", r[key]["cpu_median_ms"])


def _airflow(r: dict[str, Any]) -> Iterator[Row]:
    c = r["compaction"]
    run = f"compaction group, {c['fragments']:,} fragments, {c['tasks']} tasks, `airflow dags test`"
    yield Row("airflow", run, "ms", c["airflow_ms"], "compact_files() in process", c["in_process_ms"])
    yield Row("airflow", f"{run}, CPU", "ms", c["airflow_cpu_ms"], "compact_files() in process, CPU",
              c["in_process_cpu_ms"])  # fmt: skip


def _branches(r: dict[str, Any]) -> Iterator[Row]:
    for name, sides in r["medians"].items():
        (side, value), (peer, peer_value) = sides.items()
        yield Row("branches", f"{name} ({side})", "ms", value, "pylance" if peer == "lance" else peer, peer_value)


def _wap(r: dict[str, Any]) -> Iterator[Row]:
    for kind, m in r.items():
        name = f"write-audit-publish materialization ({m['rows']:,} rows, {kind} instance)"
        yield Row("wap", name, "ms", m["step_ms"]["wap"], "plain overwrite", m["step_ms"]["plain"])
        core = "create_branch + overwrite + publish_branch"
        yield Row("wap", core, "ms", m["core_ms"]["branch_publish"], "overwrite", m["core_ms"]["overwrite"])


def _catalog_branches(r: dict[str, Any]) -> Iterator[Row]:
    main = r["median_ms"]["main"]
    for step, value in r["median_ms"].items():
        if step != "main":
            name = f"catalog branch: {step.replace('_', ' ')} ({r['tables']} tables)"
            yield Row("catalog_branches", name, "ms", value, "the same write on main", main)
    moved = r["publish_after_main_moved_ms"]
    name = f"catalog branch: publish running the writes again ({r['tables']} tables)"
    yield Row("catalog_branches", name, "ms", moved["run_again"], "the publish as it is", moved["as_is"])


def _catalog_wap(r: dict[str, Any]) -> Iterator[Row]:
    name = f"catalog write-audit-publish step ({r['rows_per_table']:,} rows a table)"
    yield Row("catalog_wap", name, "ms", r["step_ms"]["wap"], "plain catalog step", r["step_ms"]["plain"])
    cpu = r["run_cpu_ms"]
    yield Row("catalog_wap", f"{name}, run CPU", "ms", cpu["wap"], "plain catalog run, CPU", cpu["plain"])


def _scan_shapes(r: dict[str, Any]) -> Iterator[Row]:
    for shape, m in r.items():
        fragments, rows = shape.split("x")
        name = f"full scan CPU, {fragments} fragments x {int(rows):,} rows"
        yield Row("scan_shapes", name, "ms", m["fragmented"]["cpu_ms"], "compacted copy", m["compacted"]["cpu_ms"])
        deleted, peer = m["deleted"]["cpu_ms"], m["deleted_compacted"]["cpu_ms"]
        yield Row("scan_shapes", f"{name}, {m['deleted_percent']}% deleted", "ms", deleted, "compacted copy", peer)


def _object_store(r: dict[str, Any]) -> Iterator[Row]:
    for name, m in r.get("latency", {}).items():
        counts = f"{m['requests']['mvcc']['total']} / {m['requests']['lance']['total']} requests"
        yield Row("object_store", f"{name} (S3; {counts})", "ms", m["mvcc"], "pylance", m["lance"])
    for name, m in r.get("growth", {}).items():
        yield Row("object_store", f"{name} (local)", "ms", m["mvcc"], "pylance", m["lance"])


def _retention(r: dict[str, Any]) -> Iterator[Row]:
    for name, m in r.items():
        counts = f"{m['requests']['mvcc']['total']} / {m['requests']['lance']['total']} requests"
        yield Row("retention", f"{name} (S3; {counts})", "ms", m["mvcc"], "pylance", m["lance"])


def _fleet(r: dict[str, Any]) -> Iterator[Row]:
    for store, m in r.items():
        for workers, ms in m["pool_ms"].items():
            name = f"plan_fleet of {m['tables']} tables, {store}, {workers} threads"
            yield Row("fleet", name, "ms", ms, "one thread", m["serial_ms"])


READERS: dict[str, Callable[[Any], Iterator[Row]]] = {
    "airflow": _airflow,
    "branches": _branches,
    "catalog": _catalog,
    "catalog_branches": _catalog_branches,
    "catalog_wap": _catalog_wap,
    "dagster_catalog": _dagster_catalog,
    "dagster": _dagster,
    "foundation": _foundation,
    "concurrency": _concurrency,
    "row_level": _row_level,
    "maintenance": _maintenance,
    "spark": _spark,
    "cli": _cli,
    "wap": _wap,
    "scan_shapes": _scan_shapes,
    "object_store": _object_store,
    "fleet": _fleet,
    "retention": _retention,
}


# ---- running -------------------------------------------------------------------------------------------


def modules() -> list[str]:
    return sorted(p.stem.removeprefix("bench_") for p in SUITE.glob("bench_*.py"))


def run_module(name: str, quick: bool, workdir: Path) -> Any:
    """Run suite/bench_<name>.py in its own process; its JSON results. Its own report goes to <workdir>/<name>.log."""
    out, log = workdir / f"{name}.json", workdir / f"{name}.log"
    cmd = [sys.executable, "-m", f"benchmarks.suite.bench_{name}", "--out", str(out)] + (["--quick"] if quick else [])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))  # this checkout's core
    env[TRASH_ENV] = str(workdir / "trash")  # removed with workdir after the last module (see discard.py)
    start = time.monotonic()
    with open(log, "wb") as f:
        done = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT, check=False)
    took = time.monotonic() - start
    if done.returncode != 0:
        sys.stderr.write(log.read_text(errors="replace"))
        raise SystemExit(f"bench_{name}.py failed with exit code {done.returncode} after {took:.0f} s")
    print(f"  bench_{name}.py: {took:.0f} s", file=sys.stderr, flush=True)
    return json.loads(out.read_text())


def _number(v: float | None) -> str:
    if v is None:
        return ""
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"


def table(rows: list[Row]) -> str:
    header = ("benchmark", "measurement", "unit", "mvcc", "peer", "peer value", "mvcc/peer")
    cells = [
        (
            r.benchmark,
            r.measurement,
            r.unit,
            _number(r.mvcc),
            r.peer,
            _number(r.peer_value),
            "" if r.ratio is None else f"{r.ratio:.2f}x",
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in [header, *cells]) for i in range(len(header))]
    numeric = {3, 5, 6}

    def line(row: tuple[str, ...]) -> str:
        return "  ".join(
            c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(c) for c in cells)])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="each module's quick mode")
    parser.add_argument("--only", help="comma-separated module names (without bench_), default: all")
    args = parser.parse_args(argv)
    names = modules()
    if args.only:
        wanted = args.only.split(",")
        unknown = set(wanted) - set(names)
        if unknown:
            raise SystemExit(f"unknown benchmark module(s): {', '.join(sorted(unknown))}; have {', '.join(names)}")
        names = [n for n in names if n in wanted]
    unread = [n for n in names if n not in READERS]
    if unread:
        raise SystemExit(f"no reader in run.py for: {', '.join(f'bench_{n}.py' for n in unread)}")
    mode = "quick" if args.quick else "full"
    print(f"running {len(names)} benchmark modules ({mode})", file=sys.stderr, flush=True)
    rows: list[Row] = []
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mvcc-bench-run-") as workdir:
        for name in names:
            rows.extend(READERS[name](run_module(name, args.quick, Path(workdir))))
    took = time.monotonic() - start
    print(f"mvcc benchmarks, {mode} mode, {took:.0f} s")
    print("mvcc/peer: mvcc is faster below 1.0x for ms, above 1.0x for commits/s")
    print(table(rows))


if __name__ == "__main__":
    main()
