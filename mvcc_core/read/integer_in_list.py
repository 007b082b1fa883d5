"""A filter that is one `integer column IN (values)`, evaluated by a lookup table instead of Arrow's hash set.

A spread merge_insert asks the row-address scan for the source's keys (`ops/merge_insert.py`): on 1M rows
Arrow's `is_in` costs ~10 ns per row (a hash probe), a byte per value of the list's range looked up by numpy
~1.6 ns. Design notes: docs/guide/row_level_changes.md, "Per-file work of the row-address scan".
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from mvcc_core.read.row_group_stats import StatisticsCheck

# The largest span (max - min + 1) of an IN list's values given a lookup table: a byte per value of the span.
MAX_SPAN = 1 << 24


class IntegerInList:
    """`column IN (values)` over a signed integer column as a table of one bool per value of the list's span.

    Args:
        column: the physical column the filter reads
        values: the list's values (int64, sorted, no NULL)
    """

    def __init__(self, column: str, values: np.ndarray) -> None:
        """"""
        self.column = column
        self._low = int(values[0])
        span = int(values[-1]) - self._low + 1
        self._table = np.zeros(span + 1, dtype=bool)  # the last entry, False, answers every value outside the span
        self._table[values - self._low] = True

    @classmethod
    def of(cls, check: StatisticsCheck | None, integer_columns: set[str]) -> IntegerInList | None:
        """The lookup for a filter that is exactly one IN list over an integer column, else None.

        Args:
            check: the scan's statistics check (its tests are the filter's comparisons; `complete`: nothing else)
            integer_columns: the physical names of the table's signed integer columns

        Returns:
            The lookup, or None when the filter is anything else or the values span more than `MAX_SPAN`.
        """
        if check is None or not check.complete or len(check.tests) != 1:
            return None
        test = check.tests[0]
        if test.op != "in" or test.column not in integer_columns or not test.values:
            return None
        values = test.array
        if values is None or int(values[-1]) - int(values[0]) >= MAX_SPAN:
            return None
        return cls(test.column, values)

    def mask(self, column: pa.ChunkedArray | pa.Array) -> np.ndarray | None:
        """Whether each row's value is in the list (a NULL is not); None when `column` holds NULLs (the caller
        then evaluates the filter itself).

        Args:
            column: the column's values, any signed integer type
        """
        if column.null_count:
            return None
        offsets = np.asarray(column.to_numpy(), dtype=np.int64) - self._low
        # as unsigned, a value below the span is huge (and one beyond int64 wraps below it or past its end), so
        # capping at the span's end sends every value outside it to the table's last, False, entry
        unsigned = offsets.view(np.uint64)
        np.minimum(unsigned, np.uint64(len(self._table) - 1), out=unsigned)
        return self._table[offsets]
