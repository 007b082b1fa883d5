"""What the benchmarks share: timers (medians of wall and CPU time after a warm-up), processes released at one
barrier, and a real S3-compatible server (moto) on 127.0.0.1. Every benchmark compares mvcc with a named peer or
a floor in the same run; these are the pieces that make two sides' numbers comparable."""

from __future__ import annotations

import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def median_ms(fn: Callable[[], Any], repeat: int, *, warm_up: bool = True) -> float:
    """The median wall time of `repeat` calls of `fn`, in ms (after one call not timed, unless `warm_up` is
    False: a call that changes what it measures, such as an append, or a first call that is the measurement)."""
    if warm_up:
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def medians_ms(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """(wall, CPU) medians in ms; CPU is the whole process's (every thread's), so pylance's threads count."""
    fn()  # warm-up
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls) * 1e3, statistics.median(cpus) * 1e3


def timed_processes(ctx: Any, target: Callable[..., Any], args: tuple, processes: int, shared: Any) -> float:
    """Seconds from the release of `processes` processes `target(*args, index, barrier, shared)`, started from
    `ctx` and held at one barrier until all are up, to the last one's exit.

    Args:
        ctx: the multiprocessing context (`shared` comes from it)
        target: each process's function
        args: its leading arguments, the same for every process
        processes: how many processes
        shared: a shared value or array the processes report into
    """
    barrier = ctx.Barrier(processes + 1)
    procs = [ctx.Process(target=target, args=(*args, i, barrier, shared)) for i in range(processes)]
    for p in procs:
        p.start()
    barrier.wait()
    start = time.perf_counter()
    for p in procs:
        p.join()
    return time.perf_counter() - start


class MotoServer:
    """A real S3-compatible HTTP server on 127.0.0.1 for the S3 workloads.

    Args:
        log_requests: keep the server's request log, so `requests()` counts the requests made so far
    """

    def __init__(self, log_requests: bool = False) -> None:
        self.log = Path(tempfile.mkstemp(prefix="mvcc-moto-", suffix=".log")[1]) if log_requests else None

    def __enter__(self) -> MotoServer:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.out = self.log.open("w") if self.log else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=self.out, stderr=self.out
        )
        import boto3

        client = boto3.client(
            "s3", endpoint_url=self.url, aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1"
        )
        for _ in range(100):
            try:
                client.create_bucket(Bucket="bench")
                break
            except Exception:  # noqa: BLE001 - not up yet
                time.sleep(0.1)
        self.mvcc_options = {
            "aws_access_key_id": "x",
            "aws_secret_access_key": "x",
            "aws_endpoint": self.url,
            "aws_region": "us-east-1",
        }
        self.lance_options = {
            "access_key_id": "x",
            "secret_access_key": "x",
            "endpoint": self.url,
            "region": "us-east-1",
            "allow_http": "true",
        }
        return self

    def requests(self) -> int:
        """Requests the server answered so far (needs `log_requests`)."""
        assert self.log is not None, "MotoServer(log_requests=True) counts requests"
        time.sleep(0.2)  # the server writes its log line after answering
        return sum(1 for line in self.log.read_text().splitlines() if "HTTP/1.1" in line)

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait()
        if self.log:
            self.out.close()
            self.log.unlink()


def cpu_seconds() -> float:
    """CPU seconds of this process (every thread) and of its finished children (step processes, subprocesses)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime
