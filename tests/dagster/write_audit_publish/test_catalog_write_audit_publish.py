"""Write-audit-publish on catalog assets, on real Dagster runs (in-process executor, ephemeral instances): the
step's catalog transaction goes to the catalog branch ``dagster-wap-<run id>``, its branch checks read that
branch's snapshot, and main gets ONE catalog version holding every table only when every blocking check
passes; a failed check leaves main untouched, skips downstream assets and keeps the branch."""

from datetime import timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_dagster import BranchAudit, MvccCatalogResource, branch_check, build_catalog_maintenance_job
from mvcc_dagster.metadata import BRANCH, BRANCH_VERSION, CATALOG_BRANCH_VERSION, CATALOG_VERSION, WRITE_AUDIT_PUBLISH
from mvcc_dagster.write_audit_publish import delete_catalog_wap_branches, wap_branch_name

ORDERS, CUSTOMERS = dg.AssetKey(["sales", "orders"]), dg.AssetKey(["sales", "customers"])
WAP = {WRITE_AUDIT_PUBLISH: True}
STATE: dict[str, Any] = {}  # what the assets write and what the audits saw, set by each test


@branch_check(ORDERS)
def orders_have_customers(audit: BranchAudit) -> dg.AssetCheckResult:
    """Every order's customer exists (read from the branch's catalog snapshot: a cross-table audit)."""
    STATE.setdefault("audited", []).append((audit.branch, audit.catalog_version, audit.table.branch))
    if STATE.get("during_audit"):
        STATE.pop("during_audit")()  # another writer commits on main while the branch is audited (once)
    known = set(audit.catalog.table("sales.customers").to_table().column("customer_id").to_pylist())
    STATE.setdefault("rows_seen", []).append((audit.partition_keys, audit.rows().num_rows))
    orphans = [c for c in audit.rows(["customer_id"]).column("customer_id").to_pylist() if c not in known]
    return dg.AssetCheckResult(passed=not orphans, metadata={"orphan_orders": len(orphans)})


@branch_check(CUSTOMERS, blocking=False)
def few_customers(audit: BranchAudit) -> bool:
    """Non-blocking: its failure never stops the publish."""
    return audit.table.count_rows() < 2


def load_asset(partitions: dg.PartitionsDefinition | None = None) -> dg.AssetsDefinition:
    day = {"partition_expr": "day"} if partitions is not None else {}

    @dg.multi_asset(
        specs=[dg.AssetSpec(ORDERS, metadata={**WAP, **day}), dg.AssetSpec(CUSTOMERS, metadata={**WAP, **day})],
        check_specs=[orders_have_customers.spec, few_customers.spec],
        partitions_def=partitions,
        name="load",
    )
    def load(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
        orders, customers = STATE["orders"], STATE["customers"]
        with mvcc_catalog.transaction(context) as tx:
            tx.overwrite(CUSTOMERS, customers) if partitions is None else tx.append(CUSTOMERS, customers)
            tx.append(ORDERS, orders) if partitions is None else tx.overwrite(ORDERS, orders)
        return tx.materialize_results()

    return load


@dg.asset(deps=[ORDERS])
def order_count(mvcc_catalog: MvccCatalogResource) -> None:
    STATE["downstream_read"] = mvcc_catalog.open().table("sales.orders").count_rows()


def orders(customer_ids: list[int], day: str = "d1") -> pa.Table:
    return pa.table(
        {"order_id": list(range(len(customer_ids))), "customer_id": customer_ids, "day": [day] * len(customer_ids)}
    )


def customers(ids: list[int], day: str = "d1") -> pa.Table:
    return pa.table({"customer_id": pa.array(ids, pa.int64()), "day": [day] * len(ids)})


def run(root: str, assets: list[Any], **kwargs: Any) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        assets,
        instance=kwargs.pop("instance", None) or dg.DagsterInstance.ephemeral(),
        resources={"mvcc_catalog": MvccCatalogResource(root_uri=root, conflict_retry_delay=0.01)},
        **kwargs,
    )


def evaluations(instance: dg.DagsterInstance, run_id: str) -> dict[str, dg.AssetCheckEvaluation]:
    """The check evaluations the run's event log holds (what the UI shows)."""
    logs = instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    return {
        e.dagster_event.asset_check_evaluation_data.check_name: e.dagster_event.asset_check_evaluation_data
        for e in logs
    }


@pytest.fixture(autouse=True)
def _clean_state() -> None:
    STATE.clear()


@pytest.fixture
def root(tmp_path: Any) -> str:
    return str(tmp_path / "catalog")


@pytest.mark.slow  # several runs: over 0.5 s
def test_passing_audits_publish_both_tables_in_one_catalog_version(root: str) -> None:
    """Fails on the code before catalog WAP (the step was refused)."""
    STATE.update(orders=orders([1, 2]), customers=customers([1, 2]))
    instance = dg.DagsterInstance.ephemeral()
    good = run(root, [load_asset(), order_count], instance=instance)
    assert good.success
    cat = mvcc.Catalog.open(root)
    branch = wap_branch_name(good.run_id)
    # versions 2, 3: each table created empty on main at its first write (a branch has no DDL); 4: the publish
    assert cat.latest_version == 4
    assert [v.message for v in cat.versions()][1:3] == [
        "dagster: create sales.customers",
        "dagster: create sales.orders",
    ]
    assert [v.message for v in cat.versions()][-1].startswith("dagster: sales/customers, sales/orders")
    assert cat.versions()[-1].properties["mvcc.published_branch"] == branch
    assert cat.table("sales.orders").count_rows() == 2 and cat.table("sales.customers").count_rows() == 2
    ((audited_branch, audited_version, table_branch),) = STATE["audited"]
    assert audited_branch == branch and table_branch == branch  # the fork on the catalog branch, not main
    for key in (ORDERS, CUSTOMERS):
        (mat,) = [m for m in good.asset_materializations_for_node("load") if m.asset_key == key]
        assert mat.metadata[CATALOG_VERSION].value == 4  # main's catalog version, not the branch's
        assert mat.metadata[BRANCH].value == branch
        assert mat.metadata[CATALOG_BRANCH_VERSION].value == audited_version
    checks = evaluations(instance, good.run_id)
    assert checks["orders_have_customers"].passed and checks["orders_have_customers"].blocking
    assert checks["orders_have_customers"].metadata[BRANCH].value == branch
    assert BRANCH_VERSION in checks["orders_have_customers"].metadata
    assert not checks["few_customers"].passed  # not blocking: the publish went ahead
    assert STATE["downstream_read"] == 2
    assert cat.branches() == {}  # a published branch is deleted (its forks' files are main's)


@pytest.mark.slow  # several runs: over 0.5 s
def test_a_failing_blocking_audit_leaves_main_untouched_and_keeps_the_branch(root: str) -> None:
    STATE.update(orders=orders([1, 2]), customers=customers([1, 2]))
    assert run(root, [load_asset()]).success
    cat = mvcc.Catalog.open(root)
    before = cat.latest_version
    STATE.clear()
    STATE.update(orders=orders([3, 9]), customers=customers([3]))  # customer 9 is missing
    instance = dg.DagsterInstance.ephemeral()
    bad = run(root, [load_asset(), order_count], instance=instance, raise_on_error=False)
    assert not bad.success
    cat = mvcc.Catalog.open(root)
    assert cat.latest_version == before
    assert sorted(cat.table("sales.orders").to_table().column("customer_id").to_pylist()) == [1, 2]
    assert cat.table("sales.customers").count_rows() == 2
    assert not bad.asset_materializations_for_node("load")
    assert "downstream_read" not in STATE
    assert [e.step_key for e in bad.all_events if e.is_step_failure] == ["load"]
    assert not [e for e in bad.all_events if e.step_key == "order_count" and e.is_step_start]
    (failure,) = [e for e in bad.all_events if e.is_step_failure]
    text = failure.step_failure_data.user_failure_data.description
    branch = wap_branch_name(bad.run_id)
    assert "orders_have_customers" in text and branch in text and "unchanged" in text
    assert not [e for e in bad.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    checks = evaluations(instance, bad.run_id)
    assert not checks["orders_have_customers"].passed
    assert checks["orders_have_customers"].metadata["orphan_orders"].value == 3  # customers 1, 2 replaced by 3
    # the branch keeps the rows for inspection
    assert branch in cat.branches()
    kept = cat.table("sales.orders", branch=branch).to_table().column("customer_id").to_pylist()
    assert sorted(kept) == [1, 2, 3, 9]
    # retention: a newer window keeps it, an older one deletes it and its forks
    assert delete_catalog_wap_branches(cat, timedelta(days=1)) == []
    assert delete_catalog_wap_branches(cat, timedelta(0), dry_run=True) == [branch]
    assert branch in cat.branches()
    assert delete_catalog_wap_branches(cat, timedelta(0)) == [branch]
    assert cat.branches() == {}
    assert branch not in cat.table("sales.orders").branches.list()


@pytest.mark.slow  # several runs: over 0.5 s
def test_partitioned_days_are_audited_on_their_own_rows(root: str) -> None:
    days = dg.StaticPartitionsDefinition(["d1", "d2"])
    asset = load_asset(days)
    STATE.update(orders=orders([1], "d1"), customers=customers([1]))
    assert run(root, [asset], partition_key="d1").success
    STATE.update(orders=orders([2, 2], "d2"), customers=customers([2], "d2"))
    assert run(root, [asset], partition_key="d2").success
    cat = mvcc.Catalog.open(root)
    assert sorted(cat.table("sales.orders").to_table().column("day").to_pylist()) == ["d1", "d2", "d2"]
    assert STATE["rows_seen"] == [(("d1",), 1), (("d2",), 2)]  # each run's audit saw its own day's rows only
    STATE.update(orders=orders([7], "d1"), customers=customers([]))  # re-run d1 with an orphan: refused
    bad = run(root, [asset], partition_key="d1", raise_on_error=False)
    assert not bad.success
    assert sorted(mvcc.Catalog.open(root).table("sales.orders").to_table().column("day").to_pylist()) == [
        "d1",
        "d2",
        "d2",
    ]


def test_a_blocking_check_that_is_not_a_branch_check_is_refused_before_anything_is_written(root: str) -> None:
    plain = dg.AssetCheckSpec("plain", asset=ORDERS, blocking=True)

    @dg.multi_asset(specs=[dg.AssetSpec(ORDERS, metadata=WAP)], check_specs=[plain])
    def load(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
        with mvcc_catalog.transaction(context) as tx:
            tx.append(ORDERS, orders([1]))
        return tx.materialize_results()

    result = run(root, [load], raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert "'plain' is not a branch check" in failure.step_failure_data.user_failure_data.description
    assert not Path(root).exists()  # refused before the catalog was even created


@pytest.mark.slow  # several runs: over 0.5 s
def test_the_catalog_maintenance_job_deletes_old_wap_branches(root: str) -> None:
    STATE.update(orders=orders([5]), customers=customers([]))
    bad = run(root, [load_asset()], raise_on_error=False)
    assert not bad.success and wap_branch_name(bad.run_id) in mvcc.Catalog.open(root).branches()
    job = build_catalog_maintenance_job([ORDERS, CUSTOMERS], older_than=timedelta(0))
    done = dg.Definitions(jobs=[job], resources={"mvcc_catalog": MvccCatalogResource(root_uri=root)})
    result = done.resolve_job_def(job.name).execute_in_process(instance=dg.DagsterInstance.ephemeral())
    assert result.success
    assert mvcc.Catalog.open(root).branches() == {}


@pytest.mark.slow  # several runs: over 0.5 s
def test_main_moving_during_the_audit_is_kept_or_retried(root: str) -> None:
    """A compatible commit on main during the audit (another writer's append) is kept under the publish, still
    one catalog version; a conflicting one (main overwrote the table the branch overwrote) is retried: the
    step runs again on a fresh branch and publishes once."""
    STATE.update(orders=orders([1]), customers=customers([1]))
    assert run(root, [load_asset()]).success
    cat = mvcc.Catalog.open(root)

    def other_append() -> None:
        with mvcc.Catalog.open(root).transaction() as tx:
            tx.table("sales.orders").append(pa.table({"order_id": [99], "customer_id": [1], "day": ["d9"]}))

    STATE.update(orders=orders([1]), customers=customers([1]), during_audit=other_append)
    before = cat.latest_version
    assert run(root, [load_asset()]).success
    cat = mvcc.Catalog.open(root)
    assert cat.latest_version == before + 2  # the other writer's version, then the publish
    assert sorted(cat.table("sales.orders").to_table().column("order_id").to_pylist()) == [0, 0, 99]

    def other_overwrite() -> None:
        with mvcc.Catalog.open(root).transaction() as tx:
            tx.table("sales.customers").overwrite(customers([1, 2]))

    STATE.update(orders=orders([2]), customers=customers([1, 2, 3]), during_audit=other_overwrite)
    STATE["audited"] = []
    result = run(root, [load_asset()])
    assert result.success
    assert [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    assert len(STATE["audited"]) == 2 and STATE["audited"][0][0] == STATE["audited"][1][0]  # same run's branch
    cat = mvcc.Catalog.open(root)
    assert sorted(cat.table("sales.customers").to_table().column("customer_id").to_pylist()) == [1, 2, 3]
    assert sorted(cat.table("sales.orders").to_table().column("order_id").to_pylist()) == [0, 0, 0, 99]
    assert cat.branches() == {}


@pytest.mark.slow  # a retried step: over 0.5 s
def test_a_step_retried_after_its_publish_reports_it_and_does_not_publish_twice(root: str) -> None:
    """The first attempt publishes, then fails before reporting; the retry finds that publish (the step's stamp
    on main's catalog version), reports it with the checks taken on it, and leaves no branch behind."""

    @dg.multi_asset(
        specs=[dg.AssetSpec(ORDERS, metadata=WAP), dg.AssetSpec(CUSTOMERS, metadata=WAP)],
        check_specs=[orders_have_customers.spec],
        retry_policy=dg.RetryPolicy(max_retries=1),
    )
    def load(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
        with mvcc_catalog.transaction(context) as tx:
            tx.append(CUSTOMERS, customers([1]))
            tx.append(ORDERS, orders([1, 1]))
        if context.retry_number == 0:
            raise RuntimeError("the step dies after its publish")
        return tx.materialize_results()

    STATE.update(orders=orders([1]), customers=customers([1]))
    assert run(root, [load_asset()]).success  # the tables exist: both attempts stage the same writes
    first = mvcc.Catalog.open(root).latest_version
    result = run(root, [load])
    assert result.success
    cat = mvcc.Catalog.open(root)
    assert cat.latest_version == first + 1  # one publish, not two
    assert cat.table("sales.orders").count_rows() == 3 and cat.table("sales.customers").count_rows() == 2
    (mat,) = [m for m in result.asset_materializations_for_node("load") if m.asset_key == ORDERS]
    assert mat.metadata[CATALOG_VERSION].value == first + 1
    assert mat.metadata["mvcc/catalog_published_by_run"].value == result.run_id
    assert cat.branches() == {}


@pytest.mark.slow  # S3 on moto's server, several runs
def test_the_cycle_on_every_backend(any_uri: tuple[str, Any]) -> None:
    """Local disk, memory and S3: a passing audit publishes, a failing one keeps main and the branch, and
    retention deletes the branch."""
    root, options = any_uri
    resources = {"mvcc_catalog": MvccCatalogResource(root_uri=root, storage_options=options or {})}
    STATE.update(orders=orders([1]), customers=customers([1]))
    assert dg.materialize([load_asset()], instance=dg.DagsterInstance.ephemeral(), resources=resources).success
    cat = mvcc.Catalog.open(root, storage_options=options)
    published = cat.latest_version
    STATE.update(orders=orders([4]), customers=customers([5]))
    bad = dg.materialize(
        [load_asset()], instance=dg.DagsterInstance.ephemeral(), resources=resources, raise_on_error=False
    )
    assert not bad.success
    cat = mvcc.Catalog.open(root, storage_options=options)
    assert cat.latest_version == published and cat.table("sales.orders").count_rows() == 1
    branch = wap_branch_name(bad.run_id)
    assert cat.table("sales.orders", branch=branch).count_rows() == 2
    assert delete_catalog_wap_branches(cat, timedelta(0)) == [branch] and cat.branches() == {}


@pytest.mark.slow  # several runs: over 0.5 s
def test_an_incompatible_commit_on_main_during_the_audit_refuses_the_publish_and_keeps_the_branch(root: str) -> None:
    STATE.update(orders=orders([1]), customers=customers([1]))
    assert run(root, [load_asset()]).success

    def drop_orders() -> None:
        mvcc.Catalog.open(root).drop_table("sales.orders")

    STATE.update(orders=orders([1]), customers=customers([1]), during_audit=drop_orders)
    result = run(root, [load_asset()], raise_on_error=False)
    assert not result.success
    assert not [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    assert not result.asset_materializations_for_node("load")
    cat = mvcc.Catalog.open(root)
    assert cat.tables() == ["sales.customers"] and cat.table("sales.customers").count_rows() == 1
    assert wap_branch_name(result.run_id) in cat.branches()  # kept for inspection
