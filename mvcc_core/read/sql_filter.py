"""SQL predicate strings -> pyarrow compute expressions, checked against the table schema.

The public entry points of filter translation (`to_expression`, `Projection`, ...); the translator itself is
`sql_translator`, errors quote the SQL through `sql_source`. Semantics and design: docs/design/architecture.md,
"SQL filters".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from mvcc_core.errors import PredicateError, SchemaError
from mvcc_core.read.filter_messages import ARROW_ERRORS, first_line

if TYPE_CHECKING:
    from mvcc_core.read.sql_translator import Translator


def _translator(text: str, schema: pa.Schema, *args: Any, **kwargs: Any) -> Translator:
    """A `Translator` of `text` over `schema`: the SQL parser (sqlglot) is imported with the first one, so
    scans and writes given no SQL string never load it.

    Args:
        text: the SQL text
        schema: the table's schema
        *args: the translator's other arguments
        **kwargs: its keyword arguments
    """
    from mvcc_core.read.sql_translator import Translator

    return Translator(text, schema, *args, **kwargs)


def to_expression(
    predicate: str | pc.Expression, schema: pa.Schema, physical: pa.Schema | None = None
) -> pc.Expression:
    """Turn a SQL predicate (or an Expression) into a validated Expression over ``schema``.

    Raises PredicateError for a syntax error, an unknown column, an unsupported construct or a type
    mismatch; the check binds the expression to ``schema``, so nothing has to be read to find out.
    With ``physical`` (the same schema with the data files' column names) a SQL predicate is
    resolved by the names of ``schema`` but refers to the columns of ``physical``, so it can be
    pushed into the Parquet scan.

    Args:
        predicate: the filter, SQL or an Arrow Expression
        schema: the table's schema
        physical: the same schema under the data files' column names (None: the Expression names table columns)
    """
    if isinstance(predicate, pc.Expression):
        if physical is not None:
            raise PredicateError("an Expression filter refers to table column names; it cannot be made physical")
        validate_expression(predicate, schema)
        return predicate
    if not isinstance(predicate, str):
        raise PredicateError(
            f"a filter must be a SQL string or a pyarrow.compute.Expression, not {type(predicate).__name__}"
        )
    return _translator(predicate, schema, physical).run()


def to_value_expression(sql: str, schema: pa.Schema, target: pa.DataType, column: str) -> pc.Expression:
    """A SQL value expression (`"price * 1.1"`, `"'x'"`, `"NULL"`) over `schema`, cast to `target`.

    Used by update: the cast is bound on an empty table, so a value of the wrong type fails with a
    SchemaError naming the column before anything is read or written.

    Args:
        sql: the SQL value expression
        schema: the table's schema
        target: the type of the column being set
        column: the column being set, for errors
    """
    from mvcc_core.read.sql_translator import type_category

    translator = _translator(sql, schema, subject="value", context=f" for column {column!r}")
    value = translator.parse_value()
    # Same type family, NULL, or a string literal that the bound cast below must parse (`'2024-01-01'`).
    literal_string = type_category(value.type) == "string" and value.const is not None
    if value.const is not None and _is_list(value.type) and _is_list(target):  # `[3.0, 4.0]` for a list column
        try:
            return pc.scalar(value.const.cast(target))
        except ARROW_ERRORS as e:
            raise SchemaError(f"update value for column {column!r}: {sql!r} cannot be {target}: {first_line(e)}") from e
    if type_category(value.type) not in ("null", type_category(target)) and not literal_string:
        raise SchemaError(f"update value for column {column!r}: {sql!r} is {value.type}, the column is {target}")
    expr = value.expr.cast(target) if not value.type.equals(target) else value.expr
    try:
        translator.empty_data.to_table(columns={column: expr})
    except ARROW_ERRORS as e:
        raise SchemaError(f"update value for column {column!r}: {sql!r} cannot be {target}: {first_line(e)}") from e
    return expr


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def to_column_expression(
    sql: str, schema: pa.Schema, column: str | None = None
) -> tuple[pc.Expression, pa.DataType, list[str]]:
    """A SQL value expression over `schema` for a column: the expression, the type it computes and the
    top-level columns it reads (add_columns, a scan's `columns={name: sql}`). `column`: the output
    column's name, for errors.

    Args:
        sql: the SQL value expression
        schema: the table's schema
        column: the output column's name, for errors
    """
    if not isinstance(sql, str):
        where = f" for column {column!r}" if column is not None else ""
        raise TypeError(f"the expression{where} must be a SQL string, got {type(sql).__name__} {sql!r}")
    context = f" for column {column!r}" if column is not None else ""
    translator = _translator(sql, schema, subject="expression", context=context)
    value = translator.parse_value()
    try:
        result = translator.empty_data.to_table(columns={"v": value.expr}).schema.field(0).type
    except ARROW_ERRORS as e:
        raise translator.fail(first_line(e), value.sql) from e
    return value.expr, result, [name for name in schema.names if name in translator.columns]


def struct_field_projection(columns: Sequence[str], names: Sequence[str]) -> dict[str, str] | None:
    """A `columns=` list naming struct fields by path (`["a", "meta.lang"]`) as the projection that computes
    them (pylance's shape: the output column is named by the path); None when it names none.

    Args:
        columns: the caller's table columns (system columns already taken out)
        names: the table's top-level column names
    """
    nested = [c for c in columns if c not in names and "." in c and c.split(".")[0] in names]
    if not nested:
        return None
    return {
        c: ".".join('"' + part.replace('"', '""') + '"' for part in (c.split(".") if c in nested else [c]))
        for c in columns
    }


@dataclass(frozen=True)
class Projection:
    """A scan's `columns={"name": "SQL expression"}` (pylance's shape) bound to the table schema: each
    output column's Expression over the table's names, the output schema, and the table columns read."""

    expressions: tuple[tuple[str, pc.Expression], ...]
    schema: pa.Schema
    columns: tuple[str, ...]

    @classmethod
    def bind(cls, columns: Mapping[str, str], schema: pa.Schema) -> Projection:
        """Translate every expression (the SQL filters accept); PredicateError names the output column and
        points at the problem, TypeError for a name or an expression that is not a string.

        Args:
            columns: output column name -> SQL expression over the table's columns
            schema: the table's schema
        """
        expressions, fields, read = [], [], set()
        for name, sql in columns.items():
            if not isinstance(name, str) or not name:
                raise TypeError(f"columns: an output column name must be a non-empty string, got {name!r}")
            expr, result, reads = to_column_expression(sql, schema, name)
            expressions.append((name, expr))
            fields.append(pa.field(name, result))
            read.update(reads)
        return cls(tuple(expressions), pa.schema(fields), tuple(n for n in schema.names if n in read))

    def evaluate(self, table: pa.Table) -> pa.Table:
        """The output columns computed over `table` (rows in the table's order; it has the columns read).

        Args:
            table: rows holding the columns the projection reads
        """
        if not self.expressions:
            return table.select([])
        import pyarrow.dataset as ds  # imported on first use: it imports pandas

        projected = ds.dataset(table).to_table(columns=dict(self.expressions), use_threads=False)
        return projected.cast(self.schema) if not projected.schema.equals(self.schema) else projected


def value_columns(sql: str, schema: pa.Schema) -> list[str]:
    """Top-level columns a SQL value expression reads, in schema order.

    Args:
        sql: a SQL value expression
        schema: the table's schema
    """
    translator = _translator(sql, schema, subject="expression")
    translator.parse_value()
    return [name for name in schema.names if name in translator.columns]


def referenced_columns(predicate: str, schema: pa.Schema) -> list[str]:
    """Top-level columns a SQL predicate reads, in schema order, so a scan can project only what it needs.

    A nested reference ``a.b`` counts as column ``a``. The predicate is fully validated on the way.

    Args:
        predicate: a SQL predicate
        schema: the table's schema
    """
    translator = _translator(predicate, schema)
    translator.run()
    return [name for name in dict.fromkeys(schema.names) if name in translator.columns]


def validate_expression(expr: pc.Expression, schema: pa.Schema) -> None:
    """Bind a caller's Expression to the schema so that a bad one fails before any data is touched.

    Args:
        expr: a caller's Expression
        schema: the table's schema

    Raises:
        PredicateError: it does not bind to the schema or is not boolean
    """
    import pyarrow.acero as acero

    empty = schema.empty_table()
    try:
        # one projection over no rows, on this thread, binds it (a dataset scan per check cost ~0.5 ms each for a
        # 10k-value IN list); a null-typed result is also bound as a filter, which may refuse it
        source = acero.Declaration("table_source", acero.TableSourceNodeOptions(empty))
        project = acero.Declaration("project", acero.ProjectNodeOptions([expr], ["v"]))
        result_type = acero.Declaration.from_sequence([source, project]).to_table(use_threads=False).schema[0].type
        if not (pa.types.is_boolean(result_type) or pa.types.is_null(result_type)):
            raise PredicateError(f"invalid filter expression {expr}: it is {result_type}, not a boolean")
        if pa.types.is_null(result_type):
            import pyarrow.dataset as ds  # imported on first use: it imports pandas

            ds.dataset(empty).to_table(filter=expr)
    except ARROW_ERRORS as e:
        raise PredicateError(
            f"invalid filter expression {expr}: {first_line(e)}; available columns: {', '.join(schema.names)}"
        ) from e
