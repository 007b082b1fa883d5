"""Which index, if any, answers part of a filter.

Design notes: docs/operations/maintenance.md, "Index choice, as implemented".
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.format.field_paths import path_names, physical_path
from mvcc_core.read.bound_filter import BoundFilter
from mvcc_core.read.conjuncts import Comparison
from mvcc_core.read.index_lookup import BITMAP, BTREE

# One (lower, lower inclusive, upper, upper inclusive) range; None for an open end.
Range = tuple[object | None, bool, object | None, bool]
# Bounds: for every recognised conjunct, the ranges (any of them) its matching values lie in.
Bounds = list[list[Range]]


@dataclass(frozen=True)
class IndexChoice:
    index: pb.IndexMetadata
    column: str  # the indexed table column (a struct field's dotted path: `meta.lang`)
    expr: pc.Expression  # the chosen conjuncts over the physical column name
    bounds: Bounds  # literal bounds of some of those conjuncts; [] when none are simple comparisons
    value_column: str  # the index file's value column: the physical name of the (top-level) column


def _ranges(comparison: Comparison) -> list[Range] | None:
    """The value ranges a comparison's matching rows lie in (None: no bound, e.g. IS NULL)."""
    if comparison.op == "in":
        assert isinstance(comparison.value, pa.Array)
        return [(v, True, v, True) for v in comparison.value.to_pylist()]
    if comparison.op == "is_null" or comparison.value is None:
        return None
    value = comparison.value.as_py()
    return [
        {
            "=": (value, True, value, True),
            "<": (None, False, value, False),
            "<=": (None, False, value, True),
            ">": (value, False, None, False),
            ">=": (value, True, None, False),
        }[comparison.op]
    ]


def choose_index(bound: BoundFilter, manifest: pb.Manifest) -> IndexChoice | None:
    """The index answering part of the filter, the conjuncts it answers, and their bounds; or None.

    `bound` must name physical columns (`BoundFilter.bind(..., physical=...)`): the conjuncts run on the
    index file, whose value column has the column's physical name.

    Args:
        bound: the scan's filter, bound over physical column names
        manifest: the version being read (its indices)
    """
    if not len(manifest.indices) or not bound.physical:
        return None
    by_field: dict[int, pb.IndexMetadata] = {}
    for index in manifest.indices:
        if len(index.fields) == 1 and index.index_type in (BTREE, BITMAP) and index.files:
            current = by_field.get(index.fields[0])
            if current is None or (index.index_type == BTREE and current.index_type != BTREE):
                by_field[index.fields[0]] = index
    if not by_field:
        return None
    fields = list(manifest.fields)
    ids = {f.name: f.id for f in fields if f.parent_id == -1}
    # indices on struct fields, by the field's path under the data files' names (what the bound filter names)
    nested = {physical_path(fields, i): (i, path_names(fields, i)) for i in by_field if i not in ids.values()}
    by_column: dict[str, list[tuple[pc.Expression, Comparison | None]]] = {}
    field_of: dict[str, int] = {}
    for conjunct in bound.conjuncts:
        if len(conjunct.columns) == 1 and ids.get(conjunct.columns[0]) in by_field:
            comparison = conjunct.comparison
            if comparison is not None and comparison.nan_matches:
                comparison = None  # NaN is no index bound: the conjunct is evaluated as an expression
            by_column.setdefault(conjunct.columns[0], []).append((conjunct.arrow, comparison))
            field_of[conjunct.columns[0]] = ids[conjunct.columns[0]]
        elif len(conjunct.paths) == 1 and conjunct.paths[0] in nested:
            # a conjunct reading only an indexed struct field (`meta.lang = 'en'`): evaluated on the index file,
            # whose value column holds the field under the same path; no literal bounds (not a bare column)
            field_id, name = nested[conjunct.paths[0]]
            by_column.setdefault(name, []).append((conjunct.arrow, None))
            field_of[name] = field_id
    if not by_column:
        return None
    # the column with the most conjuncts (a range `a >= x AND a < y` is two), all of them ANDed
    column = max(by_column, key=lambda c: len(by_column[c]))
    combined = by_column[column][0][0]
    for expr, _ in by_column[column][1:]:
        combined = combined & expr
    bounds = [r for _, comparison in by_column[column] if comparison and (r := _ranges(comparison)) is not None]
    field_id = field_of[column]
    return IndexChoice(by_field[field_id], column, combined, bounds, physical_path(fields, field_id)[0])
