"""A multi_asset writing a fact table and its dimension through the catalog (`MvccCatalogResource`): real
instances and materializations, a real second writer (another process) for the conflicts, and a reader
process polling the catalog during the runs."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core import failpoints
from mvcc_dagster import MvccCatalogResource
from mvcc_dagster.catalog import catalog_table_name
from mvcc_dagster.metadata import (
    CATALOG_PUBLISHED_BY_RUN,
    CATALOG_READ_VERSION,
    CATALOG_TABLE,
    CATALOG_URI,
    CATALOG_VERSION,
)

ROOT = Path(__file__).resolve().parents[3]
ORDERS, CUSTOMERS = dg.AssetKey(["sales", "orders"]), dg.AssetKey(["sales", "customers"])
DAYS = dg.StaticPartitionsDefinition(["2026-11-01", "2026-11-02"])


def events_of(result: dg.ExecuteInProcessResult, kind: dg.DagsterEventType) -> list[dg.DagsterEvent]:
    return [e for e in result.all_events if e.event_type == kind]


def other_writer(root: str, code: str) -> None:
    """A real second writer: another Python process running `code` with `cat` the catalog at `root`."""
    script = f"import pyarrow as pa\nimport mvcc_core as mvcc\ncat = mvcc.Catalog.open({root!r})\n{code}\n"
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def batch(n: int) -> tuple[pa.Table, pa.Table]:
    """Run `n`'s rows: 3 orders and the one customer they belong to, both tagged with the batch `n`."""
    orders = pa.table({"order_id": [n * 10 + i for i in range(3)], "customer_id": [n] * 3, "batch": [n] * 3})
    customers = pa.table({"customer_id": [n], "name": [f"c{n}"], "batch": [n]})
    return orders, customers


def load_asset(hook: Any = None) -> dg.AssetsDefinition:
    """The multi_asset under test: appends run `batch`'s orders and customer in one catalog transaction.
    `hook(context, tx)` runs inside the transaction, after both writes are staged."""

    @dg.multi_asset(specs=[dg.AssetSpec(ORDERS), dg.AssetSpec(CUSTOMERS)], config_schema={"batch": int})
    def load(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
        orders, customers = batch(context.op_execution_context.op_config["batch"])
        with mvcc_catalog.transaction(context) as tx:
            tx.append(ORDERS, orders)
            tx.append(CUSTOMERS, customers)
            if hook is not None:
                hook(context, tx)
        return tx.materialize_results()

    return load


def run(assets: list[Any], instance: dg.DagsterInstance, root: str, n: int, **kwargs: Any) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        assets,
        instance=instance,
        resources={"mvcc_catalog": MvccCatalogResource(root_uri=root, conflict_retry_delay=0.01)},
        run_config={"ops": {"load": {"config": {"batch": n}}}},
        **kwargs,
    )


def data_files(root: str) -> set[str]:
    """The tables' data and deletion files (the catalog's own `__manifest` table left out)."""
    return {
        str(p.relative_to(root))
        for p in Path(root).rglob("*")
        if p.is_file()
        and not str(p.relative_to(root)).startswith("__manifest")
        and (p.suffix == ".parquet" or "_deletions" in str(p))
    }


@pytest.fixture
def root(tmp_path: Path) -> str:
    return str(tmp_path / "catalog")


def test_asset_keys_name_catalog_tables() -> None:
    assert catalog_table_name("orders") == "main.orders"
    assert catalog_table_name(["sales", "orders"]) == "sales.orders"
    assert catalog_table_name("wh/sales/orders", ["wh"]) == "sales.orders"
    assert catalog_table_name(dg.AssetKey(["wh", "orders"]), ["wh"]) == "main.orders"
    with pytest.raises(ValueError, match="'a/b/c' names a catalog table as \\[table\\] or \\[schema, table\\]"):
        catalog_table_name("a/b/c")
    with pytest.raises(ValueError, match=r"part\(s\) \['v1.2'\]"):
        catalog_table_name(["sales", "v1.2"])
    assert MvccCatalogResource(root_uri="/x", key_prefix=["wh"]).table_name("wh/sales/orders") == "sales.orders"


def test_multi_asset_publishes_both_tables_in_one_catalog_version(instance: dg.DagsterInstance, root: str) -> None:
    load = load_asset()
    first = run([load], instance, root, 1)
    assert first.success
    cat = mvcc.Catalog.open(root)
    # The first run creates the schema and both tables and writes them, all in ONE catalog version.
    assert [v.version for v in cat.versions()] == [1, 2]
    assert sorted((c["change"], c["name"]) for c in cat.versions()[1].changes) == [
        ("created_schema", "sales"),
        ("created_table", "sales.customers"),
        ("created_table", "sales.orders"),
        ("inserted_into_table", "sales.customers"),
        ("inserted_into_table", "sales.orders"),
    ]
    first_mats = {m.asset_key: m for m in first.asset_materializations_for_node("load")}
    assert {m.metadata[CATALOG_VERSION].value for m in first_mats.values()} == {2}
    assert cat.table("sales.orders").count_rows() == 3 and cat.table("sales.customers").count_rows() == 1

    second = run([load], instance, root, 2)
    assert second.success
    versions = cat.versions()
    assert [v.version for v in versions] == [1, 2, 3]  # exactly one new catalog version
    assert sorted((c["change"], c["name"]) for c in versions[-1].changes) == [
        ("inserted_into_table", "sales.customers"),
        ("inserted_into_table", "sales.orders"),
    ]
    snap = cat.snapshot(3)
    before = cat.snapshot(2)
    mats = {m.asset_key: m for m in second.asset_materializations_for_node("load")}
    assert set(mats) == {ORDERS, CUSTOMERS}
    for key, name in ((ORDERS, "sales.orders"), (CUSTOMERS, "sales.customers")):
        table = snap.table(name)
        assert table.version == before.table_version(name) + 1 == snap.table_version(name)
        meta = {k: v.value for k, v in mats[key].metadata.items()}
        assert meta["mvcc/version"] == table.version
        assert meta[CATALOG_VERSION] == 3 and meta[CATALOG_READ_VERSION] == 2
        assert meta[CATALOG_TABLE] == name and meta[CATALOG_URI] == root
        assert meta["dagster/table_name"] == name and meta["dagster/uri"] == table.uri
        assert meta["dagster/row_count"] == table.count_rows() == (6 if key == ORDERS else 2)
        assert meta["mvcc/operation"] == "Append"
        assert mats[key].tags["dagster/data_version"] == f"{table.uri.rsplit('/', 1)[-1]}@{table.version}"
        props = table.versions()[-1].transaction_properties
        assert props["dagster/run_id"] == second.run_id and props["dagster/asset_key"] == key.to_user_string()
    stored = instance.get_latest_materialization_event(ORDERS)
    assert stored is not None and stored.asset_materialization is not None
    assert stored.asset_materialization.metadata[CATALOG_VERSION].value == 3


def test_failure_in_the_step_after_staging_publishes_nothing(instance: dg.DagsterInstance, root: str) -> None:
    assert run([load_asset()], instance, root, 1).success
    cat = mvcc.Catalog.open(root)
    files_before = data_files(root)
    staged: list[list[str]] = []

    def fail(context: dg.AssetExecutionContext, tx: Any) -> None:
        staged.append(sorted(data_files(root) - files_before))  # both writes' files are on storage now
        raise RuntimeError("the step failed after staging")

    result = run([load_asset(fail)], instance, root, 2, raise_on_error=False)
    assert not result.success
    assert len(staged[0]) >= 2  # one data file per table at least
    assert cat.latest_version == 2  # nothing published
    assert cat.table("sales.orders").count_rows() == 3 and cat.table("sales.customers").count_rows() == 1
    assert data_files(root) == files_before  # the staged files were removed
    assert not result.asset_materializations_for_node("load")
    # Killed between staging and the catalog commit (the core's failpoint, raising in the step's process):
    # the publish does not happen, no materialization is recorded, the next run publishes normally.
    with failpoints.armed("catalog.after_stage", "raise"):
        crashed = run([load_asset()], instance, root, 3, raise_on_error=False)
    assert not crashed.success and not crashed.asset_materializations_for_node("load")
    assert cat.latest_version == 2
    assert run([load_asset()], instance, root, 4).success
    assert cat.latest_version == 3
    assert sorted(set(cat.table("sales.orders").to_table()["batch"].to_pylist())) == [1, 4]


@pytest.mark.slow
def test_concurrent_delete_is_a_retryable_conflict_and_the_step_is_retried(
    instance: dg.DagsterInstance, root: str
) -> None:
    """The step and another process delete overlapping rows of sales.orders: DuckLake's delete/delete rule,
    refined by the core's row check (row 10 in both), makes the step's publish a retryable conflict, the plugin
    turns it into RetryRequested, the retry publishes."""
    assert run([load_asset()], instance, root, 1).success
    attempts: list[int] = []

    def delete_elsewhere(context: dg.AssetExecutionContext, tx: Any) -> None:
        tx.delete(ORDERS, "order_id IN (10, 12)")
        attempts.append(context.retry_number)
        if context.retry_number == 0:
            other_writer(
                root,
                "with cat.transaction() as tx:\n    tx.table('sales.orders').delete('order_id IN (10, 11)')",
            )

    @dg.multi_asset(specs=[dg.AssetSpec(ORDERS), dg.AssetSpec(CUSTOMERS)], config_schema={"batch": int})
    def load(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
        _, customers = batch(context.op_execution_context.op_config["batch"])
        with mvcc_catalog.transaction(context) as tx:
            tx.append(CUSTOMERS, customers)
            delete_elsewhere(context, tx)
        return tx.materialize_results()

    result = run([load], instance, root, 2)
    assert result.success and attempts == [0, 1]
    assert len(events_of(result, dg.DagsterEventType.STEP_UP_FOR_RETRY)) == 1
    cat = mvcc.Catalog.open(root)
    assert cat.latest_version == 4  # 2: run 1, 3: the other process, 4: the retry (both tables at once)
    assert sorted(c["name"] for c in cat.versions()[-1].changes) == ["sales.customers", "sales.orders"]
    assert cat.table("sales.orders").to_table()["order_id"].to_pylist() == []  # 10, 11 there, 12 here
    assert sorted(cat.table("sales.customers").to_table()["customer_id"].to_pylist()) == [1, 2]
    mats = {m.asset_key: m for m in result.asset_materializations_for_node("load")}
    assert {m.metadata[CATALOG_VERSION].value for m in mats.values()} == {4}
    assert mats[ORDERS].metadata[CATALOG_READ_VERSION].value == 3


@pytest.mark.slow
def test_concurrent_delete_of_other_rows_is_rebased_without_a_retry(instance: dg.DagsterInstance, root: str) -> None:
    """The step and another process delete different rows of the same data file: the core rebases the step's
    deletion vector onto the other's (no data file rewritten), so the step publishes at once, no retry."""
    assert run([load_asset()], instance, root, 1).success
    attempts: list[int] = []

    @dg.multi_asset(specs=[dg.AssetSpec(ORDERS), dg.AssetSpec(CUSTOMERS)], config_schema={"batch": int})
    def load(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
        _, customers = batch(context.op_execution_context.op_config["batch"])
        with mvcc_catalog.transaction(context) as tx:
            tx.append(CUSTOMERS, customers)
            tx.delete(ORDERS, "order_id = 12")  # the step's only change of orders: a rebase is possible
            attempts.append(context.retry_number)
            other_writer(root, "with cat.transaction() as tx:\n    tx.table('sales.orders').delete('order_id = 11')")
        return tx.materialize_results()

    result = run([load], instance, root, 2)
    assert result.success and attempts == [0]
    assert not events_of(result, dg.DagsterEventType.STEP_UP_FOR_RETRY)
    cat = mvcc.Catalog.open(root)
    assert cat.latest_version == 4  # 2: run 1, 3: the other process, 4: the step, rebased on 3
    assert cat.table("sales.orders").to_table()["order_id"].to_pylist() == [10]
    mats = {m.asset_key: m for m in result.asset_materializations_for_node("load")}
    assert mats[ORDERS].metadata[CATALOG_READ_VERSION].value == 2
    assert {m.metadata[CATALOG_VERSION].value for m in mats.values()} == {4}


@pytest.mark.slow
def test_concurrent_drop_is_an_incompatible_conflict_and_fails_without_retry(
    instance: dg.DagsterInstance, root: str
) -> None:
    """Another process drops sales.customers while the step has staged its writes: DuckLake's "insert into a
    table another dropped" is incompatible, the step fails at once, naming the object and both versions."""
    assert run([load_asset()], instance, root, 1).success
    files_before = data_files(root)

    def drop_elsewhere(context: dg.AssetExecutionContext, tx: Any) -> None:
        other_writer(root, "cat.drop_table('sales.customers')")

    result = dg.materialize(
        [load_asset(drop_elsewhere)],
        instance=instance,
        resources={"mvcc_catalog": MvccCatalogResource(root_uri=root, conflict_retry_delay=0.01)},
        run_config={"ops": {"load": {"config": {"batch": 2}}}},
        raise_on_error=False,
    )
    assert not result.success
    assert not events_of(result, dg.DagsterEventType.STEP_UP_FOR_RETRY)
    (failure,) = events_of(result, dg.DagsterEventType.STEP_FAILURE)
    data = failure.step_failure_data.user_failure_data
    meta = {k: v.value for k, v in data.metadata.items()}
    assert meta["catalog_object"] == "sales.customers"
    assert (meta["expected_version"], meta["actual_version"]) == (2, 3)
    assert "dropped" in meta["rule"]
    assert "incompatible catalog conflict on 'sales.customers'" in data.description
    assert "nothing was published" in data.description
    cat = mvcc.Catalog.open(root)
    assert cat.latest_version == 3 and cat.tables("sales") == ["sales.orders"]
    assert cat.table("sales.orders").count_rows() == 3  # the step's orders were not published either
    assert data_files(root) == files_before  # its staged files were removed


READER = """
import json, sys, time, os
import mvcc_core as mvcc
root, stop, out, ready = sys.argv[1:5]
seen, bad = [], []
open(ready, "w").close()
while not os.path.exists(stop):
    try:
        cat = mvcc.Catalog.open(root)
        snap = cat.snapshot()
        if "sales.orders" in snap.tables():
            o = set(snap.table("sales.orders").to_table()["batch"].to_pylist())
            c = set(snap.table("sales.customers").to_table()["batch"].to_pylist())
            seen.append(snap.version)
            if o != c:
                bad.append([snap.version, sorted(o), sorted(c)])
    except mvcc.TableNotFoundError:
        pass
    time.sleep(0.01)
json.dump({"seen": seen, "bad": bad}, open(out, "w"))
"""


@pytest.mark.timeout(180)
@pytest.mark.slow
def test_a_reader_never_sees_one_table_without_the_other(
    instance: dg.DagsterInstance, root: str, tmp_path: Path
) -> None:
    """A reader process polls the newest catalog snapshot while 6 runs publish; every snapshot it read, and
    every catalog version afterwards, has the same batches in both tables."""
    stop, out, ready = tmp_path / "stop", tmp_path / "reader.json", tmp_path / "ready"
    reader = subprocess.Popen([sys.executable, "-c", READER, root, str(stop), str(out), str(ready)], cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():  # the reader has imported mvcc and polls
            assert reader.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        load = load_asset()
        for n in range(1, 7):
            assert run([load], instance, root, n).success
            time.sleep(0.05)
    finally:
        stop.touch()
        assert reader.wait(timeout=60) == 0
    report = json.loads(out.read_text())
    assert report["bad"] == []
    assert len(set(report["seen"])) >= 2, report["seen"]  # it did read while the runs went on
    cat = mvcc.Catalog.open(root)
    for v in cat.versions():
        snap = cat.snapshot(v.version)
        if "sales.orders" not in snap.tables():
            continue
        orders = set(snap.table("sales.orders").to_table()["batch"].to_pylist())
        assert orders == set(snap.table("sales.customers").to_table()["batch"].to_pylist()), v.version
    assert orders == set(range(1, 7))


def test_partitioned_overwrite_replaces_the_runs_partition_in_both_tables(
    instance: dg.DagsterInstance, root: str
) -> None:
    specs = [
        dg.AssetSpec(ORDERS, metadata={"partition_expr": "day"}),
        dg.AssetSpec(CUSTOMERS, metadata={"partition_expr": "day"}),
    ]

    @dg.multi_asset(specs=specs, partitions_def=DAYS, config_schema={"n": int})
    def load(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
        day, n = context.partition_key, context.op_execution_context.op_config["n"]
        with mvcc_catalog.transaction(context) as tx:
            tx.overwrite(ORDERS, pa.table({"day": [day] * n, "i": list(range(n))}))
            tx.overwrite(CUSTOMERS, pa.table({"day": [day], "customers": [n]}))
        return tx.materialize_results()

    resources = {"mvcc_catalog": MvccCatalogResource(root_uri=root)}
    for day, n in (("2026-11-01", 2), ("2026-11-02", 3), ("2026-11-01", 4)):
        result = dg.materialize(
            [load],
            instance=instance,
            resources=resources,
            partition_key=day,
            run_config={"ops": {"load": {"config": {"n": n}}}},
        )
        assert result.success
    mats = {m.asset_key: m for m in result.asset_materializations_for_node("load")}
    assert mats[ORDERS].partition == "2026-11-01"
    assert mats[ORDERS].metadata["dagster/partition_row_count"].value == 4
    assert mats[ORDERS].metadata["dagster/row_count"].value == 7
    cat = mvcc.Catalog.open(root)
    orders = cat.table("sales.orders")
    assert sorted((r["day"], r["i"]) for r in orders.to_table().to_pylist()) == [
        *(("2026-11-01", i) for i in range(4)),
        *(("2026-11-02", i) for i in range(3)),
    ]
    assert orders.versions()[-1].transaction_properties["dagster/partition_key"] == "2026-11-01"
    assert sorted(r["customers"] for r in cat.table("sales.customers").to_table().to_pylist()) == [3, 4]

    # A row outside the run's partition: the core refuses the staged overwrite, the step fails without a
    # retry and neither table changes (the other table's write was staged first and is removed).
    @dg.multi_asset(specs=specs, partitions_def=DAYS, name="load", retry_policy=dg.RetryPolicy(max_retries=2))
    def foreign(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
        with mvcc_catalog.transaction(context) as tx:
            tx.overwrite(CUSTOMERS, pa.table({"day": [context.partition_key], "customers": [9]}))
            tx.overwrite(ORDERS, pa.table({"day": ["2026-11-02"], "i": [9]}))
        return tx.materialize_results()

    version, files = cat.latest_version, data_files(root)
    failed = dg.materialize(
        [foreign], instance=instance, resources=resources, partition_key="2026-11-01", raise_on_error=False
    )
    assert not failed.success and not events_of(failed, dg.DagsterEventType.STEP_UP_FOR_RETRY)
    (failure,) = events_of(failed, dg.DagsterEventType.STEP_FAILURE)
    assert "PredicateError" in failure.step_failure_data.user_failure_data.description
    assert cat.latest_version == version and data_files(root) == files


def test_bad_writes_fail_before_anything_is_published(instance: dg.DagsterInstance, root: str) -> None:
    """No partition_expr on a partitioned asset, a delete from a missing table, a non-table value: a Failure
    that is not retried, naming the asset; the catalog does not move and no table is created."""
    resources = {"mvcc_catalog": MvccCatalogResource(root_uri=root)}

    @dg.multi_asset(specs=[dg.AssetSpec(ORDERS), dg.AssetSpec(CUSTOMERS)], partitions_def=DAYS)
    def no_expr(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
        with mvcc_catalog.transaction(context) as tx:
            tx.overwrite(ORDERS, pa.table({"day": [context.partition_key]}))
        return tx.materialize_results()

    @dg.multi_asset(specs=[dg.AssetSpec(ORDERS)], retry_policy=dg.RetryPolicy(max_retries=2))
    def delete_missing(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
        with mvcc_catalog.transaction(context) as tx:
            tx.append(CUSTOMERS, pa.table({"x": [1]}))
            tx.delete(ORDERS, "x = 1")
        return tx.materialize_results()

    @dg.multi_asset(specs=[dg.AssetSpec(ORDERS)])
    def not_a_table(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
        with mvcc_catalog.transaction(context) as tx:
            tx.append(ORDERS, [1, 2, 3])
        return tx.materialize_results()

    cases = [
        (no_expr, "2026-11-01", "partition_expr"),
        (delete_missing, None, "cannot delete from catalog table 'sales.orders', which does not exist"),
        (not_a_table, None, "a catalog write takes a pyarrow Table"),
    ]
    for asset, partition, message in cases:
        result = dg.materialize(
            [asset], instance=instance, resources=resources, partition_key=partition, raise_on_error=False
        )
        assert not result.success
        assert not events_of(result, dg.DagsterEventType.STEP_UP_FOR_RETRY)
        (failure,) = events_of(result, dg.DagsterEventType.STEP_FAILURE)
        assert message in failure.step_failure_data.user_failure_data.description
    cat = mvcc.Catalog.open(root)
    assert cat.latest_version == 1 and cat.tables() == []
    assert data_files(root) == set()


def test_downstream_reads_the_catalog_version_its_upstreams_recorded(instance: dg.DagsterInstance, root: str) -> None:
    """A downstream asset reads both tables from one snapshot: the catalog version the upstream
    materializations recorded, not a newer one written outside Dagster."""
    load = load_asset()
    seen: list[tuple[int, list[int], list[int]]] = []

    @dg.asset(deps=[ORDERS, CUSTOMERS])
    def report(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource) -> None:
        snap = mvcc_catalog.snapshot_for(context, [ORDERS, CUSTOMERS])
        orders = snap.table(mvcc_catalog.table_name(ORDERS)).to_table()["batch"].to_pylist()
        customers = snap.table(mvcc_catalog.table_name(CUSTOMERS)).to_table()["batch"].to_pylist()
        seen.append((snap.version, sorted(set(orders)), customers))

    assert run([load, report], instance, root, 1).success
    assert seen[-1] == (2, [1], [1])
    outside_row = "pa.table({'order_id': [99], 'customer_id': [9], 'batch': [9]})"
    other_writer(root, f"with cat.transaction() as tx:\n    tx.table('sales.orders').append({outside_row})")
    resources = {"mvcc_catalog": MvccCatalogResource(root_uri=root)}
    assert dg.materialize([load, report], instance=instance, resources=resources, selection=[report.key]).success
    assert seen[-1] == (2, [1], [1])  # pinned: the outside commit (catalog version 3) is not read
    assert mvcc.Catalog.open(root).latest_version == 3


def test_example_catalog_assets(instance: dg.DagsterInstance, tmp_path: Path, example: ModuleType) -> None:
    """definitions.py's catalog block: each day's run publishes orders and customers in one catalog version
    (a re-run replaces the day in both), and revenue_by_segment reads the catalog version they recorded."""
    warehouse = str(tmp_path / "wh")
    resources = example.resources(warehouse)
    root = f"{warehouse}/catalog"
    for day in ("2026-11-02", "2026-11-03", "2026-11-02"):
        before = mvcc.Catalog.open(root).latest_version if Path(root).exists() else None
        result = dg.materialize(example.CATALOG_ASSETS, instance=instance, resources=resources, partition_key=day)
        assert result.success
        cat = mvcc.Catalog.open(root)
        if before is not None:
            assert cat.latest_version == before + 1
        mats = {m.asset_key: m for m in result.asset_materializations_for_node("sales_load")}
        assert {m.metadata[CATALOG_VERSION].value for m in mats.values()} == {cat.latest_version}
        (revenue,) = result.asset_materializations_for_node("sales__revenue_by_segment")
        assert revenue.metadata["mvcc/source_catalog_version"].value == cat.latest_version
        assert revenue.metadata["orders_read"].value == example.ORDERS_PER_DAY
    orders = cat.table("sales.orders").to_table()
    assert orders.num_rows == 2 * example.ORDERS_PER_DAY and len(set(orders["order_id"].to_pylist())) == orders.num_rows
    assert cat.table("sales.customers").count_rows() == 2 * example.CUSTOMERS
    revenue = mvcc.open_table(f"{warehouse}/sales/revenue_by_segment").to_table()
    assert sorted({str(d) for d in revenue["day"].to_pylist()}) == ["2026-11-02", "2026-11-03"]
    assert abs(sum(revenue["revenue"].to_pylist()) - sum(orders["amount"].to_pylist())) < 1e-6


@pytest.mark.s3
def test_multi_asset_on_s3(instance: dg.DagsterInstance, s3_uri: str, s3_options: dict[str, Any]) -> None:
    """The same publish on the local S3 server, the storage options passed through the resource."""
    resource = MvccCatalogResource(root_uri=s3_uri, storage_options=s3_options)
    for n in (1, 2):
        result = dg.materialize(
            [load_asset()],
            instance=instance,
            resources={"mvcc_catalog": resource},
            run_config={"ops": {"load": {"config": {"batch": n}}}},
        )
        assert result.success
    cat = mvcc.Catalog.open(s3_uri, storage_options=s3_options)
    assert cat.latest_version == 3
    mats = result.asset_materializations_for_node("load")
    assert {m.metadata[CATALOG_VERSION].value for m in mats} == {3}
    snap = cat.snapshot()
    assert sorted(set(snap.table("sales.orders").to_table()["batch"].to_pylist())) == [1, 2]
    assert snap.table("sales.customers").count_rows() == 2


KILLED_STEP = """
import sys
import dagster as dg
import pyarrow as pa
import mvcc_core as mvcc
from mvcc_core import failpoints
from mvcc_dagster import MvccCatalogResource

root, point = sys.argv[1:3]
failpoints.arm(point, "exit")  # the catalog's points exist once mvcc_core is imported

@dg.multi_asset(specs=[dg.AssetSpec(["sales", "orders"]), dg.AssetSpec(["sales", "customers"])])
def load(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
    with mvcc_catalog.transaction(context) as tx:
        tx.append(["sales", "orders"], pa.table({"order_id": [20, 21, 22], "customer_id": [2] * 3, "batch": [2] * 3}))
        tx.append(["sales", "customers"], pa.table({"customer_id": [2], "name": ["c2"], "batch": [2]}))
    return tx.materialize_results()

resources = {"mvcc_catalog": MvccCatalogResource(root_uri=root)}
dg.materialize([load], instance=dg.DagsterInstance.get(), resources=resources)
"""


@pytest.mark.timeout(180)
@pytest.mark.parametrize("point", ["catalog.after_stage", "catalog.after_publish"])
@pytest.mark.slow
def test_a_step_killed_mid_publish(instance: dg.DagsterInstance, root: str, point: str) -> None:
    """The step's process is killed (os._exit at the core's failpoint, as kill -9 would) while it publishes.
    Before the catalog commit: nothing is visible. After it: both tables are, together, though Dagster
    recorded no materialization (the step never reported); either way the next run publishes on top."""
    assert run([load_asset()], instance, root, 1).success
    child = subprocess.run(
        [sys.executable, "-c", KILLED_STEP, root, point], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert child.returncode == failpoints.DEFAULT_EXIT_CODE, child.stderr[-2000:]
    cat = mvcc.Catalog.open(root)
    published = point == "catalog.after_publish"
    assert cat.latest_version == (3 if published else 2)
    snap = cat.snapshot()
    orders = set(snap.table("sales.orders").to_table()["batch"].to_pylist())
    assert orders == set(snap.table("sales.customers").to_table()["batch"].to_pylist())
    assert orders == ({1, 2} if published else {1})
    latest = instance.get_latest_materialization_event(ORDERS)
    assert latest is not None and latest.asset_materialization is not None
    assert latest.asset_materialization.metadata[CATALOG_VERSION].value == 2  # the killed step reported nothing
    assert run([load_asset()], instance, root, 3).success
    snap = cat.snapshot()
    assert snap.version == (4 if published else 3)
    assert set(snap.table("sales.orders").to_table()["batch"].to_pylist()) == ({1, 2, 3} if published else {1, 3})


def test_an_op_in_a_partitioned_job_must_say_where(instance: dg.DagsterInstance, root: str) -> None:
    """A plain op has no asset specs to take partition_expr from: an overwrite without where= in a
    partitioned run fails closed (never an unpredicated overwrite); with where= it publishes."""
    seen: list[int] = []

    @dg.op(config_schema={"where": bool})
    def write(context: dg.OpExecutionContext, mvcc_catalog: MvccCatalogResource) -> None:
        day = context.partition_key
        where = f"day = '{day}'" if context.op_config["where"] else None
        with mvcc_catalog.transaction(context) as tx:
            tx.overwrite("ops/t", pa.table({"day": [day], "n": [1]}), where=where)
        seen.append(tx.published_version or 0)

    @dg.job(partitions_def=DAYS)
    def job() -> None:
        write()

    resources = {"mvcc_catalog": MvccCatalogResource(root_uri=root)}
    for flag in (True, False):
        result = job.execute_in_process(
            instance=instance,
            resources=resources,
            partition_key="2026-11-02",
            run_config={"ops": {"write": {"config": {"where": flag}}}},
            raise_on_error=False,
        )
        assert result.success is flag
    (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert "needs the partition's predicate" in failure.step_failure_data.user_failure_data.description
    cat = mvcc.Catalog.open(root)
    assert seen == [2] and cat.latest_version == 2
    assert cat.table("ops.t").to_table().to_pylist() == [{"day": "2026-11-02", "n": 1}]
    props = cat.table("ops.t").versions()[-1].transaction_properties
    assert props["dagster/partition_key"] == "2026-11-02" and props["dagster/asset_key"] == "ops/t"


def test_reporting_failure_after_the_publish_is_not_retried(instance: dg.DagsterInstance, root: str) -> None:
    """The tables are published, then reading one back for its metadata fails (its data files are gone from
    storage, and the partition's row count scans them): the step fails without a retry under its RetryPolicy
    (a retry would append the rows again), naming the catalog version that was published."""
    import shutil

    attempts: list[int] = []
    specs = [
        dg.AssetSpec(ORDERS, metadata={"partition_expr": "day"}),
        dg.AssetSpec(CUSTOMERS, metadata={"partition_expr": "day"}),
    ]

    @dg.multi_asset(specs=specs, partitions_def=DAYS, retry_policy=dg.RetryPolicy(max_retries=2))
    def load(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
        attempts.append(context.retry_number)
        rows = pa.table({"day": [context.partition_key], "n": [1]})
        with mvcc_catalog.transaction(context) as tx:
            tx.append(ORDERS, rows)
            tx.append(CUSTOMERS, rows)
        # Storage loses the table's data files. (The catalog keeps the state it published in memory, so only
        # reading rows touches storage again: `dagster/partition_row_count` counts the partition's rows.)
        shutil.rmtree(f"{tx.catalog.snapshot().table('sales.orders').uri}/data")
        return tx.materialize_results()

    result = dg.materialize(
        [load],
        instance=instance,
        resources={"mvcc_catalog": MvccCatalogResource(root_uri=root)},
        partition_key="2026-11-01",
        raise_on_error=False,
    )
    assert not result.success and attempts == [0]
    (failure,) = events_of(result, dg.DagsterEventType.STEP_FAILURE)
    data = failure.step_failure_data.user_failure_data
    assert "published as catalog version 2" in data.description and "not retried" in data.description
    assert data.metadata[CATALOG_VERSION].value == 2
    assert mvcc.Catalog.open(root).latest_version == 2


def test_reexecution_reads_the_catalog_version_the_original_run_read(instance: dg.DagsterInstance, root: str) -> None:
    """Re-executing only the downstream step of a run reads the catalog version that run recorded, even after
    the tables moved on; a fresh run reads the newest materialization."""
    import catalog_pin_defs as defs

    def read_version(result: Any) -> tuple[int, list[int]]:
        (mat,) = [
            e.event_specific_data.materialization
            for e in result.all_events
            if e.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION and e.step_key == "report"
        ]
        return mat.metadata["read_catalog_version"].value, mat.metadata["batches"].value

    os.environ[defs.ROOT_ENV] = root
    try:
        job = dg.reconstructable(defs.both)
        with dg.execute_job(job, instance=instance, tags={"batch": "1"}) as first:
            assert first.success
            assert read_version(first) == (2, [1])
            first_id = first.run_id
        assert dg.materialize(
            [defs.load], instance=instance, tags={"batch": "2"}, resources=defs.defs.resources
        ).success
        options = dg.ReexecutionOptions(parent_run_id=first_id, step_selection=["report"])
        with dg.execute_job(job, instance=instance, reexecution_options=options) as again:
            assert again.success
            assert read_version(again) == (2, [1])  # the root run's own materialization of the upstream
        # A run of the report alone reads the newest (3); re-executed after batch 3 it still reads 3: the
        # newest materialization before its root run was created.
        with dg.execute_job(job, instance=instance, asset_selection=[defs.report.key]) as alone:
            assert alone.success and read_version(alone) == (3, [1, 2])
            alone_id = alone.run_id
        assert dg.materialize(
            [defs.load], instance=instance, tags={"batch": "3"}, resources=defs.defs.resources
        ).success
        options = dg.ReexecutionOptions(parent_run_id=alone_id, step_selection=["report"])
        with dg.execute_job(job, instance=instance, reexecution_options=options) as again:
            assert again.success and read_version(again) == (3, [1, 2])
        assert mvcc.Catalog.open(root).latest_version == 4
    finally:
        del os.environ[defs.ROOT_ENV]


def test_the_one_mapping_knows_catalog_conflicts() -> None:
    from mvcc_core.catalog import IncompatibleCatalogConflictError, RetryableCatalogConflictError
    from mvcc_dagster.error_mapping import to_dagster

    common = {"object_name": "sales.orders", "expected_version": 3, "actual_version": 5, "uri": "/cat"}
    retry = to_dagster(
        RetryableCatalogConflictError(
            "x", rule="delete after delete", rule_code="delete_from_deleted_or_compacted", **common
        ),
        attempt=1,
    )
    assert isinstance(retry, dg.RetryRequested)
    failure = to_dagster(
        IncompatibleCatalogConflictError(
            "x", rule="insert into a dropped table", rule_code="insert_into_dropped_or_altered", **common
        )
    )
    assert isinstance(failure, dg.Failure) and failure.allow_retries is False
    meta = {k: v.value for k, v in failure.metadata.items()}
    assert (meta["catalog_object"], meta["expected_version"], meta["actual_version"]) == ("sales.orders", 3, 5)
    assert meta["rule"] == "insert into a dropped table" and meta["table"] == "/cat"
    assert meta["rule_code"] == "insert_into_dropped_or_altered"
    assert failure.description.startswith("incompatible catalog conflict on 'sales.orders' in catalog /cat")


def test_a_failed_first_run_leaves_no_created_table(instance: dg.DagsterInstance, root: str) -> None:
    """The first run of a new multi_asset creates its tables inside its own catalog transaction: when a later
    write of the step is refused (a row outside the run's partition), nothing is published, not even the
    empty tables, and their directories are removed; the next good run creates and fills them in one version."""
    specs = [
        dg.AssetSpec(ORDERS, metadata={"partition_expr": "day"}),
        dg.AssetSpec(CUSTOMERS, metadata={"partition_expr": "day"}),
    ]

    @dg.multi_asset(specs=specs, partitions_def=DAYS, config_schema={"foreign": bool})
    def load(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
        day = context.partition_key
        other = "2026-11-02" if context.op_execution_context.op_config["foreign"] else day
        with mvcc_catalog.transaction(context) as tx:
            tx.overwrite(CUSTOMERS, pa.table({"day": [day], "n": [1]}))
            tx.overwrite(ORDERS, pa.table({"day": [other], "i": [1]}))
            assert tx.created_tables == ["sales.customers", "sales.orders"]
        return tx.materialize_results()

    def go(foreign: bool) -> dg.ExecuteInProcessResult:
        return dg.materialize(
            [load],
            instance=instance,
            resources={"mvcc_catalog": MvccCatalogResource(root_uri=root)},
            partition_key="2026-11-01",
            run_config={"ops": {"load": {"config": {"foreign": foreign}}}},
            raise_on_error=False,
        )

    failed = go(True)
    assert not failed.success
    (failure,) = events_of(failed, dg.DagsterEventType.STEP_FAILURE)
    assert "PredicateError" in failure.step_failure_data.user_failure_data.description
    cat = mvcc.Catalog.open(root)
    assert cat.latest_version == 1 and cat.schemas() == ["main"] and cat.tables() == []
    assert [p for p in Path(root).rglob("*") if p.is_file() and not str(p.relative_to(root)).startswith("__")] == []
    assert go(False).success
    assert cat.latest_version == 2 and cat.tables("sales") == ["sales.customers", "sales.orders"]
    assert cat.table("sales.orders").to_table().to_pylist() == [{"day": "2026-11-01", "i": 1}]


def test_two_first_runs_creating_the_same_table_retry_instead_of_failing(
    instance: dg.DagsterInstance, root: str
) -> None:
    """Another process creates sales.orders while this step's first run creates it from its first write: the
    catalog refuses "both create the same name", which for a table the step created only implicitly is a
    retryable conflict (RetryRequested); the retry finds the table and appends to it."""
    attempts: list[int] = []

    def create_elsewhere(context: dg.AssetExecutionContext, tx: Any) -> None:
        attempts.append(context.retry_number)
        if context.retry_number == 0:
            assert tx.created_tables == ["sales.customers", "sales.orders"]
            schema = "pa.schema([('order_id', pa.int64()), ('customer_id', pa.int64()), ('batch', pa.int64())])"
            other_writer(root, f"cat.create_schema('sales')\ncat.create_table('sales.orders', {schema})")
        else:
            assert tx.created_tables == ["sales.customers"]

    result = run([load_asset(create_elsewhere)], instance, root, 1)
    assert result.success and attempts == [0, 1]
    assert len(events_of(result, dg.DagsterEventType.STEP_UP_FOR_RETRY)) == 1
    cat = mvcc.Catalog.open(root)
    assert cat.latest_version == 4  # 2, 3: the other process's create_schema, create_table; 4: the retry
    assert cat.table("sales.orders").count_rows() == 3 and cat.table("sales.customers").count_rows() == 1


def test_merge_and_several_writes_to_one_table_in_one_step(instance: dg.DagsterInstance, root: str) -> None:
    """`tx.merge` upserts with the core's staged merge_insert; an append, a delete and a merge of the same
    table in one step form a chain (each sees the earlier ones' rows) published in ONE catalog version, the
    table's own history keeping one version per write."""
    counts: list[dict[str, int]] = []

    @dg.multi_asset(specs=[dg.AssetSpec(ORDERS), dg.AssetSpec(CUSTOMERS)], config_schema={"round": int})
    def load(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
        r = context.op_execution_context.op_config["round"]
        with mvcc_catalog.transaction(context) as tx:
            if r == 1:
                first = pa.table({"customer_id": [1, 2], "name": ["a", "b"]})
                counts.append(tx.merge(CUSTOMERS, first, on="customer_id"))
                tx.append(ORDERS, pa.table({"order_id": [1, 2], "customer_id": [1, 2]}))
            else:
                tx.append(ORDERS, pa.table({"order_id": [3, 4], "customer_id": [2, 3]}))
                tx.delete(ORDERS, "order_id IN (1, 3)")  # one appended in this step, one published before
                assert sorted(tx.to_table(ORDERS)["order_id"].to_pylist()) == [2, 4]  # read-your-writes
                counts.append(
                    tx.merge(CUSTOMERS, pa.table({"customer_id": [2, 3], "name": ["B", "c"]}), on=["customer_id"])
                )
                counts.append(tx.merge(CUSTOMERS, pa.table({"customer_id": [3], "name": ["C"]}), on="customer_id"))
        return tx.materialize_results()

    def go(r: int) -> dg.ExecuteInProcessResult:
        return dg.materialize(
            [load],
            instance=instance,
            resources={"mvcc_catalog": MvccCatalogResource(root_uri=root)},
            run_config={"ops": {"load": {"config": {"round": r}}}},
        )

    assert go(1).success
    cat = mvcc.Catalog.open(root)
    assert cat.latest_version == 2
    before = {n: cat.snapshot(2).table_version(n) for n in ("sales.orders", "sales.customers")}
    second = go(2)
    assert second.success and cat.latest_version == 3  # one catalog version for five writes on two tables
    assert counts == [
        {"num_inserted_rows": 2, "num_updated_rows": 0, "num_deleted_rows": 0},
        {"num_inserted_rows": 1, "num_updated_rows": 1, "num_deleted_rows": 0},
        {"num_inserted_rows": 0, "num_updated_rows": 1, "num_deleted_rows": 0},  # sees the row merged above
    ]
    snap = cat.snapshot(3)
    assert sorted(snap.table("sales.orders").to_table()["order_id"].to_pylist()) == [2, 4]
    customers = sorted(snap.table("sales.customers").to_table().to_pylist(), key=lambda r: r["customer_id"])
    assert [(r["customer_id"], r["name"]) for r in customers] == [(1, "a"), (2, "B"), (3, "C")]
    assert snap.table_version("sales.orders") == before["sales.orders"] + 2  # append, delete
    assert snap.table_version("sales.customers") == before["sales.customers"] + 2  # two merges
    changes = {(c["change"], c["name"]) for c in cat.versions()[-1].changes}
    assert changes == {
        ("inserted_into_table", "sales.orders"),
        ("deleted_from_table", "sales.orders"),
        ("inserted_into_table", "sales.customers"),
        ("deleted_from_table", "sales.customers"),
    }
    mats = {m.asset_key: m for m in second.asset_materializations_for_node("load")}
    assert len(second.asset_materializations_for_node("load")) == 2  # one per asset, not per write
    meta = {k: v.value for k, v in mats[CUSTOMERS].metadata.items()}
    assert meta["mvcc/version"] == snap.table_version("sales.customers") and meta["mvcc/operation"] == "Update"
    assert meta[CATALOG_VERSION] == 3 and meta["dagster/row_count"] == 3
    props = snap.table("sales.customers").versions()[-1].transaction_properties
    assert props["dagster/run_id"] == second.run_id and props["dagster/asset_key"] == "sales/customers"


def test_partitioned_merge_deletes_missing_keys_only_in_the_runs_partition(
    instance: dg.DagsterInstance, root: str
) -> None:
    """``delete_not_in_source=True`` in a partitioned run removes the target rows the source lacks only within
    the run's partition (as an overwrite without where replaces only it); other partitions keep theirs."""
    spec = dg.AssetSpec(CUSTOMERS, metadata={"partition_expr": "day"})

    @dg.multi_asset(specs=[spec], partitions_def=DAYS, config_schema={"ids": [int]})
    def load(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
        ids = context.op_execution_context.op_config["ids"]
        day = context.partition_key
        with mvcc_catalog.transaction(context) as tx:
            rows = pa.table({"id": ids, "day": [day] * len(ids), "v": [f"{day}-{i}" for i in ids]})
            tx.merge(CUSTOMERS, rows, on=["id", "day"], delete_not_in_source=True)
        yield from tx.materialize_results()  # one asset: yield its result (a 1-tuple is not a valid return)

    def go(day: str, ids: list[int]) -> None:
        assert dg.materialize(
            [load],
            instance=instance,
            resources={"mvcc_catalog": MvccCatalogResource(root_uri=root)},
            partition_key=day,
            run_config={"ops": {"load": {"config": {"ids": ids}}}},
        ).success

    go("2026-11-01", [1, 2, 3])
    go("2026-11-02", [1, 2])
    go("2026-11-01", [2])  # 1 and 3 go from 2026-11-01 only
    rows = mvcc.Catalog.open(root).table("sales.customers").to_table().to_pylist()
    assert sorted((r["day"], r["id"]) for r in rows) == [("2026-11-01", 2), ("2026-11-02", 1), ("2026-11-02", 2)]


def test_a_retry_after_a_publish_that_was_not_reported_does_not_publish_again(
    instance: dg.DagsterInstance, root: str
) -> None:
    """The step publishes, then fails before reporting; its RetryPolicy runs it again in the same run. The
    retry finds the catalog version its first attempt published (same root run, step and partitions) with no
    materialization naming it: it discards its staged writes and reports that version, so appends land once."""
    attempts: list[int] = []

    @dg.multi_asset(specs=[dg.AssetSpec(ORDERS), dg.AssetSpec(CUSTOMERS)], retry_policy=dg.RetryPolicy(max_retries=1))
    def load(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
        attempts.append(context.retry_number)
        orders, customers = batch(1)
        with mvcc_catalog.transaction(context) as tx:
            tx.append(ORDERS, orders)
            tx.append(CUSTOMERS, customers)
        if context.retry_number == 0:
            raise RuntimeError("failed after the publish")
        return tx.materialize_results()

    result = dg.materialize([load], instance=instance, resources={"mvcc_catalog": MvccCatalogResource(root_uri=root)})
    assert result.success and attempts == [0, 1]
    cat = mvcc.Catalog.open(root)
    assert cat.latest_version == 2  # the first attempt's publish only
    assert cat.versions()[-1].properties == {
        "dagster/run_id": result.run_id,
        "dagster/root_run_id": result.run_id,
        "dagster/step_key": "load",
    }
    assert cat.table("sales.orders").count_rows() == 3 and cat.table("sales.customers").count_rows() == 1
    mats = result.asset_materializations_for_node("load")
    assert {m.metadata[CATALOG_VERSION].value for m in mats} == {2}
    assert {m.metadata[CATALOG_PUBLISHED_BY_RUN].value for m in mats} == {result.run_id}
    assert len(data_files(root)) == 2  # one data file per table: the retry's staged files were removed


def test_a_reexecution_after_an_unreported_publish_reports_it_and_a_deliberate_one_publishes(
    instance: dg.DagsterInstance, root: str
) -> None:
    """Real re-executions (`ReexecutionOptions`, a reconstructable job): the original run's step published and
    failed before reporting; re-executing it from failure publishes nothing and reports the original's
    catalog version. Re-executing it once more (its publish is now reported) is a deliberate re-run and
    publishes again, as a fresh run does."""
    import catalog_pin_defs as defs

    os.environ[defs.ROOT_ENV] = root
    job = dg.reconstructable(defs.both)
    try:
        os.environ[defs.FAIL_ENV] = "1"
        with dg.execute_job(job, instance=instance, tags={"batch": "1"}, raise_on_error=False) as first:
            assert not first.success
            first_id = first.run_id
        del os.environ[defs.FAIL_ENV]
        cat = mvcc.Catalog.open(root)
        assert cat.latest_version == 2 and cat.table("sales.orders").count_rows() == 2
        options = dg.ReexecutionOptions.from_failure(first_id, instance)
        with dg.execute_job(job, instance=instance, reexecution_options=options) as again:
            assert again.success
            mats = again.get_asset_materialization_events()
            loaded = [m for m in mats if m.step_key == "load"]
            assert {m.materialization.metadata[CATALOG_VERSION].value for m in loaded} == {2}
            assert {m.materialization.metadata[CATALOG_PUBLISHED_BY_RUN].value for m in loaded} == {first_id}
            again_id = again.run_id
        assert cat.latest_version == 2 and cat.table("sales.orders").count_rows() == 2  # not appended twice
        options = dg.ReexecutionOptions(parent_run_id=again_id, step_selection=["load"])
        with dg.execute_job(job, instance=instance, reexecution_options=options) as deliberate:
            assert deliberate.success
        assert cat.latest_version == 3 and cat.table("sales.orders").count_rows() == 4
        assert cat.versions()[-1].properties["dagster/root_run_id"] == first_id
    finally:
        os.environ.pop(defs.ROOT_ENV, None)
        os.environ.pop(defs.FAIL_ENV, None)
