"""Durations as an operator types them (`7d`, `12h`, `1w2d`): the CLI's `--older-than` and the Airflow
operators' `older_than` accept exactly these."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

__all__ = ["age_problem", "parse_duration"]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(w|d|h|m|s)", re.IGNORECASE)
_DURATION_UNITS = {"w": "weeks", "d": "days", "h": "hours", "m": "minutes", "s": "seconds"}


def parse_duration(text: str) -> timedelta:
    """`7d`, `12h`, `1w2d`, `90m`, `0s` -> a timedelta.

    A dozen lines instead of pendulum: retention ages are whole units, pendulum would add its import time to
    every command, and its ISO-8601 duration syntax (`P7D`) is not what an operator types.

    Args:
        text: the duration as typed: whole numbers with units w, d, h, m, s

    Raises:
        ValueError: anything else, or a duration over 999999999 days
    """
    cleaned = text.strip().replace(" ", "")
    parts = _DURATION.findall(cleaned)
    if not cleaned or "".join(f"{n}{u}" for n, u in parts).lower() != cleaned.lower():
        raise ValueError(f"not a duration: {text!r} (use e.g. 7d, 12h, 30m, 1w2d, 0s)")
    out = timedelta()
    try:
        for number, unit in parts:
            out += timedelta(**{_DURATION_UNITS[unit.lower()]: float(number)})
    except OverflowError:
        raise ValueError(f"duration {text!r} is too long (at most 999999999 days)") from None
    return out


def age_problem(age: timedelta, now: datetime | None = None) -> str | None:
    """What is wrong with `age` as an age ("older than this"), in words; None when `now - age` is a time.

    A duration can be longer than the time since year 1 (`1000000d`), where no date exists to compare with.

    Args:
        age: the age, e.g. a retention's `older_than`
        now: the time it is counted back from (None: now, UTC)
    """
    now = datetime.now(UTC) if now is None else now
    if age < timedelta(0):
        return "is negative: an age counts back from now"
    try:
        now - age
    except OverflowError:
        most = (now - datetime.min.replace(tzinfo=now.tzinfo)).days
        return f"reaches back before the year 1, where no version can be: give at most {most:,} days (e.g. 3650d)"
    return None
