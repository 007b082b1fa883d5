"""Every failpoint the code calls can be armed, in this process and in a child through MVCC_FAILPOINTS."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from mvcc_core import failpoints
from mvcc_core.catalog import Catalog

#: The checkout whose package this process imported: the children run the same code.
ROOT = Path(failpoints.__file__).resolve().parents[1]
IDS = pa.schema([("id", pa.int64())])

APPEND_IN_A_TRANSACTION = """
import sys
import pyarrow as pa
from mvcc_core.catalog import Catalog

cat = Catalog.open(sys.argv[1])
with cat.transaction() as tx:
    tx.table("s.a").append(pa.table({"id": [4]}))
print("committed")
"""


def called_points() -> set[str]:
    """The names passed to `failpoint(...)` anywhere in the package."""
    found: set[str] = set()
    for path in (ROOT / "mvcc_core").rglob("*.py"):
        found |= set(re.findall(r"""\bfailpoint\(\s*["']([^"']+)["']""", path.read_text()))
    return found


def test_every_point_called_is_registered() -> None:
    called = called_points()
    assert {"commit.before_manifest_put", "catalog.after_stage", "catalog.migrate.after_step"} <= called
    assert called == set(failpoints.POINTS)  # none missing (cannot be armed), none stale


@pytest.mark.parametrize(
    "point",
    [
        "catalog.after_stage",
        pytest.param("catalog.after_table_staged", marks=pytest.mark.slow),
        pytest.param("catalog.after_publish", marks=pytest.mark.slow),
    ],
)
def test_a_catalog_point_is_armed_in_a_child_through_the_environment(tmp_path: Path, point: str) -> None:
    root = str(tmp_path / "catalog")
    cat = Catalog.create(root)
    cat.create_schema("s")
    with cat.transaction() as tx:
        tx.create_table("s.a", IDS)
        tx.table("s.a").append(pa.table({"id": [1, 2, 3]}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env[failpoints.ENV_VAR] = failpoints.env_spec({point: "exit"})
    done = subprocess.run(
        [sys.executable, "-c", APPEND_IN_A_TRANSACTION, root], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == failpoints.DEFAULT_EXIT_CODE, done.stderr  # died at the point, not at import
    assert "committed" not in done.stdout
    env.pop(failpoints.ENV_VAR)
    again = subprocess.run(
        [sys.executable, "-c", APPEND_IN_A_TRANSACTION, root], env=env, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0 and "committed" in again.stdout, again.stderr


def test_an_unknown_point_in_the_environment_is_refused_at_import(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env[failpoints.ENV_VAR] = "catalog.after_stgae=exit"
    done = subprocess.run([sys.executable, "-c", "import mvcc_core"], env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "unknown failpoint 'catalog.after_stgae'" in done.stderr
