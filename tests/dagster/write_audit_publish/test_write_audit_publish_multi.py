"""Write-audit-publish on a `multi_asset`: each output is its own table, written to its own branch, audited by
its own branch checks and published on its own, in the order the body yields the outputs (real in-process
runs on an ephemeral instance)."""

from collections.abc import Iterator
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_dagster import BranchAudit, MvccIOManager, audited_output, branch_check
from mvcc_dagster.metadata import BRANCH, WRITE_AUDIT_PUBLISH
from mvcc_dagster.write_audit_publish import wap_branch_name

WAP = {WRITE_AUDIT_PUBLISH: True}
STATE: dict[str, Any] = {}


@branch_check("sales")
def sales_positive(audit: BranchAudit) -> bool:
    """Every sale is positive."""
    STATE.setdefault("audited", []).append(("sales", audit.table.branch))
    return audit.table.count_rows("amount <= 0") == 0


@branch_check("refunds")
def refunds_negative(audit: BranchAudit) -> bool:
    """Every refund is negative."""
    STATE.setdefault("audited", []).append(("refunds", audit.table.branch))
    return audit.table.count_rows("amount >= 0") == 0


@dg.multi_asset(
    outs={name: dg.AssetOut(metadata=WAP, is_required=False) for name in ("sales", "refunds")},
    check_specs=[sales_positive.spec, refunds_negative.spec],
    can_subset=True,
)
def ledger(context: dg.AssetExecutionContext) -> Iterator[Any]:
    yield from audited_output(context, pa.table({"amount": STATE["sales"]}), output_name="sales")
    yield from audited_output(context, pa.table({"amount": STATE["refunds"]}), output_name="refunds")


@dg.asset(deps=["sales", "refunds"])
def after_ledger() -> None:
    STATE["downstream_ran"] = True


def run(warehouse: str, selection: list[Any] | None = None) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [ledger, after_ledger],
        selection=selection,
        resources={"io_manager": MvccIOManager(root_uri=warehouse)},
        instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
    )


def materializations(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetMaterialization]:
    return {m.asset_key.to_user_string(): m for m in result.asset_materializations_for_node("ledger")}


@pytest.fixture(autouse=True)
def _clean_state() -> None:
    STATE.clear()


def test_each_output_is_audited_on_its_own_branch_and_published(warehouse: str) -> None:
    STATE.update(sales=[5, 7], refunds=[-2])
    result = run(warehouse)
    assert result.success
    name = wap_branch_name(result.run_id)
    assert STATE["audited"] == [("sales", name), ("refunds", name)]  # each on its table's branch, in order
    mats = materializations(result)
    for asset, rows in (("sales", [5, 7]), ("refunds", [-2])):
        table = mvcc.open_table(f"{warehouse}/{asset}")
        assert table.to_table().column("amount").to_pylist() == rows
        assert mats[asset].metadata["mvcc/version"].value == table.version  # main's version
        assert mats[asset].metadata[BRANCH].value == name
        assert not table.branches.list()  # published and deleted
    evaluations = [
        e.asset_check_evaluation_data
        for e in result.all_events
        if e.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION
    ]
    assert {(e.asset_key.to_user_string(), e.passed) for e in evaluations} == {("sales", True), ("refunds", True)}
    assert STATE["downstream_ran"]


@pytest.mark.slow  # two runs (≈0.6-1 s on the shared machine)
def test_a_failed_output_stays_off_main_while_the_one_yielded_before_it_is_published(warehouse: str) -> None:
    STATE.update(sales=[1], refunds=[-1])
    assert run(warehouse).success
    refunds_before = mvcc.open_table(f"{warehouse}/refunds").version
    STATE.clear()
    STATE.update(sales=[3], refunds=[4])  # a positive refund: its blocking check fails
    result = run(warehouse)
    assert not result.success
    assert "downstream_ran" not in STATE
    assert mvcc.open_table(f"{warehouse}/sales").to_table().column("amount").to_pylist() == [3]
    refunds = mvcc.open_table(f"{warehouse}/refunds")
    assert refunds.version == refunds_before and refunds.to_table().column("amount").to_pylist() == [-1]
    name = wap_branch_name(result.run_id)
    assert list(refunds.branches.list()) == [name]  # kept for inspection
    assert refunds.checkout_branch(name).to_table().column("amount").to_pylist() == [4]
    assert set(materializations(result)) == {"sales"}
    (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert "refunds_negative" in failure.step_failure_data.user_failure_data.description


def test_a_subset_run_writes_only_the_selected_output(warehouse: str) -> None:
    STATE.update(sales=[9], refunds=[-9])
    result = run(warehouse, selection=["refunds"])
    assert result.success
    assert STATE["audited"] == [("refunds", wap_branch_name(result.run_id))]
    assert set(materializations(result)) == {"refunds"}
    with pytest.raises(mvcc.TableNotFoundError):
        mvcc.open_table(f"{warehouse}/sales")


def test_a_multi_asset_output_yielded_without_its_name_is_refused(warehouse: str) -> None:
    @dg.multi_asset(outs={"a": dg.AssetOut(metadata=WAP), "b": dg.AssetOut(metadata=WAP)})
    def pair(context: dg.AssetExecutionContext) -> Iterator[Any]:
        yield from audited_output(context, pa.table({"x": [1]}))

    result = dg.materialize([pair], resources={"io_manager": MvccIOManager(root_uri=warehouse)}, raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    text = failure.step_failure_data.user_failure_data.description
    assert "output_name" in text and "['a', 'b']" in text
    with pytest.raises(mvcc.TableNotFoundError):
        mvcc.open_table(f"{warehouse}/a")
