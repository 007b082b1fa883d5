"""The previous release's import paths keep working for one release, each with a DeprecationWarning naming the new
path: the names the package root exported before it was narrowed, the removed flat modules, and the names of
the modules that became packages. The new paths import without a warning."""

import importlib
import subprocess
import sys
import warnings

import pytest

import mvcc_dagster
from mvcc_dagster import metadata
from mvcc_dagster._deprecated import MOVED_MODULES

# The package root's `__all__` of the previous release.
OLD_ROOT = [
    "BRANCH", "BRANCH_VERSION", "CATALOG_BRANCH_VERSION", "CATALOG_PUBLISHED_BY_RUN", "CATALOG_READ_VERSION",
    "CATALOG_RESOURCE_KEY", "CATALOG_TABLE", "CATALOG_URI", "CATALOG_VERSION", "CHECKS", "DATA_CHANGING_OPERATIONS",
    "MAINTENANCE_IO_KEY", "MAINTENANCE_OPERATIONS", "MERGE_ON", "PARTITION_EXPR", "RESOURCE_KEY", "RESTORED_FROM",
    "RESTORE_ALLOW_DATA_LOSS", "RESTORE_TAG", "TABLE_TAG", "WAP_BRANCH_PREFIX", "WRITE_AUDIT_PUBLISH", "WRITE_MODE",
    "BackfillRestoreError", "BranchAudit", "BranchCheck", "CatalogAssetTransaction", "HealthThresholds", "Level",
    "MvccCatalogResource", "MvccIOManager", "MvccResource", "MvccTableComponent", "PartitionPredicateError",
    "RestorePlan", "RowAudit", "audited_output", "branch_check", "build_catalog_health_checks",
    "build_catalog_maintenance_job", "build_compaction_job", "build_health_sensor", "build_index_job",
    "build_index_optimize_job", "build_maintenance_schedule", "build_publish_branch_job", "build_restore_job",
    "build_retention_job", "build_table_health_checks", "build_tag_job", "build_version_sensor", "catalog_table_name",
    "check_table_key", "check_write_audit_publish", "conflict_metadata", "conflict_retry_policy", "data_version",
    "delete_catalog_wap_branches", "delete_wap_branches", "evaluate_health", "is_data_changing", "materialize_result",
    "mvcc_conflicts", "partition_predicate", "pinned_partition_versions", "pinned_version", "plan_restore",
    "resolve_uri", "restore_for_backfill", "retry_wait", "table_key_problem", "table_metadata", "to_asset_key",
    "to_dagster", "wap_branch_name",
]  # fmt: skip

# Old module path -> names a program imported from it, and the module each comes from now.
OLD_MODULE_NAMES = {
    "mvcc_dagster.sensors": {"build_version_sensor": "mvcc_dagster.health.sensors"},
    "mvcc_dagster.backfill": {
        "plan_restore": "mvcc_dagster.io_manager.backfill",
        "RESTORE_TAG": "mvcc_dagster.metadata",
    },
    "mvcc_dagster.catalog_write_audit_publish": {
        "delete_catalog_wap_branches": "mvcc_dagster.write_audit_publish.catalog"
    },
    "mvcc_dagster.catalog_maintenance": {"build_catalog_maintenance_job": "mvcc_dagster.maintenance.catalog"},
    "mvcc_dagster.component": {"MvccTableComponent": "mvcc_dagster.components.table_component"},
    "mvcc_dagster.publish_job": {"RowAudit": "mvcc_dagster.write_audit_publish.publish_job"},
    "mvcc_dagster.step_identity": {"step_stamp": "mvcc_dagster.catalog.step_identity"},
    # modules that became packages of the same name: the names their package does not export
    "mvcc_dagster.health": {"REPAIRABLE": "mvcc_dagster.health.checks", "TableHandles": "mvcc_dagster.health.checks"},
    "mvcc_dagster.io_manager": {
        "WRITE_MODE": "mvcc_dagster.metadata",
        "MERGE_ON": "mvcc_dagster.metadata",
        "pinned_version": "mvcc_dagster.lineage",
    },
    "mvcc_dagster.write_audit_publish": {
        "WRITE_AUDIT_PUBLISH": "mvcc_dagster.metadata",
        "wap_enabled": "mvcc_dagster.write_audit_publish.table",
    },
    "mvcc_dagster.catalog": {
        "CATALOG_VERSION": "mvcc_dagster.metadata",
        "DEFAULT_SCHEMA": "mvcc_dagster.catalog.resource",
    },
    "mvcc_dagster.resources": {"RESOURCE_KEY": "mvcc_dagster.metadata"},
}


def _deprecations(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]


def test_the_root_exports_a_narrow_sorted_surface() -> None:
    assert 25 <= len(mvcc_dagster.__all__) <= 40
    assert "metadata" in mvcc_dagster.__all__ and "MvccTypeHandler" in mvcc_dagster.__all__
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name in mvcc_dagster.__all__:
            getattr(mvcc_dagster, name)
    assert _deprecations(caught) == []


@pytest.mark.parametrize("name", sorted(set(OLD_ROOT) - set(mvcc_dagster.__all__)))
def test_a_moved_root_name_resolves_with_a_warning(name: str) -> None:
    target = mvcc_dagster.MOVED[name]
    with pytest.warns(DeprecationWarning, match=rf"mvcc_dagster\.{name} is deprecated .*import it from {target}$"):
        value = getattr(mvcc_dagster, name)
    assert value is getattr(importlib.import_module(target), name)


def test_every_old_root_name_still_resolves() -> None:
    assert set(OLD_ROOT) <= set(mvcc_dagster.__all__) | set(mvcc_dagster.MOVED)
    assert set(mvcc_dagster.MOVED).isdisjoint(mvcc_dagster.__all__)
    with pytest.raises(AttributeError, match="has no attribute 'not_a_name'"):
        mvcc_dagster.not_a_name  # noqa: B018


def test_the_metadata_keys_are_the_previous_values() -> None:
    # the strings users wrote into their definitions and run tags: moving the constants changed none of them
    assert (metadata.WRITE_MODE, metadata.MERGE_ON, metadata.PARTITION_EXPR) == (
        "mvcc/write_mode",
        "mvcc/merge_on",
        "partition_expr",
    )
    assert (metadata.WRITE_AUDIT_PUBLISH, metadata.RESTORE_TAG, metadata.TABLE_TAG) == (
        "mvcc/write_audit_publish",
        "mvcc/backfill_restore",
        "mvcc/table",
    )
    assert (metadata.RESOURCE_KEY, metadata.CATALOG_RESOURCE_KEY, metadata.MAINTENANCE_IO_KEY) == (
        "mvcc",
        "mvcc_catalog",
        "mvcc_maintenance_io",
    )


@pytest.mark.parametrize(("old", "names"), sorted(OLD_MODULE_NAMES.items()))
def test_an_old_module_path_imports_with_a_warning(old: str, names: dict[str, str]) -> None:
    for name, target in names.items():
        with pytest.warns(DeprecationWarning, match=rf"{old}\.{name} is deprecated .*import it from {target}$"):
            namespace: dict[str, object] = {}
            exec(f"from {old} import {name}", namespace)  # noqa: S102 - the statement a user's program has
        new = importlib.import_module(target)
        assert namespace[name] is getattr(new, name)


def test_every_removed_module_is_registered() -> None:
    for old, new in MOVED_MODULES.items():
        module = importlib.import_module(f"mvcc_dagster.{old}")
        target = importlib.import_module(f"mvcc_dagster.{new}")
        with pytest.warns(DeprecationWarning, match=f"import it from mvcc_dagster.{new}"):
            names = module.__all__
        assert names, old
        with pytest.warns(DeprecationWarning):
            assert getattr(module, names[0]) is getattr(target, names[0])


def test_new_paths_import_without_a_warning() -> None:
    # a fresh interpreter: importing the package and every new path under "error" for DeprecationWarnings
    code = (
        "import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
        "import mvcc_dagster\n"
        "from mvcc_dagster.io_manager import MvccIOManager, MvccTypeHandler, PolarsTypeHandler\n"
        "from mvcc_dagster.io_manager.backfill import plan_restore\n"
        "from mvcc_dagster.write_audit_publish import branch_check, build_publish_branch_job\n"
        "from mvcc_dagster.write_audit_publish.catalog import delete_catalog_wap_branches\n"
        "from mvcc_dagster.health import build_health_sensor, build_version_sensor\n"
        "from mvcc_dagster.catalog import MvccCatalogResource\n"
        "from mvcc_dagster.components import MvccTableComponent\n"
        "from mvcc_dagster.maintenance.catalog import build_catalog_maintenance_job\n"
        "from mvcc_dagster.metadata import WRITE_MODE, COLUMNS\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
