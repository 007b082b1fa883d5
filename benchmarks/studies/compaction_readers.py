"""Compaction's pipeline settings against pylance: the `bench_maintenance.py --only compaction` workload
(1,000 one-append fragments of 1,000 rows compacted into one), tables built once, then per round a fresh copy
of each and one timed `compact_files` per variant (reader threads x row groups queued for the encoder thread),
the variants and pylance alternating. Not a test.

    python -m benchmarks.studies.compaction_readers --rounds 9 --readers 2,4,6
    python -m benchmarks.studies.compaction_readers --rounds 15 --readers 4 --encode-ahead 0,2
    python -c "while True: pass" & python -m benchmarks.studies.compaction_readers; kill %1   # beside a busy process
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import lance

import mvcc_core as mvcc
from benchmarks.suite.bench_maintenance import rows
from mvcc_core.maintenance import compaction

TARGET = 1_000_000


def build(root: Path, fragments: int) -> None:
    table = mvcc.write_table(rows(1_000), str(root / "m-base"), max_rows_per_file=1_000)
    lance.write_dataset(rows(1_000), str(root / "l-base"))
    for i in range(1, fragments):
        table.append(rows(1_000, i * 1_000))
        lance.write_dataset(rows(1_000, i * 1_000), str(root / "l-base"), mode="append")


_COPIES = itertools.count()


def fresh(base: Path, prefix: str) -> str:
    """A copy of `base` under a name not used before in this process: footers are cached by (path, size), and
    a copy under an old name would let later rounds skip the footer parses a real compaction pays."""
    work = base.parent / f"{prefix}{next(_COPIES)}"
    shutil.copytree(base, work)
    return str(work)


def timed(op: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    op()
    return (time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3


def mvcc_round(root: Path, readers: int, encode_ahead: int, expected_rows: int) -> tuple[float, float]:
    compaction._READ_THREADS = readers  # the module's settings, for this measurement only
    compaction._ENCODE_AHEAD = encode_ahead
    work = fresh(root / "m-base", "m")
    table = mvcc.open_table(work)
    result = timed(lambda: table.optimize.compact_files(target_rows_per_fragment=TARGET))
    assert mvcc.open_table(work).count_rows() == expected_rows
    shutil.rmtree(work)
    return result


def pylance_round(root: Path) -> tuple[float, float]:
    work = fresh(root / "l-base", "l")
    dataset = lance.dataset(work)
    result = timed(lambda: dataset.optimize.compact_files(target_rows_per_fragment=TARGET))
    shutil.rmtree(work)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--readers", default="2,4", help="compaction reader-thread counts to compare")
    parser.add_argument(
        "--encode-ahead", default=str(compaction._ENCODE_AHEAD), help="row groups queued for the encoder thread"
    )
    parser.add_argument("--fragments", type=int, default=1_000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mvcc-bench-readers-"))
    build(root, args.fragments)
    variants = {
        f"mvcc, {readers} readers, encode ahead {ahead}": (int(readers), int(ahead))
        for readers in args.readers.split(",")
        for ahead in args.encode_ahead.split(",")
    }
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in [*variants, "pylance"]}
    for _ in range(args.rounds):
        for name in runs:
            if name == "pylance":
                runs[name].append(pylance_round(root))
            else:
                runs[name].append(mvcc_round(root, *variants[name], args.fragments * 1_000))
    shutil.rmtree(root, ignore_errors=True)
    peer_wall, peer_cpu = (statistics.median(r[i] for r in runs["pylance"]) for i in (0, 1))
    for name, results in runs.items():
        wall, cpu = (statistics.median(r[i] for r in results) for i in (0, 1))
        print(
            f"{name:34s} wall {wall:5.0f} ms ({wall / peer_wall:.2f}x), CPU {cpu:5.0f} ms ({cpu / peer_cpu:.2f}x); "
            f"median of {args.rounds}"
        )


if __name__ == "__main__":
    main()
