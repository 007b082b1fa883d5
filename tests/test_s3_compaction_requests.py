"""Compaction on S3 (a real moto server, through a proxy that notes every request): each small input file is read
in one GET, the reads overlap, the output is one PutObject (no multipart upload, no HEAD), and the rows are kept;
behind a proxy that fails and drops requests a compaction lands whole or not at all."""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from test_fault_proxy_soak import FaultProxy, _Handler

import mvcc_core as mvcc

pytestmark = pytest.mark.s3

FRAGMENTS = 12
ROWS = 300
_request = threading.local()


class _NotingHandler(_Handler):
    def _any(self) -> None:
        _request.line = (self.command, self.path)
        with self.server.lock:
            self.server.in_flight += 1
            self.server.most = max(self.server.most, self.server.in_flight)
        try:
            super()._any()
        finally:
            with self.server.lock:
                self.server.in_flight -= 1

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any  # noqa: N815 - http.server's names


class NotingProxy(FaultProxy):
    """Passes every request (after up to `delay` seconds), noting each one's method and path, and the most held
    at once."""

    server: NotingProxy

    def __init__(self, target: str, delay: float) -> None:
        super().__init__(target, fail=0.0, drop=0.0, delay=delay, seed=7)
        self.RequestHandlerClass = _NotingHandler
        self.lines: list[tuple[str, str]] = []
        self.in_flight = self.most = 0

    def roll(self) -> tuple[str, float]:
        with self.lock:
            self.lines.append(getattr(_request, "line", ("", "")))
        verdict, pause = super().roll()
        return verdict, pause

    def kinds(self) -> Counter[str]:
        """Requests by method and kind: a listing, or data / manifest / transaction / other."""
        out: Counter[str] = Counter()
        for method, path in self.lines:
            key = path.split("?")[0]
            if method == "GET" and "list-type=2" in path:
                out["LIST"] += 1
                continue
            kind = "data" if "/data/" in key else "manifest" if "/_versions/" in key else "other"
            if "/_transactions/" in key:
                kind = "transaction"
            multipart = "uploads" in path or "uploadId=" in path
            out[f"{method} {kind}{' (multipart)' if multipart else ''}"] += 1
        return out


@pytest.fixture
def proxy(s3_server: str) -> Iterator[Any]:
    made: list[FaultProxy] = []

    def start(server: FaultProxy) -> FaultProxy:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        made.append(server)
        return server

    yield start
    for server in made:
        server.shutdown()


def _rows(start: int) -> pa.Table:
    ids = pa.array(range(start, start + ROWS), pa.int64())
    values = pa.array([i * 0.5 for i in range(ROWS)])
    return pa.table({"id": ids, "value": values, "name": [f"r{i}" for i in range(ROWS)]})


def _build(uri: str, opts: dict[str, Any]) -> pa.Table:
    t = mvcc.write_table(_rows(0), uri, storage_options=opts)
    for i in range(1, FRAGMENTS):
        t.append(_rows(i * ROWS))
    return t.to_table().sort_by("id")


def test_compaction_reads_each_small_file_in_one_get_and_keeps_the_rows(
    s3_server: str, s3_uri: str, s3_options: dict[str, Any], proxy: Any
) -> None:
    before = _build(s3_uri, s3_options)
    noting = proxy(NotingProxy(s3_server, delay=0.01))
    t = mvcc.open_table(s3_uri, storage_options={**s3_options, "aws_endpoint": noting.url})
    assert len(t.get_fragments()) == FRAGMENTS
    noting.lines.clear()
    noting.most = 0
    metrics = t.optimize.compact_files()
    kinds = noting.kinds()
    assert metrics.fragments_removed == FRAGMENTS and metrics.fragments_added == 1
    # one GET per input file, one PUT of the output; the commit: a reservation and a rewrite, each a listing, a
    # transaction file and a manifest (pylance issues the same 12 + 7)
    assert kinds["GET data"] == FRAGMENTS, kinds
    assert kinds["PUT data"] == 1, kinds
    assert not [k for k in kinds if k.startswith(("HEAD", "POST")) or "multipart" in k], kinds
    assert sum(kinds.values()) <= FRAGMENTS + 7, kinds
    assert noting.most > 2, f"the input files were read one after another ({noting.most} at once)"
    after = mvcc.open_table(s3_uri, storage_options=s3_options)
    assert len(after.get_fragments()) == 1 and after.count_rows() == before.num_rows
    assert after.to_table().sort_by("id").equals(before)


@pytest.mark.parametrize("seed", [3, 11])
def test_compaction_behind_a_failing_proxy_lands_whole_or_not_at_all(
    s3_server: str, s3_uri: str, s3_options: dict[str, Any], proxy: Any, seed: int
) -> None:
    before = _build(s3_uri, s3_options)
    t = mvcc.open_table(s3_uri, storage_options=s3_options)
    t.delete("id % 7 = 0")  # a fragment with deletions goes through the scan, the others are read whole
    before = before.filter(pa.compute.not_equal(pa.compute.modulo(before["id"], 7), 0))
    failing = proxy(FaultProxy(s3_server, fail=0.08, drop=0.04, delay=0.005, seed=seed))
    flaky = mvcc.open_table(s3_uri, storage_options={**s3_options, "aws_endpoint": failing.url})
    version = flaky.version
    with contextlib.suppress(mvcc.MvccError):  # refused: then the table must be as it was
        flaky.optimize.compact_files(materialize_deletions_threshold=0.0)
    assert failing.counts["requests"] > 0
    after = mvcc.open_table(s3_uri, storage_options=s3_options)
    assert after.version >= version
    assert after.count_rows() == before.num_rows
    assert after.to_table().sort_by("id").equals(before)


def test_compaction_in_several_tasks_keeps_stable_row_ids(s3_uri: str, s3_options: dict[str, Any]) -> None:
    t = mvcc.write_table(_rows(0), s3_uri, storage_options=s3_options, enable_stable_row_ids=True)
    for i in range(1, FRAGMENTS):
        t.append(_rows(i * ROWS))
    before = t.to_table(with_row_id=True).sort_by("id")
    metrics = t.optimize.compact_files(max_rows_per_task=4 * ROWS, target_rows_per_fragment=4 * ROWS)
    assert metrics.fragments_removed == FRAGMENTS and metrics.fragments_added == FRAGMENTS // 4
    after = mvcc.open_table(s3_uri, storage_options=s3_options)
    assert len(after.get_fragments()) == FRAGMENTS // 4
    assert after.to_table(with_row_id=True).sort_by("id").equals(before)
