"""The week's command line (benchmarks/week/simulation.py): its flags, and ``--quick``'s settings."""

import argparse
from pathlib import Path

QUICK = {
    "days": 7,
    "hour_seconds": 0.5,
    "rows_per_hour": 20000,
    "retention_days": 2,
    "workers": 2,
    "appends_per_day": 6,
}


def parse_arguments(argv: list[str] | None = None, description: str | None = None) -> argparse.Namespace:
    """The command line's settings; ``--quick`` gives its settings as defaults, so a flag given beside it wins.

    Args:
        argv: The arguments (None: the process's).
        description: The command's one-line description (week.py's docstring's first line).

    Returns:
        The parsed arguments.
    """
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--quick", action="store_true", help=f"the small week: {QUICK} (at most 5 minutes); a flag given wins"
    )
    p.add_argument("--days", type=int, default=7)
    p.add_argument("--hour-seconds", type=float, default=3.0, help="real seconds per simulated hour")
    p.add_argument("--rows-per-hour", type=int, default=5000)
    p.add_argument("--appends-per-day", type=int, default=24, choices=[1, 2, 3, 4, 6, 8, 12, 24])
    p.add_argument("--retention-days", type=float, default=2, help="the retention window, in simulated days")
    p.add_argument("--delete-share", type=float, default=0.01, help="share of every hour's rows deleted daily")
    p.add_argument("--delete-hour", type=int, default=3, help="the daily delete's hour (03:00: with maintenance)")
    p.add_argument("--amplification-warn", type=float, default=3.0, help="storage_amplification WARN threshold")
    p.add_argument(
        "--removable-share",
        type=float,
        default=0.3,
        help="the health sensor's retention_removable_share (negative: none, retention only nightly and on checks)",
    )
    p.add_argument(
        "--small-fragments-warn", type=int, default=8, help="small_fragments WARN (the health sensor compacts at it)"
    )
    p.add_argument("--deleted-warn", type=float, default=0.1, help="deleted_rows WARN (the sensor compacts at it)")
    p.add_argument(
        "--materialize-deletions",
        type=float,
        default=0.1,
        help="the pipeline tables' compaction materialize_deletions_threshold",
    )
    p.add_argument(
        "--min-removable-bytes",
        type=int,
        help="the health sensor's retention_min_removable_bytes (default: HealthThresholds' own, 8 MiB)",
    )
    p.add_argument("--workers", type=int, default=3, help="runs executing at once (the run pool's processes)")
    p.add_argument(
        "--executor",
        choices=["default", "in_process"],
        default="default",
        help="the code location's executor for jobs that do not choose one (default: Dagster's, multiprocess)",
    )
    p.add_argument("--no-maintenance", action="store_true", help="the same traffic, schedule and sensors off")
    p.add_argument(
        "--tables",
        type=int,
        help="a fleet of this many tables: 10 hot with the week's traffic, the rest nearly idle, one nightly "
        "budget (week/fleet.py)",
    )
    p.add_argument(
        "--instance",
        choices=["sqlite", "postgres"],
        default="sqlite",
        help="with --tables: the Dagster instance's storage (postgres: a fresh database on MVCC_WEEK_POSTGRES)",
    )
    p.add_argument(
        "--fleet-runs",
        choices=["dagster", "core"],
        default="dagster",
        help="with --tables: the chosen tables' maintenance as the plugin's nightly runs, or run_fleet in-process",
    )
    p.add_argument("--max-tables", type=int, help="with --tables: tables maintained a night (default: a tenth)")
    p.add_argument(
        "--budget-bytes",
        type=int,
        default=32 * 2**20,
        help="with --tables: bytes the night's compactions may read (plan_fleet's max_bytes)",
    )
    p.add_argument("--json", type=Path, help="write the result here")
    p.add_argument("--plot", type=Path, help="write the chart here (PNG)")
    p.add_argument("--baseline", type=Path, help="a result JSON to draw beside this one (e.g. --no-maintenance)")
    p.add_argument(
        "--report", type=Path, help="print a result JSON (with --baseline) as Markdown tables (and --plot it), only"
    )
    p.add_argument("--scaling", action="store_true", help="measure per-table costs (health, compaction) only")
    p.add_argument("--keep", type=Path, help="keep the warehouse and DAGSTER_HOME under this directory")
    if p.parse_known_args(argv)[0].quick:  # the small week's settings as defaults: `--quick --days 21`: 21 days
        p.set_defaults(**QUICK)
    a = p.parse_args(argv)
    for flag, value in (("--tables", a.tables), ("--max-tables", a.max_tables), ("--budget-bytes", a.budget_bytes)):
        if value is not None and value < 1:
            p.error(f"{flag} must be a positive number, got {value}")
    return a
