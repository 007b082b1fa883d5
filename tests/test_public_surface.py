"""The package roots' public names: mvcc_core's small root, the names that left it (a DeprecationWarning that
names their new module, the same object), and a sorted `__all__` in every package of the three."""

from __future__ import annotations

import importlib
import pkgutil
import re
import warnings

import pytest

import mvcc_core
from mvcc_core import errors, operations, stores
from mvcc_core.verify import verify

ROOT = {
    "Catalog",
    "CommitConflictError",
    "IncompatibleConflictError",
    "MvccError",
    "RetryableConflictError",
    "SchemaError",
    "Table",
    "TableExistsError",
    "TableNotFoundError",
    "TableState",
    "Transaction",
    "VersionInfo",
    "VersionNotFoundError",
    "__version__",
    "catalog",
    "compaction",
    "create_table_from_fragments",
    "errors",
    "names",
    "open_table",
    "operations",
    "stores",
    "write_fragments",
    "write_table",
}


def test_the_root_exports_the_small_set() -> None:
    assert set(mvcc_core.__all__) == ROOT and len(mvcc_core.__all__) == len(ROOT)
    assert set(dir(mvcc_core)) == ROOT
    for name in ROOT:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            getattr(mvcc_core, name)


@pytest.mark.parametrize("name", sorted(mvcc_core.MOVED))
def test_a_moved_name_warns_with_its_module_and_is_the_same_object(name: str) -> None:
    module = mvcc_core.MOVED[name]
    words = rf"mvcc_core\.{name} is deprecated: import it from {re.escape(module)}"
    with pytest.warns(DeprecationWarning, match=words):
        old = getattr(mvcc_core, name)
    assert old is getattr(importlib.import_module(module), name)
    with pytest.warns(DeprecationWarning):  # every use warns, not only the first
        getattr(mvcc_core, name)


def test_calling_the_verify_module_warns_and_verifies(tmp_path) -> None:
    import pyarrow as pa

    t = mvcc_core.write_table(pa.table({"a": [1, 2]}), str(tmp_path / "t"))
    with pytest.warns(
        DeprecationWarning, match=r"mvcc_core\.verify\(\.\.\.\) is deprecated: call mvcc_core\.verify\.verify"
    ):
        report = mvcc_core.verify(t)
    assert report == verify(t) and report.ok


def test_an_unknown_root_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        mvcc_core.no_such_name  # noqa: B018


def test_every_error_is_in_mvcc_core_errors() -> None:
    defined = {
        name
        for module in _modules("mvcc_core")
        for name, value in vars(module).items()
        if isinstance(value, type) and issubclass(value, errors.MvccError) and value.__module__.startswith("mvcc_core")
    }
    assert defined <= set(errors.__all__)
    assert {"CatalogEntryError", "CatalogConflictError", "TagVersionNotFoundError"} <= set(errors.__all__)
    assert all(issubclass(getattr(errors, n), errors.MvccError) for n in errors.__all__)


def test_operations_and_stores_hold_their_classes() -> None:
    assert {op.__name__ for op in operations.ALL_OPERATIONS} <= set(operations.__all__)
    assert {"DynamoDBManifestStore", "SQLiteManifestStore", "ExternalManifestStore", "open_external_store"} <= set(
        stores.__all__
    )


def _isort_key(name: str) -> tuple[int, list[object]]:
    """ruff's RUF022 order: SCREAMING_CASE constants, then CamelCase classes, then the rest; natural within each."""
    kind = 0 if len(name) > 1 and name.isupper() else 1 if name[:1].isupper() else 2
    return kind, [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _modules(package: str) -> list[object]:
    root = importlib.import_module(package)
    found = [root]
    for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
        if info.ispkg and ".spark" not in info.name:  # pyspark is an extra
            found.append(importlib.import_module(info.name))
        elif not info.ispkg and not info.name.endswith("_pb2") and package == "mvcc_core" and ".spark" not in info.name:
            if ".cli" in info.name and info.name.endswith("__main__"):
                continue
            found.append(importlib.import_module(info.name))
    return found


@pytest.mark.parametrize("package", ["mvcc_core", "mvcc_dagster", "mvcc_airflow"])
def test_every_package_all_is_sorted(package: str) -> None:
    pytest.importorskip(package)
    for module in _modules(package):
        names = getattr(module, "__all__", None)
        if names is None or not getattr(module, "__path__", None):
            continue  # only packages (their `__init__`) are checked here; ruff's RUF022 checks every module
        assert list(names) == sorted(names, key=_isort_key), f"{module.__name__}.__all__ is not sorted"
