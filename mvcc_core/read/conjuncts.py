"""The typed top-level conjuncts of a bound filter, read by pushdown, statistics pruning and the index planner."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class Comparison:
    """A top-level conjunct comparing one bare top-level column with literals.

    `value` has the column's type exactly (a literal that Arrow would compare under type promotion is
    not listed), so a min/max bound built from it means what the filter means. For `in` it is an array
    of the non-null values (a NULL in the list never makes a row pass); for `is_null` it is None.
    """

    column: str
    op: str  # "=", "<", "<=", ">", ">=", "in", "is_null"
    value: pa.Scalar | pa.Array | None
    # `op` holds for NaN too: a float `>` / `>=` in DataFusion's order, `x > c OR isnan(x)` (read/sql_nan_order.py).
    # Only statistics read such a comparison (with the file's NaN count); the index planner and Arrow's
    # pruning do not know NaN counts, so they see none (`BoundFilter.prunable` leaves them out).
    nan_matches: bool = False


@dataclass(frozen=True)
class Conjunct:
    """One top-level AND operand: the top-level columns it reads, its comparison when it is one, and its
    Expression (over the same names as the filter's).

    The Expression is built when first asked for (only the index planner needs one, and only for an
    indexed column): deserializing it costs about as much as translating a short SQL filter.
    """

    columns: tuple[str, ...]
    comparison: Comparison | None
    build: Callable[[], pc.Expression] = dataclasses.field(repr=False, compare=False)
    # the field paths it reads, under the Expression's names (`("c2", "c5")` for a struct field)
    paths: tuple[tuple[str, ...], ...] = ()

    @functools.cached_property
    def arrow(self) -> pc.Expression:
        return self.build()
