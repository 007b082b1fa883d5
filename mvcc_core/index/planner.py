"""Which index, if any, answers part of a SQL filter.

The filter is split into its top-level AND conjuncts; the first conjunct that reads exactly one indexed
column (and nothing else) is answered by that column's index (a BTREE preferred over a BITMAP). The scan
still applies the whole filter to the rows the index returns, so using an index never changes a result.

Conjuncts that compare the bare column with literals (`=`, `<`, `<=`, `>`, `>=`, BETWEEN, IN) also give
value bounds, which let a lookup skip the index file's row groups whose statistics rule them out without
asking Arrow to simplify the expression for every row group (milliseconds on a large index).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp

from .._proto import table_pb2 as pb
from ..predicate import _PredicateDialect, to_physical_expression
from .lookup import BTREE

# One (lower, lower inclusive, upper, upper inclusive) range; None for an open end.
Range = tuple[object | None, bool, object | None, bool]
# Bounds: for every recognised conjunct, the ranges (any of them) its matching values lie in.
Bounds = list[list[Range]]


class IndexChoice(NamedTuple):
    index: pb.IndexMetadata
    expr: pc.Expression  # the chosen conjuncts over the physical column name
    bounds: Bounds  # literal bounds of some of those conjuncts; [] when none are simple comparisons


def _conjuncts(node: exp.Expression) -> list[exp.Expression]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node]


def _unparen(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _literal(node: exp.Expression, column_type: pa.DataType) -> object | None:
    """A literal's value as the filter compares it with the column (its type after the translator's exact
    coercion), or None when it is not a plain literal or would not be coerced exactly (then the filter
    compares under Arrow's type promotion, and bounds are not worth the risk)."""
    node = _unparen(node)
    negative = False
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        negative, node = True, node.this
    if not isinstance(node, exp.Literal):
        return None
    # the literal's own type, as predicate._Translator._literal / _number give it
    if node.is_string:
        if not (pa.types.is_string(column_type) or pa.types.is_large_string(column_type)):
            return None
        scalar = pa.scalar(node.this, pa.string())
    else:
        numeric = pa.types.is_integer(column_type) or pa.types.is_float32(column_type)
        if not (numeric or pa.types.is_float64(column_type)):
            return None
        text = ("-" if negative else "") + node.this
        if text.lstrip("+-").isdigit():
            value = int(text)
            if -(2**63) <= value < 2**63:
                scalar = pa.scalar(value, pa.int64())
            elif 0 <= value < 2**64:
                scalar = pa.scalar(value, pa.uint64())
            else:
                return None
        else:
            try:
                number = float(text)
            except ValueError:
                return None
            if not math.isfinite(number):
                return None
            scalar = pa.scalar(number, pa.float64())
    if scalar.type == column_type:
        return scalar.as_py()
    try:
        cast = scalar.cast(column_type)  # safe cast: raises on overflow or truncation
        if cast.cast(scalar.type) != scalar:
            return None
    except (pa.ArrowException, OverflowError):
        return None
    return cast.as_py()


_OPS = {exp.EQ: "=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_FLIP = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _ranges(node: exp.Expression, column_type: pa.DataType) -> list[Range] | None:
    """The value ranges a conjunct's matching rows lie in, when it compares the bare column with literals."""
    node = _unparen(node)
    if type(node) in _OPS:
        op, left, right = _OPS[type(node)], _unparen(node.this), _unparen(node.expression)
        if isinstance(right, exp.Column) and not isinstance(left, exp.Column):
            op, left, right = _FLIP[op], right, left
        if not isinstance(left, exp.Column) or (value := _literal(right, column_type)) is None:
            return None
        return [
            {
                "=": (value, True, value, True),
                "<": (None, False, value, False),
                "<=": (None, False, value, True),
                ">": (value, False, None, False),
                ">=": (value, True, None, False),
            }[op]
        ]
    if isinstance(node, exp.Between) and not node.args.get("symmetric"):
        if not isinstance(_unparen(node.this), exp.Column):
            return None
        low, high = _literal(node.args["low"], column_type), _literal(node.args["high"], column_type)
        return None if low is None or high is None else [(low, True, high, True)]
    if isinstance(node, exp.In) and node.args.get("query") is None and node.expressions:
        if not isinstance(_unparen(node.this), exp.Column) or len(node.expressions) > 256:
            return None
        out: list[Range] = []
        for item in node.expressions:
            if isinstance(_unparen(item), exp.Null):
                continue  # NULL in a top-level IN list never makes a row pass
            value = _literal(item, column_type)
            if value is None:
                return None
            out.append((value, True, value, True))
        return out
    return None


def choose_index(sql: str, schema: pa.Schema, physical: pa.Schema, manifest: pb.Manifest) -> IndexChoice | None:
    """The index answering part of the filter, the conjuncts it answers, and their bounds; or None."""
    if not len(manifest.indices):
        return None
    by_field: dict[int, pb.IndexMetadata] = {}
    for index in manifest.indices:
        if len(index.fields) == 1 and index.index_type in ("BTREE", "BITMAP") and index.files:
            current = by_field.get(index.fields[0])
            if current is None or (index.index_type == BTREE and current.index_type != BTREE):
                by_field[index.fields[0]] = index
    if not by_field:
        return None
    try:
        tree = sqlglot.parse_one(sql, dialect=_PredicateDialect)
    except sqlglot.errors.ParseError:
        return None
    ids = {f.name: f.id for f in manifest.fields if f.parent_id == -1}
    by_column: dict[str, list[tuple[pc.Expression, exp.Expression]]] = {}
    for conjunct in _conjuncts(tree):
        if any(True for _ in conjunct.find_all(exp.Dot)) or any(c.table for c in conjunct.find_all(exp.Column)):
            continue  # a struct field path: not a scalar column of its own
        text = conjunct.sql(dialect=_PredicateDialect)
        try:
            expr, columns = to_physical_expression(text, schema, physical)
        except Exception:  # noqa: BLE001 - not translatable alone (the whole filter was valid): skip it
            continue
        if len(columns) == 1 and ids.get(columns[0]) in by_field:
            by_column.setdefault(columns[0], []).append((expr, conjunct))
    if not by_column:
        return None
    # the column with the most conjuncts (a range `a >= x AND a < y` is two), all of them ANDed
    column = max(by_column, key=lambda c: len(by_column[c]))
    combined = by_column[column][0][0]
    for expr, _ in by_column[column][1:]:
        combined = combined & expr
    column_type = schema.field(column).type
    bounds = [r for _, conjunct in by_column[column] if (r := _ranges(conjunct, column_type)) is not None]
    return IndexChoice(by_field[ids[column]], combined, bounds)
