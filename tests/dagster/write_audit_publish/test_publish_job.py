"""Write-audit-publish for a table written outside Dagster (`MvccTableComponent`'s ``write_audit_publish``,
`build_publish_branch_job`): the writer commits to a branch; the job audits it and publishes it to main in one
commit, or fails leaving main untouched and the branch kept. Real in-process runs on a sqlite instance."""

import dagster as dg
import pyarrow as pa
import pydantic
import pytest

import mvcc_core as mvcc
from mvcc_dagster import MvccTableComponent
from mvcc_dagster.metadata import BRANCH, BRANCH_VERSION

AUDITS = [
    {"name": "amounts_positive", "filter": "amount <= 0"},
    {"name": "no_huge_amounts", "filter": "amount > 100", "blocking": False},
]


def publish_job(warehouse: str, **attributes: object) -> dg.JobDefinition:
    comp = MvccTableComponent.from_attributes_dict(
        attributes={"key": "sales/orders", "root_uri": warehouse, **attributes}
    )
    defs = dg.build_defs_for_component(comp)
    return defs.resolve_job_def("mvcc_publish_branch__sales__orders"), defs.resources


def publish(job: dg.JobDefinition, resources: dict, instance: dg.DagsterInstance, branch: str):
    return job.execute_in_process(
        instance=instance,
        resources=resources,
        run_config={"ops": {"publish_branch": {"config": {"branch": branch}}}},
        raise_on_error=False,
    )


def evaluations_of(instance: dg.DagsterInstance, run_id: str) -> dict[str, dg.AssetCheckEvaluation]:
    """The check evaluations the run recorded (the instance's event log)."""
    records = instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    return {
        r.dagster_event.asset_check_evaluation_data.check_name: r.dagster_event.asset_check_evaluation_data
        for r in records
    }


def amounts(table: mvcc.Table) -> list[int]:
    return sorted(table.to_table().column("amount").to_pylist())


@pytest.mark.slow  # three runs on a sqlite instance (≈1-2 s)
def test_the_components_publish_job_audits_the_outside_writers_branch(
    instance: dg.DagsterInstance, warehouse: str
) -> None:
    job, resources = publish_job(warehouse, write_audit_publish={"audits": AUDITS})
    uri = f"{warehouse}/sales/orders"
    main = mvcc.write_table(pa.table({"amount": [10]}), uri)
    before = main.version

    main.create_branch("bad").append(pa.table({"amount": [-5]}))  # the outside writer, on a branch
    result = publish(job, resources, instance, "bad")
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
    assert "amounts_positive" in failure.step_failure_data.user_failure_data.description
    assert not [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    evaluations = evaluations_of(instance, result.run_id)
    assert not evaluations["amounts_positive"].passed and evaluations["no_huge_amounts"].passed
    assert evaluations["amounts_positive"].metadata["matching_rows"].value == 1
    main = mvcc.open_table(uri)
    assert main.version == before and amounts(main) == [10]
    assert "bad" in main.branches.list() and amounts(main.checkout_branch("bad")) == [-5, 10]
    assert not result.asset_materializations_for_node("publish_branch")

    good = main.create_branch("good")
    good.append(pa.table({"amount": [7, 500]}))  # a non-blocking audit fails: published anyway
    result = publish(job, resources, instance, "good")
    assert result.success
    main = mvcc.open_table(uri)
    assert main.version == before + 1 and amounts(main) == [7, 10, 500]
    assert "good" not in main.branches.list() and "bad" in main.branches.list()
    (mat,) = result.asset_materializations_for_node("publish_branch")
    assert mat.asset_key == dg.AssetKey(["sales", "orders"])
    assert mat.metadata["mvcc/version"].value == main.version
    assert mat.metadata[BRANCH].value == "good" and mat.metadata[BRANCH_VERSION].value == good.version
    evaluations = evaluations_of(instance, result.run_id)
    assert evaluations["amounts_positive"].passed and not evaluations["no_huge_amounts"].passed

    result = publish(job, resources, instance, "nosuch")
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
    assert "no branch 'nosuch'" in failure.step_failure_data.user_failure_data.description
    assert mvcc.open_table(uri).version == before + 1


def test_bad_write_audit_publish_settings_are_named(warehouse: str) -> None:
    with pytest.raises(pydantic.ValidationError, match="audits"):
        publish_job(warehouse, write_audit_publish={"audits": []})
    with pytest.raises(pydantic.ValidationError, match="max_rows"):
        publish_job(warehouse, write_audit_publish={"audits": [{"name": "a", "filter": "x > 1", "max_rows": -1}]})
    twice = [{"name": "a", "filter": "x > 1"}, {"name": "a", "filter": "x < 0"}]
    with pytest.raises(ValueError, match="audit names must be distinct"):
        publish_job(warehouse, write_audit_publish={"audits": twice})
    comp = MvccTableComponent.from_attributes_dict(attributes={"key": "sales/orders", "root_uri": warehouse})
    assert "mvcc_publish_branch__sales__orders" not in {j.name for j in dg.build_defs_for_component(comp).jobs}
