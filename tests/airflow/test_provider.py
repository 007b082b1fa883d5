"""The provider as Airflow loads it: the entry point, the providers manager, the UI's connection form.

In-process and fast: no DAG run here (tests/airflow/test_dags.py runs them).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

import pytest

import mvcc_airflow
import mvcc_core as mvcc


def test_the_entry_point_names_get_provider_info() -> None:
    (ep,) = [e for e in entry_points(group="apache_airflow_provider") if e.value.startswith("mvcc_airflow")]
    assert ep.load() is mvcc_airflow.get_provider_info
    info = ep.load()()
    assert info["package-name"] == "mvcc" and info["versions"] == [mvcc.__version__]
    (conn_type,) = info["connection-types"]
    assert conn_type["connection-type"] == "mvcc" and set(conn_type["conn-fields"]) == {
        "storage_options",
        "external_store",
    }


@pytest.mark.filterwarnings("ignore:ProvidersManager")
def test_airflow_loads_the_connection_type_its_form_and_the_asset_scheme() -> None:
    from airflow.providers_manager import ProvidersManager

    pm = ProvidersManager()
    assert "mvcc" in pm.providers
    hook = pm.hooks["mvcc"]
    assert hook is not None and hook.hook_class_name == "mvcc_airflow.hooks.mvcc.MvccHook"
    assert hook.connection_id_attribute_name == "mvcc_conn_id"
    assert {"extra__mvcc__storage_options", "extra__mvcc__external_store"} <= set(pm.connection_form_widgets)
    behaviour = pm.field_behaviours["mvcc"]
    assert behaviour["relabeling"]["host"] == "Root uri" and "extra" in behaviour["hidden_fields"]
    assert pm.asset_uri_handlers["mvcc"] is mvcc_airflow.assets.mvcc.sanitize_uri


def test_the_ui_serves_the_connection_form() -> None:
    """What the Airflow 3.3 UI's connection form is built from (the API server's hook metadata for `mvcc`)."""
    from airflow.api_fastapi.core_api.services.ui.connections import HookMetaService

    (meta,) = [h for h in HookMetaService.hook_meta_data() if h.connection_type == "mvcc"]
    assert meta.hook_name == "mvcc table"
    assert meta.standard_fields.host.title == "Root uri" and not meta.standard_fields.host.hidden
    assert meta.standard_fields.port.hidden
    assert {name: field["schema"]["title"] for name, field in meta.extra_fields.items()} == {
        "storage_options": "Storage options (JSON)",
        "external_store": "External manifest store",
    }


def test_every_module_and_class_path_the_provider_info_names_imports() -> None:
    from airflow.sdk.module_loading import import_string

    info = mvcc_airflow.get_provider_info()
    modules = [
        m for kind in ("hooks", "operators", "sensors", "triggers") for e in info[kind] for m in e["python-modules"]
    ]
    assert modules and all(importlib.import_module(m) for m in modules)
    paths = [c["hook-class-name"] for c in info["connection-types"]]
    paths += [a[key] for a in info["asset-uris"] for key in ("handler", "factory")]
    for path in paths:
        assert callable(import_string(path)), path
    assert import_string("mvcc_airflow.triggers.table_version.MvccVersionTrigger").__module__ in modules
