"""The asset URI scheme `mvcc`: a table's asset names its storage and path, never credentials."""

from __future__ import annotations

import pytest

from mvcc_airflow.assets import asset_uri, table_asset


def test_asset_uris_name_the_storage_and_path(connection: str) -> None:
    assert asset_uri("s3://bucket/wh/events/") == "mvcc://s3/bucket/wh/events"
    assert asset_uri("/data/wh/events") == asset_uri("file:///data/wh/events") == "mvcc://file/data/wh/events"
    assert table_asset("events").uri == f"mvcc://file{connection}/events"
    assert table_asset("memory://wh/t", mvcc_conn_id="unused").uri == "mvcc://memory/wh/t"
    with pytest.raises(ValueError, match="credentials"):
        asset_uri("s3://key:secret@bucket/t")
