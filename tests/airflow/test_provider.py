"""The provider as Airflow loads it, the hook, asset URIs, the conflict mapping and the operators' argument checks.

In-process and fast: no DAG run here (tests/airflow/test_dags.py runs them).
"""

from __future__ import annotations

import json
from datetime import timedelta
from importlib.metadata import entry_points
from pathlib import Path

import pyarrow as pa
import pytest
from airflow.sdk.exceptions import AirflowFailException

import mvcc_airflow
import mvcc_core as mvcc
from mvcc_airflow import (
    MvccCleanupOperator,
    MvccCompactOperator,
    MvccHook,
    MvccRestoreOperator,
    MvccVersionSensor,
    mvcc_compaction_group,
    table_asset,
)
from mvcc_airflow.assets import asset_uri
from mvcc_airflow.conflicts import to_airflow
from mvcc_airflow.operators import to_duration


@pytest.fixture
def connection(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """An `mvcc_default` connection (environment variable, Airflow's own secrets backend) rooted at tmp_path."""
    extra = {"storage_options": json.dumps({"block_size": 1024}), "external_store": ""}
    conn = {"conn_type": "mvcc", "host": str(tmp_path), "login": "KEY", "password": "SECRET", "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_MVCC_DEFAULT", json.dumps(conn))
    return str(tmp_path)


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
    assert hook is not None and hook.hook_class_name == "mvcc_airflow.hooks.MvccHook"
    assert hook.connection_id_attribute_name == "mvcc_conn_id"
    assert {"extra__mvcc__storage_options", "extra__mvcc__external_store"} <= set(pm.connection_form_widgets)
    behaviour = pm.field_behaviours["mvcc"]
    assert behaviour["relabeling"]["host"] == "Root uri" and "extra" in behaviour["hidden_fields"]
    assert pm.asset_uri_handlers["mvcc"] is mvcc_airflow.assets.sanitize_uri


def test_the_hook_opens_names_under_the_root_and_full_uris(connection: str) -> None:
    mvcc.write_table(pa.table({"x": [1, 2]}), f"{connection}/events")
    hook = MvccHook()
    root, options, external = hook.connection_settings()
    assert root == connection and external is None
    assert options == {"block_size": 1024, "aws_access_key_id": "KEY", "aws_secret_access_key": "SECRET"}
    assert hook.open_table("events").count_rows() == 2
    assert MvccHook("no_such_connection").open_table(f"{connection}/events").version == 1


def test_a_missing_connection_or_table_fails_in_the_users_words(connection: str) -> None:
    with pytest.raises(AirflowFailException, match="mvcc_conn_id='nope': no such Airflow connection"):
        MvccHook("nope").open_table("events")
    with pytest.raises(AirflowFailException, match="TableNotFoundError"):
        MvccHook().open_table("missing")


def test_bad_storage_options_are_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    conn = {"conn_type": "mvcc", "host": "/tmp/x", "extra": {"storage_options": "{not json"}}
    monkeypatch.setenv("AIRFLOW_CONN_BROKEN", json.dumps(conn))
    with pytest.raises(AirflowFailException, match="connection 'broken': storage_options is not JSON"):
        MvccHook("broken").open_table("events")


def test_asset_uris_name_the_storage_and_path(connection: str) -> None:
    assert asset_uri("s3://bucket/wh/events/") == "mvcc://s3/bucket/wh/events"
    assert asset_uri("/data/wh/events") == asset_uri("file:///data/wh/events") == "mvcc://file/data/wh/events"
    assert table_asset("events").uri == f"mvcc://file{connection}/events"
    assert table_asset("memory://wh/t", mvcc_conn_id="unused").uri == "mvcc://memory/wh/t"
    with pytest.raises(ValueError, match="credentials"):
        asset_uri("s3://key:secret@bucket/t")


def test_conflicts_map_to_retries_or_failures() -> None:
    retryable = mvcc.RetryableConflictError("lost", uri="u", read_version=1, conflicting_versions=[2])
    assert to_airflow(retryable) is None  # propagates: the task's retries apply
    assert to_airflow(mvcc.errors.StorageError("connection reset")) is None
    assert to_airflow(OSError("network")) is None
    incompatible = mvcc.IncompatibleConflictError(
        "restored",
        uri="u",
        read_version=1,
        conflicting_versions=[2],
        operation="Rewrite",
        conflicting_operation="Restore",
    )
    failure = to_airflow(incompatible, "compaction of u")
    assert isinstance(failure, AirflowFailException)
    assert "compaction of u: incompatible commit conflict on u" in str(failure) and "Restore" in str(failure)
    for exc in (
        mvcc.errors.ObjectNotFoundError("gone"),
        mvcc.errors.TagError("no tag"),
        ValueError("bad"),
        TypeError("bad"),
    ):
        assert isinstance(to_airflow(exc), AirflowFailException), exc
    concurrent = mvcc.TableExistsError("exists", uri="u", created_concurrently=True)
    assert to_airflow(concurrent) is None
    assert isinstance(to_airflow(mvcc.TableExistsError("exists", uri="u")), AirflowFailException)


def test_older_than_takes_the_clis_durations() -> None:
    assert to_duration("7d") == timedelta(days=7)
    assert to_duration("1w2d") == timedelta(days=9)
    assert to_duration(timedelta(hours=3)) == timedelta(hours=3)
    with pytest.raises(ValueError, match=r"older_than: not a duration: '7 days'"):
        to_duration("7 days")
    with pytest.raises(ValueError, match="older_than must not be negative"):
        to_duration(timedelta(days=-1))


def test_operators_refuse_bad_arguments_by_their_names() -> None:
    with pytest.raises(ValueError, match="older_than: not a duration"):
        MvccCleanupOperator(task_id="c", table="t", older_than="soon")
    with pytest.raises(ValueError, match="retain_versions must be a positive integer"):
        MvccCleanupOperator(task_id="c", table="t", older_than="7d", retain_versions=0)
    with pytest.raises(ValueError, match=r"options: unknown compaction option\(s\) \['target_rows'\]"):
        MvccCompactOperator(task_id="c", table="t", options={"target_rows": 5})
    with pytest.raises(ValueError, match="options: target_rows_per_fragment must be positive"):
        mvcc_compaction_group("t", options={"target_rows_per_fragment": 0})
    with pytest.raises(ValueError, match="exactly one of version, tag and timestamp"):
        MvccRestoreOperator(task_id="r", table="memory://wh/t", version=3, tag="good")
    with pytest.raises(ValueError, match="table must be a table name or a uri"):
        MvccCompactOperator(task_id="c", table="")
    with pytest.raises(ValueError, match="give after_version with mode='reschedule'"):
        MvccVersionSensor(task_id="s", table="t", mode="reschedule")


def test_operators_retry_with_backoff_unless_told_otherwise() -> None:
    op = MvccCleanupOperator(task_id="c", table="t", older_than="7d")
    assert (op.retries, op.retry_delay, op.retry_exponential_backoff) == (4, timedelta(seconds=2), 2.0)
    assert MvccCleanupOperator(task_id="c", table="t", older_than="7d", retries=0).retries == 0
    assert op.dry_run is True


def test_newer_version_passes_over_maintenance_when_asked(tmp_path: Path) -> None:
    from mvcc_airflow.versions import newer_version

    uri = str(tmp_path / "t")
    t = mvcc.write_table(pa.table({"x": [1]}), uri)
    for i in range(3):
        t = t.append(pa.table({"x": [i]}))
    seen = t.version
    assert newer_version(t, seen) == (None, seen)
    t.optimize.compact_files()  # ReserveFragments, Rewrite: no data change
    t.create_index("x")  # CreateIndex
    assert newer_version(t, seen) == (seen + 3, seen + 3)
    assert newer_version(t, seen, skip_maintenance=True) == (None, seen + 3)
    t.checkout_latest().append(pa.table({"x": [9]}))
    assert newer_version(t, seen + 3, skip_maintenance=True) == (seen + 4, seen + 4)


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
