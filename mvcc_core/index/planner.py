"""Which index, if any, answers part of a SQL filter.

The filter is split into its top-level AND conjuncts; the first conjunct that reads exactly one indexed
column (and nothing else) is answered by that column's index (a BTREE preferred over a BITMAP). The scan
still applies the whole filter to the rows the index returns, so using an index never changes a result.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp

from .._proto import table_pb2 as pb
from ..predicate import _PredicateDialect, to_physical_expression
from .scalar import BTREE


def _conjuncts(node: exp.Expression) -> list[exp.Expression]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node]


def choose_index(
    sql: str, schema: pa.Schema, physical: pa.Schema, manifest: pb.Manifest
) -> tuple[pb.IndexMetadata, pc.Expression] | None:
    """(index, the conjunct as an Expression over physical names), or None when no index applies."""
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
    by_column: dict[str, list[pc.Expression]] = {}
    for conjunct in _conjuncts(tree):
        if any(True for _ in conjunct.find_all(exp.Dot)) or any(c.table for c in conjunct.find_all(exp.Column)):
            continue  # a struct field path: not a scalar column of its own
        text = conjunct.sql(dialect=_PredicateDialect)
        try:
            expr, columns = to_physical_expression(text, schema, physical)
        except Exception:  # noqa: BLE001 - not translatable alone (the whole filter was valid): skip it
            continue
        if len(columns) == 1 and ids.get(columns[0]) in by_field:
            by_column.setdefault(columns[0], []).append(expr)
    if not by_column:
        return None
    # the column with the most conjuncts (a range `a >= x AND a < y` is two), all of them ANDed
    column = max(by_column, key=lambda c: len(by_column[c]))
    combined = by_column[column][0]
    for expr in by_column[column][1:]:
        combined = combined & expr
    return by_field[ids[column]], combined
