"""`MvccTableChangeTrigger`'s event loop on real tables, commits made by other processes: one event per new
version, none while nothing changes, the payload; and the trigger as an `AssetWatcher` takes it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from airflow.jobs.triggerer_job_runner import TriggerRunner
from airflow.triggers.base import BaseEventTrigger, TriggerEvent

import mvcc_core as mvcc
from mvcc_airflow import MvccTableChangeTrigger, table_asset

POLL = 0.05


def commit_elsewhere(uri: str, *, appends: int = 1, create: bool = False) -> None:
    """Commits from another Python process (an outside writer): create the table, or append `appends` batches."""
    code = (
        "import sys, pyarrow as pa, mvcc_core as mvcc\n"
        "uri, appends, create = sys.argv[1], int(sys.argv[2]), sys.argv[3] == '1'\n"
        "if create:\n"
        "    mvcc.write_table(pa.table({'x': [0]}), uri, commit_message='outside: created')\n"
        "for i in range(appends):\n"
        "    mvcc.open_table(uri).append(pa.table({'x': [i]}), commit_message=f'outside: batch {i}',\n"
        "                                transaction_properties={'writer': 'outside'})\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, uri, str(appends), "1" if create else "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


class Watch:
    """The trigger's event loop running in this test's event loop, as the triggerer runs it."""

    def __init__(self, trigger: MvccTableChangeTrigger) -> None:
        self.trigger = trigger
        self.events: list[TriggerEvent] = []
        self._runs: AsyncIterator[TriggerEvent] = trigger.run()
        self._task = asyncio.create_task(self._consume())

    async def _consume(self) -> None:
        async for event in self._runs:
            self.events.append(event)

    async def started(self, timeout: float = 30) -> int:
        """Wait until the trigger has taken its baseline (its cursor)."""
        deadline = time.monotonic() + timeout
        while self.trigger.cursor is None:
            assert time.monotonic() < deadline, "the trigger took no baseline"
            await asyncio.sleep(POLL)
        return self.trigger.cursor

    async def until(self, count: int, timeout: float = 30) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while len(self.events) < count:
            assert time.monotonic() < deadline, f"{len(self.events)} events, expected {count}"
            await asyncio.sleep(POLL)
        await asyncio.sleep(10 * POLL)  # and no more than that
        return [e.payload for e in self.events]

    async def stop(self) -> None:
        self._task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self._task


def test_an_outside_commit_fires_one_event_per_new_version_with_its_payload(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    mvcc.write_table(pa.table({"x": [1]}), uri)

    async def scenario() -> list[dict[str, Any]]:
        watch = Watch(MvccTableChangeTrigger(table=uri, poll_interval=POLL))
        baseline = await watch.started()
        assert baseline == 1
        await asyncio.sleep(10 * POLL)
        assert watch.events == []  # the history before the start fires nothing, and nothing changed since
        await asyncio.to_thread(commit_elsewhere, uri, appends=3)
        payloads = await watch.until(3)
        await watch.stop()
        return payloads

    payloads = asyncio.run(scenario())
    table = mvcc.open_table(uri)
    by_version = {v.version: v for v in table.versions()}
    assert [p["version"] for p in payloads] == [2, 3, 4]
    for p in payloads:
        info = by_version[p["version"]]
        assert p == {
            "table": table.uri,
            "version": info.version,
            "operation": "Append",
            "timestamp": info.timestamp.isoformat() if info.timestamp else None,
            "message": f"outside: batch {info.version - 2}",
            "transaction_properties": {"writer": "outside"},
            "latest_version": p["latest_version"],
        }
        assert p["version"] <= p["latest_version"] <= 4


def test_no_event_while_nothing_changes_and_the_cursor_stays(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = mvcc.write_table(pa.table({"x": [1]}), uri)
    t.append(pa.table({"x": [2]}))

    async def scenario() -> tuple[list[TriggerEvent], int | None]:
        watch = Watch(MvccTableChangeTrigger(table=uri, poll_interval=POLL))
        await watch.started()
        await asyncio.sleep(40 * POLL)  # about 40 polls
        await watch.stop()
        return watch.events, watch.trigger.cursor

    events, cursor = asyncio.run(scenario())
    assert events == [] and cursor == 2


def test_a_table_created_after_the_start_fires_from_its_first_version(tmp_path: Path) -> None:
    uri = str(tmp_path / "later")

    async def scenario() -> list[dict[str, Any]]:
        watch = Watch(MvccTableChangeTrigger(table=uri, poll_interval=POLL))
        assert await watch.started() == 0
        await asyncio.to_thread(commit_elsewhere, uri, create=True, appends=1)
        payloads = await watch.until(2)
        await watch.stop()
        return payloads

    payloads = asyncio.run(scenario())
    assert [(p["version"], p["operation"], p["message"]) for p in payloads] == [
        (1, "Overwrite", "outside: created"),
        (2, "Append", "outside: batch 0"),
    ]


def test_skip_maintenance_fires_for_data_changes_only(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = mvcc.write_table(pa.table({"x": [1]}), uri)
    for i in range(3):
        t = t.append(pa.table({"x": [i]}))

    async def scenario(skip: bool) -> list[dict[str, Any]]:
        watch = Watch(MvccTableChangeTrigger(table=uri, poll_interval=POLL, skip_maintenance=skip))
        start = await watch.started()
        table = mvcc.open_table(uri)
        await asyncio.to_thread(table.optimize.compact_files)  # ReserveFragments, Rewrite
        await asyncio.to_thread(commit_elsewhere, uri)
        payloads = await watch.until(1 if skip else 3)
        await watch.stop()
        return [p for p in payloads if p["version"] > start]

    assert [p["operation"] for p in asyncio.run(scenario(True))] == ["Append"]
    assert [p["operation"] for p in asyncio.run(scenario(False))] == ["ReserveFragments", "Rewrite", "Append"]


def test_the_watched_asset_holds_the_trigger_and_its_identity_is_stable(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    asset = table_asset(uri, watch=True, poll_interval=5)
    (watcher,) = asset.watchers
    assert isinstance(watcher.trigger, BaseEventTrigger)
    classpath, kwargs = watcher.trigger.serialize()
    assert classpath == "mvcc_airflow.triggers.table_change.MvccTableChangeTrigger"
    assert kwargs == {"table": uri, "mvcc_conn_id": "mvcc_default", "poll_interval": 5.0, "skip_maintenance": False}
    rebuilt = TriggerRunner().get_trigger_by_classpath(classpath)(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)
    # a DAG file parsed again (after commits) names the same watcher: Airflow keeps its trigger running
    mvcc.write_table(pa.table({"x": [1]}), uri)
    again = table_asset(uri, watch=True, poll_interval=5).watchers[0].trigger
    assert BaseEventTrigger.hash(*again.serialize()) == BaseEventTrigger.hash(classpath, kwargs)
    assert table_asset(uri).uri == asset.uri and table_asset(uri).watchers == []


@pytest.mark.parametrize(
    "bad", [{"table": ""}, {"table": "t", "poll_interval": 0}, {"table": "t", "poll_interval": "5"}]
)
def test_bad_arguments_are_refused_in_the_users_words(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="table must be|poll_interval must be"):
        MvccTableChangeTrigger(**bad)


def test_a_table_dropped_and_created_again_fires_its_versions_from_the_first(tmp_path: Path) -> None:
    """The watched table is removed and written anew from another process, with fewer versions than the cursor:
    its versions fire from 1, with the new table's payloads (not the old table's cached manifests)."""
    import shutil

    uri = str(tmp_path / "t")
    t = mvcc.write_table(pa.table({"x": [1]}), uri, commit_message="old: created")
    for i in range(3):
        t.append(pa.table({"x": [i]}), commit_message=f"old: batch {i}")

    async def scenario() -> list[dict[str, Any]]:
        watch = Watch(MvccTableChangeTrigger(table=uri, poll_interval=POLL))
        assert await watch.started() == 4
        await asyncio.sleep(5 * POLL)  # the trigger has polled its handle
        shutil.rmtree(uri)
        await asyncio.to_thread(commit_elsewhere, uri, create=True, appends=1)
        payloads = await watch.until(2)
        await watch.stop()
        return payloads

    payloads = asyncio.run(scenario())
    assert [(p["version"], p["message"], p["latest_version"]) for p in payloads] == [
        (1, "outside: created", 2),
        (2, "outside: batch 0", 2),
    ]
