"""Maintenance requested only when it has work (found by benchmarks/week/simulation.py): the nightly schedule skips a
table with nothing to compact, index or remove; the health sensor asks for retention only once a version is
older than the retention job's window; its table handles, kept from tick to tick, see what a fresh open sees."""

import random
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_dagster import (
    HealthThresholds,
    MvccResource,
    build_compaction_job,
    build_maintenance_schedule,
    build_retention_job,
)
from mvcc_dagster.health import Level, build_health_sensor, evaluate_health
from mvcc_dagster.health.checks import TableHandles
from mvcc_dagster.maintenance import MaintenanceTarget
from mvcc_dagster.maintenance.due import maintenance_work, removable_bytes, removable_versions, retention_run_config


def rows(start: int, n: int = 10) -> pa.Table:
    return pa.table({"n": pa.array(range(start, start + n), pa.int64())})


def tick(schedule: dg.ScheduleDefinition, warehouse: str, at: datetime | None = None) -> Any:
    context = dg.build_schedule_context(
        resources={"mvcc": MvccResource(root_uri=warehouse)}, scheduled_execution_time=at or datetime.now(UTC)
    )
    return schedule.evaluate_tick(context)


@pytest.mark.slow  # about 1 s: two schedules' jobs built
def test_schedule_skips_a_table_with_nothing_to_do(warehouse: str) -> None:
    """One fragment, no index, no version older than the window: a skip that says so, no run. An append
    (compaction work) or a version leaving the window (retention work) makes the tick request the run."""
    uri = f"{warehouse}/quiet"
    t = mvcc.write_table(rows(0), uri)
    options = mvcc.compaction.CompactionOptions(target_rows_per_fragment=100)
    window = build_maintenance_schedule("quiet", options=options, older_than=timedelta(days=1))
    data = tick(window, warehouse)
    assert not data.run_requests and "nothing to do" in (data.skip_message or "")
    assert "0 compaction task(s)" in data.skip_message and "0 removable version(s)" in data.skip_message

    t.append(rows(10))  # two small fragments: compaction has a task
    data = tick(window, warehouse)
    assert len(data.run_requests) == 1 and "1 compaction task(s)" in data.run_requests[0].tags["mvcc/work"]

    t.optimize.compact_files(target_rows_per_fragment=100)  # one fragment again; versions 1-3 kept by the window
    assert not tick(window, warehouse).run_requests
    no_window = build_maintenance_schedule("quiet", options=options, older_than=timedelta(0), name="now")
    data = tick(no_window, warehouse)
    assert len(data.run_requests) == 1 and "removable version" in data.run_requests[0].tags["mvcc/work"]
    assert window.job.tags["mvcc/older_than_seconds"] == "86400.0"


def test_removable_versions_follow_the_cleanup_rule(tmp_path: Path) -> None:
    """Differential: what `removable_versions` predicts is what `cleanup_old_versions` removes, over random
    histories, windows and floors (the latest always kept)."""
    rng = random.Random(28)
    for case in range(3):
        uri = str(tmp_path / f"t{case}")
        t = mvcc.write_table(rows(0), uri)
        for i in range(rng.randint(0, 4)):
            t.append(rows(10 * (i + 1)))
            if rng.random() < 0.4:
                t.optimize.compact_files(target_rows_per_fragment=1000)  # replaced files: freed when removed
        split = datetime.now(UTC)
        time.sleep(0.04)  # the window's edge falls in this gap, far from any commit
        for i in range(rng.randint(0, 3)):
            t.append(rows(100 + 10 * i))
        edge = split + timedelta(seconds=0.02)
        older_than = datetime.now(UTC) - edge if rng.random() < 0.5 else timedelta(0)
        floor = rng.choice([None, 1, 2, 5])
        predicted = removable_versions(t, older_than, floor)
        freed = removable_bytes(t, predicted)
        before = data_dir_bytes(uri)
        stats = t.cleanup_old_versions(older_than, floor)
        assert predicted == list(stats.removed_versions), (case, older_than, floor)
        assert freed == before - data_dir_bytes(uri), (case, older_than, floor)


def data_dir_bytes(uri: str) -> int:
    return sum(f.stat().st_size for f in (Path(uri) / "data").rglob("*") if f.is_file())


def test_sensor_requests_retention_when_enough_is_removable(instance: dg.DagsterInstance, warehouse: str) -> None:
    """No check fails, but an overwrite left the whole old file to remove: with `retention_removable_share`
    the sensor asks for retention once the freed bytes reach that share of the latest version's and
    `retention_min_removable_bytes`; without the share, above it, or below the floor (the default 8 MiB
    against this file's few hundred bytes: a run that frees nothing a user would notice), it does not."""
    t = mvcc.write_table(rows(0, 50), f"{warehouse}/over")
    t.overwrite(rows(100, 50))
    freed = removable_bytes(t, [1])
    retention = build_retention_job("over", older_than=timedelta(0))
    resources = {"mvcc": MvccResource(root_uri=warehouse)}
    cases = ((None, 0, 0), (5.0, 0, 0), (0.5, 0, 1), (0.5, freed, 1), (0.5, freed + 1, 0), (0.5, None, 0))
    for share, floor, expected in cases:
        given = {} if floor is None else {"retention_min_removable_bytes": floor}
        thresholds = HealthThresholds(small_fragment_rows=1, retention_removable_share=share, **given)
        sensor = build_health_sensor(["over"], retention_job=retention, thresholds=thresholds)
        result = sensor(dg.build_sensor_context(instance=instance, resources=resources))
        assert len(result.run_requests or []) == expected, (share, floor)
    with pytest.raises(ValueError, match="retention_removable_share"):
        HealthThresholds(retention_removable_share=-1)
    # retention advice scoring above advice_score (1 of 2 versions removable: 0.5) is held back by the floor
    # alike; not once the versions kept reach versions_kept's WARN level (a count, not bytes)
    for checks, floor, expected in (
        ({}, 0, 0),  # 0.5 is not above the default advice_score (0.5)
        ({"advice_score": 0.4}, freed + 1, 0),
        ({"advice_score": 0.4}, freed, 1),
        ({"advice_score": 0.4, "versions_kept": Level(2, 9)}, freed + 1, 1),
    ):
        thresholds = HealthThresholds(small_fragment_rows=1, retention_min_removable_bytes=floor, **checks)
        sensor = build_health_sensor(["over"], retention_job=retention, thresholds=thresholds)
        result = sensor(dg.build_sensor_context(instance=instance, resources=resources))
        assert len(result.run_requests or []) == expected, (checks, floor)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="retention_min_removable_bytes"):
            HealthThresholds(retention_min_removable_bytes=bad)


def test_maintenance_work_counts_index_and_compaction(warehouse: str) -> None:
    """An index missing the appended fragment is work for the nightly job even with nothing to compact."""
    t = mvcc.write_table(pa.table({"n": pa.array(range(200), pa.int64())}), f"{warehouse}/ix")
    t.create_index("n", "BTREE")
    t.append(pa.table({"n": pa.array(range(200, 400), pa.int64())}))
    options = mvcc.compaction.CompactionOptions(target_rows_per_fragment=100)  # both fragments are big enough
    work = maintenance_work(mvcc.open_table(t.uri), options, optimize_indices=True, older_than=timedelta(days=1))
    assert (work.compaction_tasks, work.unindexed_fragments, work.removable_versions) == (0, 1, 0) and work
    idle = maintenance_work(mvcc.open_table(t.uri), options, optimize_indices=False, older_than=timedelta(days=1))
    assert not idle


def test_sensor_requests_retention_only_when_a_version_is_removable(
    instance: dg.DagsterInstance, warehouse: str
) -> None:
    """versions_kept fails from the third version on; a retention job whose window still holds every version
    is not requested (it would remove nothing), one with an empty window is."""
    t = mvcc.write_table(rows(0), f"{warehouse}/hist")
    for i in range(1, 4):
        t.append(rows(10 * i))
    thresholds = HealthThresholds(small_fragment_rows=1, versions_kept=Level(3, 100))
    resources = {"mvcc": MvccResource(root_uri=warehouse)}
    for older_than, expected in ((timedelta(days=1), 0), (timedelta(0), 1)):
        retention = build_retention_job("hist", older_than=older_than)
        sensor = build_health_sensor(["hist"], retention_job=retention, thresholds=thresholds)
        result = sensor(dg.build_sensor_context(instance=instance, resources=resources))
        assert len(result.run_requests or []) == expected, older_than
        if expected:
            assert result.run_requests[0].job_name == retention.name


@pytest.mark.slow  # waits 0.7 s for versions to leave a window
def test_retention_is_asked_again_as_versions_leave_the_window(instance: dg.DagsterInstance, warehouse: str) -> None:
    """At one latest version, versions leave the window as time passes: the sensor asks for retention when
    one is removable, not while none is, and asks again (a new run key, never a repeated one) when more
    leave the window (the week requested one key twice when the cursor forgot it meanwhile)."""
    window = timedelta(seconds=0.3)
    t = mvcc.write_table(rows(0), f"{warehouse}/aging")
    t.append(rows(10))
    time.sleep(0.35)
    t.append(rows(20))
    t.append(rows(30))  # versions 1-2 out of the window, 3-4 in it
    retention = build_retention_job("aging", older_than=window)
    sensor = build_health_sensor(
        ["aging"],
        retention_job=retention,
        # half the versions removable (a score of 0.5) is above this advice_score
        thresholds=HealthThresholds(small_fragment_rows=1, versions_kept=Level(2, 9), advice_score=0.4),
    )
    resources = {"mvcc": MvccResource(root_uri=warehouse)}
    keys: list[str] = []
    cursor = None

    def evaluate() -> list[str]:
        nonlocal cursor
        result = sensor(dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources))
        cursor = result.cursor
        return [r.run_key for r in result.run_requests or []]

    keys += evaluate()
    assert len(keys) == 1 and keys[0].endswith(":mvcc_retention__aging<=2")
    assert evaluate() == []  # the same work: not asked again
    t.cleanup_old_versions(window)  # what the run does: versions 3-4 left, still failing versions_kept
    assert evaluate() == []  # nothing removable
    time.sleep(0.35)
    keys += evaluate()
    assert len(keys) == 2 and keys[1].endswith(":mvcc_retention__aging<=3") and len(set(keys)) == 2


def change(t: mvcc.Table, action: str, step: int, rng: random.Random) -> bool:
    """One random history step on `t` (an append, a delete, a compaction or a retention); False for another
    action, which the caller does itself."""
    if action == "append":
        t.append(rows(1000 * step, rng.randint(1, 30)))
    elif action == "delete":
        t.delete(f"n % {rng.randint(2, 7)} = 0")
    elif action == "compact":
        t.optimize.compact_files(target_rows_per_fragment=40)
    elif action == "cleanup":
        t.cleanup_old_versions(timedelta(0))
    else:
        return False
    return True


def test_kept_handles_see_what_a_fresh_open_sees(tmp_path: Path) -> None:
    """Differential over a random history (appends, deletes, compactions, retention, a table dropped and
    written again): every check's value and metadata through the kept handle equals a fresh open's."""
    rng = random.Random(3)  # every action, both kinds of re-creation among them
    uri = str(tmp_path / "t")
    target = MaintenanceTarget("t")
    thresholds = HealthThresholds(small_fragment_rows=15)
    handles = TableHandles()
    t = mvcc.write_table(rows(0), uri)
    now = datetime.now(UTC)
    for step in range(16):
        action = rng.choice(["append", "append", "delete", "compact", "cleanup", "recreate", "recreate longer"])
        if not change(t, action, step, rng):
            # dropped and written again: shorter, or as long as before and one more (same version numbers)
            versions = t.version + 1 if action == "recreate longer" else 1
            shutil.rmtree(uri)
            t = mvcc.write_table(rows(0, rng.randint(1, 5)), uri)
            for i in range(1, versions):
                t.append(rows(500 + i, 2))
        t = mvcc.open_table(uri)
        kept = handles.latest(uri, lambda: mvcc.open_table(uri))
        assert kept.version == t.version
        via_kept = {r.check_name: (r.passed, r.metadata) for r in evaluate_health(kept, target, thresholds, now=now)}
        fresh = {r.check_name: (r.passed, r.metadata) for r in evaluate_health(t, target, thresholds, now=now)}
        fresh.pop("files_exist"), via_kept.pop("files_exist")  # a random sample of files
        assert via_kept == fresh, (step, action)


@pytest.mark.slow  # 40 ticks of two sensors and the commits between them: about 2.5 s
def test_a_long_lived_sensor_requests_what_a_fresh_one_does(tmp_path: Path) -> None:
    """Differential over a random history and a clock crossing retention windows and the age threshold: the
    sensor that skips re-evaluating a settled table (same version, no age crossed) returns the same requests
    and cursor at every tick as a sensor built afresh for that tick, given the same cursor."""
    rng = random.Random(28)
    instance = dg.DagsterInstance.ephemeral()
    resources = {"mvcc": MvccResource(root_uri=str(tmp_path))}
    hour = timedelta(hours=1)
    jobs = {
        "compaction_job": build_compaction_job("t", executor="in_process", older_than=hour),
        "retention_job": build_retention_job("t", older_than=hour),
    }
    thresholds = HealthThresholds(
        small_fragment_rows=25,
        small_fragments=Level(4, 16),
        version_age_days=Level(0.1, 1),
        retention_removable_share=0.3,
        retention_min_removable_bytes=0,  # these tables free a few hundred bytes: the share rule alone
    )
    now = [datetime.now(UTC)]
    kept = build_health_sensor(["t"], thresholds=thresholds, clock=lambda: now[0], **jobs)
    t = mvcc.write_table(rows(0), str(tmp_path / "t"))
    cursor, requested = None, 0
    for step in range(40):
        action = rng.choice(["append", "append", "delete", "compact", "cleanup", "wait", "wait", "wait"])
        change(t, action, step, rng)  # "wait": no commit, the clock moves on
        t = mvcc.open_table(t.uri)
        now[0] += timedelta(minutes=rng.choice([1, 10, 40, 70, 150]))
        fresh = build_health_sensor(["t"], thresholds=thresholds, clock=lambda: now[0], **jobs)
        results = [
            s(dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources)) for s in (kept, fresh)
        ]
        said = [
            ([(r.run_key, r.job_name, r.run_config) for r in result.run_requests], result.cursor) for result in results
        ]
        assert said[0] == said[1], (step, action)
        cursor, requested = results[0].cursor, requested + len(results[0].run_requests)
    assert requested >= 3  # the history asked for repairs, not only for nothing


@pytest.mark.slow  # two retention runs (about 1 s on a quiet machine)
def test_sensor_and_run_measure_retention_to_the_tick(instance: dg.DagsterInstance, warehouse: str) -> None:
    """The sensor's clock says when its tick is (benchmarks/week/simulation.py's simulated clock): at a tick a day
    later, versions 1-3 of a one-hour window are removable, and the retention run it requests removes exactly
    those (its cutoff is the tick's time minus the window), even though the run starts later; at a tick now,
    nothing is removable and nothing is requested."""
    t = mvcc.write_table(rows(0), f"{warehouse}/clocked")
    for i in range(1, 4):
        t.append(rows(10 * i))
    retention = build_retention_job("clocked", older_than=timedelta(hours=1))
    thresholds = HealthThresholds(small_fragment_rows=1, versions_kept=Level(2, 9))
    resources = {"mvcc": MvccResource(root_uri=warehouse)}

    def requests(at: datetime) -> list[dg.RunRequest]:
        sensor = build_health_sensor(["clocked"], retention_job=retention, thresholds=thresholds, clock=lambda: at)
        return sensor(dg.build_sensor_context(instance=instance, resources=resources)).run_requests or []

    assert requests(datetime.now(UTC)) == []
    later = datetime.now(UTC) + timedelta(days=1)
    [request] = requests(later)
    assert request.run_key.endswith("<=3")
    cutoff = request.run_config["ops"]["cleanup_old_versions"]["config"]["cutoff"]
    assert datetime.fromisoformat(cutoff) == later - timedelta(hours=1)
    # the run: its cutoff is an hour in the future, but it never removes a version inside its own window
    result = retention.execute_in_process(run_config=request.run_config, instance=instance, resources=resources)
    assert result.success and result.output_for_node("cleanup_old_versions") == []
    past = datetime.now(UTC) + timedelta(hours=1)  # after every commit: versions 1-3 (the latest stays)
    config = {"ops": {"cleanup_old_versions": {"config": {"cutoff": past.isoformat()}}}}
    now_job = build_retention_job("clocked", older_than=timedelta(0), name="now")
    result = now_job.execute_in_process(run_config=config, instance=instance, resources=resources)
    assert result.success and result.output_for_node("cleanup_old_versions") == [1, 2, 3]
    assert [v.version for v in mvcc.open_table(t.uri).versions()] == [4]


@pytest.mark.slow  # a retention run each
@pytest.mark.parametrize("cutoff", ["yesterday", "2026-11-27T03:00:00"])
def test_a_bad_retention_cutoff_fails_naming_it(instance: dg.DagsterInstance, warehouse: str, cutoff: str) -> None:
    """A cutoff that is not an ISO time with its offset fails the step in words, and removes nothing."""
    t = mvcc.write_table(rows(0), f"{warehouse}/bad")
    t.append(rows(10))
    job = build_retention_job("bad", older_than=timedelta(0))
    result = job.execute_in_process(
        run_config={"ops": {"cleanup_old_versions": {"config": {"cutoff": cutoff}}}},
        instance=instance,
        resources={"mvcc": MvccResource(root_uri=warehouse)},
        raise_on_error=False,
    )
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert f"retention cutoff {cutoff!r}" in failure.step_failure_data.error.message
    assert len(mvcc.open_table(t.uri).versions()) == 2


@pytest.mark.slow  # a schedule's job built (about 0.5 s)
def test_schedule_gives_its_run_the_tick_time_cutoff(warehouse: str) -> None:
    """The nightly tick measures retention to its scheduled time and passes that time minus the window to
    the run: a tick a day after the commits finds versions to remove, a tick before them finds none."""
    t = mvcc.write_table(rows(0, 200), f"{warehouse}/nightly")
    t.append(rows(200, 200))
    options = mvcc.compaction.CompactionOptions(target_rows_per_fragment=100)  # nothing to compact
    schedule = build_maintenance_schedule("nightly", options=options, older_than=timedelta(hours=1))
    assert not tick(schedule, warehouse).run_requests
    at = datetime.now(UTC) + timedelta(days=1)
    [request] = tick(schedule, warehouse, at).run_requests
    assert "1 removable version(s)" in request.tags["mvcc/work"]
    cutoff = request.run_config["ops"]["cleanup_old_versions"]["config"]["cutoff"]
    assert datetime.fromisoformat(cutoff) == at - timedelta(hours=1)


@pytest.mark.slow  # one compaction run with retention (about 1 s)
def test_sensor_folds_retention_into_the_compaction_it_requests(instance: dg.DagsterInstance, warehouse: str) -> None:
    """Small fragments fail and old versions are removable: one run of the compaction job that has a
    retention step, not a compaction run and a retention run; that run compacts and removes the versions
    committed before the tick's time minus the window. A compaction job without retention leaves retention
    to its own run."""
    t = mvcc.write_table(rows(0), f"{warehouse}/both")
    for i in range(1, 4):
        t.append(rows(10 * i))  # four small fragments, versions 1-4
    window = timedelta(hours=1)
    thresholds = HealthThresholds(small_fragment_rows=100, small_fragments=Level(3, 9), versions_kept=Level(3, 9))
    resources = {"mvcc": MvccResource(root_uri=warehouse)}
    retention = build_retention_job("both", older_than=window)
    options = mvcc.compaction.CompactionOptions(target_rows_per_fragment=1000)
    folded = build_compaction_job("both", options=options, older_than=window)
    plain = build_compaction_job("both", options=options, name="plain")
    later = datetime.now(UTC) + timedelta(days=1)

    def requests(compaction: dg.JobDefinition) -> list[dg.RunRequest]:
        sensor = build_health_sensor(
            ["both"], compaction_job=compaction, retention_job=retention, thresholds=thresholds, clock=lambda: later
        )
        return sensor(dg.build_sensor_context(instance=instance, resources=resources)).run_requests or []

    assert sorted(r.job_name for r in requests(plain)) == ["mvcc_retention__both", "plain"]
    [request] = requests(folded)
    assert request.job_name == folded.name and "cleanup_old_versions" in folded.graph.node_dict
    # the run, with a window of 0 and the cutoff moved to now (an hour's window would keep every version)
    config = retention_run_config(datetime.now(UTC) + timedelta(hours=1))  # every version before the run's
    short = build_compaction_job("both", options=options, older_than=timedelta(0), name="short")
    result = short.execute_in_process(run_config=config, instance=instance, resources=resources)
    # versions 5 (ReserveFragments) and 6 (Rewrite) are the run's; every older one goes after the Rewrite
    assert result.success and result.output_for_node("cleanup_old_versions") == [1, 2, 3, 4, 5]
    after = mvcc.open_table(t.uri)
    assert len(after.get_fragments()) == 1 and [v.version for v in after.versions()] == [6]
    assert after.to_table().column("n").to_pylist() == list(range(40))


def test_sensor_checks_again_only_the_tables_that_changed(
    instance: dg.DagsterInstance, warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The health sensor keys a settled table on its kept versions (not a copy of its manifest): a tick after
    a commit, a retention run, or a drop and rewrite to the same version number evaluates that table again;
    a tick with nothing changed evaluates no table."""
    evaluated: list[str] = []
    original = mvcc.compaction.recommend

    def counting(table: mvcc.Table, *args: Any, **kwargs: Any) -> Any:
        evaluated.append(Path(table.uri).name)
        return original(table, *args, **kwargs)

    monkeypatch.setattr(mvcc.compaction, "recommend", counting)  # the sensor's one question per table
    a = mvcc.write_table(rows(0), f"{warehouse}/a")
    mvcc.write_table(rows(0), f"{warehouse}/b")
    a.append(rows(10))
    retention = {t: build_retention_job(t, older_than=timedelta(days=1)) for t in ("a", "b")}
    sensor = build_health_sensor(["a", "b"], retention_job=retention, thresholds=HealthThresholds())
    resources = {"mvcc": MvccResource(root_uri=warehouse)}
    cursor = None

    def checked() -> list[str]:
        nonlocal cursor
        evaluated.clear()
        result = sensor(dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources))
        cursor = result.cursor
        assert not result.run_requests  # nothing fails, nothing is old enough: every table settles
        return sorted(evaluated)

    assert checked() == ["a", "b"]
    assert checked() == []
    a.append(rows(20))
    assert checked() == ["a"]
    assert checked() == []
    a.cleanup_old_versions(timedelta(0))  # the latest version unchanged, the kept ones not
    assert checked() == ["a"]
    shutil.rmtree(f"{warehouse}/b")  # b written again to the same version number: another table
    mvcc.write_table(rows(5), f"{warehouse}/b")
    assert checked() == ["b"]
    assert checked() == []
