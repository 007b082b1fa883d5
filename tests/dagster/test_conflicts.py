"""The conflict mapping on real runs: retryable conflicts are retried (RetryRequested with backoff), an
incompatible conflict fails the step without a retry and names the versions, other mvcc errors are not
retried even under a RetryPolicy, and a multiprocess backfill of 8 days finishes with every row once."""

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_dagster import MvccIOManager, conflict_retry_policy, mvcc_conflicts
from mvcc_dagster.error_mapping import retry_wait, to_dagster

HERE = Path(__file__).resolve().parent
DAILY = dg.DailyPartitionsDefinition(start_date="2026-01-01", end_date="2026-01-05")
DAY = "2026-01-02"


def events_of(instance_result: dg.ExecuteInProcessResult, kind: dg.DagsterEventType) -> list[dg.DagsterEvent]:
    return [e for e in instance_result.all_events if e.event_type == kind]


def seed(warehouse: str) -> tuple[str, pa.Schema]:
    uri = f"{warehouse}/t"
    t = mvcc.write_table(pa.table({"day": ["2026-01-01", DAY], "n": [0, 0]}), uri)
    t.append(pa.table({"day": [DAY], "n": [1]}))
    return uri, t.schema


def test_incompatible_conflict_fails_without_retry(instance: dg.DagsterInstance, warehouse: str) -> None:
    """A restore lands between the IO manager's read and its commit (while the output is being written)."""
    uri, schema = seed(warehouse)
    days = dg.StaticPartitionsDefinition(["2026-01-01", DAY])

    @dg.asset(name="t", partitions_def=days, metadata={"partition_expr": "day"}, retry_policy=conflict_retry_policy())
    def t_asset() -> pa.RecordBatchReader:
        def batches():  # runs inside the write, after the table was opened at its read version
            mvcc.open_table(uri).restore(1)
            yield pa.record_batch({"day": [DAY], "n": [9]}, schema=schema)

        return pa.RecordBatchReader.from_batches(schema, batches())

    result = dg.materialize(
        [t_asset],
        instance=instance,
        resources={"io_manager": MvccIOManager(root_uri=warehouse)},
        partition_key=DAY,
        raise_on_error=False,
    )
    assert not result.success
    assert not events_of(result, dg.DagsterEventType.STEP_UP_FOR_RETRY)
    (failure,) = events_of(result, dg.DagsterEventType.STEP_FAILURE)
    data = failure.step_failure_data.user_failure_data
    meta = {k: v.value for k, v in data.metadata.items()}
    assert meta["table"] == uri
    assert meta["read_version"] == 2
    assert meta["conflicting_versions"] == [3]
    assert (meta["operation"], meta["conflicting_operation"]) == ("Update", "Restore")
    table = mvcc.open_table(uri)
    assert table.version == 3 and table.versions()[-1].operation == "Restore"
    assert sorted(table.to_table()["n"].to_pylist()) == [0, 0]


def test_retryable_conflict_is_retried(instance: dg.DagsterInstance, warehouse: str) -> None:
    """A concurrent append into the same partition during the first attempt: the step is retried and the
    partition ends up with exactly the asset's rows."""
    uri, schema = seed(warehouse)
    days = dg.StaticPartitionsDefinition(["2026-01-01", DAY])

    @dg.asset(name="t", partitions_def=days, metadata={"partition_expr": "day"})
    def t_asset(context: dg.AssetExecutionContext) -> pa.RecordBatchReader:
        first = context.retry_number == 0

        def batches():
            if first:
                mvcc.open_table(uri).append(pa.table({"day": [DAY], "n": [5]}))
            yield pa.record_batch({"day": [DAY, DAY], "n": [7, 8]}, schema=schema)

        return pa.RecordBatchReader.from_batches(schema, batches())

    io = MvccIOManager(root_uri=warehouse, conflict_retry_delay=0.05)
    result = dg.materialize([t_asset], instance=instance, resources={"io_manager": io}, partition_key=DAY)
    assert result.success
    assert len(events_of(result, dg.DagsterEventType.STEP_UP_FOR_RETRY)) == 1
    rows = sorted((r["day"], r["n"]) for r in mvcc.open_table(uri).to_table().to_pylist())
    assert rows == [("2026-01-01", 0), (DAY, 7), (DAY, 8)]


def test_mapping_in_a_users_asset_keeps_errors_that_would_fail_again_out_of_the_policy(
    instance: dg.DagsterInstance, warehouse: str
) -> None:
    attempts: list[int] = []

    @dg.asset(retry_policy=dg.RetryPolicy(max_retries=3))
    def cleanup(context: dg.AssetExecutionContext) -> None:
        attempts.append(context.retry_number)
        with mvcc_conflicts(context):
            mvcc.open_table(f"{warehouse}/missing").delete("x = 1")

    result = dg.materialize([cleanup], instance=instance, raise_on_error=False)
    assert not result.success and attempts == [0]
    (failure,) = events_of(result, dg.DagsterEventType.STEP_FAILURE)
    assert "TableNotFoundError" in failure.step_failure_data.user_failure_data.description

    # Without the mapping the same RetryPolicy retries it: the mapping is what keeps it out.
    attempts.clear()

    @dg.asset(retry_policy=dg.RetryPolicy(max_retries=1))
    def unmapped(context: dg.AssetExecutionContext) -> None:
        attempts.append(context.retry_number)
        mvcc.open_table(f"{warehouse}/missing")

    assert not dg.materialize([unmapped], instance=instance, raise_on_error=False).success
    assert attempts == [0, 1]


def test_mapping_by_type() -> None:
    retryable = mvcc.RetryableConflictError("x", uri="u", read_version=1, conflicting_versions=[2])
    mapped = to_dagster(retryable, attempt=2, max_retries=4, delay=1.0)
    assert isinstance(mapped, dg.RetryRequested) and mapped.max_retries == 4
    assert 6.0 <= mapped.seconds_to_wait <= 8.0  # (2^3 - 1) * 1 s, +/- 1 s
    incompatible = mvcc.IncompatibleConflictError(
        "x", uri="u", read_version=1, conflicting_versions=[2, 3], operation="Append", conflicting_operation="Restore"
    )
    failure = to_dagster(incompatible)
    assert isinstance(failure, dg.Failure) and failure.allow_retries is False
    assert failure.metadata["conflicting_versions"].value == [2, 3]
    for exc in (mvcc.SchemaError("s"), mvcc.TableNotFoundError("t"), ValueError("v")):
        mapped_other = to_dagster(exc)
        assert isinstance(mapped_other, dg.Failure) and mapped_other.allow_retries is False
    assert to_dagster(OSError("network")) is None  # not mvcc's to classify: a RetryPolicy decides
    waits = [retry_wait(a, 0.1) for a in range(6)]
    assert waits[-1] > waits[0] and all(w <= 60 for w in waits)
    policy = conflict_retry_policy()
    assert policy.backoff == dg.Backoff.EXPONENTIAL and policy.jitter == dg.Jitter.PLUS_MINUS


def test_branch_that_cannot_be_replayed_is_a_retry_on_a_fresh_branch() -> None:
    """A table's BranchNotReplayableError and a catalog's `branch_write_not_replayable` conflict are one refusal:
    both become a retryable conflict (a RetryRequested) that keeps the table and versions; other conflicts are
    not that refusal."""
    from mvcc_core.catalog import IncompatibleCatalogConflictError
    from mvcc_dagster.error_mapping import cannot_replay_branch, fresh_branch_retry

    table = mvcc.errors.BranchNotReplayableError("rows changed", uri="/t", read_version=3, conflicting_versions=[4])
    catalog = IncompatibleCatalogConflictError(
        "rows changed",
        object_name="s.a",
        expected_version=3,
        actual_version=5,
        rule="a write of the branch cannot run again on main's rows",
        rule_code="branch_write_not_replayable",
        uri="/cat",
        read_version=3,
        conflicting_versions=[5],
    )
    for exc in (table, catalog):
        assert cannot_replay_branch(exc)
        retry = fresh_branch_retry(exc)
        assert isinstance(retry, mvcc.RetryableConflictError) and str(retry).startswith("rows changed (")
        assert (retry.uri, retry.read_version, retry.conflicting_versions) == (
            exc.uri,
            3,
            exc.conflicting_versions,
        )
        assert isinstance(to_dagster(retry), dg.RetryRequested)
    other = mvcc.IncompatibleConflictError("x", uri="/t", read_version=1, conflicting_versions=[2])
    assert not cannot_replay_branch(other)


# 36 s on a quiet machine; 8 runs each starting step subprocesses took over 120 s at load ~15. The bound is
# for a hung run (a deadlock), not for speed: 300 s still fails one well before CI's own limit.
@pytest.mark.timeout(300)
@pytest.mark.slow
def test_multiprocess_backfill_of_eight_days(instance: dg.DagsterInstance, warehouse: str) -> None:
    """8 runs (one per day, as a backfill launches them), 4 at a time, each with the multiprocess executor:
    0 failed runs and every row exactly once."""
    import backfill_defs

    os.environ[backfill_defs.WAREHOUSE_ENV] = warehouse
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE), str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")])
    keys = backfill_defs.daily.get_partition_keys()
    assert len(keys) == 8
    try:
        with ProcessPoolExecutor(4, mp_context=multiprocessing.get_context("spawn")) as pool:
            outcomes = list(pool.map(backfill_defs.run_partition, [instance.get_ref()] * len(keys), keys))
    finally:
        del os.environ[backfill_defs.WAREHOUSE_ENV]
    assert [ok for _, ok in outcomes] == [True] * 8
    runs = instance.get_runs()
    assert len(runs) == 8 and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
    table = mvcc.open_table(f"{warehouse}/clicks").to_table()
    assert table.num_rows == 8 * backfill_defs.ROWS_PER_DAY
    assert len(set(table["ts"].to_pylist())) == table.num_rows
    assert sorted(set(table["day"].to_pylist())) == keys
    mats = instance.fetch_materializations(dg.AssetKey("clicks"), limit=100).records
    assert sorted(m.asset_materialization.partition for m in mats) == keys
    assert sys.modules.get("backfill_defs") is not None
