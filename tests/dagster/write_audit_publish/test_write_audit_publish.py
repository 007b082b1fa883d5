"""Write-audit-publish (``mvcc/write_audit_publish: true``) on real Dagster runs: the output goes to the run's
branch, the asset's blocking branch checks read that branch version, and main gets one commit only when they
all pass; a failed check leaves main untouched, skips downstream assets and keeps the branch."""

import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_dagster import BranchAudit, MvccIOManager, MvccResource, audited_output, branch_check, build_retention_job
from mvcc_dagster.metadata import BRANCH, BRANCH_VERSION, WRITE_AUDIT_PUBLISH
from mvcc_dagster.write_audit_publish import delete_wap_branches, wap_branch_name

WAP = {WRITE_AUDIT_PUBLISH: True}
# What the assets below write and what the audits saw, set by each test.
STATE: dict[str, Any] = {}


def resources(root: str) -> dict[str, Any]:
    return {"io_manager": MvccIOManager(root_uri=root), "mvcc": MvccResource(root_uri=root)}


@branch_check("orders")
def amounts_non_negative(audit: BranchAudit) -> dg.AssetCheckResult:
    """No order has a negative amount."""
    STATE.setdefault("audited", []).append((audit.branch, audit.table.branch, audit.table.version))
    bad = audit.table.count_rows("amount < 0")
    return dg.AssetCheckResult(passed=bad == 0, metadata={"negative_rows": bad})


@branch_check("orders", blocking=False)
def few_rows(audit: BranchAudit) -> bool:
    """A warning-level check: never stops the publish."""
    return audit.table.count_rows() < 3


@dg.asset(metadata=WAP, check_specs=[amounts_non_negative.spec, few_rows.spec])
def orders(context: dg.AssetExecutionContext) -> Iterator[Any]:
    yield from audited_output(context, pa.table({"id": [1, 2, 3], "amount": STATE["amounts"]}))


@dg.asset
def order_total(orders: pa.Table) -> pa.Table:
    STATE["downstream_read"] = orders.num_rows
    return pa.table({"total": [sum(orders.column("amount").to_pylist())]})


def events_of(result: dg.ExecuteInProcessResult, kind: dg.DagsterEventType) -> list[dg.DagsterEvent]:
    return [e for e in result.all_events if e.event_type == kind]


def check_results(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {
        e.asset_check_evaluation_data.check_name: e.asset_check_evaluation_data
        for e in result.all_events
        if e.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION
    }


@pytest.fixture(autouse=True)
def _clean_state() -> None:
    STATE.clear()


def test_a_passing_audit_publishes_the_branch_to_main_in_one_commit(warehouse: str) -> None:
    STATE["amounts"] = [1.0, 2.0, 3.0]
    good = dg.materialize(
        [orders, order_total], instance=dg.DagsterInstance.ephemeral(), resources=resources(warehouse)
    )
    table = MvccResource(root_uri=warehouse).open("orders")
    branch = wap_branch_name(good.run_id)
    # Created empty (version 1: a branch needs a table), then the branch published in one commit (version 2).
    assert [v.operation for v in table.versions()] == ["Overwrite", "Update"]
    assert table.version == 2 and table.to_table().column("amount").to_pylist() == [1.0, 2.0, 3.0]
    assert table.versions()[-1].transaction_properties["dagster/run_id"] == good.run_id
    mat = good.asset_materializations_for_node("orders")[0]
    assert mat.metadata["mvcc/version"].value == 2
    assert mat.metadata[BRANCH].value == branch
    # the audit read the branch's version, the one the materialization records
    ((audited_name, audited_branch, audited_version),) = STATE["audited"]
    assert (audited_name, audited_branch) == (branch, branch)
    assert mat.metadata[BRANCH_VERSION].value == audited_version
    checks = check_results(good)
    assert checks["amounts_non_negative"].passed and checks["amounts_non_negative"].blocking
    assert checks["amounts_non_negative"].metadata[BRANCH].value == branch
    assert not checks["few_rows"].passed  # not blocking: the publish went ahead
    assert STATE["downstream_read"] == 3
    assert branch not in table.branches.list()  # published branches are deleted


def test_a_failing_audit_leaves_main_untouched_skips_downstream_and_keeps_the_branch(warehouse: str) -> None:
    table = mvcc.write_table(pa.table({"id": [1, 2, 3], "amount": [1.0, 2.0, 3.0]}), f"{warehouse}/orders")
    STATE["amounts"] = [1.0, -2.0, 3.0]
    bad = dg.materialize(
        [orders, order_total],
        instance=dg.DagsterInstance.ephemeral(),
        resources=resources(warehouse),
        raise_on_error=False,
    )
    assert not bad.success
    table = table.checkout_latest()
    assert table.version == 1 and table.to_table().column("amount").to_pylist() == [1.0, 2.0, 3.0]
    assert not bad.asset_materializations_for_node("orders")
    assert "downstream_read" not in STATE  # the downstream step never ran
    assert not events_of(bad, dg.DagsterEventType.STEP_UP_FOR_RETRY)
    (failure,) = events_of(bad, dg.DagsterEventType.STEP_FAILURE)
    bad_branch = wap_branch_name(bad.run_id)
    assert "amounts_non_negative" in failure.step_failure_data.user_failure_data.description
    assert bad_branch in failure.step_failure_data.user_failure_data.description
    assert not check_results(bad)["amounts_non_negative"].passed
    # The branch stays for inspection, holding what the run wrote ...
    assert bad_branch in table.branches.list()
    kept = table.checkout_branch(bad_branch)
    assert kept.to_table().column("amount").to_pylist() == [1.0, -2.0, 3.0]
    # ... until retention's window passes (the retention job: test below).
    assert delete_wap_branches(table, older_than=timedelta(days=1)) == []
    assert delete_wap_branches(table, older_than=timedelta(days=1), now=kept.timestamp + timedelta(days=2)) == [
        bad_branch
    ]
    assert bad_branch not in table.branches.list()


@pytest.mark.slow  # three runs (≈1 s)
def test_the_retention_job_deletes_failed_audits_branches_and_their_files(warehouse: str) -> None:
    table = mvcc.write_table(pa.table({"id": [1, 2, 3], "amount": [1.0, 2.0, 3.0]}), f"{warehouse}/orders")
    STATE["amounts"] = [1.0, -2.0, 3.0]
    bad = dg.materialize(
        [orders], instance=dg.DagsterInstance.ephemeral(), resources=resources(warehouse), raise_on_error=False
    )
    bad_branch = wap_branch_name(bad.run_id)
    table.create_branch("kept-by-hand")  # not a WAP branch: never touched
    files = {p.name for p in (Path(warehouse) / "orders" / "data").iterdir()}
    assert len(files) == 2  # main's and the branch's
    job = build_retention_job("orders", older_than=timedelta(0))
    for dry in (True, False):
        run = job.execute_in_process(
            resources=resources(warehouse),
            instance=dg.DagsterInstance.ephemeral(),
            run_config={"ops": {"cleanup_old_versions": {"config": {"dry_run": dry}}}},
        )
        (out,) = events_of(run, dg.DagsterEventType.STEP_OUTPUT)
        assert out.step_output_data.metadata["wap_branches_removed"].value == [bad_branch]
        assert (bad_branch in table.branches.list()) is dry
    assert set(table.branches.list()) == {"kept-by-hand"}
    assert {p.name for p in (Path(warehouse) / "orders" / "data").iterdir()} < files
    assert table.checkout_latest().to_table().column("amount").to_pylist() == [1.0, 2.0, 3.0]


@branch_check("ledger")
def ledger_audit(audit: BranchAudit) -> bool:
    """Runs the test's hook (a concurrent writer on main) while the branch is being audited."""
    STATE["during_audit"]()
    return True


@dg.asset(metadata={**WAP, "mvcc/write_mode": "append"}, check_specs=[ledger_audit.spec])
def ledger(context: dg.AssetExecutionContext) -> Iterator[Any]:
    yield from audited_output(context, pa.table({"id": [1, 2], "amount": [1.0, 2.0]}))


def test_a_concurrent_main_write_between_write_and_publish_is_kept(warehouse: str) -> None:
    uri = f"{warehouse}/ledger"
    mvcc.write_table(pa.table({"id": [0], "amount": [0.5]}), uri)

    def outside_append() -> None:
        mvcc.open_table(uri).append(pa.table({"id": [9], "amount": [9.0]}))

    STATE["during_audit"] = outside_append
    result = dg.materialize([ledger], instance=dg.DagsterInstance.ephemeral(), resources=resources(warehouse))
    table = mvcc.open_table(uri)
    # version 2 is the outside append (made while the audit ran), version 3 the publish (one Update) checked
    # against it: read at the fork (version 1), compatible, committed over it
    assert table.version == 3
    assert [v.operation for v in table.versions()] == ["Overwrite", "Append", "Update"]
    mat = result.asset_materializations_for_node("ledger")[0]
    assert mat.metadata["mvcc/version"].value == 3
    assert mat.metadata["mvcc/read_version"].value == 1
    assert sorted(table.to_table().column("id").to_pylist()) == [0, 1, 2, 9]


def test_an_incompatible_main_commit_refuses_the_publish_and_keeps_the_branch(warehouse: str) -> None:
    uri = f"{warehouse}/ledger"
    mvcc.write_table(pa.table({"id": [0], "amount": [0.5]}), uri)
    mvcc.open_table(uri).append(pa.table({"id": [5], "amount": [5.0]}))

    def outside_restore() -> None:  # a restore conflicts with every concurrent commit
        mvcc.open_table(uri).restore(1)

    STATE["during_audit"] = outside_restore
    result = dg.materialize(
        [ledger], instance=dg.DagsterInstance.ephemeral(), resources=resources(warehouse), raise_on_error=False
    )
    assert not result.success and not events_of(result, dg.DagsterEventType.STEP_UP_FOR_RETRY)
    (failure,) = events_of(result, dg.DagsterEventType.STEP_FAILURE)
    assert "Restore" in failure.step_failure_data.user_failure_data.description
    table = mvcc.open_table(uri)
    assert [v.operation for v in table.versions()] == ["Overwrite", "Append", "Restore"]
    assert table.to_table().column("id").to_pylist() == [0]
    branch = table.checkout_branch(wap_branch_name(result.run_id))  # kept: the publish did not happen
    assert sorted(branch.to_table().column("id").to_pylist()) == [0, 1, 2, 5]
    assert not result.asset_materializations_for_node("ledger")


@pytest.mark.slow  # the S3 case starts the moto server; local is covered above
def test_publish_and_refusal_on_every_store(any_uri: tuple[str, dict[str, Any] | None]) -> None:
    root, options = any_uri
    io = {"io_manager": MvccIOManager(root_uri=root, storage_options=options or {})}
    instance = dg.DagsterInstance.ephemeral()
    STATE["amounts"] = [1.0, 2.0, 3.0]
    good = dg.materialize([orders], instance=instance, resources=io)
    STATE["amounts"] = [1.0, -2.0, 3.0]
    bad = dg.materialize([orders], instance=instance, resources=io, raise_on_error=False)
    assert good.success and not bad.success
    table = mvcc.open_table(f"{root}/orders", storage_options=options)
    assert table.version == 2 and table.to_table().column("amount").to_pylist() == [1.0, 2.0, 3.0]
    assert set(table.branches.list()) == {wap_branch_name(bad.run_id)}
    assert table.checkout_branch(wap_branch_name(bad.run_id)).count_rows("amount < 0") == 1


daily = dg.DailyPartitionsDefinition(start_date="2026-11-01", end_date="2026-11-04", timezone="UTC")


@branch_check("events")
def events_positive(audit: BranchAudit) -> dg.AssetCheckResult:
    """Every amount of the written day is positive."""
    rows = audit.rows()
    STATE.setdefault("partition_audits", []).append((audit.partition_keys, rows.num_rows, audit.partition_filter))
    bad = sum(1 for a in rows.column("amount").to_pylist() if a <= 0)
    return dg.AssetCheckResult(passed=bad == 0, metadata={"bad_rows": bad})


@dg.asset(
    partitions_def=daily,
    metadata={**WAP, "partition_expr": "day"},
    check_specs=[events_positive.spec],
)
def events(context: dg.AssetExecutionContext) -> Iterator[Any]:
    day = context.partition_time_window.start.date()
    amount = -1.0 if context.partition_key in STATE.get("bad_days", ()) else 1.0
    days = [day] * 3 + [day - timedelta(days=1) if STATE.get("stray_row") else day]
    yield from audited_output(context, pa.table({"day": pa.array(days, pa.date32()), "amount": [amount] * 4}))


def test_partitioned_days_are_audited_and_published_separately(warehouse: str) -> None:
    instance = dg.DagsterInstance.ephemeral()
    uri = f"{warehouse}/events"
    dg.materialize([events], instance=instance, resources=resources(warehouse), partition_key="2026-11-01")
    before = mvcc.open_table(uri)
    STATE["bad_days"] = {"2026-11-03"}
    bad = dg.materialize(
        [events], instance=instance, resources=resources(warehouse), partition_key="2026-11-03", raise_on_error=False
    )
    assert not bad.success
    after = mvcc.open_table(uri)
    assert after.version == before.version and after.count_rows() == 4
    # the audit saw only the day it wrote, on the branch
    keys, rows, where = STATE["partition_audits"][-1]
    assert keys == ("2026-11-03",) and rows == 4 and "2026-11-03" in where
    STATE["bad_days"] = set()
    good = dg.materialize([events], instance=instance, resources=resources(warehouse), partition_key="2026-11-03")
    table = mvcc.open_table(uri)
    assert table.version == before.version + 1 and table.count_rows() == 8
    mat = good.asset_materializations_for_node("events")[0]
    assert mat.partition == "2026-11-03" and mat.metadata["mvcc/version"].value == table.version
    assert wap_branch_name(bad.run_id) in table.branches.list()  # the failed day's branch is still there


def test_a_row_outside_the_partition_fails_before_the_audit_and_leaves_no_branch(warehouse: str) -> None:
    instance = dg.DagsterInstance.ephemeral()
    dg.materialize([events], instance=instance, resources=resources(warehouse), partition_key="2026-11-01")
    STATE["stray_row"] = True
    result = dg.materialize(
        [events], instance=instance, resources=resources(warehouse), partition_key="2026-11-02", raise_on_error=False
    )
    assert not result.success and len(STATE["partition_audits"]) == 1  # the first day's audit only
    (failure,) = events_of(result, dg.DagsterEventType.STEP_FAILURE)
    assert "PredicateError" in failure.step_failure_data.user_failure_data.description
    table = mvcc.open_table(f"{warehouse}/events")
    assert table.version == 2 and table.count_rows() == 4 and table.branches.list() == {}


def test_a_blocking_check_that_is_not_a_branch_check_is_refused_before_writing(warehouse: str) -> None:
    @dg.asset(metadata=WAP, check_specs=[dg.AssetCheckSpec("plain", asset="plain_wap", blocking=True)], key="plain_wap")
    def plain_wap() -> Iterator[dg.Output]:
        yield dg.Output(pa.table({"a": [1]}))

    result = dg.materialize(
        [plain_wap], instance=dg.DagsterInstance.ephemeral(), resources=resources(warehouse), raise_on_error=False
    )
    assert not result.success
    (failure,) = events_of(result, dg.DagsterEventType.STEP_FAILURE)
    assert "not a branch check" in failure.step_failure_data.user_failure_data.description
    with pytest.raises(mvcc.TableNotFoundError):
        mvcc.open_table(f"{warehouse}/plain_wap")


def test_a_metadata_value_that_is_not_a_bool_is_refused(warehouse: str) -> None:
    @dg.asset(metadata={WRITE_AUDIT_PUBLISH: "yes"})
    def loose() -> pa.Table:
        return pa.table({"a": [1]})

    result = dg.materialize(
        [loose], instance=dg.DagsterInstance.ephemeral(), resources=resources(warehouse), raise_on_error=False
    )
    (failure,) = events_of(result, dg.DagsterEventType.STEP_FAILURE)
    assert "must be true or false" in failure.step_failure_data.user_failure_data.description
    with pytest.raises(mvcc.TableNotFoundError):
        mvcc.open_table(f"{warehouse}/loose")


def test_audited_output_without_the_metadata_is_refused_before_writing(warehouse: str) -> None:
    @dg.asset(check_specs=[dg.AssetCheckSpec("c", asset="unmarked")])
    def unmarked(context: dg.AssetExecutionContext) -> Iterator[Any]:
        yield from audited_output(context, pa.table({"a": [1]}))

    result = dg.materialize(
        [unmarked], instance=dg.DagsterInstance.ephemeral(), resources=resources(warehouse), raise_on_error=False
    )
    (failure,) = events_of(result, dg.DagsterEventType.STEP_FAILURE)
    assert "audited_output needs the metadata mvcc/write_audit_publish: true" in (
        failure.step_failure_data.user_failure_data.description
    )
    with pytest.raises(mvcc.TableNotFoundError):
        mvcc.open_table(f"{warehouse}/unmarked")


@pytest.mark.slow  # starts a local SparkSession
@pytest.mark.timeout(300)
def test_a_spark_output_is_written_to_the_branch_audited_and_published(
    warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from dagster_pyspark import PySparkResource

    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)

    @branch_check("spark_orders")
    def spark_rows(audit: BranchAudit) -> bool:
        """The branch holds the DataFrame's ten rows."""
        STATE["spark_branch"] = audit.table.branch
        return audit.table.count_rows() == 10

    @dg.asset(metadata=WAP, check_specs=[spark_rows.spec])
    def spark_orders(context: dg.AssetExecutionContext, pyspark: PySparkResource) -> Iterator[Any]:
        df = pyspark.spark_session.range(10).selectExpr("id", "cast(id as double) AS amount")
        yield from audited_output(context, df)

    spark = PySparkResource(spark_config={"spark.master": "local[1]", "spark.ui.enabled": "false"})
    result = dg.materialize(
        [spark_orders], instance=dg.DagsterInstance.ephemeral(), resources={**resources(warehouse), "pyspark": spark}
    )
    table = mvcc.open_table(f"{warehouse}/spark_orders")
    assert STATE["spark_branch"] == wap_branch_name(result.run_id)
    assert table.version == 2 and sorted(table.to_table().column("id").to_pylist()) == list(range(10))
    assert check_results(result)["spark_rows"].passed


def test_branch_names_are_safe() -> None:
    assert wap_branch_name("0f1e2d3c-aaaa-bbbb-cccc-0123456789ab") == "dagster-wap-0f1e2d3c-aaaa-bbbb-cccc-0123456789ab"
    assert wap_branch_name("a/b c..d.") == "dagster-wap-a-b-c--d-"


@pytest.mark.slow  # loads the example deployment (≈0.5 s)
def test_the_examples_wap_asset_publishes_a_good_day_and_keeps_a_bad_one_off_main(
    example: ModuleType, warehouse: str
) -> None:
    instance = dg.DagsterInstance.ephemeral()
    day = "2026-11-02"
    good = dg.materialize([example.payments], instance=instance, resources=resources(warehouse), partition_key=day)
    table = mvcc.open_table(f"{warehouse}/payments")
    assert table.count_rows() == example.PAYMENTS_PER_DAY
    (evaluation,) = check_results(good).values()
    assert evaluation.passed and evaluation.metadata["non_positive_amounts"].value == 0
    bad = dg.materialize(
        [example.payments],
        instance=instance,
        resources=resources(warehouse),
        partition_key=day,
        run_config={"ops": {"payments": {"config": {"inject_bad_rows": True}}}},
        raise_on_error=False,
    )
    assert not bad.success
    assert table.checkout_latest().version == table.version
    (evaluation,) = check_results(bad).values()
    assert not evaluation.passed and evaluation.metadata["non_positive_amounts"].value == 2
    assert table.checkout_branch(wap_branch_name(bad.run_id)).count_rows("amount <= 0") == 2


@pytest.mark.slow  # two runs under the multiprocess executor (a process per step)
@pytest.mark.timeout(240)
def test_write_audit_publish_under_the_multiprocess_executor(
    instance: dg.DagsterInstance, warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import wap_defs

    here = Path(__file__).resolve().parent
    monkeypatch.setenv(wap_defs.WAREHOUSE_ENV, warehouse)
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(here), str(here.parents[2]), os.environ.get("PYTHONPATH", "")])
    )
    monkeypatch.chdir(here)
    uri = f"{warehouse}/audited"
    with dg.execute_job(dg.reconstructable(wap_defs.wap_job), instance=instance) as good:
        assert good.success
        assert [e for e in good.all_events if e.event_type == dg.DagsterEventType.STEP_WORKER_STARTING]
        kind = dg.DagsterEventType.ASSET_CHECK_EVALUATION
        (evaluation,) = [e.asset_check_evaluation_data for e in good.all_events if e.event_type == kind]
        assert evaluation.passed and evaluation.metadata["pid"].value != os.getpid()
        good_id = good.run_id
    table = mvcc.open_table(uri)
    assert table.version == 2 and table.to_table().column("v").to_pylist() == [1, 2, 3, 4, 5]
    mat = instance.get_latest_materialization_event(dg.AssetKey("audited")).asset_materialization
    assert mat.metadata["mvcc/version"].value == 2 and mat.metadata[BRANCH].value == wap_branch_name(good_id)
    assert mvcc.open_table(f"{warehouse}/audited_total").to_table().column("total").to_pylist() == [15]

    monkeypatch.setenv(wap_defs.BAD_ENV, "1")
    with dg.execute_job(dg.reconstructable(wap_defs.wap_job), instance=instance) as bad:
        assert not bad.success
        started = {e.step_key for e in bad.all_events if e.event_type == dg.DagsterEventType.STEP_START}
        assert started == {"audited"}  # the downstream step never started
        bad_id = bad.run_id
    table = mvcc.open_table(uri)
    assert table.version == 2 and table.to_table().column("v").to_pylist() == [1, 2, 3, 4, 5]
    assert table.checkout_branch(wap_branch_name(bad_id)).count_rows("v < 0") == 5
    assert mvcc.open_table(f"{warehouse}/audited_total").version == 1
