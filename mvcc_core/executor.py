"""Where distributable maintenance work runs: compaction tasks and index-build tasks.

Anything with `map(fn, tasks)` fits (`concurrent.futures` executors, a Spark executor in
`mvcc_core.spark`). Tasks and their results are small and picklable; the work they do (reading and
writing data files) happens wherever `fn` runs, and the driver commits once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol


class Executor(Protocol):
    """Where compaction and index tasks run: `concurrent.futures` executors fit, so does a Spark executor."""

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterable[Any]: ...


class ThreadExecutor:
    """The default executor: a thread pool in this process."""

    def __init__(self, threads: int = 4) -> None:
        self.threads = threads

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[Any]:
        with ThreadPoolExecutor(max_workers=self.threads) as pool:
            yield from pool.map(fn, tasks)
