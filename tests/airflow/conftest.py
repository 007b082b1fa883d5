"""Fixtures of the Airflow tests: a real AIRFLOW_HOME with sqlite, DAG files in its DAGs folder, `airflow dags test`.

Every test here is marked `airflow`. The in-process (fast) tests get an AIRFLOW_HOME of their own, set before
anything imports Airflow, so that Airflow never writes into ~/airflow. The `airflow_home` fixture migrates one
database per test session (per xdist worker: each worker has its own temporary directory) and runs DAGs with
`airflow dags test` in subprocesses (those tests are slow).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="mvcc-airflow-home-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

# Airflow configures logging when first imported: a root handler on the stdout of that moment (pytest's capture,
# closed later) and the root level INFO. Put the test process's logging back, so that the other tests' loggers
# (py4j's at interpreter exit, caplog users) see what they would without Airflow in the process.
_root = logging.getLogger()
_handlers, _level = list(_root.handlers), _root.level
import airflow.sdk  # noqa: E402, F401

_root.handlers[:] = _handlers
_root.setLevel(_level)

AIRFLOW = str(Path(sys.executable).with_name("airflow"))
LOGICAL_DATE = "2026-01-01"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.airflow)


@dataclass
class AirflowHome:
    """A migrated AIRFLOW_HOME (sqlite) whose DAGs folder the tests write DAG files into."""

    home: Path
    env: dict[str, str]

    @property
    def dags(self) -> Path:
        return self.home / "dags"

    def write_dag(self, name: str, source: str) -> Path:
        """Write a DAG file (dedented) into the DAGs folder."""
        path = self.dags / f"{name}.py"
        path.write_text(textwrap.dedent(source))
        return path

    def command(self, dag_id: str, dag_file: Path, conf: dict[str, Any] | None = None) -> list[str]:
        cmd = [AIRFLOW, "dags", "test", dag_id, LOGICAL_DATE, "-f", str(dag_file)]
        return [*cmd, "-c", json.dumps(conf)] if conf else cmd

    def environment(self, extra_env: dict[str, str] | None = None, warehouse: str | None = None) -> dict[str, str]:
        env = {**self.env, **(extra_env or {})}
        if warehouse is not None:
            env["AIRFLOW_CONN_MVCC_DEFAULT"] = json.dumps({"conn_type": "mvcc", "host": warehouse})
        return env

    def test_dag(
        self,
        dag_id: str,
        dag_file: Path,
        *,
        warehouse: str | None = None,
        conf: dict[str, Any] | None = None,
        extra_env: dict[str, str] | None = None,
        timeout: float = 240,
    ) -> subprocess.CompletedProcess[str]:
        """`airflow dags test dag_id` on `dag_file`; `warehouse` becomes the root uri of `mvcc_default`."""
        return subprocess.run(
            self.command(dag_id, dag_file, conf),
            env=self.environment(extra_env, warehouse),
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> AirflowHome:
    """One AIRFLOW_HOME per session (per xdist worker), its sqlite database migrated once (~8 s)."""
    home = tmp_path_factory.mktemp("airflow_home")
    (home / "dags").mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "MVCC_FAILPOINTS"))},
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
    }
    migrate = subprocess.run([AIRFLOW, "db", "migrate"], env=env, cwd=home, capture_output=True, text=True, timeout=180)
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    return AirflowHome(home=home, env=env)


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    """The root uri of the `mvcc_default` connection of one test."""
    root = tmp_path / "warehouse"
    root.mkdir()
    return str(root)


@pytest.fixture
def connection(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """An `mvcc_default` connection (environment variable, Airflow's own secrets backend) rooted at tmp_path."""
    extra = {"storage_options": json.dumps({"block_size": 1024}), "external_store": ""}
    conn = {"conn_type": "mvcc", "host": str(tmp_path), "login": "KEY", "password": "SECRET", "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_MVCC_DEFAULT", json.dumps(conn))
    return str(tmp_path)
