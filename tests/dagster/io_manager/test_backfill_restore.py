"""Backfills via restore (mvcc_dagster/io_manager/backfill.py), driven by Dagster's own backfill machinery: a real
`PartitionBackfill` in a real instance, the backfill daemon's `execute_backfill_iteration` launching its runs
(synchronous run launcher, a code location loaded from `restore_defs.py` through a code server).

Story: good days, then a bad deploy writes the last three; a backfill of those three days with the tag
``mvcc/backfill_restore`` restores both tables once (one Restore each, history kept) and recomputes the days;
the tables then hold exactly what good runs would have written, also the merge table, which a plain
re-run cannot repair. A restore that would drop a later day is refused before anything is committed.
"""

import logging
import multiprocessing
import os
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
import restore_defs
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
from dagster._core.test_utils import create_test_daemon_workspace_context
from dagster._core.workspace.load_target import ModuleTarget
from dagster._daemon.backfill import execute_backfill_iteration

import mvcc_core as mvcc
from mvcc_dagster.io_manager.backfill import BACKFILL_PROPERTY, LOCK_PREFIX, BackfillRestoreError, plan_restore
from mvcc_dagster.metadata import RESTORE_TAG
from mvcc_dagster.properties import PARTITION_KEY_PROPERTY

HERE = Path(__file__).resolve().parent
ASSETS = [restore_defs.orders, restore_defs.customer_last]
KEYS = [dg.AssetKey("orders"), dg.AssetKey("customer_last")]


def days(first: int, last: int) -> list[str]:
    return [f"2026-03-{d:02d}" for d in range(first, last + 1)]


@pytest.fixture
def pythonpath(monkeypatch: pytest.MonkeyPatch) -> None:
    """Processes started by the tests (a code server, run workers) import this checkout and restore_defs."""
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(HERE), str(HERE.parents[2]), os.environ.get("PYTHONPATH", "")])
    )


@pytest.fixture
def daemon(warehouse: str, pythonpath: None) -> Iterator[tuple[dg.DagsterInstance, Any]]:
    """An instance whose runs launch synchronously, and the daemon's view of the code location."""
    os.environ[restore_defs.WAREHOUSE_ENV] = warehouse
    try:
        with (
            dg.instance_for_test(synchronous_run_launcher=True, synchronous_run_coordinator=True) as instance,
            create_test_daemon_workspace_context(
                ModuleTarget(
                    module_name="restore_defs", attribute="defs", working_directory=str(HERE), location_name="restore"
                ),
                instance,
            ) as context,
        ):
            yield instance, context
    finally:
        del os.environ[restore_defs.WAREHOUSE_ENV]


def write_days(instance: dg.DagsterInstance, keys: list[str], *, bad: bool = False) -> None:
    """Ordinary (non-backfill) runs of both assets, one per day; `bad`: the bad deploy."""
    for key in keys:
        tags = {"deploy": "bad"} if bad else {}
        result = dg.materialize(
            ASSETS, instance=instance, partition_key=key, resources=restore_defs.resources(), tags=tags
        )
        assert result.success


def backfill(instance: dg.DagsterInstance, context: Any, keys: list[str], tags: dict[str, str], bid: str) -> Any:
    """Launch a backfill of both assets over `keys` and let the daemon run it to the end."""
    asset_graph = context.create_request_context().asset_graph
    instance.add_backfill(
        PartitionBackfill.from_asset_partitions(
            backfill_id=bid,
            asset_graph=asset_graph,
            partition_names=keys,
            asset_selection=KEYS,
            backfill_timestamp=time.time(),
            tags=tags,
            dynamic_partitions_store=instance,
            all_partitions=False,
            title=None,
            description=None,
            run_config=None,
        )
    )
    for _ in range(30):
        list(execute_backfill_iteration(context, logging.getLogger("backfill-test")))
        record = instance.get_backfill(bid)
        if record.status not in (BulkActionStatus.REQUESTED, BulkActionStatus.FAILING):
            return record
    raise AssertionError(f"backfill {bid} did not finish: {instance.get_backfill(bid).status}")


def good_orders(keys: list[str]) -> list[dict]:
    return sorted(
        (r for k in keys for r in restore_defs.orders_of(k, bad=False).to_pylist()),
        key=lambda r: (r["day"], r["customer"]),
    )


def good_customer_last(last_day: str) -> list[dict]:
    rows = restore_defs.orders_of(last_day, bad=False).to_pylist()
    return sorted(({"customer": r["customer"], "day": r["day"], "amount": r["amount"]} for r in rows), key=str)


def rows(warehouse: str, name: str, version: int | None = None) -> list[dict]:
    table = mvcc.open_table(f"{warehouse}/{name}", version)
    out = table.to_table().to_pylist()
    if name == "orders":
        return sorted(out, key=lambda r: (r["day"], r["customer"]))
    return sorted(out, key=str)


def operations(warehouse: str, name: str) -> list[str | None]:
    return [v.operation for v in mvcc.open_table(f"{warehouse}/{name}").versions()]


def backfill_materializations(instance: dg.DagsterInstance, bid: str, asset: str) -> list[Any]:
    runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": bid}))
    mats = []
    for run in runs:
        for record in instance.get_records_for_run(
            run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
        ).records:
            if record.asset_materialization.asset_key == dg.AssetKey(asset):
                mats.append(record.asset_materialization)
    return sorted(mats, key=lambda m: m.metadata["mvcc/version"].value)


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_backfill_restores_once_then_recomputes(daemon: tuple[dg.DagsterInstance, Any], warehouse: str) -> None:
    instance, context = daemon
    write_days(instance, days(1, 4))
    write_days(instance, days(5, 7), bad=True)  # the bad deploy: the last three days
    orders_before = mvcc.open_table(f"{warehouse}/orders")
    first_bad = next(
        v.version
        for v in orders_before.versions()
        if v.transaction_properties.get("dagster/partition_key") == days(5, 5)[0]
    )
    assert any(r["customer"] == "ghost" for r in rows(warehouse, "customer_last"))

    record = backfill(instance, context, days(5, 7), {RESTORE_TAG: "true"}, "fixbad")
    assert record.status == BulkActionStatus.COMPLETED_SUCCESS
    runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": "fixbad"}))
    assert len(runs) == 3 and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
    assert all(r.tags[RESTORE_TAG] == "true" for r in runs)

    # Both tables hold exactly what good runs write: the ghost customer and the negative amounts are gone.
    assert rows(warehouse, "orders") == good_orders(days(1, 7))
    assert rows(warehouse, "customer_last") == good_customer_last(days(7, 7)[0])

    for name in ("orders", "customer_last"):
        table = mvcc.open_table(f"{warehouse}/{name}")
        history = table.versions()
        restores = [v for v in history if v.operation == "Restore"]
        assert len(restores) == 1, name  # only the first run restored
        restore = restores[0]
        assert restore.transaction_properties[BACKFILL_PROPERTY] == "fixbad"
        assert restore.version == orders_before.version + 1
        # then one data-changing commit per partition step, nothing else
        assert [v.operation for v in history if v.version > restore.version] == ["Update"] * 3
        # the restored state is the version before the first bad day was written; history is kept
        target = first_bad - 1
        assert rows(warehouse, name, restore.version) == rows(warehouse, name, target)
        assert any(r["customer"] == "ghost" for r in rows(warehouse, name, restore.version - 1))
        assert not table.tags.list()  # the lock tag is gone

        mats = backfill_materializations(instance, "fixbad", name)
        assert [m.partition for m in mats] == days(5, 7)
        versions = [m.metadata["mvcc/version"].value for m in mats]
        assert versions == [restore.version + 1, restore.version + 2, restore.version + 3]
        # one data-changing version per step, recorded as that step's data version
        assert [m.tags["dagster/data_version"] for m in mats] == [str(v) for v in versions]
        assert mats[0].metadata["mvcc/restored_from"].value == target
        assert all(m.metadata["mvcc/backfill_restore_version"].value == restore.version for m in mats)
        assert all("mvcc/restored_from" not in m.metadata for m in mats[1:])

    # The downstream read orders at the version its run materialized (one version per step).
    loaded = []
    for run in runs:
        for rec in instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.LOADED_INPUT).records:
            loaded.append(rec.event_log_entry.dagster_event.event_specific_data.metadata["mvcc/version"].value)
    assert sorted(loaded) == [
        m.metadata["mvcc/version"].value for m in backfill_materializations(instance, "fixbad", "orders")
    ]

    # A later run of the same backfill (a retry) does not restore again.
    again = dg.materialize(
        ASSETS,
        instance=instance,
        partition_key=days(6, 6)[0],
        resources=restore_defs.resources(),
        tags={RESTORE_TAG: "true", "dagster/backfill": "fixbad"},
    )
    assert again.success
    assert operations(warehouse, "orders").count("Restore") == 1
    assert rows(warehouse, "orders") == good_orders(days(1, 7))


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_restore_refused_when_later_partitions_would_be_lost(
    daemon: tuple[dg.DagsterInstance, Any], warehouse: str
) -> None:
    instance, context = daemon
    write_days(instance, days(1, 3))
    write_days(instance, days(4, 5), bad=True)
    write_days(instance, days(6, 7))  # later days written after the bad ones
    before = {n: mvcc.open_table(f"{warehouse}/{n}").versions() for n in ("orders", "customer_last")}
    before_rows = {n: rows(warehouse, n) for n in before}

    record = backfill(instance, context, days(4, 5), {RESTORE_TAG: "true"}, "refused")
    assert record.status != BulkActionStatus.COMPLETED_SUCCESS
    runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": "refused"}))
    assert runs and all(r.status == dg.DagsterRunStatus.FAILURE for r in runs)
    failures = [
        e.dagster_event.step_failure_data.user_failure_data.description
        for r in runs
        for e in instance.all_logs(r.run_id, of_type=dg.DagsterEventType.STEP_FAILURE)
    ]
    assert failures
    for text in failures:
        assert "would drop later writes outside the backfill" in text
        assert "2026-03-06" in text and "2026-03-07" in text
        assert "2026-03-04" not in text.split("outside the backfill:")[1]
        assert RESTORE_TAG in text and "Nothing was committed" in text
    for name, history in before.items():  # nothing committed, nothing left behind
        table = mvcc.open_table(f"{warehouse}/{name}")
        assert table.versions() == history
        assert rows(warehouse, name) == before_rows[name]
        assert not table.tags.list()

    # Asked for explicitly, the restore drops the later days too (they are in the history still).
    record = backfill(instance, context, days(4, 5), {RESTORE_TAG: "allow-data-loss"}, "dropping")
    assert record.status == BulkActionStatus.COMPLETED_SUCCESS
    assert rows(warehouse, "orders") == good_orders(days(1, 5))
    assert rows(warehouse, "customer_last") == good_customer_last(days(5, 5)[0])
    mats = backfill_materializations(instance, "dropping", "orders")
    assert "2026-03-06" in mats[0].metadata["mvcc/dropped"].value
    assert operations(warehouse, "orders")[-3:] == ["Restore", "Update", "Update"]


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_concurrent_runs_of_one_backfill_restore_once(
    instance: dg.DagsterInstance, warehouse: str, pythonpath: None
) -> None:
    """The runs of a backfill start together (here: three processes at once, as a run launcher would start
    them, with the backfill's tags); the table tag lock lets exactly one restore, the others wait for it and
    then find the Restore."""
    os.environ[restore_defs.WAREHOUSE_ENV] = warehouse
    try:
        write_days(instance, days(1, 2))
        write_days(instance, days(3, 5), bad=True)
        keys = days(3, 5)
        instance.add_backfill(
            PartitionBackfill.from_asset_partitions(
                backfill_id="together",
                asset_graph=restore_defs.defs.resolve_asset_graph(),
                partition_names=keys,
                asset_selection=KEYS,
                backfill_timestamp=time.time(),
                tags={RESTORE_TAG: "true"},
                dynamic_partitions_store=instance,
                all_partitions=False,
                title=None,
                description=None,
                run_config=None,
            )
        )
        tags = {RESTORE_TAG: "true", "dagster/backfill": "together"}
        # Hold the lock as a run in the middle of its restore would, until all three runs wait for it; then
        # release it: the three race for it at once, exactly one restores.
        lock = LOCK_PREFIX + "together"
        orders = mvcc.open_table(f"{warehouse}/orders")
        orders.tags.create(lock, orders.version)
        with ProcessPoolExecutor(3, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(restore_defs.run_partition, instance.get_ref(), k, tags) for k in keys]
            deadline = time.monotonic() + 180
            while waiting_runs(instance, "together") < 3:
                assert time.monotonic() < deadline, "the runs did not reach the lock"
                assert not any(f.done() for f in futures), [f.result() for f in futures if f.done()]
                time.sleep(0.2)
            orders.tags.delete(lock)
            outcomes = [f.result() for f in futures]
    finally:
        del os.environ[restore_defs.WAREHOUSE_ENV]
    assert [ok for _, ok in outcomes] == [True] * 3
    for name in ("orders", "customer_last"):
        table = mvcc.open_table(f"{warehouse}/{name}")
        ops = [v.operation for v in table.versions()]
        assert ops.count("Restore") == 1, (name, ops)
        assert ops[ops.index("Restore") + 1 :] == ["Update"] * 3
        assert not table.tags.list()
        assert not any(t.startswith(LOCK_PREFIX) for t in table.tags.list())
    assert rows(warehouse, "orders") == good_orders(days(1, 5))
    # customer_last's days were merged in whatever order the runs committed: each customer's row is the
    # last merged day's good row (no ghost, no negative amount).
    last = rows(warehouse, "customer_last")
    assert {r["customer"] for r in last} == set(restore_defs.CUSTOMERS)
    assert all(r["amount"] > 0 for r in last)


@pytest.mark.slow
def test_restore_landing_between_checkout_and_check_is_written_over(
    warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race behind a flaky `test_concurrent_runs_of_one_backfill_restore_once` (``Update on customer_last
    (read version 5) is incompatible with Restore committed as version 6``): a run checked the table out, then
    another run of the backfill committed the Restore before this run looked for it. The run must write on top
    of that Restore, not on the handle it checked out before. The other run's Restore is injected at exactly
    that step, once per table (no sleeps): both writes land after the one Restore of each table."""
    from mvcc_dagster.io_manager import backfill as backfill_module

    instance = dg.DagsterInstance.ephemeral()
    monkeypatch.setenv(restore_defs.WAREHOUSE_ENV, warehouse)
    write_days(instance, days(1, 2))
    write_days(instance, days(3, 3), bad=True)
    key = days(3, 3)[0]
    real_find_restore = backfill_module.find_restore
    injected: list[str] = []

    def other_run_restores_first(table: mvcc.Table, restore_id: str, since: float | None) -> int | None:
        if table.uri not in injected:  # the other run of the backfill lands its Restore now
            injected.append(table.uri)
            other = table.checkout_latest()
            plan = plan_restore(other, [key], partitions_def=restore_defs.daily, label="other run")
            marks = {BACKFILL_PROPERTY: restore_id, PARTITION_KEY_PROPERTY: key}  # as `_restore_locked` labels it
            other.restore(plan.target, transaction_properties=marks)
        return real_find_restore(table, restore_id, since)

    monkeypatch.setattr(backfill_module, "find_restore", other_run_restores_first)
    result = dg.materialize(
        ASSETS,
        instance=instance,
        partition_key=key,
        resources=restore_defs.resources(),
        tags={RESTORE_TAG: "true"},
        raise_on_error=False,
    )
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    assert len(injected) == 2
    assert operations(warehouse, "orders")[-2:] == ["Restore", "Update"]
    assert operations(warehouse, "customer_last")[-2:] == ["Restore", "Update"]
    assert rows(warehouse, "orders") == good_orders(days(1, 3))
    assert rows(warehouse, "customer_last") == good_customer_last(key)


def waiting_runs(instance: dg.DagsterInstance, bid: str) -> int:
    """Runs of backfill `bid` that logged waiting for the restore lock."""
    runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": bid}))
    return sum(any("holds the table tag" in (e.user_message or "") for e in instance.all_logs(r.run_id)) for r in runs)


@pytest.mark.slow
def test_bad_input_commits_nothing(instance: dg.DagsterInstance, warehouse: str) -> None:
    """Partitions never written, a restore target removed by retention, an unknown tag value, a backfill the
    instance does not know: each run fails naming the table and the tag, and nothing is committed."""
    os.environ[restore_defs.WAREHOUSE_ENV] = warehouse
    try:
        write_days(instance, days(1, 3))

        def run(key: str, value: str = "true", extra: dict[str, str] | None = None) -> str:
            result = dg.materialize(
                ASSETS,
                instance=instance,
                partition_key=key,
                resources=restore_defs.resources(),
                tags={RESTORE_TAG: value, **(extra or {})},
                raise_on_error=False,
            )
            assert not result.success
            failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
            assert not [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
            return failure.step_failure_data.user_failure_data.description

        history = mvcc.open_table(f"{warehouse}/orders").versions()
        text = run(days(9, 9)[0])
        assert "asset orders" in text and RESTORE_TAG in text and "was ever written" in text
        assert "2026-03-09" in text
        text = run(days(1, 1)[0], value="yes please")
        assert RESTORE_TAG in text and "allow-data-loss" in text
        text = run(days(2, 2)[0], extra={"dagster/backfill": "nosuchbf"})
        assert "backfill nosuchbf" in text and "not in the instance" in text and RESTORE_TAG in text
        assert mvcc.open_table(f"{warehouse}/orders").versions() == history

        # Retention removed the version before day 2 was first written.
        table = mvcc.open_table(f"{warehouse}/orders")
        table.cleanup_old_versions(older_than=timedelta(0), retain_versions=1)
        kept = mvcc.open_table(f"{warehouse}/orders").versions()
        assert [v.version for v in kept] == [table.version]
        text = run(days(2, 2)[0])
        assert "asset orders" in text and RESTORE_TAG in text and "removed by retention" in text
        assert mvcc.open_table(f"{warehouse}/orders").versions() == kept
        assert not mvcc.open_table(f"{warehouse}/orders").tags.list()
    finally:
        del os.environ[restore_defs.WAREHOUSE_ENV]


def test_unpartitioned_asset_refused(instance: dg.DagsterInstance, warehouse: str) -> None:
    @dg.asset
    def plain() -> pa.Table:
        return pa.table({"x": [1]})

    resources = {"io_manager": restore_defs.MvccIOManager(root_uri=warehouse)}
    assert dg.materialize([plain], instance=instance, resources=resources).success
    result = dg.materialize(
        [plain], instance=instance, resources=resources, tags={RESTORE_TAG: "true"}, raise_on_error=False
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
    text = failure.step_failure_data.user_failure_data.description
    assert "asset plain" in text and RESTORE_TAG in text and "partitioned" in text
    assert len(mvcc.open_table(f"{warehouse}/plain").versions()) == 1


def totals(warehouse: str) -> list[dict]:
    return sorted(mvcc.open_table(f"{warehouse}/order_totals").to_table().to_pylist(), key=lambda r: r["day"])


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_downstream_backfill_reads_each_partition_as_materialized(
    daemon: tuple[dg.DagsterInstance, Any], warehouse: str
) -> None:
    """Story 2: a single-run backfill of `order_totals` over three days (one step reading three `orders`
    partitions) reads each partition at the version its own materialization recorded, so it reproduces what
    the original runs computed after `orders` moved on: a late row appended to day 1 outside Dagster, a new
    day, a compaction, and a re-run of day 2 (newer than the outside append)."""
    instance, context = daemon
    every = [*ASSETS, restore_defs.order_totals]
    for key in days(1, 3):
        assert dg.materialize(every, instance=instance, partition_key=key, resources=restore_defs.resources()).success
    original = totals(warehouse)
    assert [r["orders"] for r in original] == [3, 3, 3]
    pins = {}
    for key in days(1, 3):
        (record,) = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("orders"), asset_partitions=[key]), limit=1
        ).records
        pins[key] = record.asset_materialization.metadata["mvcc/version"].value
    original_latest = max(pins.values())

    orders = mvcc.open_table(f"{warehouse}/orders")
    late = pa.table(
        {"day": pa.array([restore_defs.date(2026, 3, 1)], pa.date32()), "customer": ["ann"], "amount": [1000]}
    )
    orders.append(late)  # outside Dagster: no materialization records it
    write_days(instance, days(4, 4))
    orders.checkout_latest().optimize.compact_files()
    day2 = dg.materialize(ASSETS, instance=instance, partition_key=days(2, 2)[0], resources=restore_defs.resources())
    assert day2.success  # the same rows again, at a newer version than the outside append
    pins[days(2, 2)[0]] = day2.asset_materializations_for_node("orders")[0].metadata["mvcc/version"].value
    moved_on = operations(warehouse, "orders")[original_latest:]  # the versions after the original runs
    assert moved_on[0] == "Append" and "Rewrite" in moved_on and moved_on[-1] == "Update", moved_on

    asset_graph = context.create_request_context().asset_graph
    instance.add_backfill(
        PartitionBackfill.from_asset_partitions(
            backfill_id="totals",
            asset_graph=asset_graph,
            partition_names=days(1, 3),
            asset_selection=[dg.AssetKey("order_totals")],
            backfill_timestamp=time.time(),
            tags={},
            dynamic_partitions_store=instance,
            all_partitions=False,
            title=None,
            description=None,
            run_config=None,
        )
    )
    for _ in range(30):
        list(execute_backfill_iteration(context, logging.getLogger("backfill-test")))
        if instance.get_backfill("totals").status != BulkActionStatus.REQUESTED:
            break
    assert instance.get_backfill("totals").status == BulkActionStatus.COMPLETED_SUCCESS
    (run,) = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": "totals"}))
    assert run.tags["dagster/asset_partition_range_start"] == "2026-03-01"  # one run over the range
    assert totals(warehouse) == original  # the late row of day 1 is not read
    (loaded,) = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.LOADED_INPUT).records
    meta = loaded.event_log_entry.dagster_event.event_specific_data.metadata
    assert meta["mvcc/partition_versions"].value == pins

    # One run per partition (a multi-run backfill's runs) reads the same way.
    one = dg.materialize(
        every,
        instance=instance,
        partition_key=days(1, 1)[0],
        selection=[restore_defs.order_totals],
        resources=restore_defs.resources(),
    )
    assert one.success
    assert totals(warehouse) == original
    # While the latest version of orders does hold the late row.
    latest_day1 = [r for r in rows(warehouse, "orders") if r["day"] == restore_defs.date(2026, 3, 1)]
    assert len(latest_day1) == 4


def test_plan_reads_partitions_from_properties_and_runs(tmp_path: Path) -> None:
    """The plan from a table's history alone: a range label is expanded, a commit with only a run id gets the
    run's partitions, a later commit without a partition and a later write of another day are losses, and
    maintenance after the target is listed (no rows lost)."""
    daily = dg.DailyPartitionsDefinition(start_date="2026-03-01", end_date="2026-03-15")

    def day(d: int) -> pa.Table:
        return pa.table({"day": pa.array([restore_defs.date(2026, 3, d)], pa.date32()), "v": [d]})

    uri = str(tmp_path / "t")
    t = mvcc.write_table(day(1), uri, transaction_properties={"dagster/partition_key": "2026-03-01"})  # 1
    t.append(day(2), transaction_properties={"dagster/partition_key": "2026-03-02...2026-03-03"})  # 2: a range
    t.append(day(4), transaction_properties={"dagster/run_id": "run-4"})  # 3: partition known from the run
    t.update_config({"owner": "x"})  # 4: maintenance
    t.append(day(9))  # 5: no partition at all
    runs = {"run-4": {"2026-03-04"}}

    plan = plan_restore(t, ["2026-03-03", "2026-03-04"], partitions_def=daily, label="t", lookup_run=runs.get)
    assert (plan.target, plan.first_write, plan.first_partition) == (1, 2, "2026-03-03")
    assert plan.lost == {"2026-03-02": [2]}  # the range commit also wrote a day outside the backfill
    assert plan.lost_unpartitioned == ["version 5 (Append)"]
    assert plan.undone_maintenance == [4]
    assert plan.never_written == [] and plan.loses_data
    assert "2026-03-02 (version 2)" in plan.describe_loss()

    plan = plan_restore(t, ["2026-03-04", "2026-03-05"], partitions_def=daily, label="t", lookup_run=runs.get)
    assert (plan.target, plan.never_written) == (2, ["2026-03-05"])
    # without the run lookup, version 3's partition is unknown: then it is not a first write of the backfill
    with pytest.raises(BackfillRestoreError, match="was ever written"):
        plan_restore(t, ["2026-03-04"], partitions_def=daily, label="t")
    with pytest.raises(BackfillRestoreError, match="the table's first version"):
        plan_restore(t, ["2026-03-01"], partitions_def=daily, label="t")
    # Dagster recorded an earlier first write (version 1) than the history shows: its predecessor is gone
    with pytest.raises(BackfillRestoreError, match="first written at version 1"):
        plan_restore(t, ["2026-03-04"], partitions_def=daily, label="t", lookup_run=runs.get, first_materialized=1)


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_commit_slipping_in_before_the_restore_is_kept(
    instance: dg.DagsterInstance, warehouse: str, pythonpath: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Restore lands over any concurrent commit, so a writer outside the backfill that commits between the
    run's check and its Restore would be dropped: the run sees it after committing, undoes its Restore with a
    second one and fails naming the version. The run's commits are slowed by a failpoint (2 s after the
    transaction file) so the outside append lands in that window."""
    monkeypatch.setenv(restore_defs.WAREHOUSE_ENV, warehouse)
    write_days(instance, days(1, 2))
    write_days(instance, days(3, 3), bad=True)
    monkeypatch.setenv("MVCC_FAILPOINTS", "commit.after_transaction_file=sleep(2)")  # read by the run's process
    orders = mvcc.open_table(f"{warehouse}/orders")
    lock = LOCK_PREFIX
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        future = pool.submit(restore_defs.run_partition, instance.get_ref(), days(3, 3)[0], {RESTORE_TAG: "true"})
        deadline = time.monotonic() + 120
        while not any(t.startswith(lock) for t in orders.tags.list()):
            assert time.monotonic() < deadline and not future.done()
            time.sleep(0.05)
        time.sleep(0.5)  # the run holds the lock and is inside its Restore commit
        outside = orders.checkout_latest().append(restore_defs.orders_of("2026-03-09", bad=False))
        run_id, ok = future.result()
    assert not ok
    history = mvcc.open_table(f"{warehouse}/orders").versions()
    assert [v.operation for v in history[-3:]] == ["Append", "Restore", "Restore"]
    assert history[-3].version == outside.version
    assert history[-1].transaction_properties[BACKFILL_PROPERTY].endswith("-undone")
    assert rows(warehouse, "orders") == rows(warehouse, "orders", outside.version)  # the outside rows are kept
    assert not mvcc.open_table(f"{warehouse}/orders").tags.list()
    (failure,) = instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE)
    text = failure.dagster_event.step_failure_data.user_failure_data.description
    assert f"versions [{outside.version}]" in text and "undone" in text and RESTORE_TAG in text


def test_a_lock_tag_that_does_not_read_is_held(tmp_path: Path) -> None:
    """The restore lock is a tag: a lock file that does not read still holds the table, so a waiting run waits
    (and fails when its deadline passes) instead of restoring beside the holder."""
    from mvcc_dagster.io_manager.backfill import _wait_for_unlock

    t = mvcc.write_table(pa.table({"a": [1]}), str(tmp_path / "t"))
    lock = LOCK_PREFIX + "r1"
    (Path(t.uri) / "_refs" / "tags").mkdir(parents=True)
    (Path(t.uri) / "_refs" / "tags" / f"{lock}.json").write_text("{not json")
    with pytest.raises(dg.Failure, match=lock):
        _wait_for_unlock(t, lock, time.monotonic() + 0.3, "asset")
    os.remove(Path(t.uri) / "_refs" / "tags" / f"{lock}.json")
    _wait_for_unlock(t, lock, time.monotonic() + 0.3, "asset")  # no lock: returns at once
