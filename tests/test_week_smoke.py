"""Smoke test of the week benchmark (benchmarks/week/simulation.py): one simulated day at a tiny scale, run
with and without maintenance against real Dagster instances (sqlite in temporary DAGSTER_HOMEs)."""

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dagster")
pytest.importorskip("matplotlib")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout root: `benchmarks` is a package
from benchmarks.week import simulation as week  # noqa: E402

DAY_KEYS = {
    "day",
    "table",
    "fragments",
    "small_fragments",
    "live_rows",
    "live_bytes",
    "stored_bytes",
    "scan_seconds",
    "compacted_scan_seconds",
}
RUN_KEYS = {"runs", "failed", "retries", "conflict_retries", "wall_seconds", "cpu_seconds"}
TINY = ["--days", "1", "--hour-seconds", "0.5", "--rows-per-hour", "50", "--appends-per-day", "12", "--workers", "2"]
# hours of 0.5 s: at 0.25 s a machine under load (CI beside other work) ended the day before the compaction run
# landed (kept 11 fragments, bare 10). In-process jobs keep the test near a minute (the benchmark itself
# measures the jobs' default executor)
TINY += ["--executor", "in_process"]


def run_week(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> dict[str, Any]:
    # main() points DAGSTER_HOME and the settings at its temporary directory; monkeypatch restores them
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.setenv(week.SETTINGS_ENV, "{}")
    return week.main([*TINY, "--keep", str(tmp_path), *extra])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_week_shape_and_maintenance_reduces_fragments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, png = tmp_path / "week.json", tmp_path / "week.png"
    bare = run_week(tmp_path, monkeypatch, "--no-maintenance", "--json", str(tmp_path / "bare.json"))
    kept = run_week(
        tmp_path, monkeypatch, "--json", str(out), "--plot", str(png), "--baseline", str(tmp_path / "bare.json")
    )
    for result in (bare, kept):
        assert {"days", "runs", "pipeline_cpu_seconds", "maintenance_cpu_seconds", "retention_days"} <= set(result)
        assert result["days"] and all(set(d) >= DAY_KEYS for d in result["days"])
        assert all(set(v) >= RUN_KEYS for v in result["runs"].values())
        assert result["runs"]["append"]["runs"] == 12 and result["runs"]["append"]["failed"] == 0
        assert result["readers"]["scans"] > 0
    assert not any(k.startswith(("maintenance", "health")) for k in bare["runs"])
    assert kept["maintenance_cpu_seconds"] > 0 and kept["maintenance_runs"]
    assert out.exists() and png.stat().st_size > 1000

    def fragments(result: dict[str, Any], table: str) -> int:
        return next(d["fragments"] for d in result["days"] if d["table"] == table and d["day"] == 1)

    assert fragments(bare, "raw_events") >= 10  # 12 appends; the last may still be running at the day's end
    assert fragments(kept, "raw_events") < fragments(bare, "raw_events")
    assert fragments(kept, "partner_feed") < fragments(bare, "partner_feed")


def test_quick_gives_defaults_and_a_flag_beside_it_wins() -> None:
    quick = week.parse_arguments(["--quick"])
    assert (quick.days, quick.hour_seconds, quick.appends_per_day) == (7, 0.5, 6)
    longer = week.parse_arguments(["--quick", "--days", "21", "--workers", "3"])
    assert (longer.days, longer.workers, longer.hour_seconds, longer.rows_per_hour) == (21, 3, 0.5, 20000)
    assert week.parse_arguments([]).hour_seconds == 3.0


def test_simulated_clock_holds_the_window_through_a_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hours of 1 s with a 10 s hold before hour 3 and a 2-hour window: at hour 4 the cutoff is the real
    start of hour 2 (the versions of hours 0-1 are older), not "now - 2 s", which the hold would have moved
    past hours 2-3; a tick's now minus the jobs' older_than is that cutoff."""
    from benchmarks.week.clock import SimulatedClock

    clock = SimulatedClock(hour_seconds=1.0, retention_days=2 / 24)
    real = iter([100.0, 101.0, 102.0, 113.0, 114.0])
    monkeypatch.setattr("benchmarks.week.clock.time.time", lambda: next(real))
    for hour in range(5):
        clock.begin(hour)
    assert clock.cutoff().timestamp() == 102.0 and (clock.now() - clock.window).timestamp() == 102.0
    assert clock.real_start(-2).timestamp() == 98.0  # before the week: at the time scale
