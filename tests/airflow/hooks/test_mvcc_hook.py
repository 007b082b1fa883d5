"""`MvccHook`: table names under the connection's root, full uris, and a wrong connection in the user's words."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from airflow.sdk.exceptions import AirflowFailException

import mvcc_core as mvcc
from mvcc_airflow.hooks import MvccHook


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
