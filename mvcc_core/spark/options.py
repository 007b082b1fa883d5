"""The options of the `mvcc` Spark data source: parsed and checked on the driver, before anything runs.

Spark hands a data source every `.option(...)` as a string in a case-insensitive mapping. A misspelt
option would otherwise be ignored silently (a `verison` read of the latest version, an `aws_endpiont`
write to real S3), so every name is checked against the lists below and an unknown one is refused
with the list of known ones.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mvcc_core.times import parse_time

#: Read options (time travel, projection, partition sizing).
READ_OPTIONS = ("version", "tag", "timestamp", "columns", "rows_per_partition")
#: Write options.
WRITE_OPTIONS = ("replacewhere", "commit_message", "transaction_properties", "max_rows_per_file")
#: Storage options the core's object store understands (Lance / object_store names and their aliases),
#: plus the external manifest store and the local backend's fsync switch.
STORAGE_OPTIONS = (
    "aws_access_key_id",
    "access_key_id",
    "aws_secret_access_key",
    "secret_access_key",
    "aws_session_token",
    "session_token",
    "aws_endpoint",
    "endpoint",
    "aws_endpoint_url",
    "endpoint_url",
    "aws_region",
    "region",
    "aws_default_region",
    "region_name",
    "allow_http",
    "conditional_put",
    "aws_conditional_put",
    "external_store",
    "fsync",
)
_BOOLEAN_STORAGE_OPTIONS = ("fsync",)
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")

#: Fewest live rows per input partition when the read sizes its partitions (no `rows_per_partition`): 128 Ki
#: rows, so a table of a few hundred thousand rows written by a few Spark tasks is still read by several tasks
#: (at 1 Mi a 500k-row table was one task on local[2]: a full read took 1.8x Spark's parquet reader, at 128 Ki
#: 1.5x).
DEFAULT_ROWS_PER_PARTITION = 131_072
#: Input partitions a read sized by the table aims at, or a multiple of it for a large table: a Python data
#: source task costs ~30-120 ms beyond its rows (docs/guide/spark.md, "The data source against the API's floor"), so
#: a table of 1 Mi-row files gets fewer, larger tasks than one per file; a multiple of 4 gives 1, 2 or 4
#: cores equal waves.
PARTITIONS_PER_READ = 4
#: Most live rows per input partition when the read sizes its partitions (larger tables get 4 more at a time).
MAX_ROWS_PER_PARTITION = 2_097_152
#: Upper bound of fragments per input partition: opening a file costs a footer read (a request on S3),
#: so thousands of tiny fragments are still spread over several tasks.
MAX_FRAGMENTS_PER_PARTITION = 64


@dataclass(frozen=True)
class SourceOptions:
    """What a read or a write was asked for, parsed from Spark's string options."""

    path: str
    storage_options: dict[str, Any] | None = None
    version: int | str | datetime | None = None  # a number, a tag or a timestamp
    columns: list[str] | None = None
    rows_per_partition: int | None = None  # None: sized by the table (`partition_rows`)
    replace_where: str | None = None
    commit_message: str | None = None
    transaction_properties: dict[str, str] = field(default_factory=dict)
    max_rows_per_file: int | None = None


def partition_rows(live_rows: int) -> int:
    """Live rows per input partition of a read that gives no `rows_per_partition`: the table's live rows over
    PARTITIONS_PER_READ partitions (or a multiple of it, so that none exceeds MAX_ROWS_PER_PARTITION), at
    least DEFAULT_ROWS_PER_PARTITION.

    Args:
        live_rows: the live rows of the fragments read

    Returns:
        The rows per partition `group_fragments` aims at.
    """
    partitions = PARTITIONS_PER_READ * max(1, -(-live_rows // (PARTITIONS_PER_READ * MAX_ROWS_PER_PARTITION)))
    return max(DEFAULT_ROWS_PER_PARTITION, -(-live_rows // partitions))


def _positive_int(name: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"mvcc option {name!r} must be a positive integer, got {value!r}") from None
    if number <= 0:
        raise ValueError(f"mvcc option {name!r} must be a positive integer, got {value!r}")
    return number


def parse_timestamp(value: str) -> datetime:
    """An ISO 8601 timestamp (`mvcc_core.times.parse_time`, the parser of every time a user types); without a
    zone it is UTC (as the core's `checkout(datetime)` takes it).

    Args:
        value: the option's text

    Raises:
        ValueError: it is not an ISO 8601 timestamp
    """
    try:
        return parse_time(value)
    except ValueError:
        raise ValueError(
            f"mvcc option 'timestamp' must be an ISO 8601 timestamp such as 2026-11-01T12:00:00Z, got {value!r}"
        ) from None


def parse_options(options: Mapping[str, str], *, for_write: bool) -> SourceOptions:
    """Check and parse Spark's options of one read or write; ValueError names an unknown or bad option.

    Args:
        options: Spark's options, as given to `.option()`/`.options()` and `.load()`/`.save()`
        for_write: the options of a write (else of a read)
    """
    lowered = {str(k).lower(): str(v) for k, v in options.items() if v is not None}
    path = lowered.pop("path", None)
    if not path:
        verb = "save(uri)" if for_write else "load(uri)"
        raise ValueError(f"the mvcc data source needs a table uri: .{verb} or .option('path', uri)")
    own = WRITE_OPTIONS if for_write else READ_OPTIONS
    unknown = sorted(k for k in lowered if k not in own and k not in STORAGE_OPTIONS)
    if unknown:
        kind = "write" if for_write else "read"
        raise ValueError(
            f"unknown mvcc {kind} option(s) {unknown}; {kind} options are {list(own)}, "
            f"storage options are {list(STORAGE_OPTIONS)}"
        )
    storage: dict[str, Any] = {}
    for key in STORAGE_OPTIONS:
        if key not in lowered:
            continue
        value: Any = lowered[key]
        if key in _BOOLEAN_STORAGE_OPTIONS:
            if value.lower() not in _TRUE + _FALSE:
                raise ValueError(f"mvcc option {key!r} must be true or false, got {value!r}")
            value = value.lower() in _TRUE
        storage[key] = value
    parsed: dict[str, Any] = {"path": path, "storage_options": storage or None}
    if for_write:
        parsed["replace_where"] = lowered.get("replacewhere")
        if parsed["replace_where"] is not None and not parsed["replace_where"].strip():
            raise ValueError("mvcc option 'replaceWhere' is empty; give a SQL predicate such as \"day = '2026-11-01'\"")
        parsed["commit_message"] = lowered.get("commit_message")
        if "transaction_properties" in lowered:
            parsed["transaction_properties"] = _properties(lowered["transaction_properties"])
        if "max_rows_per_file" in lowered:
            parsed["max_rows_per_file"] = _positive_int("max_rows_per_file", lowered["max_rows_per_file"])
        return SourceOptions(**parsed)
    given = [k for k in ("version", "tag", "timestamp") if k in lowered]
    if len(given) > 1:
        raise ValueError(f"give at most one of the mvcc options version, tag and timestamp; got {given}")
    if "version" in lowered:
        parsed["version"] = _positive_int("version", lowered["version"])
    elif "tag" in lowered:
        parsed["version"] = lowered["tag"]
    elif "timestamp" in lowered:
        parsed["version"] = parse_timestamp(lowered["timestamp"])
    if "columns" in lowered:
        columns = [c.strip() for c in lowered["columns"].split(",") if c.strip()]
        if not columns:
            raise ValueError(f"mvcc option 'columns' names no column: {lowered['columns']!r}")
        parsed["columns"] = columns
    if "rows_per_partition" in lowered:
        parsed["rows_per_partition"] = _positive_int("rows_per_partition", lowered["rows_per_partition"])
    return SourceOptions(**parsed)


def _properties(text: str) -> dict[str, str]:
    """`transaction_properties` as a JSON object of strings (Spark options are flat strings)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError(
            f"mvcc option 'transaction_properties' must be a JSON object of strings such as "
            f'{{"job": "nightly"}}, got {text!r}'
        )
    return value
