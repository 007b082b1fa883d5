"""A separate blocking ``@dg.asset_check`` on a write-audit-publish asset runs after the step, so after the
publish: it is refused before anything is written. A non-blocking one, and any check of a plain asset, run."""

from collections.abc import Iterator
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_dagster import BranchAudit, MvccIOManager, audited_output, branch_check
from mvcc_dagster.metadata import WRITE_AUDIT_PUBLISH
from mvcc_dagster.write_audit_publish import check_write_audit_publish

WAP = {WRITE_AUDIT_PUBLISH: True}
ROWS: dict[str, list[int]] = {}


def resources(root: str) -> dict[str, Any]:
    return {"io_manager": MvccIOManager(root_uri=root)}


@branch_check("gated")
def gated_positive(audit: BranchAudit) -> bool:
    """No negative value on the branch."""
    return audit.table.count_rows("v < 0") == 0


@dg.asset(metadata=WAP, check_specs=[gated_positive.spec])
def gated(context: dg.AssetExecutionContext) -> Iterator[Any]:
    yield from audited_output(context, pa.table({"v": ROWS["gated"]}))


@dg.asset_check(asset=gated, blocking=True)
def gated_after(gated: pa.Table) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=min(gated.column("v").to_pylist()) >= 0)


@dg.asset_check(asset=gated, blocking=False)
def gated_watch(gated: pa.Table) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=True, metadata={"rows": gated.num_rows})


@dg.asset(metadata=WAP)
def bare(context: dg.AssetExecutionContext) -> pa.Table:
    return pa.table({"v": ROWS["bare"]})


@dg.asset_check(asset=bare, blocking=True)
def bare_positive(bare: pa.Table) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=min(bare.column("v").to_pylist()) >= 0)


@dg.asset
def plain(context: dg.AssetExecutionContext) -> pa.Table:
    return pa.table({"v": ROWS["plain"]})


@dg.asset_check(asset=plain, blocking=True)
def plain_positive(plain: pa.Table) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=min(plain.column("v").to_pylist()) >= 0)


@dg.asset(deps=[plain])
def after_plain() -> None:
    ROWS["after_plain_ran"] = [1]


@pytest.fixture(autouse=True)
def _clean() -> None:
    ROWS.clear()


def failure_text(result: dg.ExecuteInProcessResult) -> str:
    (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    return failure.step_failure_data.user_failure_data.description


def test_a_separate_blocking_check_on_a_new_wap_table_is_refused_and_nothing_is_written(warehouse: str) -> None:
    ROWS["bare"] = [-1, 2]
    result = dg.materialize(
        [bare, bare_positive],
        instance=dg.DagsterInstance.ephemeral(),
        resources=resources(warehouse),
        raise_on_error=False,
    )
    assert not result.success
    text = failure_text(result)
    assert "'bare_positive'" in text and "branch_check" in text and "Nothing was written" in text
    with pytest.raises(mvcc.TableNotFoundError):
        mvcc.open_table(f"{warehouse}/bare")


def test_a_separate_blocking_check_beside_a_branch_check_is_refused_and_main_is_unchanged(warehouse: str) -> None:
    instance = dg.DagsterInstance.ephemeral()
    ROWS["gated"] = [1, 2]
    assert dg.materialize([gated], instance=instance, resources=resources(warehouse)).success
    before = mvcc.open_table(f"{warehouse}/gated").version

    ROWS["gated"] = [-5, 3]
    result = dg.materialize(
        [gated, gated_after], instance=instance, resources=resources(warehouse), raise_on_error=False
    )
    assert not result.success
    assert "'gated_after'" in failure_text(result)
    table = mvcc.open_table(f"{warehouse}/gated")
    assert table.version == before and table.branches.list() == {}
    assert sorted(table.to_table().column("v").to_pylist()) == [1, 2]


def test_a_branch_check_still_gates_with_a_separate_non_blocking_check(warehouse: str) -> None:
    instance = dg.DagsterInstance.ephemeral()
    ROWS["gated"] = [1, 2]
    good = dg.materialize([gated, gated_watch], instance=instance, resources=resources(warehouse))
    assert good.success
    watched = [
        e.asset_check_evaluation_data
        for e in good.all_events
        if e.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION
    ]
    assert {w.check_name for w in watched} == {"gated_positive", "gated_watch"}
    before = mvcc.open_table(f"{warehouse}/gated").version

    ROWS["gated"] = [-1]
    bad = dg.materialize([gated, gated_watch], instance=instance, resources=resources(warehouse), raise_on_error=False)
    assert not bad.success and "gated_positive" in failure_text(bad)
    assert mvcc.open_table(f"{warehouse}/gated").version == before


def test_a_plain_asset_with_a_separate_blocking_check_still_gates_downstream(warehouse: str) -> None:
    instance = dg.DagsterInstance.ephemeral()
    ROWS["plain"] = [1, 2]
    assert dg.materialize(
        [plain, plain_positive, after_plain], instance=instance, resources=resources(warehouse)
    ).success
    assert ROWS.pop("after_plain_ran") == [1]
    ROWS["plain"] = [-1]
    bad = dg.materialize(
        [plain, plain_positive, after_plain], instance=instance, resources=resources(warehouse), raise_on_error=False
    )
    assert not bad.success and "after_plain_ran" not in ROWS
    assert mvcc.open_table(f"{warehouse}/plain").count_rows() == 1


def test_check_write_audit_publish_refuses_a_separate_blocking_check_at_load() -> None:
    with pytest.raises(dg.DagsterInvalidDefinitionError, match="'gated_after' on asset gated.*branch_check"):
        check_write_audit_publish(dg.Definitions(assets=[gated], asset_checks=[gated_after]))
    fine = dg.Definitions(assets=[gated, plain], asset_checks=[gated_watch, plain_positive])
    assert check_write_audit_publish(fine) is fine
