"""The process-wide reader pool of `mvcc_core.io.read_ahead`: order, read-ahead bound, runs, and fork safety."""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator

import pytest

from mvcc_core.io import read_ahead as file_reads


def test_runs_cut_consecutive_items_up_to_the_row_bound() -> None:
    sizes = [5, 5, 5, 20, 1, 1]
    got = list(file_reads.runs(sizes, lambda n: n, 10))
    # a run closes once it holds at least part_rows rows; an item bigger than the bound is a run alone
    assert got == [(10, [5, 5]), (25, [5, 20]), (2, [1, 1])]
    assert list(file_reads.runs([], lambda n: n, 10)) == []


def test_read_ahead_keeps_order_and_bounds_what_is_in_flight() -> None:
    pulled = 0
    done: list[int] = []
    in_flight: list[int] = []

    def parts() -> Iterator[tuple[int, Callable[[], int]]]:
        nonlocal pulled
        for i in range(40):
            pulled += 1
            yield 10, (lambda i=i: i * i)

    for value in file_reads.read_ahead(parts(), ahead_rows=30, ahead_parts=2):
        in_flight.append(pulled - len(done))
        done.append(value)
    assert done == [i * i for i in range(40)]
    # at most max(ahead_parts, ahead_rows / rows per part) parts ahead, plus the one being handed over
    assert max(in_flight) <= 4


@pytest.mark.parametrize("count", [0, 1, 2, 9])
def test_read_ahead_can_read_the_first_part_on_the_caller_and_keeps_order_and_bound(count: int) -> None:
    caller = threading.get_ident()
    threads: dict[int, int] = {}
    pulled = 0

    def read(i: int) -> int:
        threads[i] = threading.get_ident()
        return i

    def parts() -> Iterator[tuple[int, Callable[[], int]]]:
        nonlocal pulled
        for i in range(count):
            pulled += 1
            yield 10, lambda i=i: read(i)

    got = []
    for value in file_reads.read_ahead(parts(), ahead_rows=20, ahead_parts=2, first_on_caller=True):
        got.append(value)
        assert pulled <= value + 1 + 2  # the first part, and at most the window beyond what was consumed
    assert got == list(range(count))
    assert [i for i, ident in threads.items() if ident == caller] == ([0] if count else [])


def test_read_ahead_raises_a_part_error_in_the_consumer() -> None:
    def boom() -> int:
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        list(file_reads.read_ahead([(1, lambda: 1), (1, boom)], ahead_rows=10))


def test_pool_is_shared_and_runs_on_its_own_threads() -> None:
    assert file_reads.pool() is file_reads.pool()
    name = file_reads.pool().submit(lambda: threading.current_thread().name).result()
    assert name.startswith("mvcc-read")


def test_pools_of_other_sizes_are_shared_per_size_and_run_parts_on_their_threads() -> None:
    bigger = file_reads.READ_THREADS + 2
    assert file_reads.pool(bigger) is file_reads.pool(bigger) is not file_reads.pool()
    assert file_reads.pool(bigger)._max_workers == bigger
    barrier = threading.Barrier(bigger, timeout=10)  # passes only when `bigger` parts run at once

    def part() -> str:
        barrier.wait()
        return threading.current_thread().name

    names = list(file_reads.read_ahead(((1, part) for _ in range(bigger)), bigger, bigger, threads=bigger))
    assert len(set(names)) == bigger and all(name.startswith("mvcc-read") for name in names)


def _child(queue: multiprocessing.Queue) -> None:
    queue.put((os.getpid(), file_reads.pool().submit(os.getpid).result()))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_a_forked_child_gets_a_pool_of_its_own() -> None:
    file_reads.pool().submit(lambda: None).result()  # the parent's pool has threads the child will not have
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child, args=(queue,))
    child.start()
    child_pid, ran_in = queue.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0
    assert ran_in == child_pid != os.getpid()
