"""Maintenance policy kept in the table's own configuration (Iceberg's table properties).

`compact_files` and `cleanup_old_versions` read these keys when the caller passes no value of their own (an
explicit argument wins); `update_config` refuses a value that does not parse (`check_config`), naming the key.
Keys and meanings: docs/operations/maintenance.md, "Policy in the table's configuration".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pyarrow as pa

from mvcc_core.durations import parse_duration
from mvcc_core.maintenance import clustering
from mvcc_core.maintenance.options import ZORDER_MAX_COLUMNS, ZORDER_MIN_COLUMNS, CompactionOptions

__all__ = [
    "CLUSTERING_KEYS",
    "COMPACTION_KEYS",
    "DEFAULT_OLDER_THAN",
    "KEYS",
    "MATERIALIZE_DELETIONS_THRESHOLD",
    "MAX_BYTES",
    "POLICY_KEYS",
    "RETAIN_VERSIONS",
    "RETENTION_KEYS",
    "RETENTION_OLDER_THAN",
    "SORT_BY",
    "TARGET_BYTES_PER_FRAGMENT",
    "TARGET_ROWS_PER_FRAGMENT",
    "ZORDER_BY",
    "PolicyKey",
    "PolicyValueError",
    "check_config",
    "compaction_options",
    "parse_size",
    "parse_value",
    "retention_settings",
]

TARGET_ROWS_PER_FRAGMENT = "mvcc.compaction.target_rows_per_fragment"
TARGET_BYTES_PER_FRAGMENT = "mvcc.compaction.target_bytes_per_fragment"
MATERIALIZE_DELETIONS_THRESHOLD = "mvcc.compaction.materialize_deletions_threshold"
MAX_BYTES = "mvcc.compaction.max_bytes"
RETENTION_OLDER_THAN = "mvcc.retention.older_than"
RETAIN_VERSIONS = "mvcc.retention.retain_versions"
SORT_BY = "mvcc.compaction.sort_by"
ZORDER_BY = "mvcc.compaction.zorder_by"
_PREFIXES = ("mvcc.compaction.", "mvcc.retention.")

_SIZE = re.compile(r"^\s*(\d+)\s*(b|kb|kib|mb|mib|gb|gib|tb|tib)?\s*$", re.IGNORECASE)
_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


_WHOLE = re.compile(r"^\s*[+-]?\d+\s*$")


def _count(text: str) -> int:
    cleaned = text.replace("_", "")
    if _WHOLE.match(cleaned) is None:
        raise ValueError("use a positive whole number, e.g. 10 or 1_048_576")
    value = int(cleaned)
    if value <= 0:
        raise ValueError("it must be positive")
    return value


def parse_size(text: str) -> int:
    """`134217728`, `128MiB`, `1GB` -> bytes (what the byte keys and the CLI's `--max-bytes` accept).

    Args:
        text: a whole number of bytes, optionally with a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)

    Raises:
        ValueError: anything else, or a size that is not positive
    """
    return _size(text)


def _size(text: str) -> int:
    match = _SIZE.match(text.replace("_", ""))
    if match is None:
        raise ValueError("use a number of bytes, optionally with a unit: 134217728, 128MiB, 1GB")
    value = int(match.group(1)) * _UNITS[(match.group(2) or "b").lower()]
    if value <= 0:
        raise ValueError("it must be positive")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError("use a fraction in [0, 1], e.g. 0.1") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError("it is a fraction in [0, 1]")
    return value


def _duration(text: str) -> timedelta:
    return parse_duration(text)


def _names(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(","))
    if not names or not all(names):
        raise ValueError("use column names separated by commas: user,ts")
    if len(set(names)) != len(names):
        raise ValueError("a column is named more than once")
    return names


def _zorder_names(text: str) -> tuple[str, ...]:
    names = _names(text)
    if not ZORDER_MIN_COLUMNS <= len(names) <= ZORDER_MAX_COLUMNS:
        raise ValueError(
            f"a z-order takes {ZORDER_MIN_COLUMNS} to {ZORDER_MAX_COLUMNS} columns, got {len(names)} "
            f"(for one column use {SORT_BY})"
        )
    return names


_PARSERS: dict[str, Callable[[str], Any]] = {
    TARGET_ROWS_PER_FRAGMENT: _count,
    TARGET_BYTES_PER_FRAGMENT: _size,
    MATERIALIZE_DELETIONS_THRESHOLD: _fraction,
    MAX_BYTES: _size,
    RETENTION_OLDER_THAN: _duration,
    RETAIN_VERSIONS: _count,
    SORT_BY: _names,
    ZORDER_BY: _zorder_names,
}
COMPACTION_KEYS = (TARGET_ROWS_PER_FRAGMENT, TARGET_BYTES_PER_FRAGMENT, MATERIALIZE_DELETIONS_THRESHOLD, MAX_BYTES)
#: The layout a compaction writes when the caller gives none (comma-separated column names; at most one is set).
CLUSTERING_KEYS = (SORT_BY, ZORDER_BY)
RETENTION_KEYS = (RETENTION_OLDER_THAN, RETAIN_VERSIONS)
POLICY_KEYS = COMPACTION_KEYS + CLUSTERING_KEYS + RETENTION_KEYS
#: The age `cleanup_old_versions` removes versions past when neither the caller nor the table says.
DEFAULT_OLDER_THAN = timedelta(days=14)


@dataclass(frozen=True)
class PolicyKey:
    """One policy key as a user meets it (`mvcc policy show`, the errors of `mvcc policy set`).

    Attributes:
        key: The configuration key.
        expected: The form its value takes, in words with an example.
        default: The value that applies when the table does not set the key, in the key's own form (None: no
            value applies, see `unset`).
        unset: What applies when the table does not set the key, in words.
    """

    key: str
    expected: str
    default: str | None
    unset: str


_DEFAULTS = CompactionOptions()
#: Every policy key, in `POLICY_KEYS`' order.
KEYS: dict[str, PolicyKey] = {
    k.key: k
    for k in (
        PolicyKey(
            TARGET_ROWS_PER_FRAGMENT,
            "a positive whole number of rows, e.g. 1048576",
            str(_DEFAULTS.target_rows_per_fragment),
            f"{_DEFAULTS.target_rows_per_fragment:,} rows",
        ),
        PolicyKey(
            TARGET_BYTES_PER_FRAGMENT,
            "a number of bytes, optionally with a unit, e.g. 134217728 or 128MiB",
            None,
            "no byte target (rows only)",
        ),
        PolicyKey(
            MATERIALIZE_DELETIONS_THRESHOLD,
            "a fraction in [0, 1], e.g. 0.1",
            str(_DEFAULTS.materialize_deletions_threshold),
            f"fragments with more than {_DEFAULTS.materialize_deletions_threshold:.0%} of their rows deleted",
        ),
        PolicyKey(MAX_BYTES, "a number of bytes, optionally with a unit, e.g. 512MiB", None, "no budget"),
        PolicyKey(SORT_BY, "column names separated by commas, e.g. user,ts", None, "no clustering"),
        PolicyKey(
            ZORDER_BY,
            f"{ZORDER_MIN_COLUMNS} to {ZORDER_MAX_COLUMNS} column names separated by commas, e.g. x,y",
            None,
            "no clustering",
        ),
        PolicyKey(RETENTION_OLDER_THAN, "a duration, e.g. 14d, 12h, 1w2d", "14d", "14 days"),
        PolicyKey(RETAIN_VERSIONS, "a positive whole number of versions, e.g. 10", None, "no floor"),
    )
}


class PolicyValueError(ValueError):
    """A policy key's value that does not parse, or a key under the policy prefixes that is no policy key; the
    parts are kept for a caller that words the error its own way (the CLI).

    Args:
        message: the whole message, naming the key and the value
        key: the key
        value: its value as given
        reason: why it cannot be used

    Attributes:
        key: The key.
        value: Its value as given.
        reason: Why it cannot be used, in words (the message without the key and value).
    """

    def __init__(self, message: str, key: str, value: object, reason: str) -> None:
        super().__init__(message)
        self.key, self.value, self.reason = key, value, reason


def _parse(key: str, value: str) -> Any:
    parser = _PARSERS.get(key)
    if parser is None:
        reason = f"not a maintenance key; the keys are {list(POLICY_KEYS)}"
        raise PolicyValueError(f"table configuration {key!r} is {reason}", key, value, reason)
    if not isinstance(value, str):
        raise PolicyValueError(
            f"table configuration {key!r} must be a string, got {value!r}", key, value, "it must be a string"
        )
    try:
        return parser(value)
    except (ValueError, OverflowError) as exc:
        raise PolicyValueError(
            f"table configuration {key!r} = {value!r} is not valid: {exc}", key, value, str(exc)
        ) from None


def parse_value(key: str, value: str) -> Any:
    """The value of policy key `key` as the maintenance calls read it (an int, a float, a timedelta, column names).

    Args:
        key: one of `POLICY_KEYS`
        value: its text, as the table's configuration holds it

    Raises:
        PolicyValueError: `key` is no policy key or `value` does not parse; the message names the key and says
            why, `reason` says why alone
    """
    return _parse(key, value)


def check_config(
    upsert: Mapping[str, str | None] | None,
    schema: pa.Schema | None = None,
    config: Mapping[str, str] | None = None,
    delete: Sequence[str] = (),
) -> None:
    """Refuse maintenance keys (`mvcc.compaction.*`, `mvcc.retention.*`) whose value does not parse and unknown
    keys under those prefixes; a None value (a removal) is always allowed. With the table's `schema`, a clustering
    key naming a column the table does not have is refused too, and with its `config`, setting both clustering
    keys (the one given beside the one the table has, unless that one is removed).

    Args:
        upsert: the keys `update_config` is about to set
        schema: the table's schema (None: column names are not checked)
        config: the table's configuration before the change (None: only `upsert` is looked at)
        delete: the keys the change removes

    Raises:
        ValueError: the message names the key, its value and what it must be
    """
    upsert = upsert or {}
    for key, value in upsert.items():
        if value is not None and isinstance(key, str) and key.startswith(_PREFIXES):
            parsed = _parse(key, value)
            if key in CLUSTERING_KEYS and schema is not None:
                clustering.check_columns(schema, f"table configuration {key!r}", parsed)
    after: dict[str, str | None] = {k: v for k, v in (config or {}).items() if k not in delete}
    after.update(upsert)
    both = [key for key in CLUSTERING_KEYS if after.get(key) is not None]
    if len(both) > 1 and any(key in upsert for key in both):
        raise ValueError(
            f"table configuration {both[0]!r} and {both[1]!r} cannot both be set (a compaction writes one layout): "
            "remove one"
        )


def _policy(config: Mapping[str, str], keys: tuple[str, ...]) -> dict[str, Any]:
    """The parsed values of `keys` that the table's configuration sets."""
    return {key: _parse(key, config[key]) for key in keys if key in config}


def compaction_options(config: Mapping[str, str], **explicit: Any) -> CompactionOptions:
    """`CompactionOptions` from the caller's arguments, the table's policy for the ones not given (None counts
    as not given), then the defaults.

    Args:
        config: the table's configuration (`manifest.config`)
        **explicit: `CompactionOptions` fields the caller passed

    Raises:
        ValueError: a policy key set on the table does not parse, or both clustering keys are set
    """
    fields = {k: v for k, v in explicit.items() if v is not None}
    unset = tuple(key for key in COMPACTION_KEYS if key.removeprefix("mvcc.compaction.") not in fields)
    if "sort_by" not in fields and "zorder_by" not in fields:  # the caller's layout wins over the table's
        layout = _policy(config, CLUSTERING_KEYS)
        if len(layout) > 1:
            raise ValueError(f"table configuration {SORT_BY!r} and {ZORDER_BY!r} are both set: remove one")
        for key, value in layout.items():
            fields[key.removeprefix("mvcc.compaction.")] = value
    for key, value in _policy(config, unset).items():  # only the keys the caller left to the policy are read
        fields[key.removeprefix("mvcc.compaction.")] = value
    return CompactionOptions(**fields)


def retention_settings(
    config: Mapping[str, str], older_than: timedelta | None, retain_versions: int | None
) -> tuple[timedelta, int | None]:
    """(older_than, retain_versions) for a cleanup: the caller's, else the table's policy, else 14 days and none.

    Args:
        config: the table's configuration (`manifest.config`)
        older_than: the caller's age (None: the policy's)
        retain_versions: the caller's count (None: the policy's)

    Raises:
        ValueError: a retention key set on the table does not parse
    """
    policy = _policy(
        config,
        tuple(k for k, given in zip(RETENTION_KEYS, (older_than, retain_versions), strict=True) if given is None),
    )
    if older_than is None:
        older_than = policy.get(RETENTION_OLDER_THAN, DEFAULT_OLDER_THAN)
    if retain_versions is None:
        retain_versions = policy.get(RETAIN_VERSIONS)
    return older_than, retain_versions
