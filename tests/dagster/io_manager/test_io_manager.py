"""MvccIOManager on real runs: materializations are table versions, write modes, the data-changing rule,
transaction properties, and bad settings that fail before anything is written."""

from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_dagster import MvccIOManager, MvccResource, data_version
from mvcc_dagster.versions import is_data_changing

STANDARD_KEYS = {
    "dagster/row_count",
    "dagster/column_schema",
    "dagster/table_name",
    "dagster/uri",
    "dagster/size_bytes",
}
MVCC_KEYS = {"mvcc/version", "mvcc/read_version", "mvcc/operation", "mvcc/fragments", "mvcc/deleted_rows"}


def resources(root: str) -> dict[str, Any]:
    return {"io_manager": MvccIOManager(root_uri=root), "mvcc": MvccResource(root_uri=root)}


def latest(instance: dg.DagsterInstance, key: str) -> dg.AssetMaterialization:
    event = instance.get_latest_materialization_event(dg.AssetKey.from_user_string(key))
    assert event is not None and event.asset_materialization is not None
    return event.asset_materialization


def test_materialization_is_the_table_version(instance: dg.DagsterInstance, warehouse: str) -> None:
    @dg.asset(key_prefix=["sales"])
    def orders() -> pa.Table:
        return pa.table({"id": [1, 2, 3], "amount": [1.5, 2.5, 3.5]})

    for run in range(2):
        result = dg.materialize([orders], instance=instance, resources=resources(warehouse))
        table = MvccResource(root_uri=warehouse).open("sales/orders")
        assert table.uri == f"{warehouse}/sales/orders"
        mat = latest(instance, "sales/orders")
        assert set(mat.metadata) >= STANDARD_KEYS | MVCC_KEYS
        assert mat.metadata["mvcc/version"].value == table.version == run + 1
        assert mat.metadata["mvcc/read_version"].value == run
        assert mat.metadata["mvcc/operation"].value == "Overwrite"
        assert mat.metadata["dagster/row_count"].value == 3 == table.count_rows()
        assert mat.metadata["dagster/table_name"].value == "sales/orders"
        assert mat.metadata["mvcc/fragments"].value == len(table.get_fragments())
        assert mat.metadata["dagster/size_bytes"].value > 0
        columns = [c.name for c in mat.metadata["dagster/column_schema"].value.columns]
        assert columns == ["id", "amount"]
        assert mat.tags["dagster/data_version"] == str(table.version)
        props = table.versions()[-1].transaction_properties
        assert props == {"dagster/run_id": result.run_id, "dagster/asset_key": "sales/orders"}


def test_write_modes_and_input_types(instance: dg.DagsterInstance, warehouse: str) -> None:
    """append takes a pandas DataFrame, merge a RecordBatchReader (upsert on the key)."""

    @dg.asset(metadata={"mvcc/write_mode": "append"})
    def log() -> pd.DataFrame:
        return pd.DataFrame({"id": [1, 2], "v": ["a", "b"]})

    @dg.asset(metadata={"mvcc/write_mode": "merge", "mvcc/merge_on": ["id"]})
    def dim(context: dg.AssetExecutionContext) -> pa.RecordBatchReader:
        value = "old" if context.run.tags.get("round") == "1" else "new"
        data = pa.table({"id": [1, 2] if value == "old" else [2, 3], "v": [value, value]})
        return pa.RecordBatchReader.from_batches(data.schema, data.to_batches())

    for round_ in ("1", "2"):
        dg.materialize([log, dim], instance=instance, resources=resources(warehouse), tags={"round": round_})
    assert sorted(mvcc.open_table(f"{warehouse}/log").to_table()["id"].to_pylist()) == [1, 1, 2, 2]
    rows = sorted(mvcc.open_table(f"{warehouse}/dim").to_table().to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 1, "v": "old"}, {"id": 2, "v": "new"}, {"id": 3, "v": "new"}]
    assert latest(instance, "log").metadata["mvcc/operation"].value == "Append"
    assert latest(instance, "dim").metadata["mvcc/operation"].value == "Update"


def test_data_version_ignores_maintenance_and_follows_restore(instance: dg.DagsterInstance, warehouse: str) -> None:
    """Compaction and config changes keep the data version; a restore changes it."""

    @dg.asset(metadata={"mvcc/write_mode": "append"})
    def facts() -> pa.Table:
        return pa.table({"id": [1, 2]})

    for _ in range(3):
        dg.materialize([facts], instance=instance, resources=resources(warehouse))
    table = mvcc.open_table(f"{warehouse}/facts")
    assert data_version(table) == 3
    table.optimize.compact_files()
    table.update_config({"owner": "dagster"})
    assert [v.operation for v in table.versions()][-2:] == ["Rewrite", "UpdateConfig"]
    assert data_version(mvcc.open_table(table.uri)) == 3
    table.restore(2)
    restored = mvcc.open_table(table.uri).version
    assert restored > 5 and data_version(mvcc.open_table(table.uri)) == restored
    dg.materialize([facts], instance=instance, resources=resources(warehouse))
    mat = latest(instance, "facts")
    assert mat.metadata["mvcc/version"].value == restored + 1
    assert mat.tags["dagster/data_version"] == str(restored + 1)
    assert not is_data_changing("Rewrite") and is_data_changing("Restore") and is_data_changing("Project")
    assert is_data_changing("SomeFutureOperation")


def _fails_with(asset_def: dg.AssetsDefinition, root: str, instance: dg.DagsterInstance, *needles: str) -> None:
    result = dg.materialize([asset_def], instance=instance, resources=resources(root), raise_on_error=False)
    assert not result.success
    failures = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert len(failures) == 1
    message = failures[0].step_failure_data.user_failure_data.description
    for needle in needles:
        assert needle in message, message
    # No retry was attempted, even with a RetryPolicy on the asset.
    assert not [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]


RETRY = dg.RetryPolicy(max_retries=3)


def test_bad_input_fails_before_writing(instance: dg.DagsterInstance, warehouse: str, tmp_path: Path) -> None:
    @dg.asset(retry_policy=RETRY)
    def not_a_table() -> dict:
        return {"id": [1]}

    @dg.asset(retry_policy=RETRY, metadata={"mvcc/write_mode": "upsert"})
    def misspelled() -> pa.Table:
        return pa.table({"id": [1]})

    @dg.asset(retry_policy=RETRY, metadata={"mvcc/write_mode": "merge"})
    def merge_without_key() -> pa.Table:
        return pa.table({"id": [1]})

    @dg.asset(retry_policy=RETRY, metadata={"mvcc/write_mode": "merge", "mvcc/merge_on": "key"})
    def merge_missing_key() -> pa.Table:
        return pa.table({"id": [1]})

    @dg.asset(
        retry_policy=RETRY,
        partitions_def=dg.StaticPartitionsDefinition(["a"]),
        metadata={"partition_expr": "region"},
    )
    def missing_column() -> pa.Table:
        return pa.table({"id": [1]})

    _fails_with(not_a_table, warehouse, instance, "not_a_table", "output type", "dict")
    _fails_with(misspelled, warehouse, instance, "misspelled", "mvcc/write_mode", "upsert")
    _fails_with(merge_without_key, warehouse, instance, "merge_without_key", "mvcc/merge_on")
    _fails_with(merge_missing_key, warehouse, instance, "merge_missing_key", "mvcc/merge_on", "key")
    result = dg.materialize(
        [missing_column], instance=instance, resources=resources(warehouse), partition_key="a", raise_on_error=False
    )
    assert not result.success
    assert list(Path(warehouse).iterdir()) == []  # nothing written, not even an empty table

    unreachable = tmp_path / "a-file"
    unreachable.write_text("not a directory")

    @dg.asset(retry_policy=RETRY)
    def nowhere() -> pa.Table:
        return pa.table({"id": [1]})

    _fails_with(nowhere, str(unreachable), instance, "nowhere", "root_uri", str(unreachable))
    assert unreachable.read_text() == "not a directory"


def test_resource_resolves_keys_and_uris(warehouse: str) -> None:
    res = MvccResource(root_uri=warehouse + "/")
    assert res.uri("a/b") == res.uri(dg.AssetKey(["a", "b"])) == f"{warehouse}/a/b"
    assert res.uri("s3://bucket/t") == "s3://bucket/t"
    assert res.uri("/abs/t") == "/abs/t"
    with pytest.raises(mvcc.TableNotFoundError):
        res.open("missing")
    mvcc.write_table(pa.table({"x": [1]}), res.uri("a/b"))
    mvcc.open_table(res.uri("a/b")).append(pa.table({"x": [2]}))
    assert res.open(dg.AssetKey(["a", "b"]), version=1).count_rows() == 1


def test_an_op_output_fails_naming_the_op(instance: dg.DagsterInstance, warehouse: str) -> None:
    """A plain op (no asset) returning a value under MvccIOManager fails naming the op's output and what to do,
    not with Dagster's "Attempting to access asset_key"; nothing is written."""

    @dg.op
    def count_rows() -> int:
        return 3

    @dg.job(resource_defs=resources(warehouse))
    def plain_job() -> None:
        count_rows()

    result = plain_job.execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    message = failure.step_failure_data.user_failure_data.description
    assert "count_rows.result" in message and "asset outputs" in message
    assert list(Path(warehouse).iterdir()) == []
