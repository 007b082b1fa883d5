"""The week benchmark's targets, chart and Markdown tables (benchmarks/week/simulation.py's ``--report``, ``--plot``).

Reads only a result's JSON (no Dagster, no table), so a result can be reported again on any machine.
"""

from pathlib import Path
from typing import Any

TABLES = ["raw_events", "user_latest", "daily_revenue", "partner_feed"]
"""The week's tables, in the chart's order (benchmarks/week/simulation.py's `TABLES`)."""


def targets(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The week's targets checked on a week's result: each with its measured value and whether it is met."""
    days = result["days"]
    after = [d for d in days if d["day"] > result["retention_days"]]
    amplification = max((d["stored_bytes"] / max(1, d["live_bytes"]) for d in after), default=None)
    data_only = max((d.get("stored_data_bytes", 0) / max(1, d["live_bytes"]) for d in after), default=None)
    beyond = max((d.get("removable_bytes", 0) / max(1, d["live_bytes"]) for d in after), default=None)
    # CPU of the scans (wall times on this busy machine vary several-fold between repeats; both are in "days")
    scan = max((d["scan_cpu_seconds"] / max(1e-3, d["compacted_scan_cpu_seconds"]) for d in days), default=None)
    small = max((d["small_fragments"] for d in days), default=None)
    failed = sum(v["failed"] for v in result["runs"].values())
    twice = result.get("compactions_requested_twice_for_one_version", [])
    pipeline, maintenance = result["pipeline_cpu_seconds"], result["maintenance_cpu_seconds"]
    share = maintenance / pipeline if pipeline else None
    per_table = {
        name: {
            "small_fragments_max": max(d["small_fragments"] for d in days if d["table"] == name),
            "stored_over_live_after_retention_max": round(
                max((d["stored_bytes"] / max(1, d["live_bytes"]) for d in after if d["table"] == name), default=0), 3
            ),
            "stored_beyond_the_window_over_live_after_retention_max": round(
                max(
                    (d.get("removable_bytes", 0) / max(1, d["live_bytes"]) for d in after if d["table"] == name),
                    default=0,
                ),
                3,
            ),
            "scan_cpu_over_compacted_max": round(
                max(
                    d["scan_cpu_seconds"] / max(1e-3, d["compacted_scan_cpu_seconds"])
                    for d in days
                    if d["table"] == name
                ),
                3,
            ),
        }
        for name in dict.fromkeys(d["table"] for d in days)
    }
    return {
        "per_table": {"value": per_table, "target": "the same, per table", "met": None},
        "small_fragments_max": _at_most(small, 10),
        "stored_over_live_after_retention_max": _at_most(amplification, 1.3),
        "stored_data_files_over_live_after_retention_max (metadata excluded)": _at_most(data_only, 1.3),
        "stored_beyond_the_window_over_live_after_retention_max (what retention could remove now)": _at_most(
            beyond, 0.3
        ),
        "scan_cpu_over_compacted_max": _at_most(scan, 1.2),
        "failed_runs": {"value": failed, "target": 0, "met": failed == 0},
        "duplicate_requests": {
            "value": len(result["duplicate_requests"]) + len(twice),
            "target": 0,
            "met": not result["duplicate_requests"] and not twice,
        },
        "maintenance_cpu_share": _at_most(share, 0.15),
    }


def _at_most(value: float | None, target: float) -> dict[str, Any]:
    """A target met when the measured `value` (None: not measured) is at most `target`."""
    return {
        "value": None if value is None else round(value, 3),
        "target": target,
        "met": value is not None and value <= target,
    }


def plot(result: dict[str, Any], out: Path, baseline: dict[str, Any] | None = None) -> None:
    """Fragments, stored/live bytes and full-scan CPU over a compacted copy's, per table per day, with (solid)
    and without (dashed) maintenance; the maintenance runs as red ticks on the time axis; dotted: the targets."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, len(TABLES), figsize=(3.2 * len(TABLES), 7.0), sharex=True)
    series = [(result, "-", "with maintenance" if result["maintenance"] else "no maintenance")]
    if baseline is not None:
        series.append((baseline, "--", "with maintenance" if baseline["maintenance"] else "no maintenance"))
    for col, name in enumerate(TABLES):
        for res, style, label in series:
            rows = [d for d in res["days"] if d["table"] == name]
            x = [d["day"] for d in rows]
            axes[0, col].plot(x, [d["fragments"] for d in rows], style, marker="o", ms=3, label=label)
            ratio = [d["stored_bytes"] / max(1, d["live_bytes"]) for d in rows]
            axes[1, col].plot(x, ratio, style, marker="o", ms=3, label=label)
            scan = [d["scan_cpu_seconds"] / max(1e-3, d["compacted_scan_cpu_seconds"]) for d in rows]
            axes[2, col].plot(x, scan, style, marker="o", ms=3, label=label)
            if res["maintenance"]:
                hours = [r["hour"] / 24 for r in res["maintenance_runs"] if name in r["job"]]
                axes[0, col].plot(hours, [0] * len(hours), "|", color="tab:red", ms=10, label="maintenance run")
        axes[0, col].set_title(name, fontsize=9)
        axes[1, col].axhline(1.3, color="grey", lw=0.6, ls=":")
        axes[2, col].axhline(1.2, color="grey", lw=0.6, ls=":")
        axes[2, col].set_xlabel("simulated day")
    axes[0, 0].set_ylabel("fragments")
    axes[1, 0].set_ylabel("stored / live bytes")
    axes[2, 0].set_ylabel("scan CPU / compacted copy's")
    axes[0, 0].legend(fontsize=6)
    title = (
        f"a simulated week ({result['settings']['rows_per_hour']} rows/hour, 2-core machine, {result.get('date', '')})"
    )
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=64)
    plt.close(fig)


def markdown(result: dict[str, Any], baseline: dict[str, Any] | None = None) -> str:
    """The week's last day per table and the runs per kind, as the Markdown tables of docs/operations/running.md."""
    last = max(d["day"] for d in result["days"])
    lines = [
        "| table | fragments (small) | live rows | live MB | stored MB | stored / live (data files only; beyond the "
        "window) "
        "| scan CPU ms (compacted copy) |"
        + (" without maintenance: fragments, stored / live, scan CPU ms |" if baseline else ""),
        "|---|---|---|---|---|---|---|" + ("---|" if baseline else ""),
    ]
    for d in (d for d in result["days"] if d["day"] == last):
        row = (
            f"| {d['table']} | {d['fragments']} ({d['small_fragments']}) | {d['live_rows']:,} | "
            f"{d['live_bytes'] / 1e6:.2f} | {d['stored_bytes'] / 1e6:.2f} | "
            f"{d['stored_bytes'] / max(1, d['live_bytes']):.2f} "
            f"({d.get('stored_data_bytes', 0) / max(1, d['live_bytes']):.2f}; "
            f"{d.get('removable_bytes', 0) / max(1, d['live_bytes']):.2f}) | "
            f"{d['scan_cpu_seconds'] * 1000:.1f} ({d['compacted_scan_cpu_seconds'] * 1000:.1f}) |"
        )
        if baseline:
            b = next((x for x in baseline["days"] if x["day"] == last and x["table"] == d["table"]), None)
            row += (
                f" {b['fragments']}, {b['stored_bytes'] / max(1, b['live_bytes']):.2f}, "
                f"{b['scan_cpu_seconds'] * 1000:.1f} |"
                if b
                else " |"
            )
        lines.append(row)
    names = list(dict.fromkeys(d["table"] for d in result["days"]))
    lines += [
        "",
        "Every day's end: stored / live (beyond the window) and scan CPU / compacted copy's:",
        "",
        "| day | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for day in sorted({d["day"] for d in result["days"]}):
        cells = []
        for name in names:
            d = next((x for x in result["days"] if x["day"] == day and x["table"] == name), None)
            cells.append(
                "-"
                if d is None
                else f"{d['stored_bytes'] / max(1, d['live_bytes']):.2f} "
                f"({d.get('removable_bytes', 0) / max(1, d['live_bytes']):.2f}), "
                f"{d['scan_cpu_seconds'] / max(1e-3, d['compacted_scan_cpu_seconds']):.2f}"
            )
        lines.append(f"| {day} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| run kind | runs | failed | run retries | conflict step retries | wall s | CPU s |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, r in result["runs"].items():
        lines.append(
            f"| {kind} | {r['runs']} | {r['failed']} | {r['retries']} | {r['conflict_retries']} | "
            f"{r['wall_seconds'] if r['wall_seconds'] is not None else '-'} | {r['cpu_seconds']} |"
        )
    lines += ["", "| target | value | met |", "|---|---|---|"]
    for name, t in result["targets"].items():
        if name == "per_table":
            continue
        lines.append(f"| {name} (target {t['target']}) | {t['value']} | {'yes' if t['met'] else 'no'} |")
    return "\n".join(lines)
