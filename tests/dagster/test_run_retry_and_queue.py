"""The maintenance jobs under Dagster's daemons: run retries after a lost compaction, and the run-level limit
per table.

Real machinery throughout: a persisted `instance_for_test` with the default run launcher (each run is a
run-worker process started by a code server loaded from `retry_queue_defs.py`) and the instance's default
queued run coordinator; runs are created the way the sensor daemon creates them and submitted to the
coordinator; the daemons' own iterations (`QueuedRunCoordinatorDaemon.run_iteration`, which dequeues and
launches, and `EventLogConsumerDaemon.run_iteration`, whose handler is
`consume_new_runs_for_automatic_reexecution`) are called by the test instead of by `dagster-daemon run`.

1. A compaction that loses to a concurrent column rewrite (committed by the test between the run's ReserveFragments
   and its Rewrite; the run's commits are slowed by the failpoint `commit.after_transaction_file=sleep(...)`
   armed in the run worker through MVCC_FAILPOINTS) fails; with `run_retries: {enabled: true}` the daemon
   launches a retry that plans from the new version and succeeds; one Rewrite, rows equal, and no file of the
   losing attempt left in the table's directory.
2. With `concurrency.runs.tag_concurrency_limits` on `mvcc/table` (one run per table), two compaction runs of
   one table submitted together run one after the other: the second is dequeued only after the first ended.
"""

import os
import pickle
import time
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
import retry_queue_defs
from dagster._core.definitions.selector import JobSubsetSelector
from dagster._core.test_utils import create_test_daemon_workspace_context
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import ModuleTarget
from dagster._daemon.auto_run_reexecution.event_log_consumer import EventLogConsumerDaemon
from dagster._daemon.daemon import DagsterDaemon
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon
from dagster._utils.error import SerializableErrorInfo

import mvcc_core as mvcc
from mvcc_core import failpoints

HERE = Path(__file__).resolve().parent
LOCATION = "retry_queue"
COMMIT_SLEEP = 3.0  # seconds each commit of a run waits after its transaction file: the delete's window
RUN_LIMIT = {"tag_concurrency_limits": [{"key": "mvcc/table", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}]}
FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


def fragmented(uri: str, fragments: int, rows: int = 10) -> mvcc.Table:
    """A table of `fragments` small fragments (one append each), column `n` numbering the rows."""
    t = mvcc.write_table(pa.table({"n": list(range(rows))}), uri)
    for i in range(1, fragments):
        t.append(pa.table({"n": list(range(i * rows, (i + 1) * rows))}))
    return t


@contextmanager
def deployment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, overrides: dict[str, Any]
) -> Iterator[tuple[dg.DagsterInstance, WorkspaceProcessContext, str]]:
    """A persisted instance (`overrides` in its dagster.yaml), the daemons' view of the code location
    `retry_queue_defs` (a code server process; the run workers it starts inherit its environment: the
    warehouse, this checkout on PYTHONPATH and the failpoint slowing every commit), and the table's uri."""
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    monkeypatch.setenv(retry_queue_defs.WAREHOUSE_ENV, str(warehouse))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(HERE), str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")])
    )
    monkeypatch.setenv(failpoints.ENV_VAR, f"commit.after_transaction_file=sleep({COMMIT_SLEEP})")
    assert failpoints.armed_points() == {}  # armed in the run workers only, not in this process
    with ExitStack() as stack:
        instance = stack.enter_context(dg.instance_for_test(overrides=overrides))
        target = ModuleTarget(
            module_name="retry_queue_defs", attribute="defs", working_directory=str(HERE), location_name=LOCATION
        )
        context = stack.enter_context(create_test_daemon_workspace_context(target, instance))
        yield instance, context, f"{warehouse}/{retry_queue_defs.TABLE}"


def submit(context: WorkspaceProcessContext, job_name: str = retry_queue_defs.JOB) -> str:
    """Create a run of `job_name` from the code location as the sensor daemon does (remote origin, snapshots,
    the job's tags) and submit it to the instance's run coordinator (queued: the daemon launches it)."""
    instance = context.instance
    workspace = context.create_request_context()
    location = workspace.get_code_location(LOCATION)
    (repo,) = location.get_repositories().values()
    remote_job = location.get_job(
        JobSubsetSelector(location_name=LOCATION, repository_name=repo.name, job_name=job_name, op_selection=None)
    )
    plan = location.get_execution_plan(remote_job, {}, step_keys_to_execute=None, known_state=None, instance=instance)
    run = instance.create_run(
        job_name=job_name,
        run_id=None,
        run_config={},
        resolved_op_selection=None,
        step_keys_to_execute=None,
        status=dg.DagsterRunStatus.NOT_STARTED,
        op_selection=None,
        root_run_id=None,
        parent_run_id=None,
        tags=dict(remote_job.run_tags or {}),
        job_snapshot=remote_job.job_snapshot,
        execution_plan_snapshot=plan.execution_plan_snapshot,
        parent_job_snapshot=remote_job.parent_job_snapshot,
        remote_job_origin=remote_job.get_remote_origin(),
        job_code_origin=remote_job.get_python_origin(),
        asset_selection=None,
        asset_check_selection=None,
        asset_graph=repo.asset_graph,
    )
    instance.submit_run(run.run_id, workspace)
    return run.run_id


def tick(context: WorkspaceProcessContext, daemons: Iterable[DagsterDaemon]) -> None:
    """One iteration of each daemon, failing on any error it reports (a daemon yields its errors)."""
    for daemon in daemons:
        for item in daemon.run_iteration(context):
            assert not isinstance(item, SerializableErrorInfo), item.to_string()


def status(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRunStatus:
    return instance.get_run_by_id(run_id).status


def wait_until(condition: Any, what: str, timeout: float = 90, every: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def referenced_files(uri: str) -> set[str]:
    """Every data and deletion file a version of the table references (the table's live files)."""
    t = mvcc.open_table(uri)
    out: set[str] = set()
    for info in t.versions():
        for fragment in t.checkout(info.version).get_fragments():
            out |= {f"data/{df.path}" for df in fragment.data_files()}
            if fragment.deletion_file() is not None:
                d = fragment.metadata.deletion_file
                out.add(f"_deletions/{fragment.fragment_id}-{d.read_version}-{d.id}.bin")
    return out


def stored_files(uri: str) -> set[str]:
    """Every data and deletion file in the table's directory."""
    root = Path(uri)
    return {p.relative_to(root).as_posix() for d in ("data", "_deletions") for p in (root / d).glob("*") if p.is_file()}


@pytest.mark.timeout(240)
@pytest.mark.slow
def test_lost_compaction_is_retried_by_the_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A REWRITE_COLUMNS update lands between the run's ReserveFragments and its Rewrite (a delete would be carried
    onto the Rewrite): the Rewrite loses, `commit_rewrite`
    fails (no step retry), the files the run wrote are removed; the auto-reexecution daemon launches a retry
    (the job's tags: `dagster/max_retries`, `dagster/retry_strategy: ALL_STEPS`) that plans from the version
    with the update and succeeds."""
    overrides = {"run_retries": {"enabled": True}}
    with deployment(tmp_path, monkeypatch, overrides) as (instance, context, uri):
        t = fragmented(uri, 12)  # 120 rows in 12 fragments: 2 tasks of 60 rows
        start = t.version
        with QueuedRunCoordinatorDaemon(interval_seconds=1) as queue, EventLogConsumerDaemon() as retries:
            tick(context, [retries])  # the consumer starts at the event log's top, as a daemon started now would
            first = submit(context)
            assert status(instance, first) == dg.DagsterRunStatus.QUEUED
            tick(context, [queue])  # dequeues and launches the run (a run-worker process)

            def reserved() -> bool:
                (info,) = mvcc.open_table(uri).versions(limit=1)
                return info.operation == "ReserveFragments"

            wait_until(reserved, "the first run's ReserveFragments")
            # The run's Rewrite cannot land for COMMIT_SLEEP seconds (its own failpoint): commit a column rewrite
            # of a row of a fragment it rewrites now, from this process (no failpoint armed here). A delete would
            # be carried onto the Rewrite (docs/reference/conflicts.md); rewritten values the Rewrite copied cannot be.
            mvcc.open_table(uri).update({"n": "n + 1000"}, where="n = 3", mode="rewrite_columns")
            wait_until(lambda: status(instance, first) in FINISHED, "the first run to end")
            assert status(instance, first) == dg.DagsterRunStatus.FAILURE

            tick(context, [retries])  # sees the RUN_FAILURE: creates the retry and submits it
            retry = instance.get_run_by_id(first).tags.get("dagster/auto_retry_run_id")
            assert retry is not None, [e.message for e in instance.all_logs(first) if e.dagster_event is None]
            tick(context, [queue])
            wait_until(lambda: status(instance, retry) in FINISHED, "the retry to end")
            assert status(instance, retry) == dg.DagsterRunStatus.SUCCESS
            tick(context, [retries])  # a success: nothing more to retry
            assert len(instance.get_runs()) == 2

        run = instance.get_run_by_id(retry)
        assert run.parent_run_id == first and run.root_run_id == first
        assert run.tags["dagster/retry_number"] == "1" and run.tags["mvcc/table"] == retry_queue_defs.TABLE
        failures = [
            r.dagster_event
            for r in instance.all_logs(first, of_type=dg.DagsterEventType.STEP_FAILURE)
            if r.dagster_event is not None
        ]
        assert [e.step_key for e in failures] == ["commit_rewrite"]
        assert "lost to a concurrent commit" in failures[0].step_failure_data.user_failure_data.description
        assert not instance.all_logs(first, of_type=dg.DagsterEventType.STEP_UP_FOR_RETRY)
        # The losing attempt's own files, from its rewrite steps' outputs (pickled by the job's IO manager;
        # each new fragment is a serialized DataFragment, the message `get_fragments` returns).
        fragment_type = type(mvcc.open_table(uri).get_fragments()[0].metadata)
        lost = {
            f"data/{df.path}"
            for path in Path(instance.storage_directory(), first).glob("rewrite_fragments*/result")
            for fragment in pickle.loads(path.read_bytes()).new_fragments
            for df in fragment_type.FromString(fragment).files
        }
        assert len(lost) == 2, lost  # two tasks, one new fragment each

    after = mvcc.open_table(uri)
    history = after.versions()[start:]
    assert [(v.operation, v.transaction_properties.get("dagster/run_id")) for v in history] == [
        ("ReserveFragments", first),
        ("Update", None),
        ("ReserveFragments", retry),
        ("Rewrite", retry),
    ]
    assert sorted(after.to_table()["n"].to_pylist()) == [n for n in range(120) if n != 3] + [1003]
    assert len(after.get_fragments()) == 2
    # The losing attempt wrote two fragments' files and removed them: every file in the table's directory is
    # referenced by some version (nothing orphaned), and nothing a version references is missing.
    assert not lost & stored_files(uri)
    assert stored_files(uri) == referenced_files(uri)


@pytest.mark.timeout(240)
@pytest.mark.slow
def test_run_limit_per_table_serializes_compactions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two compaction runs of one table submitted together: the queued run coordinator's daemon launches the
    first and holds the second back (tag `mvcc/table`, one run per value) until the first ended; the second
    then finds nothing left to compact and succeeds without committing."""
    overrides = {"concurrency": {"runs": RUN_LIMIT}, "run_retries": {"enabled": True}}
    with deployment(tmp_path, monkeypatch, overrides) as (instance, context, uri):
        t = fragmented(uri, 12)
        start, rows = t.version, sorted(t.to_table()["n"].to_pylist())
        with QueuedRunCoordinatorDaemon(interval_seconds=1) as queue:
            runs = [submit(context), submit(context)]
            held_back = 0  # ticks that saw the first run in progress and the second still queued
            while not all(status(instance, r) in FINISHED for r in runs):
                tick(context, [queue])
                first, second = (status(instance, r) for r in runs)
                assert not (
                    first in (dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED)
                    and second not in (dg.DagsterRunStatus.QUEUED,)
                ), (first, second)
                held_back += first in (dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED)
                time.sleep(0.25)
        assert held_back >= 2
        records = [instance.get_run_record_by_id(r) for r in runs]
        assert [r.dagster_run.status for r in records] == [dg.DagsterRunStatus.SUCCESS] * 2
        # The daemon reports RUN_STARTING when it dequeues a run, just before it launches it.
        dequeued = [instance.all_logs(r, of_type=dg.DagsterEventType.RUN_STARTING)[0].timestamp for r in runs]
        # from run storage: the second run was dequeued, and started, only after the first had ended
        assert records[0].end_time is not None and dequeued[0] < records[0].end_time
        assert dequeued[1] >= records[0].end_time and records[1].start_time >= records[0].end_time

    after = mvcc.open_table(uri)
    ops = [(v.operation, v.transaction_properties.get("dagster/run_id")) for v in after.versions()[start:]]
    assert ops == [("ReserveFragments", runs[0]), ("Rewrite", runs[0])]
    assert sorted(after.to_table()["n"].to_pylist()) == rows and len(after.get_fragments()) == 2
