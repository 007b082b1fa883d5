"""A real Airflow deployment (`airflow standalone`: scheduler, DAG processor, triggerer, API server; a temporary
AIRFLOW_HOME with sqlite) running the example DAG `mvcc_on_outside_commit`: a commit made by another process
(examples/outside_writer.py) reaches the triggerer's watcher, becomes an asset event, and starts a DAG run whose
task reads the new version (three commits, each one's latency printed). Then the deployment stops, two commits
land while no triggerer runs, and the restarted watcher fires for exactly those two versions (its cursor in the
asset state store), not again for the ones it fired before.

Slow tier, and out of CI unless ``MVCC_AIRFLOW_STANDALONE=1``: a whole deployment per run (about a minute to
start on two idle cores, several under load), started twice, and latencies that depend on the load.
The measured latencies are printed (``-s``) and asserted against generous bounds only.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import mvcc_core as mvcc

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("MVCC_AIRFLOW_STANDALONE") != "1",
        reason="a whole Airflow deployment: set MVCC_AIRFLOW_STANDALONE=1 to run it (kept out of CI)",
    ),
]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "airflow" / "dags" / "mvcc_on_outside_commit.py"
WRITER = ROOT / "examples" / "outside_writer.py"
DAG_ID = "mvcc_on_outside_commit"
AIRFLOW = str(Path(sys.executable).with_name("airflow"))
POLL = 10.0  # the example's poll_interval


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def parse_time(value: str | None) -> datetime | None:
    if value is None:
        return None
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class Deployment:
    def __init__(self, home: Path, warehouse: Path) -> None:
        self.home = home
        api = free_port()
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "MVCC_FAILPOINTS"))},
            "PYTHONPATH": str(ROOT),
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(api),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api}/execution/",
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW_CONN_MVCC_DEFAULT": json.dumps({"conn_type": "mvcc", "host": str(warehouse)}),
            "MVCC_WAREHOUSE": str(warehouse),
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = home / "standalone.log"

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [AIRFLOW, "standalone"],
                env=self.env,
                cwd=self.home,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        db = self.home / "airflow.db"
        if not db.exists():
            return []
        with sqlite3.connect(db, timeout=30) as conn:
            try:
                return conn.execute(sql, args).fetchall()
            except sqlite3.OperationalError:  # not migrated yet, or locked beyond the timeout
                return []

    def wait(self, what: str, check: Any, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                pytest.fail(f"airflow standalone exited ({self.proc.returncode}):\n{self.tail()}")
            found = check()
            if found:
                return found
            time.sleep(0.2)
        pytest.fail(f"timed out waiting for {what}:\n{self.tail()}")

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-6000:] if self.log.exists() else ""

    def cursor(self) -> int | None:
        rows = self.query("SELECT value FROM asset_state_store WHERE key = 'mvcc/version'")
        return int(json.loads(rows[0][0])) if rows else None

    def events(self) -> list[tuple[int, datetime]]:
        rows = self.query("SELECT extra, timestamp FROM asset_event ORDER BY id")
        out = []
        for extra, at in rows:
            payload = json.loads(extra).get("payload", {})
            out.append((int(payload["version"]), parse_time(at)))
        return out

    def event_of(self, version: int) -> datetime | None:
        return next((at for v, at in self.events() if v == version), None)

    def run_after(self, event_at: datetime) -> tuple[str, datetime, datetime, str] | None:
        """The first run queued after `event_at` that has started."""
        for run_id, queued_at, started_at, state in self.runs():
            if queued_at is not None and started_at is not None and queued_at >= event_at:
                return run_id, queued_at, started_at, state
        return None

    def run_state(self, run_id: str) -> str | None:
        return next((state for r, _, _, state in self.runs() if r == run_id), None)

    def runs(self) -> list[tuple[str, datetime | None, datetime | None, str]]:
        rows = self.query(
            "SELECT run_id, queued_at, start_date, state FROM dag_run WHERE dag_id = ? ORDER BY id", DAG_ID
        )
        return [(r[0], parse_time(r[1]), parse_time(r[2]), r[3]) for r in rows]


def commit_outside(env: dict[str, str]) -> datetime:
    """One commit by the example's outside writer (another process); the time it returned."""
    done = subprocess.run([sys.executable, str(WRITER)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return datetime.now(UTC)


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[Deployment]:
    home = tmp_path / "airflow_home"
    (home / "dags").mkdir(parents=True)
    shutil.copy(EXAMPLE, home / "dags" / EXAMPLE.name)
    d = Deployment(home, tmp_path / "warehouse")
    try:
        yield d
    finally:
        d.stop()


def test_an_outside_commit_starts_the_watched_dag_and_a_restart_fires_exactly_the_missed_versions(
    deployment: Deployment,
) -> None:
    env = deployment.env
    commit_outside(env)  # the table's first version, before the watcher exists: no event for it
    start = time.monotonic()
    deployment.start()
    deployment.wait("the watcher's cursor", lambda: deployment.cursor() == 1, timeout=600)
    print(f"\ndeployment up, watcher at version 1 after {time.monotonic() - start:.1f} s")

    # Three outside commits, each once the run of the one before has started: versions 2, 3, 4.
    latencies = []
    for version in (2, 3, 4):
        committed = commit_outside(env)
        event = deployment.wait(f"the asset event of version {version}", lambda v=version: deployment.event_of(v), 120)
        run = deployment.wait(f"the run of version {version}", lambda e=event: deployment.run_after(e), timeout=180)
        _, queued_at, started_at, _ = run
        latencies.append(
            (
                (event - committed).total_seconds(),
                (queued_at - committed).total_seconds(),
                (started_at - committed).total_seconds(),
            )
        )
        deployment.wait("the run's success", lambda r=run[0]: deployment.run_state(r) == "success", timeout=300)
    for (to_event, to_queued, to_started), version in zip(latencies, (2, 3, 4), strict=True):
        print(
            f"version {version}: commit -> asset event {to_event:.1f} s, -> run queued {to_queued:.1f} s,"
            f" -> run started {to_started:.1f} s (poll interval {POLL:.0f} s)"
        )
    assert [v for v, _ in deployment.events()] == [2, 3, 4]
    assert all(to_event <= POLL + 15 for to_event, _, _ in latencies)  # a poll, the sync, a loaded machine
    deployment.wait("the cursor at version 4", lambda: deployment.cursor() == 4, timeout=60)

    deployment.stop()
    commit_outside(env)  # versions 5 and 6 while no triggerer runs
    commit_outside(env)
    deployment.start()
    deployment.wait("events for versions 5 and 6", lambda: len(deployment.events()) >= 5, timeout=600)
    time.sleep(2 * POLL)  # and nothing more
    assert [v for v, _ in deployment.events()] == [2, 3, 4, 5, 6]
    assert mvcc.open_table(env["MVCC_WAREHOUSE"] + "/partner_feed").version == 6
