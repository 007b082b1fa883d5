"""A data or index file whose upload the S3 server refuses (a 500 on every try, through the real fault proxy of
the soak test) fails the operation with a `StorageError` naming the operation and the file, never a raw
`OSError` from pyarrow's filesystem, and the table is unchanged."""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa
import pytest
from test_fault_proxy_soak import FaultProxy, _Handler

import mvcc_core as mvcc

pytestmark = pytest.mark.s3

_request = threading.local()


class _UploadFailingHandler(_Handler):
    def _any(self) -> None:
        _request.line = (self.command, self.path)
        super()._any()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any  # noqa: N815 - http.server's names


class UploadFailingProxy(FaultProxy):
    """Passes every request but the uploads (PUT, POST) of keys under `part`, which it fails with a 500."""

    def __init__(self, target: str, part: str) -> None:
        super().__init__(target, fail=0.0, drop=0.0, delay=0.0, seed=0)
        self.RequestHandlerClass = _UploadFailingHandler
        self.part = part

    def roll(self) -> tuple[str, float]:
        method, path = getattr(_request, "line", ("", ""))
        with self.lock:
            self.counts["requests"] += 1
            if method in ("PUT", "POST") and self.part in path:
                self.counts["failed"] += 1
                return "fail", 0.0
        return "pass", 0.0


@pytest.fixture
def proxied(s3_server: str, s3_options: dict[str, Any]) -> Any:
    proxies: list[FaultProxy] = []

    def make(part: str) -> tuple[dict[str, Any], FaultProxy]:
        proxy = UploadFailingProxy(s3_server, part)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        proxies.append(proxy)
        return {**s3_options, "aws_endpoint": proxy.url}, proxy

    yield make
    for proxy in proxies:
        proxy.shutdown()


def test_a_refused_data_file_upload_is_a_storage_error(s3_uri: str, s3_options: dict[str, Any], proxied: Any) -> None:
    mvcc.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), s3_uri, storage_options=s3_options)
    opts, proxy = proxied("/data/")
    t = mvcc.open_table(s3_uri, storage_options=opts)
    with pytest.raises(mvcc.errors.StorageError, match=r"write of 'data/[^']+\.parquet' in s3://.* failed") as caught:
        t.append(pa.table({"id": pa.array([3], pa.int64())}))
    assert proxy.counts["failed"] > 0 and isinstance(caught.value.__cause__, OSError)
    clean = mvcc.open_table(s3_uri, storage_options=s3_options)
    assert clean.version == 1 and len(clean.state.store.list("data")) == 1  # the refused file is not left


def test_a_refused_index_file_upload_is_a_storage_error(s3_uri: str, s3_options: dict[str, Any], proxied: Any) -> None:
    mvcc.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), s3_uri, storage_options=s3_options)
    opts, proxy = proxied("/_indices/")
    t = mvcc.open_table(s3_uri, storage_options=opts)
    with pytest.raises(mvcc.errors.StorageError, match=r"write of '_indices/[^']+' in s3://.* failed"):
        t.create_index("id")
    assert proxy.counts["failed"] > 0
    assert mvcc.open_table(s3_uri, storage_options=s3_options).list_indices() == []
