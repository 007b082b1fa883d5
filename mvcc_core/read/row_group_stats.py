"""What a Parquet file's row-group statistics say of a filter (no row, every row, or some rows may match), decided
from a footer already in hand.

Design notes: docs/design/architecture.md, "Row-group statistics on the reader threads".
"""

from __future__ import annotations

import bisect
import enum
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mvcc_core.format.nan_counts import NAN_COUNTS_KEY
from mvcc_core.read.conjuncts import Conjunct

__all__ = ["StatisticsCheck", "Verdict", "column_positions", "nan_counts", "statistics_check"]


def _decidable(data_type: pa.DataType) -> bool:
    return (
        pa.types.is_signed_integer(data_type)
        or pa.types.is_string(data_type)
        or pa.types.is_large_string(data_type)
        or pa.types.is_float32(data_type)
        or pa.types.is_float64(data_type)
    )


@dataclass(frozen=True)
class _Test:
    column: str  # the physical column name, as the data files spell it
    op: str
    values: tuple[Any, ...]  # one value, or the IN list sorted; empty for is_null
    # a float column: Parquet's min/max leave NaN out, so what NaN rows do depends on the file's NaN count
    floating: bool = False
    nan_matches: bool = False  # NaN satisfies the test (`Comparison.nan_matches`)
    # an IN list over an integer column: its values as a sorted int64 array (for `IntegerInList`)
    array: np.ndarray | None = field(default=None, compare=False, repr=False)


class Verdict(enum.Enum):
    """What a file's statistics say of a filter: no row can match, every row matches, or either may hold."""

    NONE = "none"
    ALL = "all"
    SOME = "some"


@dataclass(frozen=True)
class StatisticsCheck:
    """The filter's decidable comparisons, over physical column names. `complete`: the filter is exactly
    their conjunction, so a file whose every row satisfies each of them needs no evaluation at all."""

    tests: tuple[_Test, ...]
    complete: bool

    @property
    def reads_nan_counts(self) -> bool:
        """Whether a test is a NaN-ordered comparison, which only this check (not Arrow's pruning) decides."""
        return any(t.nan_matches for t in self.tests)

    def rules_out(self, metadata: pq.FileMetaData) -> bool:
        """Whether the file's statistics show that no row of it matches.

        Args:
            metadata: the data file's Parquet footer
        """
        return self.verdict(metadata) is Verdict.NONE

    def _located(
        self, metadata: pq.FileMetaData, positions: Mapping[str, int] | None = None
    ) -> tuple[list[tuple[_Test, int]], dict[str, int]]:
        """The tests on columns the file holds, each with its column's index (`positions`, else named from the
        footer), and the file's NaN counts when a test is on a float column (else empty)."""
        if positions is None:
            first = metadata.row_group(0) if metadata.num_row_groups else None
            positions = {} if first is None else {first.column(i).path_in_schema: i for i in range(first.num_columns)}
        tests = [(t, positions[t.column]) for t in self.tests if t.column in positions]
        nans = nan_counts(metadata) if any(t.floating for t, _ in tests) else {}
        return tests, nans

    def matching_row_groups(self, metadata: pq.FileMetaData) -> list[int] | None:
        """The row groups of the file whose statistics do not rule out the filter.

        Args:
            metadata: the data file's Parquet footer

        Returns:
            Their indices in file order, or None when the check reads no column of the file (every group).
        """
        tests, nans = self._located(metadata)
        if not tests:
            return None
        return [
            g
            for g in range(metadata.num_row_groups)
            if _group_verdict(metadata.row_group(g), tests, nans) is not Verdict.NONE
        ]

    def verdict(self, metadata: pq.FileMetaData, positions: Mapping[str, int] | None = None) -> Verdict:
        """What the file's statistics say of its rows: none, some or all match.

        Args:
            metadata: the data file's Parquet footer
            positions: each leaf column's index by its path in the schema (`column_positions`), when the caller
                keeps them per footer layout (naming them from a fresh footer's metadata objects costs ~25 us)

        Returns:
            NONE when no row can match, ALL when every row matches, else SOME.
        """
        if metadata.num_row_groups == 0:
            return Verdict.NONE
        tests, nans = self._located(metadata, positions)
        if not tests:
            return Verdict.SOME  # a column the file lacks reads as nulls: leave that to the scan
        verdicts = {_group_verdict(metadata.row_group(g), tests, nans) for g in range(metadata.num_row_groups)}
        if verdicts == {Verdict.NONE}:
            return Verdict.NONE
        if verdicts == {Verdict.ALL} and self.complete and len(tests) == len(self.tests):
            return Verdict.ALL
        return Verdict.SOME


def column_positions(column_paths: Sequence[Sequence[str]]) -> dict[str, int]:
    """Each leaf column's index by its path in the schema, as `ColumnChunkMetaData.path_in_schema` spells it.

    Args:
        column_paths: the leaf columns' paths, in order (`ParquetReader.column_paths`)

    Returns:
        The dotted path of each leaf -> its index.
    """
    return {".".join(path): i for i, path in enumerate(column_paths)}


def nan_counts(metadata: pq.FileMetaData) -> dict[str, int]:
    """The NaN count of each float column of a data file, as its writer recorded it in the footer
    (`NAN_COUNTS_KEY`, docs/reference/format.md); empty for files written before, whose NaN counts are unknown.

    Args:
        metadata: the data file's Parquet footer
    """
    raw = (metadata.metadata or {}).get(NAN_COUNTS_KEY.encode())  # pyarrow gives the footer's entries as bytes
    if raw is None:
        return {}
    try:
        counts = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(counts, dict):
        return {}
    return {k: v for k, v in counts.items() if isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)}


def _group_verdict(group: pq.RowGroupMetaData, tests: list[tuple[_Test, int]], nans: Mapping[str, int]) -> Verdict:
    """NONE if some test fails for every row of the group, ALL if every test holds for every row. `nans`: the
    file's NaN count per float column (a column missing: unknown, so NaN rows may be there)."""
    if group.num_rows == 0:
        return Verdict.NONE
    every = True
    for test, position in tests:
        stats = group.column(position).statistics
        if stats is None:
            every = False
            continue
        if test.floating and nans.get(test.column) != 0:
            # NaN rows may be there, outside min/max: they match a NaN-ordered `>` (so no NONE from it), and no
            # test holds for every row (no ALL); a plain comparison's NONE stands (NaN fails `=`, `<`, `<=`, IN,
            # a caller's IEEE `>`), and IS NULL is not about NaN
            every = False
            if test.nan_matches:
                continue
        nulls = stats.null_count if stats.has_null_count else None
        if test.op == "is_null":
            if nulls == 0:
                return Verdict.NONE
            every = every and nulls == group.num_rows
            continue
        if not stats.has_min_max:
            if nulls == group.num_rows:
                return Verdict.NONE  # only nulls: no comparison holds for them
            every = False
            continue
        if not test.values:  # only NaN was asked for, and this group has none
            return Verdict.NONE
        low, high = stats.min, stats.max
        if not isinstance(low, type(test.values[0])) or not isinstance(high, type(test.values[0])):
            every = False  # a representation this module does not compare (binary statistics, say)
            continue
        verdict = _range_verdict(test.op, test.values, low, high)
        if verdict is Verdict.NONE:
            return Verdict.NONE
        every = every and nulls == 0 and verdict is Verdict.ALL
    return Verdict.ALL if every else Verdict.SOME


# Per comparison `x op v`: whether some x in [low, high] satisfies it, and whether every x there does.
_RANGE_TESTS: dict[str, tuple[Callable[[Any, Any, Any], bool], Callable[[Any, Any, Any], bool]]] = {
    "=": (lambda low, high, v: low <= v <= high, lambda low, high, v: low == high == v),
    "<": (lambda low, high, v: low < v, lambda low, high, v: high < v),
    "<=": (lambda low, high, v: low <= v, lambda low, high, v: high <= v),
    ">": (lambda low, high, v: high > v, lambda low, high, v: low > v),
    ">=": (lambda low, high, v: high >= v, lambda low, high, v: low >= v),
}


def _range_verdict(op: str, values: tuple[Any, ...], low: Any, high: Any) -> Verdict:
    """NONE if no x in [low, high] satisfies `x op values[0]` (`x in values` for "in", the values sorted),
    ALL if every x there does, else SOME."""
    if op == "in":
        if values[-1] < low or values[0] > high:
            return Verdict.NONE
        first = bisect.bisect_left(values, low)
        if first == len(values) or values[first] > high:
            return Verdict.NONE
        return Verdict.ALL if low == high else Verdict.SOME
    some, every = _RANGE_TESTS[op]
    if not some(low, high, values[0]):
        return Verdict.NONE
    return Verdict.ALL if every(low, high, values[0]) else Verdict.SOME


def statistics_check(
    conjuncts: Sequence[Conjunct], schema: pa.Schema, physical_names: Mapping[str, str]
) -> StatisticsCheck | None:
    """The check for a filter's top-level `conjuncts` (table column names, `schema` the table's), or
    None when one of their comparisons is not decidable here (the caller then prunes through
    pyarrow.dataset, which knows every type).

    Args:
        conjuncts: the filter's top-level conjuncts
        schema: the table's schema
        physical_names: table column name -> the data files' column name
    """
    comparisons = [c.comparison for c in conjuncts if c.comparison is not None]
    tests = []
    for comparison in comparisons:
        array: np.ndarray | None = None
        if not _decidable(schema.field(comparison.column).type):
            return None
        if comparison.op == "is_null":
            values: tuple[Any, ...] = ()
        elif comparison.op == "in":
            assert isinstance(comparison.value, pa.Array)
            if pa.types.is_signed_integer(comparison.value.type):  # sorted by numpy: to_pylist costs ~0.3 us a value
                array = np.sort(comparison.value.drop_null().to_numpy().astype(np.int64))  # (np.unique hashes: slower)
                array = array[np.concatenate(([True], array[1:] != array[:-1]))] if len(array) else array
                values = tuple(array.tolist())
            else:
                values = tuple(sorted(v for v in comparison.value.to_pylist() if v is not None))
            if not values:
                return None
        else:
            assert isinstance(comparison.value, pa.Scalar)
            values = (comparison.value.as_py(),)
        floating = pa.types.is_floating(schema.field(comparison.column).type)
        nan_matches = comparison.nan_matches
        if floating and any(v != v for v in values):
            # `x = NaN` / `x IN (.., NaN)` match NaN rows, which Parquet's min/max leave out: only the file's
            # NaN count can rule them out, and the other values are tested against min/max as usual
            nan_matches, values = True, tuple(sorted(v for v in values if v == v))
        column = physical_names[comparison.column]
        tests.append(_Test(column, comparison.op, values, floating, nan_matches, array))
    return StatisticsCheck(tuple(tests), complete=len(comparisons) == len(conjuncts)) if tests else None
