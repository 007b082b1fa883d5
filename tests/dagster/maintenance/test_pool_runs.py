"""Pools on real runs: two compaction runs of one table, started together in two processes against one
persisted instance whose pools have one slot, never run their committing steps (`reserve_fragments`,
`commit_rewrite`, pool ``mvcc/<table>``) at the same time, judged by the steps' start and end events in the
event log. Op-level pools are enforced by each run's own executor (it claims a slot in the instance's
storage before starting a step), so no daemon runs here; the run-level tag limit is the queued run
coordinator's and needs the daemon (docs/integrations/dagster/index.md).

The second run starts once the first holds the pool's slot. Dagster's slot claim is a check and then a write in
separate statements (`has_unassigned_slots`, then `add_pending_step`; `SELECT ... FOR UPDATE` is a no-op in
sqlite), so two claims in the same few milliseconds on a sqlite instance can both be granted the one slot: seen
once in CI, both reserves starting 4 ms apart. That race is Dagster's storage, not the limit this test is
about (docs/integrations/dagster/index.md says what it means for users)."""

import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

import mvcc_core as mvcc

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
COMMITTING = ("reserve_fragments", "commit_rewrite")

CHILD = """
import os, sys, time
import dagster as dg
import pool_defs

go, role = sys.argv[1], sys.argv[2]
while not os.path.exists(go):  # start both runs together, after both processes have imported dagster
    time.sleep(0.01)
with dg.DagsterInstance.get() as instance:
    if role == "second":  # wait until the first run holds the slot (module docstring), at most 120 s
        deadline = time.monotonic() + 120
        pool = f"mvcc/{pool_defs.TABLE}"
        while not instance.event_log_storage.get_concurrency_info(pool).claimed_slots:
            if time.monotonic() > deadline:
                sys.exit("the first run never claimed the pool's slot")
            time.sleep(0.01)
    with dg.execute_job(
        dg.reconstructable(pool_defs.compaction_job), instance=instance, raise_on_error=False
    ) as result:
        print(result.run_id, result.success)
"""


def fragmented(uri: str, fragments: int, rows: int = 10) -> mvcc.Table:
    import pyarrow as pa

    t = mvcc.write_table(pa.table({"n": list(range(rows)), "k": ["a"] * rows}), uri)
    for i in range(1, fragments):
        t.append(pa.table({"n": list(range(i * rows, (i + 1) * rows)), "k": ["a"] * rows}))
    return t


def intervals(instance: dg.DagsterInstance, run_id: str) -> dict[str, tuple[float, float, str]]:
    """Each committing step of the run: (start, end, how it ended) from the event log."""
    starts: dict[str, float] = {}
    out: dict[str, tuple[float, float, str]] = {}
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None or event.step_key not in COMMITTING:
            continue
        if event.event_type == dg.DagsterEventType.STEP_START:
            starts[event.step_key] = record.timestamp
        elif event.event_type in (dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE):
            out[event.step_key] = (starts[event.step_key], record.timestamp, event.event_type.value)
    return out


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_two_compaction_runs_never_commit_at_once(tmp_path: Path) -> None:
    import pool_defs

    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("concurrency:\n  pools:\n    default_limit: 1\ntelemetry:\n  enabled: false\n")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        # Create the instance's storage here (two processes creating it at once race on its tables), and the
        # pool's slots from the default limit: Dagster creates them lazily on a pool's first claim, and two runs
        # making that first claim together can both get a slot (seen once in CI: both reserves ran at once).
        assert instance.event_log_storage.initialize_concurrency_limit_to_default(f"mvcc/{pool_defs.TABLE}")
    warehouse = tmp_path / "warehouse"
    uri = f"{warehouse}/{pool_defs.TABLE}"
    t = fragmented(uri, 60)  # 600 rows: two rewrite tasks of 300 rows per run
    rows = sorted(t.to_table()["n"].to_pylist())
    go = tmp_path / "go"
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        pool_defs.WAREHOUSE_ENV: str(warehouse),
        "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")]),
        # every commit holds its step 1.5 s (a failpoint's sleep), so two unserialized steps would overlap
        "MVCC_FAILPOINTS": "commit.after_transaction_file=sleep(1.5)",
    }
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(go), role],
            cwd=HERE,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for role in ("first", "second")
    ]
    time.sleep(3)  # both import dagster and the job module, then wait for `go`
    go.touch()
    outputs = [child.communicate(timeout=240) for child in children]
    assert all(child.returncode == 0 for child in children), [err.decode()[-3000:] for _, err in outputs]
    runs = [out.decode().split()[-2:] for out, _ in outputs]

    with dg.DagsterInstance.from_config(str(home)) as instance:
        pool = f"mvcc/{pool_defs.TABLE}"
        assert instance.event_log_storage.get_pool_limits()[0].name == pool  # the default limit applied to it
        steps = [intervals(instance, run_id) for run_id, _ in runs]
    committing = sorted((start, end, run, step) for run, s in enumerate(steps) for step, (start, end, _) in s.items())
    assert len(committing) >= 3, steps  # both reserves ran, and at least one commit
    for (_, end, run_a, step_a), (start, _, run_b, step_b) in zip(committing, committing[1:], strict=False):
        assert end <= start, f"{step_a} of run {run_a} and {step_b} of run {run_b} overlapped: {steps}"
    assert all(set(s) == set(COMMITTING) for s in steps), steps

    # Without the run-level limit the two runs may both plan the same fragments: then the second Rewrite
    # loses to the first (a lost compaction fails commit_rewrite, its files removed) — never both land.
    succeeded = [ok == "True" for _, ok in runs]
    assert any(succeeded)
    after = mvcc.open_table(uri)
    assert sorted(after.to_table()["n"].to_pylist()) == rows
    rewrites = [v for v in after.versions() if v.operation == "Rewrite"]
    assert 1 <= len(rewrites) <= 2 and len(after.get_fragments()) == 2
    for ok, s in zip(succeeded, steps, strict=True):
        if not ok:
            assert s["commit_rewrite"][2] == "STEP_FAILURE"
