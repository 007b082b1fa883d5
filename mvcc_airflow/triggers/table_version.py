"""`MvccVersionTrigger`: waits in the triggerer for a table version newer than a baseline."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.sdk import BaseHook
from airflow.triggers.base import BaseTrigger, TriggerEvent

import mvcc_core as mvcc

from ..hooks.mvcc import is_uri, settings_of, uri_under_root
from ..utils.versions import newer_version


async def open_in_triggerer(table: str, mvcc_conn_id: str) -> mvcc.Table | None:
    """Open `table` in the triggerer, its connection read there (`aget_connection`); None while there is no table.

    Args:
        table: A table name under the connection's root uri, or a full uri (then the connection is optional).
        mvcc_conn_id: The Airflow connection of type ``mvcc``.

    Returns:
        The table at its latest version, or None when none is there yet.
    """
    try:
        conn = await BaseHook.aget_connection(mvcc_conn_id)
    except Exception:
        if not is_uri(table):
            raise
        conn = None
    root, options, external = settings_of(conn, mvcc_conn_id) if conn is not None else ("", {}, None)
    uri = table if is_uri(table) else uri_under_root(root, table)
    try:
        return await asyncio.to_thread(mvcc.open_table, uri, storage_options=options or None, external_store=external)
    except mvcc.TableNotFoundError:
        return None  # not created yet: its first version is the one waited for


class MvccVersionTrigger(BaseTrigger):
    """Fires when `table` has a version newer than `after_version` (one cheap request per poll, no data read).

    Args:
        table: A table name under the connection's root uri, or a full uri.
        after_version: The version already seen.
        mvcc_conn_id: The Airflow connection of type ``mvcc`` (read in the triggerer: no credentials are
            stored with the trigger).
        poll_interval: Seconds between polls.
        skip_maintenance: Pass over versions whose operation does not change data.
    """

    def __init__(
        self,
        *,
        table: str,
        after_version: int,
        mvcc_conn_id: str,
        poll_interval: float = 60.0,
        skip_maintenance: bool = False,
    ) -> None:
        super().__init__()
        self.table = table
        self.after_version = after_version
        self.mvcc_conn_id = mvcc_conn_id
        self.poll_interval = poll_interval
        self.skip_maintenance = skip_maintenance

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """The classpath and keyword arguments the triggerer rebuilds the trigger from."""
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "table": self.table,
                "after_version": self.after_version,
                "mvcc_conn_id": self.mvcc_conn_id,
                "poll_interval": self.poll_interval,
                "skip_maintenance": self.skip_maintenance,
            },
        )

    async def _open(self) -> mvcc.Table | None:
        return await open_in_triggerer(self.table, self.mvcc_conn_id)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Poll until a newer version appears; the event carries it (or the error that stopped the wait)."""
        try:
            table = None
            baseline = self.after_version
            while True:
                if table is None:
                    table = await self._open()
                if table is None:
                    await asyncio.sleep(self.poll_interval)
                    continue
                version, baseline = await asyncio.to_thread(
                    newer_version, table, baseline, skip_maintenance=self.skip_maintenance
                )
                if version is not None:
                    yield TriggerEvent({"status": "success", "version": version, "table": table.uri})
                    return
                await asyncio.sleep(self.poll_interval)
        except Exception as exc:
            yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}", "table": self.table})
