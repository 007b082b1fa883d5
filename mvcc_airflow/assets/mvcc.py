"""Airflow assets for mvcc tables: the URI scheme `mvcc` (registered in `get_provider_info`).

A table's asset URI names where the table lives, so every DAG that writes or waits on one table names the same
asset whatever connection it goes through: ``mvcc://<storage>/<path>``, the storage being the table uri's own
scheme (``s3://bucket/wh/events`` -> ``mvcc://s3/bucket/wh/events``; ``/data/wh/events`` or
``file:///data/wh/events`` -> ``mvcc://file/data/wh/events``; ``memory://wh/events`` ->
``mvcc://memory/wh/events``). No credentials and no endpoint are part of it.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import SplitResult

from airflow.sdk import Asset

from ..hooks.mvcc import DEFAULT_CONN_ID, MvccHook, is_uri
from ..provider_info import ASSET_SCHEME

VERSION_EXTRA = "mvcc/version"
OPERATION_EXTRA = "mvcc/operation"


def asset_uri(table_uri: str) -> str:
    """The asset URI of the table at `table_uri`.

    Args:
        table_uri: The table's full uri (``s3://...``, ``file://...``, ``memory://...``) or absolute path.

    Returns:
        ``mvcc://<storage>/<path>``.
    """
    if "://" in table_uri:
        storage, rest = table_uri.split("://", 1)
        storage = {"local": "file", "s3a": "s3"}.get(storage.lower(), storage.lower())
    else:
        storage, rest = "file", os.path.abspath(table_uri)
    if "@" in rest.split("/", 1)[0]:
        raise ValueError(f"table uri {table_uri!r} carries credentials; give them in the mvcc connection instead")
    return f"{ASSET_SCHEME}://{storage}/{rest.strip('/')}"


def table_asset(
    table: str,
    *,
    mvcc_conn_id: str = DEFAULT_CONN_ID,
    watch: bool = False,
    poll_interval: float = 30.0,
    skip_maintenance: bool = False,
) -> Asset:
    """The Airflow `Asset` of a table, for `outlets`, `schedule=` and asset events.

    With `watch=True` the asset has an `AssetWatcher` (`MvccTableChangeTrigger`, run by the triggerer) that
    emits an asset event for each new version of the table, whoever committed it (Spark, the CLI, a script), so
    a DAG scheduled on the asset runs after outside commits too.

    Args:
        table: A table name under the connection's root uri, or a full uri (then no connection is read).
        mvcc_conn_id: The `mvcc` connection a table name resolves through (read when the DAG file is parsed).
        watch: Watch the table for new versions (an `AssetWatcher` named ``mvcc_watch_<path>``).
        poll_interval: With `watch`: seconds between the watcher's looks at the table's latest version.
        skip_maintenance: With `watch`: no event for versions that do not change data (compaction, indices).

    Returns:
        The asset (URI ``mvcc://<storage>/<path>``; its name is the URI too).
    """
    uri = table if is_uri(table) else MvccHook(mvcc_conn_id).table_uri(table)
    name = asset_uri(uri)
    if not watch:
        return Asset(uri=name)
    from airflow.sdk import AssetWatcher

    from ..triggers.table_change import MvccTableChangeTrigger

    trigger = MvccTableChangeTrigger(
        table=table, mvcc_conn_id=mvcc_conn_id, poll_interval=poll_interval, skip_maintenance=skip_maintenance
    )
    watcher_name = "mvcc_watch_" + re.sub(r"[^A-Za-z0-9_]+", "_", name.split("://", 1)[1]).strip("_")
    return Asset(uri=name, watchers=[AssetWatcher(name=watcher_name, trigger=trigger)])


def sanitize_uri(uri: SplitResult) -> SplitResult:
    """Airflow's check of an ``mvcc://`` asset URI (the provider's `asset-uris` handler).

    Args:
        uri: The split URI.

    Returns:
        The URI, its path without a trailing slash.

    Raises:
        ValueError: No storage, no path, or credentials in the URI.
    """
    if not uri.netloc:
        raise ValueError("an mvcc asset URI names its storage: mvcc://<storage>/<path>, e.g. mvcc://s3/bucket/t")
    if "@" in uri.netloc:
        raise ValueError("an mvcc asset URI must not carry credentials")
    if not uri.path.strip("/"):
        raise ValueError("an mvcc asset URI names the table's path: mvcc://<storage>/<path>")
    return uri._replace(path=uri.path.rstrip("/"))


def create_asset(*, table: str, mvcc_conn_id: str = DEFAULT_CONN_ID, extra: dict[str, Any] | None = None) -> Asset:
    """The provider's asset factory (`asset-uris` ``factory``): `table_asset` with `extra`.

    Args:
        table: the table's name or uri
        mvcc_conn_id: the Airflow connection of the mvcc warehouse
        extra: the asset's extra fields

    Returns:
        The asset.
    """
    asset = table_asset(table, mvcc_conn_id=mvcc_conn_id)
    return Asset(uri=asset.uri, extra=extra) if extra else asset
