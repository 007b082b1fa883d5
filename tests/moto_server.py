"""moto's S3 server for the test session, with its writes made atomic.

`python -m moto.server` runs a threaded werkzeug server: every request is handled on its own thread, and
moto's handlers hold no lock. A conditional PUT (`If-None-Match: *`) is a check followed by a write
(`moto/s3/responses.py` `put_object`: `backend.get_object(...) is not None` → 412; otherwise
`backend.put_object(...)`, which hashes the body and only then stores the key in `bucket.keys`). Two
requests for one key whose checks both run before either stores both get 200: two winners. Under load
this happened in a full test run (`test_put_if_not_exists_exactly_once_s3`).

Real S3 documents conditional writes as atomic. This server makes moto match that by running every request
that can change state (anything but GET/HEAD/OPTIONS) one at a time under one lock. The request body is read
from the socket before the lock is taken, so a slow upload does not hold up the others; reads stay concurrent.

usage: python tests/moto_server.py [-H HOST] -p PORT
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple

READ_ONLY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class SerializedWrites:
    """WSGI middleware: requests that may write are handled one at a time; reads run concurrently."""

    def __init__(self, app: WsgiApp) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ["REQUEST_METHOD"] in READ_ONLY_METHODS:
            return self.app(environ, start_response)
        _buffer_body(environ)
        with self.lock:
            # moto builds the whole response inside this call (the handler has run when it returns)
            return self.app(environ, start_response)


def _buffer_body(environ: dict[str, Any]) -> None:
    """Read the request body now, outside the lock, and hand the application an in-memory copy."""
    stream = environ["wsgi.input"]
    if environ.get("wsgi.input_terminated"):  # chunked transfer: werkzeug's stream ends after the last chunk
        body = stream.read()
    else:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = stream.read(length) if length > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)
    # the copy ends where the body ends; werkzeug then reads it to the end whatever the headers say
    # (it ignores Content-Length on a chunked request)
    environ["wsgi.input_terminated"] = True


def build_app() -> WsgiApp:
    """moto's server application (as `python -m moto.server` builds it), writes serialized."""
    app = DomainDispatcherApplication(create_backend_app)
    app.debug = True  # type: ignore[attr-defined]  # as moto.server does
    return SerializedWrites(app)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    args = parser.parse_args(argv)
    os.environ.setdefault("MOTO_PORT", str(args.port))  # as moto.server does
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    run_simple(args.host, args.port, build_app(), threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
