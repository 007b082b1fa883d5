"""First materializations on an empty warehouse: one commit each, and concurrent first runs all succeed.

- Two runs of two partitions, started together in two processes against one persisted instance, with the
  multiprocess executor (each step commits from its own process); every commit is held by a failpoint so
  that both runs' steps find no table. Every step succeeds, and each materialization is exactly one version.
- The first write of a partitioned overwrite, a merge and an append is one version carrying the run's
  properties; the partition predicate still checks every row of it.
- The error mapping: a TableExistsError of a table created while the step wrote is retried, one that was
  there before is a Failure "not retried".
"""

import datetime as dt
import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_dagster import MvccIOManager, MvccResource, conflict_retry_policy, mvcc_conflicts
from mvcc_dagster.error_mapping import to_dagster

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
DAYS = ("2026-11-02", "2026-11-03")
TABLES = ("events", "latest", "audit")

CHILD = """
import os, sys, time
import dagster as dg
import first_write_defs

day, go, job = sys.argv[1], sys.argv[2], sys.argv[3]
while not os.path.exists(go):  # start both runs together, after both processes have imported dagster
    time.sleep(0.01)
with dg.DagsterInstance.get() as instance:
    with dg.execute_job(
        dg.reconstructable(getattr(first_write_defs, job)),
        instance=instance,
        tags={"dagster/partition": day},
        raise_on_error=False,
    ) as result:
        print(result.run_id, result.success)
"""


def step_failures(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [
        str(r.dagster_event.event_specific_data)
        for r in instance.all_logs(run_id)
        if r.dagster_event is not None and r.dagster_event.event_type == dg.DagsterEventType.STEP_FAILURE
    ]


def run_concurrently(tmp_path: Path, job: str, hold: float, extra_env: dict[str, str]) -> tuple[Path, list[str]]:
    """Two runs of `job` (a function of first_write_defs), one per day of DAYS, started together in two
    processes against one persisted instance; every commit waits `hold` seconds after its transaction file,
    so both runs' steps find no table. The instance's home and the run ids."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with dg.DagsterInstance.from_config(str(home)):
        pass  # create the instance's storage here: two processes creating it at once race on its tables
    go = tmp_path / "go"
    env = {
        **os.environ,
        **extra_env,
        "DAGSTER_HOME": str(home),
        "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "MVCC_FAILPOINTS": f"commit.after_transaction_file=sleep({hold})",
    }
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, day, str(go), job],
            cwd=HERE,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for day in DAYS
    ]
    time.sleep(3)  # both import dagster and the job module, then wait for `go`
    go.touch()
    outputs = [child.communicate(timeout=600) for child in children]
    assert all(child.returncode == 0 for child in children), [err.decode()[-3000:] for _, err in outputs]
    runs = [out.decode().split()[-2:] for out, _ in outputs]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert [ok for _, ok in runs] == ["True", "True"], [step_failures(instance, r) for r, _ in runs]
    return home, [run_id for run_id, _ in runs]


def assert_one_version_per_materialization(home: Path, warehouse: Path, tables: tuple[str, ...], runs: list[str]):
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for name in tables:
            infos = mvcc.open_table(f"{warehouse}/{name}").versions()
            # two runs, two versions, each with its run and its day
            assert len(infos) == 2, (name, [(i.operation, i.transaction_properties) for i in infos])
            assert {i.transaction_properties["dagster/run_id"] for i in infos} == set(runs)
            assert sorted(i.transaction_properties["dagster/partition_key"] for i in infos) == list(DAYS)
            records = instance.fetch_materializations(dg.AssetKey.from_user_string(name), limit=10).records
            assert sorted(r.asset_materialization.metadata["mvcc/version"].value for r in records) == [1, 2]


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_two_first_partition_runs_in_processes_both_succeed_one_commit_each(tmp_path: Path) -> None:
    import first_write_defs

    warehouse = tmp_path / "warehouse"
    home, runs = run_concurrently(tmp_path, "first_writes_job", 3, {first_write_defs.WAREHOUSE_ENV: str(warehouse)})
    assert_one_version_per_materialization(home, warehouse, TABLES, runs)
    events = mvcc.open_table(f"{warehouse}/events")
    assert [i.operation for i in events.versions()] == ["Overwrite", "Update"]
    days = events.to_table().column("day").to_pylist()
    assert sorted({str(d) for d in days}) == list(DAYS)
    assert len(days) == 2 * first_write_defs.ROWS_PER_DAY
    assert mvcc.open_table(f"{warehouse}/latest").count_rows() == first_write_defs.USERS
    assert mvcc.open_table(f"{warehouse}/audit").count_rows() == 2


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_examples_first_two_day_backfill_succeeds(tmp_path: Path) -> None:
    """The example's `events` group (Spark ingest, a merge, a date-partitioned aggregate) for two days at once
    on an empty warehouse, each run with the multiprocess executor: every step succeeds, one version each."""
    pytest.importorskip("pyspark")
    warehouse = tmp_path / "warehouse"
    home, runs = run_concurrently(tmp_path, "example_events_job", 10, {"MVCC_WAREHOUSE": str(warehouse)})
    example_tables = ("raw_events", "user_latest", "daily_revenue")
    assert_one_version_per_materialization(home, warehouse, example_tables, runs)
    assert mvcc.open_table(f"{warehouse}/raw_events").count_rows() == 2 * 1000  # EVENTS_PER_DAY
    assert mvcc.open_table(f"{warehouse}/daily_revenue").count_rows() == 2


daily = dg.DailyPartitionsDefinition(start_date="2026-11-01", timezone="UTC")


def day_rows(day: str, ids: list[int]) -> pa.Table:
    date = dt.date.fromisoformat(day)
    return pa.table({"day": pa.array([date] * len(ids), pa.date32()), "id": pa.array(ids, pa.int64())})


def test_first_materializations_are_one_commit_each(instance: dg.DagsterInstance, warehouse: str) -> None:
    @dg.asset(partitions_def=daily, metadata={"partition_expr": "day"})
    def parts(context: dg.AssetExecutionContext) -> pa.Table:
        return day_rows(context.partition_key, [1, 2])

    @dg.asset(partitions_def=daily, metadata={"mvcc/write_mode": "merge", "mvcc/merge_on": "id"})
    def merged(context: dg.AssetExecutionContext) -> pa.Table:
        return day_rows(context.partition_key, [1, 2, 3])

    result = dg.materialize(
        [parts, merged],
        instance=instance,
        resources={"io_manager": MvccIOManager(root_uri=warehouse)},
        partition_key=DAYS[0],
    )
    assert result.success
    for name, rows in (("parts", 2), ("merged", 3)):
        table = mvcc.open_table(f"{warehouse}/{name}")
        assert table.version == 1 and table.count_rows() == rows
        [info] = table.versions()
        assert info.operation == "Overwrite"
        assert info.transaction_properties["dagster/run_id"] == result.run_id
        assert info.transaction_properties["dagster/partition_key"] == DAYS[0]
        meta = instance.get_latest_materialization_event(dg.AssetKey(name)).asset_materialization.metadata
        assert meta["mvcc/version"].value == 1


def test_first_partitioned_write_still_checks_every_row(instance: dg.DagsterInstance, warehouse: str) -> None:
    @dg.asset(partitions_def=daily, metadata={"partition_expr": "day"})
    def strays(context: dg.AssetExecutionContext) -> pa.Table:
        return pa.concat_tables([day_rows(context.partition_key, [1]), day_rows(DAYS[1], [2])])

    @dg.asset(partitions_def=daily, metadata={"mvcc/write_mode": "merge", "mvcc/merge_on": "id"})
    def dupes(context: dg.AssetExecutionContext) -> pa.Table:
        return day_rows(context.partition_key, [1, 1])

    resources = {"io_manager": MvccIOManager(root_uri=warehouse)}
    for asset, expected in ((strays, "PredicateError"), (dupes, "unique keys")):
        result = dg.materialize(
            [asset], instance=instance, resources=resources, partition_key=DAYS[0], raise_on_error=False
        )
        assert not result.success
        [failure] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
        assert expected in failure.event_specific_data.error.message
        assert not os.path.exists(f"{warehouse}/{asset.key.to_user_string()}")  # nothing written, no table


def test_table_exists_errors_are_mapped_by_whether_the_table_appeared_meanwhile() -> None:
    raced = mvcc.TableExistsError("x", uri="/t", version=1, created_concurrently=True)
    assert isinstance(to_dagster(raced), dg.RetryRequested)
    there = to_dagster(mvcc.TableExistsError("x", uri="/t", version=1))
    assert isinstance(there, dg.Failure) and "not retried" in there.description


OTHER_WRITER = "import sys, pyarrow as pa, mvcc_core as m; m.write_table(pa.table({'id': [0]}), sys.argv[1])"


def test_a_step_whose_table_appeared_while_it_wrote_is_retried(instance: dg.DagsterInstance, warehouse: str) -> None:
    """An asset that creates its table when missing: another process creates it between the asset's look and
    its commit. The step is retried (not failed with "it would fail again") and then appends."""

    @dg.asset(retry_policy=conflict_retry_policy(max_retries=0))
    def own_table(context: dg.AssetExecutionContext, mvcc_res: MvccResource) -> None:
        uri = mvcc_res.uri("own_table")
        data = pa.table({"id": [context.retry_number + 1]})
        with mvcc_conflicts(context, what="own_table"):
            try:
                mvcc_res.open("own_table").append(data)
            except mvcc.TableNotFoundError:
                fragments = mvcc.write_fragments(data, uri)
                subprocess.run([sys.executable, "-c", OTHER_WRITER, uri], check=True)  # the other writer
                mvcc.create_table_from_fragments(fragments, uri, schema=data.schema)

    result = dg.materialize(
        [own_table], instance=instance, resources={"mvcc_res": MvccResource(root_uri=warehouse)}, raise_on_error=False
    )
    assert result.success
    table = mvcc.open_table(f"{warehouse}/own_table")
    assert sorted(table.to_table().column("id").to_pylist()) == [0, 2]  # the other's row, then the retry's


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_examples_first_two_day_catalog_runs_succeed(tmp_path: Path) -> None:
    """The example's catalog job for two days at once on an empty warehouse: both steps create the catalog and
    its two tables from their first write (the loser of each race runs again and writes into the winner's
    tables), and the reader's first partitioned writes race too; both runs succeed, every day once."""
    warehouse = tmp_path / "warehouse"
    home, runs = run_concurrently(tmp_path, "example_sales_job", 3, {"MVCC_WAREHOUSE": str(warehouse)})
    assert_one_version_per_materialization(home, warehouse, ("sales/revenue_by_segment",), runs)
    catalog = mvcc.Catalog.open(f"{warehouse}/catalog")
    orders = catalog.table("sales.orders").to_table()
    assert sorted({str(d) for d in orders.column("order_day").to_pylist()}) == list(DAYS)
    assert orders.num_rows == len(set(orders.column("order_id").to_pylist()))  # every order once
    revenue = mvcc.open_table(f"{warehouse}/sales/revenue_by_segment").to_table()
    assert sorted({str(d) for d in revenue.column("day").to_pylist()}) == list(DAYS)
