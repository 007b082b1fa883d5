"""Asset keys that would name a table outside its root (or inside another table) are refused: by the resource,
by the IO manager before anything is written, and by the factories and the component when the definitions
load. Good keys (``["sales", "orders"]``, ``"sales/orders"``) still name ``{root}/sales/orders``."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_dagster import (
    MvccIOManager,
    MvccResource,
    MvccTableComponent,
    build_compaction_job,
    build_retention_job,
    build_table_health_checks,
)
from mvcc_dagster.resources import check_table_key

# (key parts, what the refusal says about them)
HOSTILE_KEYS = [
    pytest.param(["..", "x"], "'..'", id="dotdot"),
    pytest.param(["a", "..", "..", "x"], "'..'", id="dotdot-inside"),
    pytest.param([".", "x"], "'.'", id="dot"),
    pytest.param(["a", "", "x"], "non-empty", id="empty-part"),
    pytest.param(["a/b", "x"], "'a/b'", id="slash-in-part"),
    pytest.param(["a\\b", "x"], "'a\\\\b'", id="backslash"),
    pytest.param(["a\x01b", "x"], "'a\\x01b'", id="control-character"),
    pytest.param(["x\n"], "'x\\n'", id="trailing-newline"),
    pytest.param(["\uff41", "x"], "'\uff41'", id="fullwidth-look-alike"),
    pytest.param(["\u0430", "x"], "'\u0430'", id="cyrillic-look-alike"),
    pytest.param(["sales", "_versions"], "'_versions'", id="internal-folder"),
    pytest.param(["sales", "data"], "'data'", id="data-folder"),
    pytest.param(["_versions"], "'_versions'", id="internal-first"),
]


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def hostile_asset(parts: list[str]) -> dg.AssetsDefinition:
    # a multi_asset with its own op name: Dagster checks an @asset's last key part as its op name, not the others
    @dg.multi_asset(outs={"result": dg.AssetOut(key=dg.AssetKey(parts))}, name="hostile", retry_policy=RETRY)
    def hostile() -> pa.Table:
        return pa.table({"id": [1, 2]})

    return hostile


RETRY = dg.RetryPolicy(max_retries=2)


@pytest.mark.parametrize(("parts", "shown"), HOSTILE_KEYS)
def test_a_hostile_asset_key_fails_the_step_before_anything_is_written(
    instance: dg.DagsterInstance, tmp_path: Path, parts: list[str], shown: str
) -> None:
    root = tmp_path / "nested" / "warehouse"
    root.mkdir(parents=True)
    before = tree(tmp_path)
    resources = {"io_manager": MvccIOManager(root_uri=str(root)), "mvcc": MvccResource(root_uri=str(root))}
    result = dg.materialize([hostile_asset(parts)], instance=instance, resources=resources, raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    message = failure.step_failure_data.user_failure_data.description
    key = dg.AssetKey(parts).to_user_string()
    assert f"asset {key}: asset key: " in message, message
    assert shown in message, message
    assert "cannot name a table under the root" in message
    assert not [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    assert tree(tmp_path) == before  # no table, no directory, inside the root or outside it
    assert instance.get_latest_materialization_event(dg.AssetKey(parts)) is None


@pytest.mark.parametrize(("parts", "shown"), HOSTILE_KEYS)
def test_the_resource_and_the_factories_refuse_a_hostile_key(tmp_path: Path, parts: list[str], shown: str) -> None:
    resource = MvccResource(root_uri=str(tmp_path / "warehouse"))
    for name in (parts, dg.AssetKey(parts)):
        with pytest.raises(mvcc.errors.InvalidNameError, match="cannot name a table under the root") as caught:
            resource.uri(name)
        assert shown in str(caught.value)
    with pytest.raises(mvcc.errors.InvalidNameError):
        resource.open(parts)
    # at definition load: the maintenance jobs and health checks of the key
    for factory in (build_retention_job, build_compaction_job):
        with pytest.raises(ValueError, match="cannot name a table under the root"):
            factory(parts)
    with pytest.raises(ValueError, match="cannot name a table under the root"):
        build_table_health_checks([parts])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "name",
    ["a/../../b", "../outside", "sales//orders", "sales/orders/", "./x", "sales/_refs", "sales/tree", "sales\\x"],
)
def test_a_hostile_key_string(tmp_path: Path, name: str) -> None:
    resource = MvccResource(root_uri=str(tmp_path / "warehouse"))
    with pytest.raises(mvcc.errors.InvalidNameError, match=f"asset key {name!r}".replace("\\", "\\\\")):
        resource.uri(name)
    with pytest.raises(ValueError, match="key: asset key"):
        MvccTableComponent(key=name)


def test_good_keys_still_name_tables_under_the_root(instance: dg.DagsterInstance, warehouse: str) -> None:
    resource = MvccResource(root_uri=warehouse)
    assert resource.uri(["sales", "orders"]) == f"{warehouse}/sales/orders"
    assert resource.uri("sales/orders") == f"{warehouse}/sales/orders"
    assert resource.uri(dg.AssetKey(["v1.2", "raw-events", "day_2026"])) == f"{warehouse}/v1.2/raw-events/day_2026"
    assert resource.uri("data") == f"{warehouse}/data"  # a first segment may be called data: it is no table's folder
    assert check_table_key(["sales", "orders"]) == dg.AssetKey(["sales", "orders"])
    # a full uri is not a key: it names the table itself
    assert resource.uri(os.path.join(warehouse, "elsewhere")) == os.path.join(warehouse, "elsewhere")
    MvccTableComponent(key="sales/orders")
    MvccTableComponent(key="../x", uri=os.path.join(warehouse, "x"))  # the key is not the path: allowed

    @dg.asset(key_prefix=["sales"])
    def orders() -> pa.Table:
        return pa.table({"id": [1, 2, 3]})

    resources = {"io_manager": MvccIOManager(root_uri=warehouse), "mvcc": MvccResource(root_uri=warehouse)}
    assert dg.materialize([orders], instance=instance, resources=resources).success
    assert resource.open("sales/orders").count_rows() == 3
