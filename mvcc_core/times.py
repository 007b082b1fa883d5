"""Times as a user types them (`2026-11-01`, `2026-11-01T12:00:00+01:00`): one parser for every timestamp a
person passes, in Python (`checkout`, `restore`, `open_table(version=...)`) or on the command line (`--at`, a
positional reference). A time names no zone: UTC.

pendulum parses them (ISO 8601 with its zone forms, `Z`, offsets, a space for `T`); it is imported only when a
string must be read as a time, so a command that takes none pays nothing for it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

__all__ = ["HOW_TO_PASS_A_TIME", "looks_like_time", "parse_time"]

#: What can only be meant as a time: a full calendar date first (`2026-11-01`, then optionally a time). A tag
#: may look like this too (`2026-11-01`, `2026-11-01-rc1`); a tag of that name is looked up first.
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]|$)")

#: The hint every error about a reference that is neither a tag nor a time ends with.
HOW_TO_PASS_A_TIME = (
    "a time is an ISO 8601 date or date and time, e.g. 2026-11-01, 2026-11-01T12:00:00 (UTC) or "
    "2026-11-01T12:00:00+01:00"
)


def looks_like_time(text: str) -> bool:
    """Whether `text` starts with a full calendar date (YYYY-MM-DD), the only strings read as times.

    Args:
        text: the reference as typed
    """
    return bool(_ISO_DATE.match(text.strip()))


def parse_time(text: str) -> datetime:
    """An ISO 8601 date or date and time -> an aware datetime (UTC when `text` names no zone).

    Args:
        text: the time as typed: `2026-11-01`, `2026-11-01T12:00`, `2026-11-01 12:00:00Z`,
            `2026-11-01T12:00:00+01:00`

    Raises:
        ValueError: `text` does not start with a calendar date, or is no valid time (`2026-13-01`)
    """
    cleaned = text.strip()
    if not looks_like_time(cleaned):
        raise ValueError(f"{text!r} is not a time: {HOW_TO_PASS_A_TIME}")
    import pendulum  # here only: its import time is paid only when a time must be read

    try:
        parsed = pendulum.parse(cleaned, strict=True, exact=False)
    except ValueError:  # pendulum's ParserError is one
        raise ValueError(f"{text!r} is not a valid time: {HOW_TO_PASS_A_TIME}") from None
    if not isinstance(parsed, datetime):  # a Duration or Interval: not one moment
        raise ValueError(f"{text!r} is not one moment in time: {HOW_TO_PASS_A_TIME}")
    offset = parsed.utcoffset()
    plain = datetime(
        parsed.year, parsed.month, parsed.day, parsed.hour, parsed.minute, parsed.second, parsed.microsecond
    )
    return (plain - offset).replace(tzinfo=UTC) if offset is not None else plain.replace(tzinfo=UTC)
