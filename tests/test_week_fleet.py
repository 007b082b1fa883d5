"""The fleet week (benchmarks/week/fleet.py, ``python -m benchmarks.week --tables N``) at a tiny scale: its
JSON keeps the week's shape and adds the fleet's figures; the nightly plan stays within its table limit; a
fleet too small for its hot tables is refused naming the flag."""

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dagster")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout root: `benchmarks` is a package
from benchmarks.week import simulation as week  # noqa: E402

TINY = ["--days", "2", "--hour-seconds", "0.05", "--rows-per-hour", "50", "--appends-per-day", "6", "--workers", "2"]
FLEET_DAY_KEYS = {"maintenance_cpu_seconds", "maintenance_runs", "stored_data_bytes", "live_data_bytes", "kind"}


def run_fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> dict[str, Any]:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.setenv(week.SETTINGS_ENV, "{}")
    return week.main([*TINY, "--keep", str(tmp_path), *extra])


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("runs", ["core", "dagster"])
def test_fleet_shape_and_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runs: str) -> None:
    out = tmp_path / "fleet.json"
    result = run_fleet(
        tmp_path, monkeypatch, "--tables", "14", "--max-tables", "3", "--fleet-runs", runs, "--json", str(out)
    )
    assert out.exists()
    assert {"days", "runs", "pipeline_cpu_seconds", "maintenance_cpu_seconds", "targets", "fleet"} <= set(result)
    days = result["days"]
    assert {d["day"] for d in days} == {1, 2}
    assert all(set(d) >= FLEET_DAY_KEYS for d in days)
    assert len({d["table"] for d in days}) == 14  # every table measured (the daily ones from day 1 on)
    assert result["elapsed_seconds"] >= result["wall_seconds"]
    fleet = result["fleet"]
    assert fleet["tables"] == 14 and fleet["runs_path"] == runs and fleet["budget"]["max_tables"] == 3
    assert {"mvcc_version_sensor", "mvcc_health_sensor", "fleet plan"} <= set(fleet["ticks"])
    assert fleet["ticks"]["mvcc_version_sensor"]["ticks"] == 48 and fleet["ticks"]["fleet plan"]["ticks"] == 2
    nights = fleet["nights"]
    assert all(len(n["chosen"]) <= 3 for n in nights)
    assert nights[1]["advised"] > len(nights[1]["chosen"])  # the budget does not cover every table that asks
    nightly = result["runs"]["fleet_nightly"]
    assert nightly["runs"] == sum(len(n["chosen"]) for n in nights) and nightly["failed"] == 0
    # each run on the day its night began (night n, at 03:00 of day n, is in day n + 1's figures)
    assert sum(d["maintenance_runs"] for d in days) == nightly["runs"]
    # a chosen table was maintained: its small fragments the next day are fewer than another day's max
    chosen = nights[1]["chosen"][0]
    after = next(d for d in days if d["table"] == chosen and d["day"] == 2)
    assert after["maintenance_runs"] == 1 and after["maintenance_cpu_seconds"] > 0


def test_fleet_too_small_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit, match="--tables 5: a fleet has the 10 hot tables"):
        run_fleet(tmp_path, monkeypatch, "--tables", "5")
    assert list(tmp_path.iterdir()) == []  # nothing left behind


def test_non_positive_fleet_flags_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    for flag in ("--tables", "--max-tables", "--budget-bytes"):
        with pytest.raises(SystemExit):
            week.parse_arguments([flag, "0"])
        assert f"{flag} must be a positive number, got 0" in capsys.readouterr().err
