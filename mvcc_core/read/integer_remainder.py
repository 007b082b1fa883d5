"""A filter that is one comparison of an integer column's SQL remainder with a constant (`id % 10 = 3`), evaluated
by numpy's `fmod` instead of the four Arrow kernels the SQL translator's `a - trunc(a / c) * c` takes.

Design notes: docs/guide/row_level_changes.md, "Sixth round".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mvcc_core.read.arrow_expression import ExpressionTree

_COMPARISONS: dict[str, Callable[[np.ndarray, np.int64], np.ndarray]] = {
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
}


class IntegerRemainder:
    """`column % divisor <op> value` over a signed integer column, with SQL's remainder (the dividend's sign).

    Args:
        column: the physical column the filter reads
        divisor: the constant divisor, above 0
        compare: the comparison's numpy function
        value: the constant the remainder is compared with
    """

    def __init__(self, column: str, divisor: int, compare: Callable[[np.ndarray, np.int64], np.ndarray], value: int):
        """"""
        self.column = column
        self._divisor = np.int64(divisor)
        self._compare = compare
        self._value = np.int64(value)

    @classmethod
    def of(cls, expr: pc.Expression | None, integer_columns: set[str]) -> IntegerRemainder | None:
        """The evaluator of a filter that is exactly `column % c <op> k` as the SQL translator builds it
        (`subtract(a, multiply(divide(a, c), c)) <op> k`, `c` a positive and `k` any int64 constant), else None.

        Args:
            expr: the scan's filter over physical columns (None: no filter)
            integer_columns: the physical names of the table's signed integer columns

        Returns:
            The evaluator, or None for any other filter.
        """
        tree = ExpressionTree.of(expr) if expr is not None else None
        if tree is None:
            return None

        def constant(node: Any) -> int | None:  # a node of the tree: an int64 literal's value
            if node.kind != "literal":
                return None
            scalar = tree.batch.column(node.literal)[0]
            return scalar.as_py() if pa.types.is_int64(scalar.type) and scalar.is_valid else None

        def call(node: Any, name: str) -> tuple[Any, ...] | None:  # a call of `name` with two arguments: them
            if node.kind != "call" or node.name != name or node.options is not None or len(node.args) != 2:
                return None
            return node.args

        root = tree.root
        if root.name not in _COMPARISONS or call(root, root.name) is None:
            return None
        value = constant(root.args[1])
        subtract = call(root.args[0], "subtract")
        multiply = call(subtract[1], "multiply") if subtract else None
        divide = call(multiply[0], "divide") if multiply else None
        if value is None or subtract is None or multiply is None or not divide:
            return None
        column, divisor = subtract[0], constant(divide[1])
        if (
            column.kind != "field"
            or len(column.path) != 1
            or column.path[0] not in integer_columns
            or divide[0].kind != "field"
            or divide[0].path != column.path
            or divisor is None
            or divisor <= 0
            or constant(multiply[1]) != divisor
        ):
            return None
        return cls(column.path[0], divisor, _COMPARISONS[root.name], value)

    def mask(self, column: pa.ChunkedArray | pa.Array) -> np.ndarray | None:
        """Whether each row satisfies the filter; None when `column` holds NULLs (the caller then evaluates the
        filter itself).

        Args:
            column: the column's values, any signed integer type

        Returns:
            One bool per row, or None.
        """
        if column.null_count:
            return None
        values = np.asarray(column.to_numpy(), dtype=np.int64)  # Arrow computes it in int64 too
        remainders = np.fmod(values, self._divisor)  # C's (and SQL's) remainder: the sign of the dividend
        return self._compare(remainders, self._value)
