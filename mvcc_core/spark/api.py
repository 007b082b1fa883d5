"""`write(df, uri, ...)`: a Spark write committed in the calling process, returning the committed `Table`.

The data source path (`df.write.format("mvcc")`) returns nothing and turns every error into Spark's
`AnalysisException` text. This path runs the same protocol (`writes.WritePlan`) with the executors'
part as `df.mapInArrow` (Spark Connect safe) and the commit here, so the caller gets the new version and
the core's own exception types (`RetryableConflictError`, `IncompatibleConflictError`, `SchemaError`,
`PredicateError`).
"""

from __future__ import annotations

import logging
import pickle
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark import cloudpickle

import mvcc_core
from mvcc_core.spark import native as native_mod
from mvcc_core.spark.executor import is_connect
from mvcc_core.spark.writes import ABORT_SETTLE_SECONDS, WritePlan, plan_write
from mvcc_core.txn.transaction import check_properties

log = logging.getLogger("mvcc.spark")

_RESULT_SCHEMA = "fragment binary, error binary"


def _task(plan: WritePlan):  # noqa: ANN202 - a closure for mapInArrow
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        try:
            fragments = plan.write_batches(batches)
        except Exception as exc:  # noqa: BLE001 - carried to the driver with its type
            try:
                error = cloudpickle.dumps(exc)
            except Exception:  # noqa: BLE001
                error = cloudpickle.dumps(RuntimeError(f"{type(exc).__name__}: {exc}"))
            yield pa.RecordBatch.from_arrays(
                [pa.array([None], pa.binary()), pa.array([error], pa.binary())], names=["fragment", "error"]
            )
            return
        if fragments:
            yield pa.RecordBatch.from_arrays(
                [pa.array(fragments, pa.binary()), pa.array([None] * len(fragments), pa.binary())],
                names=["fragment", "error"],
            )

    return run


def write(
    df: Any,
    uri: str,
    *,
    mode: str = "append",
    where: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    commit_message: str | None = None,
    storage_options: dict[str, Any] | None = None,
    max_rows_per_file: int | None = None,
    native: bool | None = None,
) -> mvcc_core.Table:
    """Write a Spark DataFrame to the table at `uri` in ONE commit and return the committed `Table`.

    `mode`: "append" or "overwrite" (replace every row; with `where`, only the rows matching the SQL
    predicate: every new row must match it, else PredicateError and nothing is written). A missing table
    is created. The schema is checked here before any Spark task runs (SchemaError naming the columns).
    A concurrent commit that conflicts raises the core's RetryableConflictError / IncompatibleConflictError;
    after any failure no data file of this write is left.

    `native`: None writes with Spark's own Parquet writer when it can (a local table, no `where`, no
    non-nullable column fed by a nullable one; `native.write_fragments_with_spark`) and through the core's
    writer in Python tasks otherwise; False always uses the core's writer; True refuses, naming the reason,
    a write Spark's writer cannot make.

    Args:
        df: the DataFrame to write
        uri: the table's root (created when missing)
        mode: "append" or "overwrite"
        where: with mode "overwrite": the SQL predicate of the rows replaced
        transaction_properties: properties stored with the transaction (a dict of str to str)
        commit_message: the message stored with the transaction
        storage_options: the table store's options
        max_rows_per_file: rows at most in one data file (None: the core's default)
        native: None: Spark's Parquet writer when it can; True: only it; False: always the core's writer
    """
    properties = check_properties(transaction_properties)
    plan = plan_write(
        df.schema,
        str(uri),
        mode=mode,
        where=where,
        storage_options=storage_options,
        max_rows_per_file=max_rows_per_file,
    )
    reason = None if native is False else native_mod.can_write_natively(df, plan, connect_ok=bool(native))
    if native and reason is not None:
        raise ValueError(f"mvcc write to {plan.uri}: native=True is not possible: {reason}")
    try:
        if native is not False and reason is None:
            fragments = native_mod.write_fragments_with_spark(df, plan)
        else:
            rows = df.mapInArrow(_task(plan), _RESULT_SCHEMA).collect()
            errors = [pickle.loads(bytes(r["error"])) for r in rows if r["error"] is not None]
            if errors:
                raise errors[0]
            fragments = [bytes(r["fragment"]) for r in rows]
    except BaseException:
        # classic sessions: wait until no task of the job runs; Connect cannot see tasks: a settle window
        waited = _wait_for_tasks(df)
        plan.remove_files(settle=0.0 if waited else ABORT_SETTLE_SECONDS)
        raise
    try:
        table = plan.commit(fragments, commit_message=commit_message, transaction_properties=properties, path="write")
    except BaseException:
        plan.remove_files()  # keeps them if the commit did land (an ambiguous failure)
        raise
    plan.remove_orphans(fragments)
    return table


def _wait_for_tasks(df: Any, timeout: float = 30.0) -> bool:
    """After a failed job, wait (bounded) until Spark has no running task left, so that a task still
    writing when the job failed cannot add a file after the cleanup. Classic sessions only: whether it
    could wait (False on Spark Connect, whose client cannot see tasks)."""
    spark = df.sparkSession
    if is_connect(spark):
        return False
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        active = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
        if not any(info is not None and info.numActiveTasks for info in active):
            return True
        time.sleep(0.1)
    log.warning("Spark tasks still running %.0f s after a failed mvcc write", timeout)
    return True
