"""Partitioned writes: each partition's output replaces exactly that partition's rows in one commit, built
from the partition's instants; re-runs and out-of-order runs keep every row exactly once; a predicate that
cannot be built, or data outside its partition, fails the step and leaves the table unchanged."""

from datetime import UTC, date, datetime, timedelta
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_dagster import MvccIOManager
from mvcc_dagster.partitions import PartitionPredicateError, partition_predicate


def resources(root: str) -> dict[str, Any]:
    return {"io_manager": MvccIOManager(root_uri=root)}


def day_rows(window: dg.TimeWindow, column_type: pa.DataType, per_hour: int = 1) -> pa.Table:
    """One row per hour of the window (by instants: a DST day has 23 or 25), tagged with the window start."""
    start, end = window.start.astimezone(UTC), window.end.astimezone(UTC)
    hours = int((end - start).total_seconds() // 3600)
    instants = [start + timedelta(hours=h, minutes=m) for h in range(hours) for m in range(0, 60, 60 // per_hour)]
    if pa.types.is_timestamp(column_type) and column_type.tz is None:
        values: list[Any] = [i.astimezone(window.start.tzinfo).replace(tzinfo=None) for i in instants]
    else:
        values = instants
    return pa.table(
        {
            "ts": pa.array(values, column_type),
            "part": pa.array([window.start.isoformat()] * len(values)),
            "n": pa.array(range(len(values)), pa.int64()),
        }
    )


@pytest.mark.parametrize(
    "column_type",
    [pa.timestamp("us", "America/New_York"), pa.timestamp("ms", "UTC"), pa.timestamp("us")],
    ids=["zoned-other-zone", "utc", "naive-wall-time"],
)
def test_daily_out_of_order_and_reruns(instance: dg.DagsterInstance, warehouse: str, column_type: pa.DataType) -> None:
    """Berlin days over the DST change (23 h, 24 h, 25 h days included), materialized out of order and again."""
    partitions = dg.DailyPartitionsDefinition(start_date="2024-03-30", end_date="2024-04-02", timezone="Europe/Berlin")

    @dg.asset(partitions_def=partitions, metadata={"partition_expr": "ts"})
    def events(context: dg.AssetExecutionContext) -> pa.Table:
        return day_rows(context.partition_time_window, column_type)

    order = ["2024-03-31", "2024-03-30", "2024-04-01", "2024-03-31", "2024-03-30"]
    for key in order:
        result = dg.materialize([events], instance=instance, resources=resources(warehouse), partition_key=key)
        table = mvcc.open_table(f"{warehouse}/events")
        mat = result.asset_materializations_for_node("events")[0]
        assert mat.partition == key
        assert mat.metadata["mvcc/version"].value == table.version
        own = partitions.time_window_for_partition_key(key).start.isoformat()
        assert mat.metadata["dagster/partition_row_count"].value == table.to_table()["part"].to_pylist().count(own)
        assert table.versions()[-1].transaction_properties["dagster/partition_key"] == key
    table = mvcc.open_table(f"{warehouse}/events").to_table()
    # 30 March: 24 h, 31 March (spring forward): 23 h, 1 April: 24 h; every row once.
    counts = {p: table["part"].to_pylist().count(p) for p in set(table["part"].to_pylist())}
    assert sorted(counts.values()) == [23, 24, 24]
    assert table.num_rows == len(set(zip(table["part"].to_pylist(), table["n"].to_pylist(), strict=True)))
    # one commit per run, the first one included (it creates the table with its day's rows)
    assert len(mvcc.open_table(f"{warehouse}/events").versions()) == len(order)


@pytest.mark.slow
def test_date_static_and_multi_partitions(instance: dg.DagsterInstance, warehouse: str) -> None:
    daily = dg.DailyPartitionsDefinition(start_date="2026-01-01", end_date="2026-01-05")
    regions = dg.StaticPartitionsDefinition(["eu", "us", "o'hare"])
    multi = dg.MultiPartitionsDefinition({"day": daily, "region": regions})

    @dg.asset(partitions_def=daily, metadata={"partition_expr": "day"})
    def by_date(context: dg.AssetExecutionContext) -> pa.Table:
        d = context.partition_time_window.start.date()
        return pa.table({"day": [d, d], "run": [context.run.run_id] * 2})

    @dg.asset(partitions_def=regions, metadata={"partition_expr": "region"})
    def by_region(context: dg.AssetExecutionContext) -> pa.Table:
        return pa.table({"region": [context.partition_key] * 3, "run": [context.run.run_id] * 3})

    @dg.asset(partitions_def=multi, metadata={"partition_expr": {"day": "day", "region": "region"}})
    def by_both(context: dg.AssetExecutionContext) -> pa.Table:
        key = context.partition_key.keys_by_dimension
        return pa.table(
            {"day": [date.fromisoformat(key["day"])], "region": [key["region"]], "run": [context.run.run_id]}
        )

    runs: dict[str, list[str]] = {}
    for asset_def, keys in [
        (by_date, ["2026-01-03", "2026-01-01", "2026-01-03"]),
        (by_region, ["o'hare", "eu", "o'hare"]),
        (by_both, ["2026-01-02|eu", "2026-01-02|us", "2026-01-01|eu", "2026-01-02|eu"]),
    ]:
        for key in keys:
            result = dg.materialize([asset_def], instance=instance, resources=resources(warehouse), partition_key=key)
            runs.setdefault(asset_def.key.to_user_string(), []).append(result.run_id)
    dates = mvcc.open_table(f"{warehouse}/by_date").to_table()
    assert sorted(dates["day"].to_pylist()) == [date(2026, 1, 1)] * 2 + [date(2026, 1, 3)] * 2
    assert set(dates["run"].to_pylist()) == {runs["by_date"][1], runs["by_date"][2]}  # the re-run replaced run 0
    regions_rows = mvcc.open_table(f"{warehouse}/by_region").to_table()
    assert sorted(regions_rows["region"].to_pylist()) == ["eu"] * 3 + ["o'hare"] * 3
    both = mvcc.open_table(f"{warehouse}/by_both").to_table().to_pylist()
    assert sorted((r["day"].isoformat(), r["region"]) for r in both) == [
        ("2026-01-01", "eu"),
        ("2026-01-02", "eu"),
        ("2026-01-02", "us"),
    ]
    assert {r["run"] for r in both if r["region"] == "eu" and r["day"] == date(2026, 1, 2)} == {runs["by_both"][3]}


def test_unbuildable_predicate_or_foreign_rows_change_nothing(instance: dg.DagsterInstance, warehouse: str) -> None:
    daily = dg.DailyPartitionsDefinition(start_date="2026-01-01", end_date="2026-01-05")
    retry = dg.RetryPolicy(max_retries=2)

    def make(name: str, expr: Any, rows: dict[str, list[Any]]) -> dg.AssetsDefinition:
        @dg.asset(name=name, partitions_def=daily, metadata={"partition_expr": expr}, retry_policy=retry)
        def _asset() -> pa.Table:
            return pa.table(rows)

        return _asset

    d1 = datetime(2026, 1, 1, 12, tzinfo=UTC)
    good = make("t", "ts", {"ts": [d1], "n": [1]})
    assert dg.materialize([good], instance=instance, resources=resources(warehouse), partition_key="2026-01-01").success
    before = mvcc.open_table(f"{warehouse}/t").versions()

    bad = [
        (make("t", "n", {"ts": [d1], "n": [2]}), "must be a timestamp or a date"),  # wrong type
        (make("t", "missing", {"ts": [d1], "n": [2]}), "does not have"),  # missing column
        (make("t", {"day": "ts"}, {"ts": [d1], "n": [2]}), "must be a column name"),  # a mapping
        (make("t", None, {"ts": [d1], "n": [2]}), "no 'partition_expr'"),  # none at all
        (make("t", "ts", {"ts": [d1 + timedelta(days=1)], "n": [2]}), "PredicateError"),  # row outside the day
    ]
    for asset_def, needle in bad:
        result = dg.materialize(
            [asset_def],
            instance=instance,
            resources=resources(warehouse),
            partition_key="2026-01-01",
            raise_on_error=False,
        )
        assert not result.success
        failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
        assert needle in failure.step_failure_data.user_failure_data.description
        assert not [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    after = mvcc.open_table(f"{warehouse}/t")
    assert after.versions() == before
    assert after.to_table()["n"].to_pylist() == [1]


def test_single_run_backfill_is_one_commit(instance: dg.DagsterInstance, warehouse: str) -> None:
    daily = dg.DailyPartitionsDefinition(start_date="2026-01-01", end_date="2026-01-10")

    @dg.asset(partitions_def=daily, metadata={"partition_expr": "ts"}, backfill_policy=dg.BackfillPolicy.single_run())
    def ranged(context: dg.AssetExecutionContext) -> pa.Table:
        window = context.partition_time_window
        hours = int((window.end - window.start).total_seconds() // 3600)
        return pa.table({"ts": [window.start + timedelta(hours=h) for h in range(hours)]})

    dg.materialize([ranged], instance=instance, resources=resources(warehouse), partition_key="2026-01-03")
    tags = {"dagster/asset_partition_range_start": "2026-01-02", "dagster/asset_partition_range_end": "2026-01-05"}
    result = dg.materialize([ranged], instance=instance, resources=resources(warehouse), tags=tags)
    table = mvcc.open_table(f"{warehouse}/ranged")
    assert [v.operation for v in table.versions()] == ["Overwrite", "Update"]  # the first day creates, the range
    mats = result.asset_materializations_for_node("ranged")
    assert sorted(m.partition for m in mats) == ["2026-01-02", "2026-01-03", "2026-01-04", "2026-01-05"]
    assert {m.metadata["mvcc/version"].value for m in mats} == {table.version}
    assert table.versions()[-1].transaction_properties["dagster/partition_key"] == "2026-01-02...2026-01-05"
    assert table.count_rows() == 4 * 24


def test_predicate_literals_are_instants() -> None:
    """The DST day 2024-03-31 in Berlin is 23 hours: the literals are its two instants, whatever the column zone."""
    daily = dg.DailyPartitionsDefinition(start_date="2024-03-30", timezone="Europe/Berlin")
    zoned = pa.schema([("ts", pa.timestamp("us", "Asia/Tokyo")), ("d", pa.date32()), ("s", pa.string())])
    sql = partition_predicate(daily, ["2024-03-31"], "ts", zoned, asset="a")
    assert sql == "(\"ts\" >= TIMESTAMP '2024-03-30 23:00:00+00:00' AND \"ts\" < TIMESTAMP '2024-03-31 22:00:00+00:00')"
    assert partition_predicate(daily, ["2024-03-31", "2024-03-30"], "d", zoned, asset="a") == (
        "(\"d\" >= DATE '2024-03-30' AND \"d\" < DATE '2024-04-01')"
    )
    hourly_offset = dg.DailyPartitionsDefinition(start_date="2024-03-30", hour_offset=6)
    with pytest.raises(PartitionPredicateError, match="midnight"):
        partition_predicate(hourly_offset, ["2024-03-31"], "d", zoned, asset="a")
    with pytest.raises(PartitionPredicateError, match="must be a string"):
        partition_predicate(dg.StaticPartitionsDefinition(["x"]), ["x"], "d", zoned, asset="a")
    assert partition_predicate(dg.StaticPartitionsDefinition(["x", "y"]), ["y", "x"], "s", zoned, asset="a") == (
        "(\"s\" IN ('x', 'y'))"
    )
    # Spark SQL (filters of Spark DataFrame inputs): backticks, backslash escapes
    spark_sql = partition_predicate(
        dg.StaticPartitionsDefinition(["o'hare"]), ["o'hare"], "s", zoned, asset="a", dialect="spark"
    )
    assert spark_sql == "(`s` = 'o\\'hare')"
