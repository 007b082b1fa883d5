"""Wall time of the `mvcc` command: whole processes, interpreter start and imports included.

A table with 1,000 versions (one small append each, each with transaction properties) on a local disk;
`mvcc show URI` and `mvcc versions URI --limit 20` are each run as a fresh process several times and the
median wall time reported beside the floor every command pays: a process that only imports mvcc_core.
Target: < 1 s each on this machine. Not a test.

The command is the `mvcc` script next to this interpreter if one is installed, else `python -m mvcc_core.cli`
of this checkout (the same `main`).

    python -m benchmarks.suite.bench_cli            # 1,000 versions, 7 runs of each command
    python -m benchmarks.suite.bench_cli --quick    # 1,000 versions, 3 runs
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = 1_000


def command() -> list[str]:
    installed = Path(sys.executable).with_name("mvcc")
    return [str(installed)] if installed.exists() else [sys.executable, "-m", "mvcc_core.cli"]


def env() -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), out.get("PYTHONPATH")]))
    return out


def build(uri: str) -> None:
    import mvcc_core as mvcc

    t = mvcc.write_table(pa.table({"id": [0]}), uri)
    for i in range(1, VERSIONS):
        t.append(pa.table({"id": [i]}), transaction_properties={"run": f"run-{i}"})


def wall_ms(args: list[str], runs: int) -> float:
    """Median wall time of `args` as a fresh process (stdout to a pipe, as a script would read it)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(args, env=env(), check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    args = parser.parse_args()
    runs = 3 if args.quick else 7
    with tempfile.TemporaryDirectory(prefix="mvcc-bench-cli-") as tmp:
        uri = str(Path(tmp) / "table")
        build(uri)
        mvcc = command()
        subprocess.run([*mvcc, "--version"], env=env(), check=True, capture_output=True)  # warm the page cache
        results = {
            "versions": VERSIONS,
            "command": " ".join(Path(a).name for a in mvcc),
            "import_floor_ms": wall_ms([sys.executable, "-c", "import mvcc_core"], runs),
            "show_ms": wall_ms([*mvcc, "show", uri], runs),
            "versions_limit_20_ms": wall_ms([*mvcc, "versions", uri, "--limit", "20"], runs),
            "versions_all_json_ms": wall_ms([*mvcc, "versions", uri, "--json"], runs),
        }
    for key, value in results.items():
        print(f"{key:24} {value:.0f}" if isinstance(value, float) else f"{key:24} {value}")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
