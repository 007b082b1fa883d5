"""A moto S3 server as a separate process on 127.0.0.1 (`tests/moto_server.py`: writes serialized), for a test session
or one test module."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

MOTO_SERVER = Path(__file__).with_name("moto_server.py")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until_up(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            output = log.read_text(errors="replace")
            raise RuntimeError(f"moto server exited with {proc.returncode}:\n{output}")
        try:
            with urllib.request.urlopen(f"{url}/moto-api/", timeout=1):
                return
        except urllib.error.HTTPError:
            return  # it answers, even if not with 200
        except OSError:
            time.sleep(0.1)
    output = log.read_text(errors="replace")
    raise RuntimeError(f"moto server did not answer on {url} within {timeout}s:\n{output}")


@contextlib.contextmanager
def moto_server(extra_env: dict[str, str] | None = None) -> Iterator[str]:
    """Run a moto S3 server until the block ends; yields its endpoint url.

    Args:
        extra_env: environment variables for the server on top of this process's, without its AWS_* ones
            (e.g. ``INITIAL_NO_AUTH_ACTION_COUNT=0`` to have it check credentials)
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = Path(tempfile.mkdtemp(prefix="mvcc-moto-")) / "moto.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env.update(extra_env or {})
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(
            [sys.executable, str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    try:
        _wait_until_up(url, proc, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
