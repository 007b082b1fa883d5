"""Soak: four writer processes append and delete on the S3 server through a proxy that fails
requests, drops responses after forwarding them and delays others, while writers are killed with SIGKILL and
restarted. Afterwards, read without the proxy: no acknowledged append lost, no row twice, no acknowledged delete
undone, `mvcc verify --all` clean, and nothing unreferenced left after retention.

A writer logs each row it is about to append or delete ("try") and each acknowledged commit ("ack") to a local
file, flushed before and after the commit, so the check knows which rows are certain and which ambiguous (a
writer killed or failing between the two).
"""

from __future__ import annotations

import http.client
import json
import multiprocessing
import os
import random
import signal
import socket
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner

import mvcc_core as mvcc
from mvcc_core import cli
from mvcc_core.format.referenced_files import version_files

pytestmark = [pytest.mark.slow, pytest.mark.s3]

WRITERS = 4
SECONDS = float(os.environ.get("MVCC_SOAK_SECONDS", "40"))


class FaultProxy(ThreadingHTTPServer):
    """Forwards HTTP requests to `target`: fails `fail` of them with a 500 before forwarding, forwards `drop` of
    them and then closes the connection without an answer, delays the others by up to `delay` seconds."""

    daemon_threads = True

    def __init__(self, target: str, fail: float, drop: float, delay: float, seed: int) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        host, port = target.removeprefix("http://").split(":")
        self.target = (host, int(port))
        self.fail, self.drop, self.delay = fail, drop, delay
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.counts = {"requests": 0, "failed": 0, "dropped": 0}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def roll(self) -> tuple[str, float]:
        with self.lock:
            self.counts["requests"] += 1
            r, pause = self.rng.random(), self.rng.random() * self.delay
            if r < self.fail:
                self.counts["failed"] += 1
                return "fail", pause
            if r < self.fail + self.drop:
                self.counts["dropped"] += 1
                return "drop", pause
            return "pass", pause


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FaultProxy

    def log_message(self, *args: Any) -> None:
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:  # then trailers, up to an empty line
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size + 2)[:size]
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _any(self) -> None:
        body = self._body()
        verdict, pause = self.server.roll()
        time.sleep(pause)
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
        if verdict == "drop":  # the server did it; the client never hears
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.send_response(response.status, response.reason)
        for key, value in response.getheaders():
            if key.lower() not in ("transfer-encoding", "content-length", "connection", "server", "date"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any  # noqa: N815 - http.server's names


def rows(ids: list[int], writer: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "w": pa.array([writer] * len(ids), pa.int32())})


def _writer(uri: str, opts: dict[str, Any], log_path: str, writer: int, start: int) -> None:
    """Append batches of new ids; now and then delete a few of this writer's acknowledged ids."""
    rng = random.Random(writer * 1_000_003 + start)
    acked: list[int] = []
    next_id = start
    with open(log_path, "a") as log:

        def note(**entry: Any) -> None:
            log.write(json.dumps(entry) + "\n")
            log.flush()
            os.fsync(log.fileno())

        while True:
            try:
                t = mvcc.open_table(uri, storage_options=opts)
                if acked and rng.random() < 0.3:
                    doomed = rng.sample(acked, min(3, len(acked)))
                    note(kind="try_delete", ids=doomed)
                    t.delete(f"id IN ({', '.join(map(str, doomed))})")
                    note(kind="ack_delete", ids=doomed)
                    acked = [i for i in acked if i not in doomed]
                else:
                    ids = list(range(next_id, next_id + rng.randint(1, 5)))
                    next_id = ids[-1] + 1
                    note(kind="try_append", ids=ids)
                    t.append(
                        pa.table({"id": pa.array(ids, pa.int64()), "w": pa.array([writer] * len(ids), pa.int32())})
                    )
                    note(kind="ack_append", ids=ids)
                    acked.extend(ids)
            except mvcc.MvccError:
                time.sleep(0.05)  # ambiguous or lost: the log says "try" without "ack"
            except OSError as exc:  # a raw error of the store (see the report's "raw_errors")
                note(kind="raw_error", ids=[], error=str(exc)[:200])
                time.sleep(0.05)


def test_writers_behind_a_failing_proxy_killed_at_random(
    s3_server: str, s3_uri: str, s3_options: dict[str, Any], tmp_path: Path
) -> None:
    proxy = FaultProxy(s3_server, fail=0.08, drop=0.05, delay=0.02, seed=26)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    proxied = {**s3_options, "aws_endpoint": proxy.url}
    mvcc.write_table(
        pa.table({"id": pa.array([-1], pa.int64()), "w": pa.array([-1], pa.int32())}),
        s3_uri,
        storage_options=s3_options,
    )
    ctx = multiprocessing.get_context("spawn")
    logs = [str(tmp_path / f"w{i}.log") for i in range(WRITERS)]
    starts = [0] * WRITERS
    procs: list[Any] = [None] * WRITERS
    kills = 0

    def launch(i: int) -> None:
        starts[i] += 1
        procs[i] = ctx.Process(target=_writer, args=(s3_uri, proxied, logs[i], i, i * 10**9 + starts[i] * 10**6))
        procs[i].start()

    for i in range(WRITERS):
        launch(i)
    rng = random.Random(7)
    deadline = time.monotonic() + SECONDS
    try:
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(2.0, 5.0))  # a spawned writer needs ~1.5 s to import mvcc
            victim = rng.randrange(WRITERS)
            os.kill(procs[victim].pid, signal.SIGKILL)
            procs[victim].join()
            kills += 1
            launch(victim)
    finally:
        for p in procs:
            if p is not None and p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
                p.join()
        proxy.shutdown()

    tried_append: set[int] = set()
    acked_append: set[int] = set()
    tried_delete: set[int] = set()
    acked_delete: set[int] = set()
    raw_errors: list[str] = []
    for path in logs:
        if not os.path.exists(path):
            continue  # every run of this writer was killed before it started
        for line in Path(path).read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line torn by SIGKILL
            if entry["kind"] == "raw_error":  # reported below, not a row
                raw_errors.append(entry["error"])
                continue
            {
                "try_append": tried_append,
                "ack_append": acked_append,
                "try_delete": tried_delete,
                "ack_delete": acked_delete,
            }[entry["kind"]].update(entry["ids"])
    t = mvcc.open_table(s3_uri, storage_options=s3_options)
    found = t.to_table().column("id").to_pylist()
    present = set(found)
    report = {
        "proxy": proxy.counts,
        "kills": kills,
        "versions": t.version,
        "acked_appends": len(acked_append),
        "acked_deletes": len(acked_delete),
        "lost": sorted(acked_append - tried_delete - present)[:10],
        "duplicated": len(found) - len(present),
        "undone_deletes": sorted(acked_delete & present)[:10],
        "unknown_rows": sorted(present - tried_append - {-1})[:10],
        "raw_errors": len(raw_errors),
        "raw_error_sample": raw_errors[:2],
    }
    print("soak:", json.dumps(report))
    assert proxy.counts["failed"] > 0 and proxy.counts["dropped"] > 0 and kills > 0
    assert len(acked_append) > 50 and acked_delete
    assert not report["lost"] and report["duplicated"] == 0 and not report["undone_deletes"]
    assert not report["unknown_rows"]
    direct = ["--storage-option", f"aws_endpoint={s3_server}"] + [
        arg for k, v in s3_options.items() if k != "aws_endpoint" for arg in ("--storage-option", f"{k}={v}")
    ]
    result = CliRunner().invoke(cli.cli, ["verify", s3_uri, "--all", *direct], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    t.cleanup_old_versions(older_than=timedelta(0), retain_versions=1, delete_unverified=True)
    referenced = {
        f"{ref.store.uri}/{ref.path}"
        for ref in version_files(t.state.store, mvcc.open_table(s3_uri, storage_options=s3_options).manifest)
    }
    listed = {f"{t.state.store.uri}/{m.path}" for m in t.state.store.list("data")}
    assert listed <= referenced, sorted(listed - referenced)[:5]
