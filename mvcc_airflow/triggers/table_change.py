"""`MvccTableChangeTrigger`: an event trigger for an `AssetWatcher`, one event per new version of a table.

What Airflow 3.3 keeps across a triggerer restart, and what this trigger does with it: a watcher's trigger is
identified by its classpath and keyword arguments (`BaseEventTrigger.hash`), and the triggerer hands it the
watched assets' state store (`asset_state_store`, rows in the metadata database). The trigger keeps its
cursor there under the key ``mvcc/version``: the last version it has fired for. Airflow writes a yielded event
to the database in the triggerer's next sync with its supervisor (about once a second), with no transaction
shared with a state-store write; so the trigger moves its cursor past events only at a later poll, at least
`SAVE_AFTER` seconds after it yielded them. A restart therefore fires again at most the versions fired in the
last poll interval (or `SAVE_AFTER` seconds, if longer) before it stopped: at least once, none lost (a version
removed by cleanup before the watcher saw it excepted); versions committed while no triggerer ran fire when
one starts again. A table dropped and created again is noticed while its latest version is below the cursor
(its versions then fire from 1); one that grew past the cursor before a poll saw it fires from the cursor on.
Without a state store (more than one
asset watched by one trigger, or the trigger run outside a triggerer) the cursor lives in memory only and a
restart starts from the latest version.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

import mvcc_core as mvcc

from ..utils.versions import new_versions
from .table_version import open_in_triggerer

CURSOR_KEY = "mvcc/version"
# Seconds between yielding events and moving the stored cursor past them: twice the triggerer's sync period
# (it sends the yielded events to the metadata database about once a second).
SAVE_AFTER = 2.0


def version_payload(table_uri: str, info: mvcc.VersionInfo, latest: int) -> dict[str, Any]:
    """The payload of the event for one version (the asset event's ``extra["payload"]``).

    Args:
        table_uri: The table's uri.
        info: The version, as `Table.versions()` lists it.
        latest: The table's latest version when the event was made.

    Returns:
        ``table``, ``version``, ``operation``, ``timestamp`` (ISO 8601 or None), ``message``,
        ``transaction_properties`` and ``latest_version``: JSON only.
    """
    return {
        "table": table_uri,
        "version": info.version,
        "operation": info.operation,
        "timestamp": info.timestamp.isoformat() if info.timestamp is not None else None,
        "message": info.message,
        "transaction_properties": dict(info.transaction_properties),
        "latest_version": latest,
    }


class MvccTableChangeTrigger(BaseEventTrigger):
    """Fires one event per new version of `table`, for ever (an `AssetWatcher`'s trigger; see `table_asset`).

    Each poll reads the latest version's name (one request); when there are new versions it lists them (their
    manifests and transactions, no data file) and yields one event per version, oldest first. The first start
    takes the latest version as seen (no event for the history), or 0 when there is no table yet (its first
    version then fires). Errors while polling (storage, a missing connection) are logged and the next poll tries
    again: a watcher that stopped would start nothing until the DAG file changes.

    Args:
        table: A table name under the connection's root uri, or a full uri.
        mvcc_conn_id: The Airflow connection of type ``mvcc`` (read in the triggerer: no credentials are
            stored with the trigger).
        poll_interval: Seconds between polls.
        skip_maintenance: Fire no event for versions whose operation does not change data (compaction, indices).
    """

    def __init__(
        self,
        *,
        table: str,
        mvcc_conn_id: str = "mvcc_default",
        poll_interval: float = 30.0,
        skip_maintenance: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(table, str) or not table.strip():
            raise ValueError(f"table must be a table name or a uri, got {table!r}")
        if isinstance(poll_interval, bool) or not isinstance(poll_interval, int | float) or poll_interval <= 0:
            raise ValueError(f"poll_interval must be a positive number of seconds, got {poll_interval!r}")
        self.table = table
        self.mvcc_conn_id = mvcc_conn_id
        self.poll_interval = float(poll_interval)
        self.skip_maintenance = skip_maintenance
        self.cursor: int | None = None  # the last version fired for (or taken as seen)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """The classpath and keyword arguments the triggerer rebuilds the trigger from (no cursor: they are the
        watcher's identity, fixed when the DAG file is parsed)."""
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "table": self.table,
                "mvcc_conn_id": self.mvcc_conn_id,
                "poll_interval": self.poll_interval,
                "skip_maintenance": self.skip_maintenance,
            },
        )

    async def _load_cursor(self) -> int | None:
        store = self.asset_state_store
        if store is None:
            return None
        try:
            value = await store.aget(CURSOR_KEY)
        except ValueError:  # more than one asset shares this trigger: no single place to keep the cursor
            self.log.warning("%s: several assets share this watcher; its cursor is kept in memory only", self.table)
            self.asset_state_store = None
            return None
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    async def _save_cursor(self, version: int) -> None:
        if self.asset_state_store is not None:
            await self.asset_state_store.aset(CURSOR_KEY, version)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Poll for ever; yield one event per new version (its payload: `version_payload`)."""
        table: mvcc.Table | None = None
        loaded = False
        saved: int | None = None
        fired_at = 0.0  # when the last events were yielded (monotonic seconds)
        while True:
            try:
                if not loaded:
                    saved = self.cursor = await self._load_cursor()
                    loaded = True
                if self.cursor is not None and saved != self.cursor and time.monotonic() - fired_at >= SAVE_AFTER:
                    # the events up to the cursor went to the metadata database at a sync since they were yielded
                    await self._save_cursor(self.cursor)
                    saved = self.cursor
                if table is None:
                    table = await open_in_triggerer(self.table, self.mvcc_conn_id)
                if table is None:
                    self.cursor = 0 if self.cursor is None else self.cursor
                elif self.cursor is None:
                    self.cursor = table.latest_version
                    self.log.info("%s: watching for versions after %d", table.uri, self.cursor)
                    await self._save_cursor(self.cursor)
                    saved = self.cursor
                else:
                    found, latest = await asyncio.to_thread(
                        new_versions, table, self.cursor, skip_maintenance=self.skip_maintenance
                    )
                    if latest < self.cursor:
                        # versions restart at 1 only when the table was dropped and created again: every
                        # version of the new table is new (fired from the next poll, through a new handle, as
                        # the old one caches the old table's manifests)
                        self.log.warning(
                            "%s: the latest version %d is below the last one seen (%d): the table was created "
                            "again; firing its versions from 1",
                            table.uri,
                            latest,
                            self.cursor,
                        )
                        table, self.cursor = None, 0
                        continue
                    for info in found:
                        yield TriggerEvent(version_payload(table.uri, info, latest))
                    if found:
                        fired_at = time.monotonic()
                    if latest != self.cursor:
                        table.trim_version_cache(4)  # a handle kept for ever keeps only the newest versions read
                    self.cursor = latest
            except Exception as exc:
                self.log.warning("%s: watching failed (%s: %s); trying again", self.table, type(exc).__name__, exc)
            await asyncio.sleep(self.poll_interval)
