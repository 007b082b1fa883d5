"""Fixtures of the Dagster tests: a real instance (sqlite, `instance_for_test`) and a warehouse directory.

Every test here is marked `dagster` (registered in pyproject) and skips with a reason where dagster is not
installed (extra `dagster`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

dg = pytest.importorskip("dagster", reason="dagster is not installed (extra 'dagster')")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.dagster)


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    """A real, persistent (sqlite) Dagster instance in a temporary DAGSTER_HOME."""
    with dg.instance_for_test() as inst:
        yield inst


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    """The warehouse root of one test."""
    root = tmp_path / "warehouse"
    root.mkdir()
    return str(root)


@pytest.fixture
def example() -> ModuleType:
    """The example deployment, definitions.py at the repository root (a file, not a package), as a fresh module."""
    path = Path(__file__).resolve().parents[2] / "definitions.py"
    spec = importlib.util.spec_from_file_location("mvcc_example_definitions", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
