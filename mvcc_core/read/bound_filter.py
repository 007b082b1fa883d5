"""A filter bound to a table schema once per scan: the Expression, its columns and its typed conjuncts."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from mvcc_core.errors import PredicateError
from mvcc_core.read.arrow_expression import ExpressionTree, serialized
from mvcc_core.read.conjuncts import Comparison, Conjunct
from mvcc_core.read.filter_messages import unknown_column_problem
from mvcc_core.read.sql_filter import validate_expression

# --------------------------------------------------------------------------------------------------------
# bound filters: one analysis per filter, read by pushdown, statistics pruning and the index planner


@dataclass(frozen=True)
class BoundFilter:
    """A filter parsed and checked once against a schema; every consumer of a scan's filter reads this.

    `arrow` is the whole filter as an Expression: over the data files' (physical) column names when
    `physical` is True, so Parquet pushdown and row-group statistics apply, otherwise over the table's
    names (then a scan applies it after relabelling, reading every column). `columns` are the top-level
    table columns it reads, from its column references (never from its text). `conjuncts` are its
    top-level AND operands, which the index planner and statistics pruning use.

    SQL and `pyarrow.compute.Expression` filters take the same path: SQL is translated to an Expression
    first, then both are analysed alike (see `ExpressionTree`).
    """

    arrow: pc.Expression
    columns: tuple[str, ...]
    conjuncts: tuple[Conjunct, ...]
    physical: bool
    text: str

    @property
    def comparisons(self) -> tuple[Comparison, ...]:
        """The top-level comparisons of bare columns with literals."""
        return tuple(c.comparison for c in self.conjuncts if c.comparison is not None)

    @property
    def prunable(self) -> bool:
        """Whether Parquet min/max statistics can rule files out for this filter through Arrow's pruning (some
        top-level conjunct compares a bare column with literals); scans skip a statistics pass that cannot
        help. A NaN-ordered float comparison does not count: only `row_group_stats`, which reads the files'
        NaN counts, can prune by it (see `comparisons`)."""
        return any(c.comparison is not None and not c.comparison.nan_matches for c in self.conjuncts)

    @classmethod
    def bind(
        cls,
        filter: str | pc.Expression,  # noqa: A002 - pylance's name
        schema: pa.Schema,
        physical: pa.Schema | None = None,
    ) -> BoundFilter:
        """Parse, validate and analyse `filter` against the table schema `schema`.

        With `physical` (the same schema under the data files' column names) the bound Expression names
        physical columns. Raises PredicateError for a bad filter, naming the problem (an unknown column,
        a type mismatch, a syntax error).

        A filter that negates a comparison of a floating-point column (`f <> 1.5`, `NOT (f < 2)`,
        `f NOT IN (...)`) is bound over the table's names instead, so it is applied after the read and
        never pushed into Parquet: Parquet min/max statistics leave NaN out, and Arrow then prunes a row
        group of `[1.5, NaN]` for `f != 1.5` although NaN != 1.5 holds (pyarrow 26).

        Args:
            filter: the filter as the caller gave it (SQL or an Arrow Expression)
            schema: the table's schema, whose column names the filter uses
            physical: the same schema under the data files' column names (None: bind over the table's names)
        """
        if physical is not None:
            bound = cls._bind(filter, schema, physical)
            if _negates_float(bound.arrow, bound.columns, schema):
                return cls._bind(filter, schema, None)
            return bound
        return cls._bind(filter, schema, None)

    @classmethod
    def _bind(
        cls,
        filter: str | pc.Expression,  # noqa: A002
        schema: pa.Schema,
        physical: pa.Schema | None,
    ) -> BoundFilter:
        if isinstance(filter, str):
            from mvcc_core.read.sql_translator import Translator  # sqlglot: loaded with the first SQL filter

            translator = Translator(filter, schema, physical)
            expr = translator.run()
            columns = tuple(name for name in schema.names if name in translator.columns)
            tree = ExpressionTree.of(expr)
            if tree is None:  # Arrow could not serialize what the translator built: not expected, still right
                return cls(expr, columns, (), physical is not None, filter)
            names = _names_by_physical(schema, physical)
            conjuncts = tree.conjuncts(expr, schema, names)
            return cls(expr, columns, conjuncts, physical is not None, filter)
        if not isinstance(filter, pc.Expression):
            raise PredicateError(
                f"a filter must be a SQL string or a pyarrow.compute.Expression, not {type(filter).__name__}"
            )
        tree = ExpressionTree.of(filter)
        if tree is not None:
            unknown = [path[0] for path in tree.field_paths() if path[0] not in schema.names]
            if unknown:
                raise PredicateError(
                    f"invalid filter expression {filter}: {unknown_column_problem(unknown[0], schema.names)}"
                )
        validate_expression(filter, schema)
        if tree is None:
            # not analysable (a field referenced by position): every column is read and the filter is
            # applied to the rows read, over the table's names
            return cls(filter, tuple(schema.names), (), False, str(filter))
        expr = filter
        if physical is not None:
            tree = tree.renamed(schema, physical)
            expr = tree.expression()
        conjuncts = tree.conjuncts(expr, schema, _names_by_physical(schema, physical))
        columns = tuple(name for name in schema.names if any(name in c.columns for c in conjuncts))
        return cls(expr, columns, conjuncts, physical is not None, str(filter))


def _has_float(data_type: pa.DataType) -> bool:
    if pa.types.is_floating(data_type):
        return True
    return any(_has_float(data_type.field(i).type) for i in range(data_type.num_fields))


_NEGATIONS = ("!=", "invert(", "not_equal(")


def _negates_float(expr: pc.Expression, columns: Sequence[str], schema: pa.Schema) -> bool:
    """Whether `expr` reads a floating-point column and negates something (see `BoundFilter.bind`)."""
    if not any(_has_float(schema.field(name).type) for name in columns if name in schema.names):
        return False
    text = str(expr)
    return any(token in text for token in _NEGATIONS)


# A filter larger than this is not cached: such filters are built per call (a merge_insert's key list), and
# the caches (256 bound filters and index choices per process) would hold megabytes for nothing.
MAX_CACHED_FILTER_BYTES = 64 * 1024


def filter_cache_key(filter: str | pc.Expression) -> Hashable | None:  # noqa: A002
    """A key identifying a filter for caches of bound filters (with the schema's key), or None when it has
    none (an Expression Arrow cannot serialize, or a filter over `MAX_CACHED_FILTER_BYTES`). Expressions are
    keyed by their serialization: their `==` builds an Expression, and their text is ambiguous
    (`pc.field("a == 1")`).

    Args:
        filter: the filter as the caller gave it (SQL or an Arrow Expression)
    """
    if isinstance(filter, str):
        return ("sql", filter) if len(filter) <= MAX_CACHED_FILTER_BYTES else None
    try:
        data = serialized(filter)
    except (pa.ArrowException, TypeError, IndexError):
        return None
    return ("expression", data.to_pybytes()) if data.size <= MAX_CACHED_FILTER_BYTES else None


def _names_by_physical(schema: pa.Schema, physical: pa.Schema | None) -> dict[str, str]:
    """Top-level name in the bound Expression -> table column name."""
    if physical is None:
        return {name: name for name in schema.names}
    return dict(zip(physical.names, schema.names, strict=True))
