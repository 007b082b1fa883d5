"""Commit throughput under concurrent appenders: mvcc against pylance in the same run.

1, 4 and 8 processes each append small batches to one table for a fixed number of commits, on a local disk
and on S3 (a moto server on 127.0.0.1 started here). Reported: committed transactions per second and
failed appends, and the ratio mvcc / pylance (target >= 1.0x at 8 writers, zero failures). Not a test.

    python -m benchmarks.suite.bench_concurrency            # 20 commits per writer
    python -m benchmarks.suite.bench_concurrency --quick    # 5 commits per writer, local only
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa

from benchmarks.discard import discard  # noqa: E402
from benchmarks.harness import MotoServer, timed_processes  # noqa: E402


def _mvcc_writer(uri: str, opts: dict | None, commits: int, writer: int, barrier: Any, failures: Any) -> None:
    import mvcc_core as mvcc

    barrier.wait()
    t = mvcc.open_table(uri, storage_options=opts)
    for i in range(commits):
        try:
            t.append(pa.table({"writer": [writer], "i": [i]}), max_retries=1000)
        except Exception:  # noqa: BLE001 - counted, reported
            with failures.get_lock():
                failures.value += 1


def _lance_writer(uri: str, opts: dict | None, commits: int, writer: int, barrier: Any, failures: Any) -> None:
    import lance

    barrier.wait()
    for i in range(commits):
        try:
            lance.write_dataset(pa.table({"writer": [writer], "i": [i]}), uri, mode="append", storage_options=opts)
        except Exception:  # noqa: BLE001 - counted, reported
            with failures.get_lock():
                failures.value += 1


def run(target: Any, uri: str, opts: dict | None, writers: int, commits: int) -> tuple[float, int]:
    ctx = mp.get_context("spawn")
    failures = ctx.Value("i", 0)
    elapsed = timed_processes(ctx, target, (uri, opts, commits), writers, failures)
    return (writers * commits - failures.value) / elapsed, failures.value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    args = parser.parse_args()
    commits = 5 if args.quick else 20
    root = Path(tempfile.mkdtemp(prefix="mvcc-bench-conc-"))
    results = []
    import lance

    import mvcc_core as mvcc

    backends: list[tuple[str, Any]] = [("local", None)]
    server = None
    if not args.quick:
        server = MotoServer().__enter__()
        backends.append(("s3", server))
    try:
        for backend, srv in backends:
            for writers in (1, 4, 8):
                name = uuid.uuid4().hex
                if srv is None:
                    m_uri, l_uri, m_opts, l_opts = str(root / f"m{name}"), str(root / f"l{name}"), None, None
                else:
                    m_uri, l_uri = f"s3://bench/m{name}", f"s3://bench/l{name}"
                    m_opts, l_opts = srv.mvcc_options, srv.lance_options
                seed = pa.table({"writer": pa.array([-1], pa.int64()), "i": pa.array([-1], pa.int64())})
                mvcc.write_table(seed, m_uri, storage_options=m_opts)
                lance.write_dataset(seed, l_uri, storage_options=l_opts)
                m_tps, m_fail = run(_mvcc_writer, m_uri, m_opts, writers, commits)
                l_tps, l_fail = run(_lance_writer, l_uri, l_opts, writers, commits)
                rows = mvcc.open_table(m_uri, storage_options=m_opts).count_rows()
                results.append(
                    {
                        "backend": backend,
                        "writers": writers,
                        "mvcc_tps": m_tps,
                        "pylance_tps": l_tps,
                        "mvcc_failed": m_fail,
                        "pylance_failed": l_fail,
                        "mvcc_rows": rows,
                    }  # fmt: skip
                )
                print(
                    f"{backend:<6}{writers:>3} writers: mvcc {m_tps:7.1f} commits/s ({m_fail} failed), pylance "
                    f"{l_tps:7.1f} commits/s ({l_fail} failed), ratio {m_tps / l_tps:.2f}x; rows {rows}"
                )
    finally:
        if server is not None:
            server.__exit__(None, None, None)
        discard(root)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
