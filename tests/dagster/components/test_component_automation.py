"""`MvccTableComponent`'s automation and policy attributes on a real table and instance: the asset's freshness
policy, the checks' automation condition, the compaction job's scope and partial progress as defaults of its
run config, the retention job following the table's retention policy; bad combinations named."""

from datetime import timedelta

import dagster as dg
import pyarrow as pa
import pydantic
import pytest

import mvcc_core as mvcc
from mvcc_dagster import MvccTableComponent
from mvcc_dagster.health import health_automation_condition


def component(warehouse: str, **attributes: object) -> MvccTableComponent:
    return MvccTableComponent.from_attributes_dict(
        attributes={"key": "sales/orders", "root_uri": warehouse, **attributes}
    )


def test_freshness_automation_scope_and_policy(instance: dg.DagsterInstance, warehouse: str) -> None:
    comp = component(
        warehouse,
        freshness={"fail_after_hours": 24, "warn_after_hours": 12},
        health={"automation_condition": {"cron": "0 * * * *"}},
        maintenance={"where": "day = 'a'", "sort_by": ["n"], "partial_progress": True},
    )
    defs = dg.build_defs_for_component(comp)
    (spec,) = [s for a in defs.assets or [] for s in getattr(a, "specs", [a])]
    assert spec.freshness_policy == dg.FreshnessPolicy.time_window(
        fail_window=timedelta(hours=24), warn_window=timedelta(hours=12)
    )
    conditions = {s.automation_condition for c in defs.asset_checks or [] for s in c.check_specs}
    assert conditions == {health_automation_condition(on_update=True, cron="0 * * * *")}

    uri = f"{warehouse}/sales/orders"
    t = mvcc.write_table(pa.table({"n": [3, 2, 1], "day": ["a"] * 3}), uri)
    t.append(pa.table({"n": [6, 5, 4], "day": ["a"] * 3}))
    t.append(pa.table({"n": [9, 8, 7], "day": ["b"] * 3}))
    compaction = defs.resolve_job_def("mvcc_compaction__sales__orders")
    result = compaction.execute_in_process(instance=instance, resources=defs.resources)
    assert result.success
    observed = [
        e.event_specific_data.asset_observation.metadata  # type: ignore[union-attr]
        for e in result.all_events
        if e.event_type_value == "ASSET_OBSERVATION"
    ]
    assert observed[0]["where"].value == "day = 'a'" and observed[0]["layout"].value == "sort by n"
    assert observed[-1]["partial_progress"].value is True and observed[-1]["groups_committed"].value == 1
    after = mvcc.open_table(uri)
    assert len(after.get_fragments()) == 2  # day a's two fragments became one; day b's stays
    assert [r["n"] for r in after.to_table().to_pylist() if r["day"] == "a"] == [1, 2, 3, 4, 5, 6]

    retention = defs.resolve_job_def("mvcc_retention__sales__orders")
    assert "mvcc/older_than_seconds" not in retention.tags  # no window of its own: the table's policy
    after.update_config({"mvcc.retention.older_than": "0s"})
    result = retention.execute_in_process(instance=instance, resources=defs.resources)
    assert result.success and result.output_for_node("cleanup_old_versions") == [1, 2, 3, 4, 5]


@pytest.mark.parametrize(
    ("freshness", "message"),
    [
        ({"fail_after_hours": 24, "deadline_cron": "0 9 * * *"}, "exactly one"),
        ({"deadline_cron": "0 9 * * *"}, "needs lower_bound_hours"),
        ({"warn_after_hours": 2, "deadline_cron": "0 9 * * *", "lower_bound_hours": 1}, "warn_after_hours goes"),
    ],
)
def test_bad_freshness_is_named(warehouse: str, freshness: dict[str, object], message: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=message):
        component(warehouse, freshness=freshness)


def test_cron_freshness_and_bad_scope(warehouse: str) -> None:
    comp = component(warehouse, freshness={"deadline_cron": "0 9 * * *", "lower_bound_hours": 2})
    (spec,) = [s for a in dg.build_defs_for_component(comp).assets or [] for s in getattr(a, "specs", [a])]
    assert spec.freshness_policy == dg.FreshnessPolicy.cron(
        deadline_cron="0 9 * * *", lower_bound_delta=timedelta(hours=2)
    )
    with pytest.raises(ValueError, match="compaction job of sales/orders: .*sort_by or zorder_by"):
        dg.build_defs_for_component(component(warehouse, maintenance={"sort_by": ["n"], "zorder_by": ["n", "day"]}))
