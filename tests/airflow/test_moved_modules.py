"""The provider's module paths: the packages of Airflow's provider shape, and the flat modules of the previous
release, which still import and warn."""

from __future__ import annotations

import importlib

import pytest

import mvcc_airflow

# Old module -> (a name it held, the module that holds it now).
MOVED = {
    "mvcc_airflow.branch_operators": ("MvccPublishBranchOperator", "mvcc_airflow.operators.publish_branch"),
    "mvcc_airflow.compaction_calls": ("compaction_options", "mvcc_airflow.utils.compaction_calls"),
    "mvcc_airflow.compaction_group": ("mvcc_compaction_group", "mvcc_airflow.operators.compaction_group"),
    "mvcc_airflow.conflicts": ("mvcc_errors", "mvcc_airflow.utils.conflicts"),
    "mvcc_airflow.task_results": ("task_result", "mvcc_airflow.utils.task_results"),
    "mvcc_airflow.versions": ("newer_version", "mvcc_airflow.utils.versions"),
}

# Modules of the previous release that are packages of the same name now: their names import without a warning.
KEPT = {
    "mvcc_airflow.hooks": ["DEFAULT_CONN_ID", "MvccHook", "is_uri", "settings_of", "uri_under_root"],
    "mvcc_airflow.operators": [
        "MvccBaseOperator",
        "MvccCleanupOperator",
        "MvccCompactOperator",
        "MvccCreateIndexOperator",
        "MvccOptimizeIndicesOperator",
        "MvccRestoreOperator",
        "MvccTagOperator",
        "mvcc_compaction_group",
        "tagged_text",
        "to_duration",
        "to_timestamp",
    ],
    "mvcc_airflow.sensors": ["MvccVersionSensor"],
    "mvcc_airflow.triggers": ["MvccVersionTrigger"],
    "mvcc_airflow.assets": [
        "OPERATION_EXTRA",
        "VERSION_EXTRA",
        "asset_uri",
        "create_asset",
        "sanitize_uri",
        "table_asset",
    ],
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_moved_module_still_imports_and_warns_naming_its_new_path(old: str) -> None:
    name, new = MOVED[old]
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=rf"{old} is deprecated .*: import from {new}$"):
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(new), name)
    with pytest.warns(DeprecationWarning, match=old):
        exec(f"from {old} import {name} as imported", namespace := {})
    assert namespace["imported"] is value
    with pytest.warns(DeprecationWarning), pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018


def test_a_star_import_of_a_moved_module_gives_the_names_it_defined() -> None:
    namespace: dict[str, object] = {}
    with pytest.warns(DeprecationWarning, match="mvcc_airflow.versions"):
        exec("from mvcc_airflow.versions import *", namespace)
    assert {"MAINTENANCE_OPERATIONS", "newer_version"} <= set(namespace) and "mvcc" not in namespace


def test_a_moved_module_is_an_attribute_of_the_package() -> None:
    import mvcc_airflow.conflicts

    assert mvcc_airflow.conflicts is importlib.import_module("mvcc_airflow.conflicts")


@pytest.mark.filterwarnings("error::DeprecationWarning")
@pytest.mark.parametrize("package", sorted(KEPT))
def test_the_old_modules_that_became_packages_keep_their_names(package: str) -> None:
    module = importlib.import_module(package)
    for name in KEPT[package]:
        assert getattr(module, name) is not None, name
    assert set(KEPT[package]) <= set(module.__all__)


@pytest.mark.filterwarnings("error::DeprecationWarning")
def test_the_package_root_has_a_small_sorted_all_and_every_name_loads() -> None:
    assert mvcc_airflow.__all__ == sorted(mvcc_airflow.__all__)
    assert len(mvcc_airflow.__all__) <= 20
    for name in mvcc_airflow.__all__:
        assert getattr(mvcc_airflow, name) is not None, name
    assert mvcc_airflow.MvccPublishBranchOperator is mvcc_airflow.operators.MvccPublishBranchOperator
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        mvcc_airflow.nope  # noqa: B018
