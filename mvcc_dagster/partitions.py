"""Partition predicates: the SQL that scopes a partitioned write (`overwrite(where=...)`) and a read.

Built from instants and the column type, failing closed: docs/integrations/dagster/io_manager.md ("Partitioned writes
replace
exactly their partition").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, time

import dagster as dg
import pyarrow as pa

from .metadata import PARTITION_EXPR


class PartitionPredicateError(ValueError):
    """The partition's predicate cannot be built; nothing may be written."""


def quote_ident(name: str, dialect: str = "mvcc") -> str:
    """A column name as a SQL identifier (mvcc's SQL: double quotes; Spark SQL: backticks).

    Args:
        name: The column name.
        dialect: ``"mvcc"`` or ``"spark"``.

    Returns:
        The quoted identifier.
    """
    if dialect == "spark":
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


def quote_str(value: str, dialect: str = "mvcc") -> str:
    """A SQL string literal (mvcc's SQL doubles quotes; Spark SQL escapes with backslashes and would
    concatenate ``'a''b'`` into ``ab``).

    Args:
        value: The text.
        dialect: ``"mvcc"`` or ``"spark"``.

    Returns:
        The literal.
    """
    if dialect == "spark":
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return "'" + value.replace("'", "''") + "'"


def _column(schema: pa.Schema, column: str, asset: str) -> pa.Field:
    if not isinstance(column, str) or not column:
        raise PartitionPredicateError(
            f"asset {asset}: metadata {PARTITION_EXPR!r} must name a column of the table, got {column!r}"
        )
    index = schema.get_field_index(column)
    if index < 0:
        raise PartitionPredicateError(
            f"asset {asset}: metadata {PARTITION_EXPR!r} names column {column!r}, which the table does not have "
            f"(columns: {schema.names})"
        )
    return schema.field(index)


def _merge_windows(windows: Sequence[dg.TimeWindow]) -> list[tuple[datetime, datetime]]:
    """Sort the windows and merge the ones that touch (a backfill range becomes one window)."""
    merged: list[tuple[datetime, datetime]] = []
    for w in sorted(windows, key=lambda w: w.start):
        if merged and w.start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], w.end))
        else:
            merged.append((w.start, w.end))
    return merged


def _ts_literal(value: datetime, dialect: str) -> str:
    return f"TIMESTAMP {quote_str(value.isoformat(sep=' '), dialect)}"


def time_window_predicate(field: pa.Field, start: datetime, end: datetime, asset: str, dialect: str = "mvcc") -> str:
    """`start <= col < end` for a timestamp or date column (see the module docstring).

    Args:
        field: The column.
        start: The window's start (an instant).
        end: The window's end.
        asset: The asset, for messages.
        dialect: ``"mvcc"`` or ``"spark"``.

    Returns:
        The predicate.
    """
    col = quote_ident(field.name, dialect)
    t = field.type
    if pa.types.is_timestamp(t):
        if t.tz is not None:
            lo, hi = start.astimezone(UTC), end.astimezone(UTC)
        else:
            lo, hi = start.replace(tzinfo=None), end.replace(tzinfo=None)
        return f"({col} >= {_ts_literal(lo, dialect)} AND {col} < {_ts_literal(hi, dialect)})"
    if pa.types.is_date(t):
        if start.timetz().replace(tzinfo=None) != time(0) or end.timetz().replace(tzinfo=None) != time(0):
            raise PartitionPredicateError(
                f"asset {asset}: {PARTITION_EXPR!r} column {field.name!r} is a date but the partition window "
                f"{start.isoformat()} .. {end.isoformat()} does not start and end at midnight"
            )
        first, last = quote_str(start.date().isoformat(), dialect), quote_str(end.date().isoformat(), dialect)
        return f"({col} >= DATE {first} AND {col} < DATE {last})"
    raise PartitionPredicateError(
        f"asset {asset}: {PARTITION_EXPR!r} column {field.name!r} of a time-partitioned asset must be a timestamp "
        f"or a date, it is {t}"
    )


def static_predicate(field: pa.Field, keys: Sequence[str], asset: str, dialect: str = "mvcc") -> str:
    """`col IN (keys)` for a string column.

    Args:
        field: The column.
        keys: The partition keys.
        asset: The asset, for messages.
        dialect: ``"mvcc"`` or ``"spark"``.

    Returns:
        The predicate.
    """
    if not (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)):
        raise PartitionPredicateError(
            f"asset {asset}: {PARTITION_EXPR!r} column {field.name!r} of a statically partitioned asset must be a "
            f"string, it is {field.type}"
        )
    keys = sorted(set(keys))
    col = quote_ident(field.name, dialect)
    if len(keys) == 1:
        return f"({col} = {quote_str(keys[0], dialect)})"
    return f"({col} IN ({', '.join(quote_str(k, dialect) for k in keys)}))"


def _single(
    partitions_def: dg.PartitionsDefinition,
    keys: Sequence[str],
    column: object,
    schema: pa.Schema,
    asset: str,
    dialect: str,
) -> str:
    field = _column(schema, column, asset)  # type: ignore[arg-type]
    if isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
        windows = [partitions_def.time_window_for_partition_key(k) for k in keys]
        parts = [time_window_predicate(field, s, e, asset, dialect) for s, e in _merge_windows(windows)]
        return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"
    if isinstance(partitions_def, dg.StaticPartitionsDefinition | dg.DynamicPartitionsDefinition):
        return static_predicate(field, keys, asset, dialect)
    raise PartitionPredicateError(
        f"asset {asset}: partitions of type {type(partitions_def).__name__} are not supported "
        "(time windows, static, dynamic and multi-partitions are)"
    )


def partition_predicate(
    partitions_def: dg.PartitionsDefinition,
    keys: Sequence[str],
    partition_expr: object,
    schema: pa.Schema,
    *,
    asset: str,
    dialect: str = "mvcc",
) -> str:
    """The SQL predicate selecting exactly the rows of partitions `keys` of a table with `schema`.

    `partition_expr`: the column name (a multi-partitioned asset: a mapping dimension name -> column).
    `dialect`: ``"mvcc"`` (the core's SQL: writes and pyarrow reads) or ``"spark"`` (a Spark DataFrame filter).

    Args:
        partitions_def: The asset's partitions definition.
        keys: The partition keys (a single-run backfill: several).
        partition_expr: See above.
        schema: The table's (or the output's) Arrow schema.
        asset: The asset, for messages.
        dialect: See above.

    Returns:
        The predicate.

    Raises:
        PartitionPredicateError: It cannot be built (no column, a missing column, a column of the wrong type).
    """
    if not keys:
        raise PartitionPredicateError(f"asset {asset}: no partition keys to build a predicate from")
    if partition_expr is None:
        raise PartitionPredicateError(
            f"asset {asset} is partitioned but has no {PARTITION_EXPR!r} definition metadata naming the partition "
            "column; refusing to overwrite without a predicate"
        )
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        if not isinstance(partition_expr, Mapping):
            raise PartitionPredicateError(
                f"asset {asset}: a multi-partitioned asset's {PARTITION_EXPR!r} must map each dimension to a column, "
                f"got {partition_expr!r}"
            )
        dims = {d.name: d.partitions_def for d in partitions_def.partitions_defs}
        missing = sorted(set(dims) - set(partition_expr))
        if missing:
            raise PartitionPredicateError(f"asset {asset}: {PARTITION_EXPR!r} has no column for dimension(s) {missing}")
        disjuncts = []
        for key in sorted(set(keys)):
            by_dim = partitions_def.get_partition_key_from_str(key).keys_by_dimension
            conj = [_single(dims[d], [by_dim[d]], partition_expr[d], schema, asset, dialect) for d in sorted(dims)]
            disjuncts.append("(" + " AND ".join(conj) + ")")
        return disjuncts[0] if len(disjuncts) == 1 else "(" + " OR ".join(disjuncts) + ")"
    if isinstance(partition_expr, Mapping):
        raise PartitionPredicateError(
            f"asset {asset}: {PARTITION_EXPR!r} must be a column name for a single-dimension partitioned asset, "
            f"got {partition_expr!r}"
        )
    return _single(partitions_def, keys, partition_expr, schema, asset, dialect)
