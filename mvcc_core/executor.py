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

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterable[Any]:
        """Run `fn` on each task; the results in task order.

        Args:
            fn: the function to run (it must pickle for a process or Spark executor)
            tasks: its arguments, one per task
        """
        ...


class ThreadExecutor:
    """The default executor: a thread pool in this process.

    Args:
        threads: how many threads run tasks at once
    """

    def __init__(self, threads: int = 4) -> None:
        self.threads = threads

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[Any]:
        """Run the tasks on a pool of `threads` threads; the results in task order.

        Args:
            fn: the function to run (it must pickle for a process or Spark executor)
            tasks: its arguments, one per task
        """
        with ThreadPoolExecutor(max_workers=self.threads) as pool:
            yield from pool.map(fn, tasks)
