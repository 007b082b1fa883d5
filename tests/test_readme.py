"""README.md runs as written: its local S3 server, every ```python block in order in one fresh interpreter,
then every `mvcc ...` line of its ```bash blocks against the tables those blocks made.

The server is started with the README's own command line, on the README's port: if something else listens
there, the test skips (it cannot run the snippet's text as written). The snippets write fixed paths under
/tmp and a fixed bucket, so runs of this test in several processes (xdist workers, other checkouts) take
turns through a file lock, and the /tmp paths the README names are removed first.

A line `expression  # literal` in a python block (e.g. `s3.count_rows()  # 3`) is run as an assertion that
the expression equals the literal, so the values the README shows are checked too.
"""

from __future__ import annotations

import ast
import fcntl
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LOCK = Path("/tmp/mvcc-test-readme.lock")

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_TMP_PATH = re.compile(r"/tmp/[A-Za-z0-9_.-]+")
_SHOWN_VALUE = re.compile(r"^(?P<expression>\S.*?)\s+#\s*(?P<value>.+)$")


def blocks(text: str, language: str) -> list[tuple[int, str]]:
    """(first line number, body) of every fenced block of `language`, in order."""
    return [(text.count("\n", 0, m.start(2)) + 1, m.group(2)) for m in _FENCE.finditer(text) if m.group(1) == language]


def with_shown_values_asserted(body: str) -> str:
    """`body` with each one-line `expression  # literal` turned into `assert (expression) == literal`."""
    out = []
    for line in body.splitlines():
        match = _SHOWN_VALUE.match(line)
        if match:
            expression, value = match["expression"], match["value"].strip()
            try:
                ast.parse(expression, mode="eval")
                ast.literal_eval(value)
            except (SyntaxError, ValueError):
                pass
            else:
                line = f"assert ({expression}) == {value}, ({expression!r}, {expression})"
        out.append(line)
    return "\n".join(out)


def python_script(text: str) -> str:
    """Every python block in order, each headed by the README line it starts on."""
    parts = [f"# ---- README.md line {n}\n{with_shown_values_asserted(body)}" for n, body in blocks(text, "python")]
    return "\n".join(parts) + "\n"


def bash_lines(text: str) -> list[str]:
    """The commands of every bash block in order (comment-only and blank lines dropped)."""
    return [
        line.strip()
        for _, body in blocks(text, "bash")
        for line in body.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def clean_env() -> dict[str, str]:
    """This environment without AWS_* and MVCC_* variables, this checkout's package first, this venv's scripts."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MVCC_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


@pytest.fixture
def readme_turn() -> Iterator[None]:
    """One run of the README's snippets at a time on this machine (they share /tmp paths and a port)."""
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture
def readme_server(readme_turn: None, tmp_path: Path) -> Iterator[None]:
    """The S3 server started by the README's own `moto_server ... &` line (none when the README has none)."""
    line = next((c for c in bash_lines(README.read_text()) if c.split()[0] == "moto_server"), None)
    if line is None:
        yield
        return
    argv = shlex.split(line.removesuffix("&"))
    host = argv[argv.index("-H") + 1] if "-H" in argv else "127.0.0.1"
    port = int(argv[argv.index("-p") + 1]) if "-p" in argv else 5000
    if not port_is_free(host, port):
        pytest.skip(f"{host}:{port}, where the README starts its S3 server, is in use by another program")
    log = tmp_path / "moto.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=clean_env())
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"`{line}` exited with {proc.returncode}: {log.read_text()}"
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                if s.connect_ex((host, port)) == 0:
                    break
            assert time.monotonic() < deadline, f"`{line}` did not listen on {host}:{port} within 60 s"
            time.sleep(0.1)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_shown_values_become_assertions() -> None:
    body = "t.count_rows()  # 3\nt.count_rows()  # from the manifest\nold = t.checkout(1)  # 1\nx  # ['a', 'b']"
    assert with_shown_values_asserted(body).splitlines() == [
        "assert (t.count_rows()) == 3, ('t.count_rows()', t.count_rows())",
        "t.count_rows()  # from the manifest",
        "old = t.checkout(1)  # 1",
        "assert (x) == ['a', 'b'], ('x', x)",
    ]


@pytest.mark.s3
@pytest.mark.slow
def test_readme_runs_as_written(readme_server: None, tmp_path: Path) -> None:
    text = README.read_text()
    assert blocks(text, "python"), "README.md has no python block"
    for path in sorted(set(_TMP_PATH.findall(text))):
        shutil.rmtree(path, ignore_errors=True)
    script = tmp_path / "readme_snippets.py"
    script.write_text(python_script(text))
    env = clean_env()
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, f"the README's python blocks failed ({script}):\n{done.stderr[-4000:]}"

    # a shell session: the README's exports hold for the commands after them
    exports: list[str] = []
    ran = 0
    for command in bash_lines(text):
        if command.startswith("export "):
            exports.append(command)
        elif command.split()[0] == "mvcc":
            shell = "\n".join([*exports, command])
            result = subprocess.run(
                ["bash", "-c", shell], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
            )
            assert result.returncode == 0, f"`{command}` exited with {result.returncode}:\n{result.stderr}"
            assert result.stdout.strip(), f"`{command}` printed nothing"
            ran += 1
    assert ran, "README.md has no `mvcc` command line"
