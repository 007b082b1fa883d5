"""The S3 backend on botocore's synchronous client (`mvcc_core/io/s3_client.py`), on moto's real server: one client
per process and options, conditional puts that one of two processes wins, retries and re-reads through a proxy that
fails, drops and cuts answers, multipart uploads and copies, the error messages of refused credentials and missing
buckets, and a process that writes and reads a table on S3 without importing s3fs."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from moto_process import moto_server
from test_fault_proxy_soak import FaultProxy, _Handler

import mvcc_core.io.s3 as s3_backend
from mvcc_core.errors import ObjectNotFoundError, StorageError
from mvcc_core.io import ObjectStore
from mvcc_core.io.s3_client import MAX_ATTEMPTS, POOL_CONNECTIONS, shared_s3_client

pytestmark = pytest.mark.s3

ROOT = Path(__file__).resolve().parents[1]
HINT = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), "


# --- a proxy that answers matching requests by a script ----------------------------------------------------


class ScriptedProxy(FaultProxy):
    """Forwards to `target`; the requests of `method` whose path holds `part` get the next verdict of `script`:
    "fail" (a 500, not forwarded), "drop" (forwarded, then the connection closes unanswered), "cut" (forwarded,
    then half the body and the connection closes), "pass". Every other request passes."""

    def __init__(self, target: str, method: str, part: str, script: list[str]) -> None:
        super().__init__(target, fail=0.0, drop=0.0, delay=0.0, seed=0)
        self.RequestHandlerClass = _ScriptedHandler
        self.method, self.part, self.script = method, part, list(script)
        self.seen: list[dict[str, str]] = []  # the headers of each matching request

    def verdict(self, method: str, path: str, headers: Any) -> str:
        with self.lock:
            if method != self.method or self.part not in path:
                return "pass"
            self.seen.append({k.lower(): v for k, v in headers.items()})
            return self.script.pop(0) if self.script else "pass"


class _ScriptedHandler(_Handler):
    server: ScriptedProxy

    def _any(self) -> None:
        body = self._body()
        verdict = self.server.verdict(self.command, self.path, self.headers)
        if verdict == "fail":
            message = b"<Error><Code>InternalError</Code><Message>injected</Message></Error>"
            self.send_response(500)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(message)))
            self.end_headers()
            self.wfile.write(message)
            return
        hop = ("transfer-encoding", "content-length", "expect", "connection", "keep-alive")
        headers = {k: v for k, v in self.headers.items() if k.lower() not in hop}
        headers["Content-Length"] = str(len(body))
        conn = http.client.HTTPConnection(*self.server.target, timeout=60)
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
        finally:
            conn.close()
        if verdict == "drop":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.send_response(response.status, response.reason)
        for key, value in response.getheaders():
            if key.lower() not in ("transfer-encoding", "content-length", "connection", "server", "date"):
                self.send_header(key, value)
        length = response.getheader("Content-Length") if self.command == "HEAD" else None
        self.send_header("Content-Length", length if length is not None else str(len(data)))
        self.end_headers()
        if self.command == "HEAD":
            return
        if verdict == "cut":
            self.wfile.write(data[: len(data) // 2])
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any  # noqa: N815 - http.server's names


@pytest.fixture
def scripted(s3_server: str, s3_options: dict[str, Any]) -> Iterator[Any]:
    """Makes a `ScriptedProxy` in front of the session's server; yields (options through it, the proxy)."""
    proxies: list[ScriptedProxy] = []

    def make(method: str, part: str, script: list[str]) -> tuple[dict[str, Any], ScriptedProxy]:
        proxy = ScriptedProxy(s3_server, method, part, script)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        proxies.append(proxy)
        return {**s3_options, "aws_endpoint": proxy.url}, proxy

    yield make
    for proxy in proxies:
        proxy.shutdown()
        proxy.server_close()


# --- one client per process and options --------------------------------------------------------------------


def test_stores_with_the_same_options_share_one_client(s3_uri: str, s3_options: dict[str, Any]) -> None:
    a, b = ObjectStore(s3_uri, s3_options), ObjectStore(f"{s3_uri}-other", dict(s3_options))
    assert a._backend.s3 is b._backend.s3 and a.shares_client(b)
    c = ObjectStore(s3_uri, {**s3_options, "aws_region": "eu-west-1"})
    assert c._backend.s3 is not a._backend.s3 and not a.shares_client(c)
    config = a._backend.s3.client.meta.config
    assert config.max_pool_connections == POOL_CONNECTIONS >= 16
    assert config.retries["mode"] == "standard" and config.retries["total_max_attempts"] == MAX_ATTEMPTS


def test_an_unknown_option_is_refused_when_the_store_opens(s3_uri: str, s3_options: dict[str, Any]) -> None:
    with pytest.raises(StorageError, match=r"unknown S3 storage option\(s\) 'colour'"):
        ObjectStore(s3_uri, {**s3_options, "colour": "blue"})


def test_config_kwargs_reach_the_client(s3_uri: str, s3_options: dict[str, Any]) -> None:
    store = ObjectStore(s3_uri, {**s3_options, "config_kwargs": {"max_pool_connections": 17, "read_timeout": 7}})
    config = store._backend.s3.client.meta.config
    assert (config.max_pool_connections, config.read_timeout) == (17, 7)
    store.put("cfg", b"ok")
    assert store.get("cfg") == b"ok"


# --- conditional put: two processes, one wins --------------------------------------------------------------

_RACER = """
import json, os, sys, time
from mvcc_core.io import ObjectStore
uri, opts, ready, go, me = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
store = ObjectStore(uri, opts)
store.exists("warm-up")  # the client is built and connected before the start
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.001)
print(json.dumps([store.put_if_not_exists(f"_versions/{i}.manifest", me.encode()) for i in range(8)]))
"""


def test_two_processes_racing_for_each_name_one_wins(s3_uri: str, s3_options: dict[str, Any], tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    go = tmp_path / "go"
    procs = []
    for me in ("a", "b"):
        ready = tmp_path / f"ready-{me}"
        args = [sys.executable, "-c", _RACER, s3_uri, json.dumps(s3_options), str(ready), str(go), me]
        procs.append((me, ready, subprocess.Popen(args, env=env, stdout=subprocess.PIPE, text=True)))
    deadline = time.monotonic() + 60
    while not all(ready.exists() for _, ready, _ in procs):
        assert time.monotonic() < deadline and all(p.poll() is None for _, _, p in procs)
        time.sleep(0.01)
    go.touch()
    won = {}
    for me, _, proc in procs:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        won[me] = json.loads(out.strip().splitlines()[-1])
    store = ObjectStore(s3_uri, s3_options)
    for i in range(8):
        assert won["a"][i] != won["b"][i], (i, won)
        winner = "a" if won["a"][i] else "b"
        assert store.get(f"_versions/{i}.manifest") == winner.encode()


# --- retries, dropped answers, cut streams -----------------------------------------------------------------


def test_failed_requests_are_retried(s3_uri: str, scripted: Any) -> None:
    opts, proxy = scripted("PUT", "/retried", ["fail"] * (MAX_ATTEMPTS - 1))
    store = ObjectStore(s3_uri, opts)
    store.put("retried", b"after four 500s")
    assert len(proxy.seen) == MAX_ATTEMPTS
    assert store.get("retried") == b"after four 500s"


def test_a_request_failing_every_time_is_a_storage_error_after_the_last_attempt(s3_uri: str, scripted: Any) -> None:
    opts, proxy = scripted("GET", "/doomed", ["fail"] * 20)
    store = ObjectStore(s3_uri, opts)
    store.put("doomed", b"x")
    with pytest.raises(StorageError) as caught:
        store.get("doomed")
    assert str(caught.value).startswith(f"read of 'doomed' in {s3_uri} failed: ClientError: ")
    assert "InternalError" in str(caught.value)
    assert len(proxy.seen) == MAX_ATTEMPTS


def test_a_dropped_answer_to_a_conditional_put_reads_as_taken(s3_uri: str, scripted: Any) -> None:
    """The PUT lands but its answer is lost; the retry gets 412: False, though the object is ours (the commit
    loop then looks for its own transaction in the winning manifest)."""
    opts, proxy = scripted("PUT", "/_versions/", ["drop"])
    store = ObjectStore(s3_uri, opts)
    assert store.put_if_not_exists("_versions/1.manifest", b"ours") is False
    assert len(proxy.seen) == 2 and store.get("_versions/1.manifest") == b"ours"


@pytest.mark.parametrize("ranged", [False, True])
def test_a_cut_response_stream_is_read_again_from_where_it_stopped(s3_uri: str, scripted: Any, ranged: bool) -> None:
    data = os.urandom(3 * 2**20 + 123)
    opts, proxy = scripted("GET", "/cut/object", ["cut"])
    store = ObjectStore(s3_uri, opts)
    store.put("cut/object", data)
    if ranged:
        assert store.get_range("cut/object", 1000, 2_000_000) == data[1000:2_000_000]
        first, half = 1000, (2_000_000 - 1000) // 2
        assert proxy.seen[0]["range"] == "bytes=1000-1999999"
        assert proxy.seen[1]["range"] == f"bytes={first + half}-1999999"
    else:
        assert store.get("cut/object") == data
        assert "range" not in proxy.seen[0]
        assert proxy.seen[1]["range"] == f"bytes={len(data) // 2}-"
    assert len(proxy.seen) == 2 and proxy.seen[1]["if-match"]


# --- large objects -----------------------------------------------------------------------------------------


def _count(store: ObjectStore, operation: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    store._backend.s3.client.meta.events.register(
        f"before-parameter-build.s3.{operation}", lambda params, **kw: seen.append(dict(params))
    )
    return seen


def test_a_large_put_is_a_multipart_upload(s3_uri: str, s3_options: dict[str, Any], monkeypatch: Any) -> None:
    monkeypatch.setattr(s3_backend, "_MULTIPART_THRESHOLD", 5 * 2**20)
    monkeypatch.setattr(s3_backend, "_PART_SIZE", 5 * 2**20)
    store = ObjectStore(s3_uri, {**s3_options, "aws_region": "us-east-1", "config_kwargs": {"read_timeout": 61}})
    parts, single = _count(store, "UploadPart"), _count(store, "PutObject")
    data = os.urandom(11 * 2**20)
    store.put("big/object", data)
    assert [p["PartNumber"] for p in parts] == [1, 2, 3] and single == []
    assert store.get("big/object") == data
    store.put("big/small", b"one request")
    assert len(single) == 1


def test_a_copy_above_the_copy_limit_goes_part_by_part(
    s3_uri: str, s3_options: dict[str, Any], monkeypatch: Any
) -> None:
    monkeypatch.setattr(s3_backend, "_PART_SIZE", 5 * 2**20)
    store = ObjectStore(s3_uri, s3_options)
    data = os.urandom(11 * 2**20)
    store.put("big/src", data)
    backend = store._backend
    source = {"Bucket": backend.bucket, "Key": backend.key("big/src")}
    backend._multipart_copy(source, backend.key("big/dst"), len(data))
    assert store.get("big/dst") == data


# --- error messages ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checking_server() -> Iterator[str]:
    """Endpoint url of a moto S3 server that checks each request's credentials."""
    with moto_server({"INITIAL_NO_AUTH_ACTION_COUNT": "0"}) as url:
        yield url


def test_refused_credentials_are_named_on_every_operation(checking_server: str) -> None:
    options = {"aws_endpoint": checking_server, "aws_access_key_id": "nobody", "aws_secret_access_key": "x"}
    store = ObjectStore("s3://bucket/table", options)
    refused = f"S3 refused the credentials (InvalidAccessKeyId): {HINT}"
    for call, words in (
        (lambda: store.list("_versions"), "cannot list s3://bucket/table/_versions/"),
        (lambda: store.get("_versions/1.manifest"), "cannot read s3://bucket/table/_versions/1.manifest"),
        (lambda: store.put("data/x", b"x"), "cannot write s3://bucket/table/data/x"),
        (lambda: store.put_if_not_exists("_versions/1.manifest", b"x"), "cannot write s3://bucket/table/_versions/1"),
    ):
        with pytest.raises(StorageError) as caught:
            call()
        assert str(caught.value).startswith(f"{words}"), str(caught.value)
        assert refused in str(caught.value)
    with pytest.raises(StorageError, match=r"^cannot read s3://bucket/table/x: access denied \(403\)"):
        store.head("x")  # a HEAD's answer has no body, so no code: its status says it


def test_a_missing_bucket_is_named(s3_options: dict[str, Any]) -> None:
    bucket = f"mvcc-no-such-bucket-{uuid.uuid4().hex[:8]}"
    store = ObjectStore(f"s3://{bucket}/t", s3_options)
    with pytest.raises(StorageError) as caught:
        store.list("_versions")
    assert str(caught.value) == f"cannot list s3://{bucket}/t/_versions/: bucket {bucket!r} does not exist"
    with pytest.raises(ObjectNotFoundError, match=f"^get: object 'x' not found in s3://{bucket}/t$"):
        store.get("x")
    with pytest.raises(ObjectNotFoundError):
        store.head("x")


# --- no s3fs on the write and read path --------------------------------------------------------------------

_NO_S3FS = """
import json, sys
import pyarrow as pa
import mvcc_core as mvcc
uri, opts = sys.argv[1], json.loads(sys.argv[2])
t = mvcc.write_table(pa.table({"id": [1, 2, 3]}), uri, storage_options=opts)
t.append(pa.table({"id": [4]}))
t.delete("id = 2")
rows = mvcc.open_table(uri, storage_options=opts).to_table().column("id").to_pylist()
loaded = sorted(m for m in ("s3fs", "aiobotocore", "aiohttp") if m in sys.modules)
print(json.dumps({"rows": sorted(rows), "loaded": loaded}))
"""


def test_writing_and_reading_a_table_on_s3_imports_no_s3fs(s3_uri: str, s3_options: dict[str, Any]) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-c", _NO_S3FS, s3_uri, json.dumps(s3_options)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"rows": [1, 3, 4], "loaded": []}


def test_the_fsspec_filesystem_is_still_there_for_who_asks(s3_uri: str, s3_options: dict[str, Any]) -> None:
    store = ObjectStore(s3_uri, s3_options)
    store.put("via/botocore", b"seen by s3fs")
    assert store.fs.cat_file(store.full_path("via/botocore")) == b"seen by s3fs"
    assert ObjectStore(s3_uri, s3_options).fs is store.fs  # shared per process and options, like the client
    assert shared_s3_client(s3_backend.translate_s3_options(s3_options)[0]) is store._backend.s3
