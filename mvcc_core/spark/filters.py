"""Spark's pushed filters as one pyarrow Expression for the core's `Scan`.

Spark pushes simple filters (`EqualTo`, `In`, `IsNull`, `StringStartsWith`, ...; never OR or functions)
and re-evaluates the ones a reader returns. A filter is taken only when Arrow gives it exactly Spark's
answer on every row, so that Spark may skip re-evaluating it:

- comparisons on floating-point columns are returned: Spark orders NaN above every number and makes
  `NaN = NaN` true, Arrow makes every comparison with NaN false;
- a literal that does not cast to the column's type exactly, a null literal, a nested or unknown column,
  a column of a type Spark compares differently (maps, lists, structs, binary collations) are returned.

Taken filters are ANDed; the core's scan binds the Expression once and uses it for Parquet pushdown,
statistics pruning and scalar indices (`Scan.explain()` shows which).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

_COMPARISONS = {
    EqualTo: lambda f, v: f == v,
    GreaterThan: lambda f, v: f > v,
    GreaterThanOrEqual: lambda f, v: f >= v,
    LessThan: lambda f, v: f < v,
    LessThanOrEqual: lambda f, v: f <= v,
}
_STRING_MATCHES = {
    StringStartsWith: pc.starts_with,
    StringEndsWith: pc.ends_with,
    StringContains: pc.match_substring,
}


def _comparable(kind: pa.DataType) -> bool:
    """Types whose Arrow comparison equals Spark's (no NaN, no collation, no nested ordering)."""
    if pat.is_dictionary(kind):
        kind = kind.value_type
    return (
        pat.is_integer(kind)
        or pat.is_decimal(kind)
        or pat.is_string(kind)
        or pat.is_large_string(kind)
        or pat.is_boolean(kind)
        or pat.is_date(kind)
        or pat.is_timestamp(kind)
    )


def _literal(value: Any, kind: pa.DataType) -> pa.Scalar | None:
    """`value` as a scalar of the column's type, None when it does not convert exactly."""
    if value is None:
        return None
    if pat.is_dictionary(kind):
        kind = kind.value_type
    try:
        scalar = pa.scalar(value, type=kind)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError, TypeError, ValueError):
        return None
    try:
        if scalar.as_py() != value and not (pat.is_timestamp(kind) and kind.tz is not None):
            return None  # e.g. 1.5 into an int column, a truncated decimal
    except (ValueError, OverflowError):  # pragma: no cover - as_py of an odd timestamp
        return None
    return scalar


def translate(filter_: Filter, schema: pa.Schema) -> pc.Expression | None:
    """The Expression of one Spark filter over `schema` (the table's Arrow schema), None if not taken."""
    if isinstance(filter_, Not):
        inner = translate(filter_.child, schema)
        return None if inner is None else ~inner
    attribute = getattr(filter_, "attribute", ())
    if len(attribute) != 1 or attribute[0] not in schema.names:
        return None  # a nested field or a column this read does not have
    name = attribute[0]
    kind = schema.field(name).type
    column = pc.field(name)
    if isinstance(filter_, IsNull):
        return column.is_null()
    if isinstance(filter_, IsNotNull):
        return column.is_valid()
    if not _comparable(kind):
        return None
    if type(filter_) in _COMPARISONS:
        literal = _literal(filter_.value, kind)
        return None if literal is None else _COMPARISONS[type(filter_)](column, literal)
    if isinstance(filter_, EqualNullSafe):
        if filter_.value is None:
            return column.is_null()
        literal = _literal(filter_.value, kind)
        # null <=> v is false, null = v is null: a filter drops the row either way
        return None if literal is None else column == literal
    if isinstance(filter_, In):
        values = [v for v in filter_.value if v is not None]
        literals = [_literal(v, kind) for v in values]
        if not literals or any(lit is None for lit in literals):
            return None
        value_type = kind.value_type if pat.is_dictionary(kind) else kind
        return column.isin(pa.array([lit.as_py() for lit in literals], type=value_type))
    if type(filter_) in _STRING_MATCHES:
        string = pat.is_string(kind) or pat.is_large_string(kind)
        string = string or (pat.is_dictionary(kind) and pat.is_string(kind.value_type))
        if not string or not isinstance(filter_.value, str):
            return None
        return _STRING_MATCHES[type(filter_)](column, pattern=filter_.value)
    return None


def push(filters: Sequence[Filter], schema: pa.Schema) -> tuple[pc.Expression | None, list[Filter]]:
    """(the AND of the filters taken, the filters Spark must still evaluate)."""
    taken: list[pc.Expression] = []
    returned: list[Filter] = []
    for filter_ in filters:
        expression = translate(filter_, schema)
        if expression is None:
            returned.append(filter_)
        else:
            taken.append(expression)
    if not taken:
        return None, returned
    combined = taken[0]
    for expression in taken[1:]:
        combined = combined & expression
    return combined, returned
