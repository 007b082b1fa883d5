"""Comparisons of floating-point values in DataFusion's order, which pylance's filters use: NaN equals NaN and
is greater than every number, infinity included (docs/reference/pylance_compat.md, "NaN in comparisons")."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from mvcc_core.read.sql_source import Text
    from mvcc_core.read.sql_values import Value


class NanOrdering:
    """The NaN corrections of the SQL translator's comparisons (mixed into `Translator`, whose `_call`, `_const`
    and `_null_bool` build the expressions). A truth value is a Python bool when it is known while translating,
    else a translated value, so that a comparison with a number literal stays a plain comparison where it can
    (statistics pruning and the index planner read those)."""

    _call: Callable[..., Value]  # (function, args, sql, **options)
    _const: Callable[[pa.Scalar, Text], Value]
    _null_bool: Callable[[], Value]

    def _nan_ordered(self, function: str, left: Value, right: Value, result: Value, sql: Text) -> Value:
        """`result` (an IEEE comparison) corrected to DataFusion's order, which pylance uses: NaN equals NaN and
        is greater than every number (docs/reference/pylance_compat.md). With a number literal on the right, only `>`
        and
        `>=` change (`f > 1` becomes `f > 1 OR isnan(f)`); `=`, `<>`, `<`, `<=` stay plain comparisons."""
        left_nan, right_nan = self._is_nan(left, sql), self._is_nan(right, sql)
        if function == "equal":
            extra = self._and(left_nan, right_nan, sql)
        elif function == "not_equal":
            return self._as_value(self._and(result, self._invert(self._and(left_nan, right_nan, sql), sql), sql), sql)
        elif function == "greater":
            extra = self._and(left_nan, self._invert(right_nan, sql), sql)
        elif function == "greater_equal":
            extra = self._and(left_nan, self._valid(right, sql), sql)
        elif function == "less":
            extra = self._and(self._invert(left_nan, sql), right_nan, sql)
        else:  # less_equal
            extra = self._and(right_nan, self._valid(left, sql), sql)
        return self._as_value(self._or(result, extra, sql), sql)

    # a truth value known while translating (a Python bool) or computed per row (a Value)
    def _is_nan(self, value: Value, sql: Text) -> bool | Value:
        if not pa.types.is_floating(value.type):
            return False
        if value.is_const:
            return math.isnan(value.scalar.as_py()) if value.scalar.is_valid else value
        return self._call("is_nan", [value], sql)

    def _valid(self, value: Value, sql: Text) -> bool | Value:
        return bool(value.scalar.is_valid) if value.is_const else self._call("is_valid", [value], sql)

    def _and(self, a: bool | Value, b: bool | Value, sql: Text) -> bool | Value:
        return self._kleene("and_kleene", a, b, sql)

    def _or(self, a: bool | Value, b: bool | Value, sql: Text) -> bool | Value:
        return self._kleene("or_kleene", a, b, sql)

    def _kleene(self, function: str, a: bool | Value, b: bool | Value, sql: Text) -> bool | Value:
        """`a AND b` (`and_kleene`) or `a OR b` (`or_kleene`), folded where an operand is known: the
        operator's absorbing value (False for AND, True for OR) decides it, its identity leaves the other."""
        absorbing = function == "or_kleene"
        if a is absorbing or b is absorbing:
            return absorbing
        if isinstance(a, bool):  # the identity
            return b
        if isinstance(b, bool):
            return a
        return self._call(function, [self._boolean_of(a), self._boolean_of(b)], sql)

    def _invert(self, a: bool | Value, sql: Text) -> bool | Value:
        return (not a) if isinstance(a, bool) else self._call("invert", [self._boolean_of(a)], sql)

    def _boolean_of(self, value: Value) -> Value:
        """A NULL constant (`is_nan(NULL)`) as a boolean NULL."""
        return self._null_bool() if value.is_const and not value.scalar.is_valid else value

    def _as_value(self, truth: bool | Value, sql: Text) -> Value:
        """`truth` as a value; a known one is a constant with the text `sql` of the comparison it folds."""
        return self._const(pa.scalar(truth), sql) if isinstance(truth, bool) else truth
