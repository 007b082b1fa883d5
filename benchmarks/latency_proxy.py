"""An HTTP forwarder on 127.0.0.1 that holds each request a set number of milliseconds before passing it to an
S3-compatible server (moto), and counts the requests by method and kind of object (manifest, transaction, data
file, listing, other). Object stores answer in tens of milliseconds; a local moto server in well under one, so
without this a benchmark cannot tell one request from a hundred.

    with LatencyProxy(moto_url) as proxy:
        proxy.delay_ms = 20
        proxy.reset()
        ...  # requests through proxy.url
        proxy.counts()  # {"GET manifest": 3, "LIST": 1, ...}
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit


def request_kind(method: str, path: str) -> str:
    """`method kind` of one S3 request: a listing, or a GET/PUT/HEAD/DELETE/POST of a manifest, a transaction
    file, a data file, a deletion file or something else.

    Args:
        method: the HTTP method
        path: the request's path and query
    """
    parts = urlsplit(path)
    query = parts.query
    if method == "GET" and ("list-type" in query or "prefix=" in query or parts.path.rstrip("/").count("/") <= 1):
        return "LIST"
    if method == "POST" and "delete" in query:
        return "POST delete-batch"
    key = parts.path
    if "/_versions/" in key:
        kind = "manifest"
    elif "/_transactions/" in key:
        kind = "transaction"
    elif "/_deletions/" in key:
        kind = "deletion"
    elif "/data/" in key:
        kind = "data"
    else:
        kind = "other"
    if "uploadId" in query or "uploads" in query:
        kind += " (multipart)"
    return f"{method} {kind}"


class LatencyProxy(ThreadingHTTPServer):
    """Forwards every request to `target` after holding it `delay_ms`; counts them (see `counts`).

    Args:
        target: the server's url, ``http://127.0.0.1:PORT``
    """

    daemon_threads = True

    def __init__(self, target: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        host, port = target.removeprefix("http://").split(":")
        self.target = (host, int(port))
        self.delay_ms = 0.0
        self.lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._in_flight = 0
        self._most_in_flight = 0
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def note(self, method: str, path: str) -> None:
        with self.lock:
            self._counts[request_kind(method, path)] += 1
            self._in_flight += 1
            self._most_in_flight = max(self._most_in_flight, self._in_flight)

    def done(self) -> None:
        with self.lock:
            self._in_flight -= 1

    def reset(self) -> None:
        """Start counting from zero."""
        with self.lock:
            self._counts.clear()
            self._most_in_flight = self._in_flight

    def counts(self) -> dict[str, int]:
        """Requests since the last `reset`, by `method kind`, with their sum under "total" and the most of them
        held at once under "in flight" (1: one after another)."""
        with self.lock:
            out = dict(sorted(self._counts.items()))
            most = self._most_in_flight
        out["total"] = sum(out.values())
        out["in flight"] = most
        return out

    def get_request(self) -> tuple[socket.socket, Any]:
        """The accepted client connection, with Nagle's algorithm off: the handler writes the headers and the
        body separately, and a client's delayed ACK of the first would otherwise hold the second ~40 ms."""
        conn, address = super().get_request()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, address

    def __enter__(self) -> LatencyProxy:
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: LatencyProxy

    def log_message(self, *args: Any) -> None:
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size + 2)[:size]
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _any(self) -> None:
        body = self._body()
        self.server.note(self.command, self.path)
        try:
            self._forward(body)
        finally:
            self.server.done()

    def _forward(self, body: bytes) -> None:
        if self.server.delay_ms:
            time.sleep(self.server.delay_ms / 1e3)
        hop = ("transfer-encoding", "content-length", "expect", "connection", "keep-alive")
        headers = {k: v for k, v in self.headers.items() if k.lower() not in hop}
        headers["Content-Length"] = str(len(body))
        conn = http.client.HTTPConnection(*self.server.target, timeout=120)  # connect() sets TCP_NODELAY itself
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
        finally:
            conn.close()
        self.send_response(response.status, response.reason)
        for key, value in response.getheaders():
            if key.lower() not in ("transfer-encoding", "content-length", "connection", "server", "date"):
                self.send_header(key, value)
        length = response.getheader("Content-Length") if self.command == "HEAD" else None
        self.send_header("Content-Length", length if length is not None else str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any  # noqa: N815 - http.server's names
