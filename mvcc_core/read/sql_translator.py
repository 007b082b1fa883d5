"""The SQL translator: a sqlglot tree to one pyarrow Expression, node by node, with SQL's semantics (see
`sql_filter`)."""

from __future__ import annotations

import datetime
import decimal
import math
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError, TokenError

from mvcc_core.errors import PredicateError
from mvcc_core.read.filter_messages import ARROW_ERRORS, first_line, literal_hint, unknown_column_problem
from mvcc_core.read.sql_functions import function_handlers
from mvcc_core.read.sql_nan_order import NanOrdering
from mvcc_core.read.sql_source import (
    PredicateDialect,
    Snippet,
    Source,
    Text,
    expression,
)
from mvcc_core.read.sql_values import Value

_COMPARISONS: dict[type[exp.Expression], str] = {
    exp.EQ: "equal",
    exp.NEQ: "not_equal",
    exp.LT: "less",
    exp.LTE: "less_equal",
    exp.GT: "greater",
    exp.GTE: "greater_equal",
}
# the same comparison with its operands swapped: `5 < x` becomes `x > 5`, the form pruning recognises
_FLIPPED = {
    "equal": "equal",
    "not_equal": "not_equal",
    "less": "greater",
    "less_equal": "greater_equal",
    "greater": "less",
    "greater_equal": "less_equal",
}
_ARITHMETIC: dict[type[exp.Expression], str] = {
    # checked kernels: an overflow is an error, never a silently wrapped value
    exp.Add: "add_checked",
    exp.Sub: "subtract_checked",
    exp.Mul: "multiply_checked",
    exp.Div: "divide",
}
_SIMPLE_TYPES: dict[str, pa.DataType] = {
    "BOOLEAN": pa.bool_(),
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "UTINYINT": pa.uint8(),
    "USMALLINT": pa.uint16(),
    "UINT": pa.uint32(),
    "UBIGINT": pa.uint64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "TEXT": pa.string(),
    "VARCHAR": pa.string(),
    "NVARCHAR": pa.string(),
    "CHAR": pa.string(),
    "NCHAR": pa.string(),
    "BINARY": pa.binary(),
    "VARBINARY": pa.binary(),
    "BLOB": pa.binary(),
    "DATE": pa.date32(),
    "TIME": pa.time64("us"),
}
_TIMESTAMP_TYPES = {"TIMESTAMP": None, "DATETIME": None, "TIMESTAMPNTZ": None, "TIMESTAMPTZ": "UTC"}
_TIMESTAMP_UNITS = {0: "s", 3: "ms", 6: "us", 9: "ns"}


def type_category(t: pa.DataType) -> str:
    """Coarse type families: values compare only within one family (or against NULL).

    Args:
        t: a column's or a value's Arrow type
    """
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_dictionary(t):
        return type_category(t.value_type)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "number"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_date(t) or pa.types.is_timestamp(t):
        return "datetime"
    if pa.types.is_time(t):
        return "time"
    if pa.types.is_duration(t):
        return "duration"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "binary"
    return str(t)


class Translator(NanOrdering):
    """Walks one sqlglot tree and builds the Expression, checking types as it goes.

    Args:
        predicate: the SQL text
        schema: the table's schema, whose names the text uses
        physical: the same schema under the data files' names (None: the Expression names table columns)
        subject: how errors name the text (`filter`, `expression`, `value`)
        context: added after the quoted text in errors (` for column 'x'`)
    """

    def __init__(
        self,
        predicate: str,
        schema: pa.Schema,
        physical: pa.Schema | None = None,
        subject: str = "filter",
        context: str = "",
    ) -> None:
        """A translator of `predicate` over `schema`."""
        self.predicate = predicate
        self.source = Source(predicate)
        # how an error names the text: f"invalid {subject} 'text'{context}" ("invalid expression 'id +' for column 'x'")
        self.subject = subject
        self.context = context
        self.schema = schema
        self.physical = physical
        self.columns: set[str] = set()
        import pyarrow.dataset as ds  # imported on first use: it imports pandas

        self.empty_data = ds.dataset((physical or schema).empty_table())
        self._handlers: dict[type[exp.Expression], Callable[[Any, bool], Value]] = {
            exp.Paren: lambda n, positive: self.visit(n.this, positive),
            exp.And: self._and_or,
            exp.Or: self._and_or,
            exp.Not: self._not,
            exp.Is: self._is,
            exp.In: self._in,
            exp.Between: self._between,
            exp.Like: self._like,
            exp.ILike: self._like,
            exp.Escape: self._like,
            exp.NullSafeEQ: self._null_safe,
            exp.NullSafeNEQ: self._null_safe,
            exp.Mod: self._mod,
            exp.Neg: self._neg,
            exp.Literal: self._literal,
            exp.Boolean: lambda n, _: self._const(pa.scalar(bool(n.this)), self._sql(n)),
            exp.Null: lambda n, _: self._const(pa.scalar(None), "NULL"),
            exp.Column: self._column,
            exp.Dot: self._column,
            exp.Cast: self._cast,
            exp.Lower: self._function,
            exp.Upper: self._function,
            exp.Length: self._function,
            exp.Abs: self._function,
            exp.Coalesce: self._coalesce,
            exp.StartsWith: self._starts_ends_with,
            exp.EndsWith: self._starts_ends_with,
        }
        self._handlers.update(function_handlers(self))
        for cls in _COMPARISONS:
            self._handlers[cls] = self._comparison
        for cls in _ARITHMETIC:
            self._handlers[cls] = self._arithmetic

    # ---- entry points and errors

    def fail(self, problem: str, at: Text | exp.Expression | tuple[int, int] | None = None) -> PredicateError:
        """The error for `problem`, pointing at `at` in the text: a node (or the snippet of one), or a
        character span (first, last).

        Args:
            problem: what is wrong, in words
            at: where in the text: a node, its snippet, or a character span (first, last); None: nowhere
        """
        node = at.node if isinstance(at, Snippet) else at
        if isinstance(node, exp.Expression):
            span = self.source.span_of(node)
        else:  # a plain str (the text of a value folded while translating, `NULL`) has no place in the text
            span = None if isinstance(node, str) else node
        return PredicateError(self.source.render(f"invalid {self.subject}", problem, span, self.context))

    def run(self) -> pc.Expression:
        value = self.parse_value(condition=True)
        if type_category(value.type) not in ("boolean", "null"):
            raise self.fail(f"a filter must be a boolean condition, but {value.sql!r} is {value.type}", value.sql)
        expr = value.expr if type_category(value.type) == "boolean" else self._null_bool().expr
        try:  # the final bind, exactly as a scan will use it
            self.empty_data.to_table(filter=expr)
        except ARROW_ERRORS as e:
            raise self.fail(first_line(e)) from e
        return expr

    def parse_value(self, condition: bool = False) -> Value:
        """Parse and translate the text as one expression of any type. `condition`: the text is a filter,
        where FALSE and NULL both drop a row (so `x IN (...)` may answer FALSE for a NULL x); a value
        (a projected column, an update) keeps SQL's NULL.

        Args:
            condition: the text is a filter, where FALSE and NULL both drop a row
        """
        if not self.predicate.strip():
            raise self.fail("it is empty")
        try:
            statements = [
                expression(s) for s in sqlglot.parse(self.predicate, dialect=PredicateDialect) if s is not None
            ]
        except TokenError as e:
            raise self.fail(*self.source.unreadable()) from e
        except ParseError as e:
            raise self.fail(*self.source.syntax_error(e.errors[0] if e.errors else {})) from e
        except SqlglotError as e:
            raise self.fail(f"syntax error: {first_line(e)}") from e
        except RecursionError as e:
            raise self.fail("it is nested too deeply") from e
        if not statements:
            raise self.fail("it is empty")
        if len(statements) > 1:
            raise self.fail(
                f"expected one expression, found {len(statements)} statements", self.source.statement_break()
            )
        try:
            return self.visit(statements[0], positive=condition)
        except RecursionError as e:
            raise self.fail("it is nested too deeply") from e

    def visit(self, node: exp.Expression, positive: bool = False) -> Value:
        """Translate ``node``; ``positive`` is True while only AND/OR lie between it and the root.

        Args:
            node: a sqlglot node of the text
            positive: only AND/OR lie between it and the root
        """
        handler = self._handlers.get(type(node))
        if handler is not None:
            return handler(node, positive)
        raise self._unsupported(node)

    def _unsupported(self, node: exp.Expression) -> PredicateError:
        """The error for SQL this translator does not handle, pointing at it."""
        sql = self._sql(node)
        if isinstance(node, exp.Subquery | exp.Select | exp.Exists | exp.Query):
            return self.fail(f"subqueries are not supported: {sql!r}", node)
        if isinstance(node, exp.Alias):
            alias = node.args.get("alias")
            return self.fail(
                f"unexpected text after the expression (aliases are not allowed): {sql!r}",
                alias if isinstance(alias, exp.Expression) else node,
            )
        if isinstance(node, exp.Placeholder):
            return self.fail(f"parameters are not supported: {sql!r}", node)
        if isinstance(node, exp.Anonymous):
            return self.fail(f"unknown function {node.name}(): {sql!r}", node)
        if isinstance(node, exp.Func) and not isinstance(node, exp.Case | exp.If):
            return self.fail(f"unsupported function {node.sql_name()}: {sql!r}", node)
        if isinstance(node, exp.Star):
            return self.fail("'*' (every column) is not a value", node)
        if isinstance(node, exp.Binary):
            operator = self.source.between(node.this, node.expression)
            if operator:
                return self.fail(f"the operator {operator!r} is not supported: {sql!r}", node)
        if isinstance(node, exp.Case | exp.If):
            return self.fail(f"unsupported SQL construct CASE: {sql!r}", node)
        return self.fail(f"unsupported SQL: {sql!r}", node)

    # ---- building blocks

    def _const(self, scalar: pa.Scalar, sql: Text, text: str | None = None) -> Value:
        return Value(pc.scalar(scalar), scalar.type, sql, scalar, text)

    def _call(self, function: str, args: list[Value], sql: Text, **options: Any) -> Value:
        """Apply an Arrow compute function, folding constants and type-checking as it is built.

        The result type comes from running the kernel on empty arrays of the operand types: the same
        dispatch (and implicit casts) as binding the expression, at a cost that does not grow with it.
        """
        kernel = getattr(pc, function)
        try:
            if all(a.is_const for a in args):
                return self._const(kernel(*[a.const for a in args], **options), sql)
            probe = kernel(*[a.const if a.is_const else pa.array([], a.type) for a in args], **options)
            return Value(kernel(*[a.expr for a in args], **options), probe.type, sql)
        except ARROW_ERRORS as e:
            operands = " and ".join(f"{a.sql} ({a.type})" for a in args)
            detail = first_line(e)
            if "no kernel matching" in detail or "not implemented" in detail.lower():
                problem = f"{sql!r} is not defined for {operands}"
            elif "overflow" in detail.lower():
                problem = f"{sql!r} overflows its type ({operands})"
            else:
                problem = f"cannot compute {sql!r} from {operands}: {detail}"
            raise self.fail(problem, sql) from e

    def _boolean(self, value: Value, context: str) -> Value:
        if type_category(value.type) not in ("boolean", "null"):
            raise self.fail(f"{context} needs a boolean operand, but {value.sql!r} is {value.type}", value.sql)
        if pa.types.is_null(value.type):  # a bare NULL is an unknown truth value
            return self._const(pa.scalar(None, pa.bool_()), value.sql)
        return value

    def _decoded(self, value: Value) -> Value:
        """Dictionary-encoded strings are decoded for the kernels (LIKE, lower, ...) that need plain ones."""
        if pa.types.is_dictionary(value.type) and not value.is_const:
            expr = value.expr.cast(value.type.value_type)
            return Value(expr, value.type.value_type, value.sql)
        return value

    def _null_bool(self) -> Value:
        return self._const(pa.scalar(None, pa.bool_()), "NULL")

    # ---- logic

    def _and_or(self, node: exp.And | exp.Or, positive: bool) -> Value:
        word = "AND" if isinstance(node, exp.And) else "OR"
        # a long chain (`id = 1 OR id = 2 OR ...`) is one flat list, combined as a balanced tree, so
        # neither this translation nor Arrow recurses once per operand
        values = [self._boolean(self.visit(expression(part), positive), word) for part in node.flatten()]
        return self._combine("and_kleene" if word == "AND" else "or_kleene", values, self._sql(node))

    def _combine(self, function: str, values: list[Value], sql: Text) -> Value:
        """Join operands with an associative kernel as a balanced tree (depth log n, not n)."""
        while len(values) > 1:
            pairs = [values[i : i + 2] for i in range(0, len(values), 2)]
            values = [self._call(function, pair, sql) if len(pair) == 2 else pair[0] for pair in pairs]
        return values[0]

    def _not(self, node: exp.Not, positive: bool) -> Value:
        inner = self._boolean(self.visit(node.this, positive=False), "NOT")
        return self._call("invert", [inner], self._sql(node))

    def _is(self, node: exp.Is, positive: bool) -> Value:
        sql = self._sql(node)
        operand = self.visit(node.this)
        target = node.expression
        if isinstance(target, exp.Null):
            return self._call("is_null", [operand], sql)
        if isinstance(target, exp.Boolean):
            operand = self._boolean(operand, "IS TRUE / IS FALSE")
            truth = operand if target.this else self._call("invert", [operand], sql)
            # TRUE only where the operand is non-null and has the asked-for value; never NULL itself
            return self._call("and_kleene", [self._call("is_valid", [operand], sql), truth], sql)
        raise self._unsupported(node)

    # ---- comparisons

    def _comparison(self, node: exp.Expression, positive: bool) -> Value:
        return self._compare(
            _COMPARISONS[type(node)], self.visit(node.this), self.visit(node.expression), self._sql(node)
        )

    def _compare(self, function: str, left: Value, right: Value, sql: Text) -> Value:
        left, right = self._coerce_pair(left, right, sql)
        if left.is_const and not right.is_const:
            left, right, function = right, left, _FLIPPED[function]
        result = self._call(function, [left, right], sql)
        if not (pa.types.is_floating(left.type) or pa.types.is_floating(right.type)):
            return result
        return self._nan_ordered(function, left, right, result, sql)

    def _coerce_pair(self, left: Value, right: Value, sql: Text) -> tuple[Value, Value]:
        """Give a literal the type of what it is compared with, or reject a comparison across families."""
        if right.is_const and not left.is_const:
            return left, self._coerce_const(right, left, sql)
        if left.is_const and not right.is_const:
            return self._coerce_const(left, right, sql), right
        if left.is_const and right.is_const:
            if type_category(left.type) == "string" and type_category(right.type) != "string":
                return self._coerce_const(left, right, sql), right
            if type_category(right.type) == "string" and type_category(left.type) != "string":
                return left, self._coerce_const(right, left, sql)
        self._check_families(left, right, sql)
        return left, right

    def _check_families(self, left: Value, right: Value, sql: Text) -> None:
        families = {type_category(left.type), type_category(right.type)} - {"null"}
        if len(families) > 1:
            raise self.fail(
                f"type mismatch in {sql!r}: cannot compare {left.sql} ({left.type}) with {right.sql} ({right.type})",
                sql,
            )

    def _coerce_const(self, const: Value, other: Value, sql: Text) -> Value:
        """Cast the literal ``const`` to ``other``'s type where that is exact; keep it where it is not."""
        source, target = const.type, other.type
        if pa.types.is_dictionary(target):
            target = target.value_type
        if source == target:
            return const
        scalar = const.const
        assert scalar is not None
        if pa.types.is_null(source):
            try:
                return self._const(pa.scalar(None, target), const.sql)
            except ARROW_ERRORS:
                return const
        source_family, target_family = type_category(source), type_category(target)
        if source_family == "string" and target_family != "string":
            if target_family not in ("number", "boolean", "datetime", "time", "binary"):
                self._check_families(other, const, sql)
            try:
                return self._const(self._parse_string(scalar.as_py(), target), const.sql)
            except ARROW_ERRORS as e:
                raise self.fail(
                    f"type mismatch in {sql!r}: {const.sql} is not a valid {target} "
                    f"to compare with {other.sql}{literal_hint(e)}",
                    const.sql,
                ) from e
        self._check_families(other, const, sql)
        try:
            if source_family == "datetime":
                return self._const(self._coerce_datetime(scalar, target, other, sql), const.sql)
            if pa.types.is_decimal(target) and const.text is not None:
                # exact: `price > 1.005` must not become `price > 1.00` on a decimal(10, 2) column
                exact = pa.scalar(decimal.Decimal(const.text))
                try:
                    return self._const(exact.cast(target), const.sql)
                except ARROW_ERRORS:
                    return self._const(exact, const.sql)
            cast = scalar.cast(target)  # safe cast: raises on truncation or overflow
            if cast.cast(source) != scalar:
                return const
            return self._const(cast, const.sql)
        except ARROW_ERRORS:
            return const  # not exactly representable: leave it to Arrow's own type promotion

    def _parse_string(self, text: str, target: pa.DataType) -> pa.Scalar:
        """A string literal read as ``target``; for zoned timestamps, naive text is wall time in that zone."""
        string = pa.scalar(text)
        if pa.types.is_timestamp(target) and target.tz is not None:
            try:
                return string.cast(target)
            except pa.ArrowInvalid:
                naive = string.cast(pa.timestamp(target.unit))
                return pc.assume_timezone(naive, target.tz)
        if pa.types.is_boolean(target) and text.strip().lower() not in ("true", "false"):
            raise pa.ArrowInvalid(f"{text!r} is not TRUE or FALSE")
        if pa.types.is_time(target):  # Arrow has no string -> time cast
            try:
                return pa.scalar(datetime.time.fromisoformat(text.strip()), target)
            except ValueError as e:
                raise pa.ArrowInvalid(f"{text!r} is not a time of day (HH:MM[:SS[.ffffff]])") from e
        return string.cast(target)

    def _coerce_datetime(self, scalar: pa.Scalar, target: pa.DataType, other: Value, sql: Text) -> pa.Scalar:
        source = scalar.type
        if not pa.types.is_timestamp(target):
            return scalar.cast(target)
        if pa.types.is_date(source):
            scalar = scalar.cast(pa.timestamp(target.unit))
            source = scalar.type
        if source.tz is None and target.tz is not None:
            scalar = pc.assume_timezone(scalar, target.tz)
        elif source.tz is not None and target.tz is None:
            raise self.fail(
                f"type mismatch in {sql!r}: {other.sql} is a timestamp without time zone ({target}) "
                f"but the literal has one ({source}); drop the offset from the literal",
                sql,
            )
        try:
            return scalar.cast(target)
        except ARROW_ERRORS:
            return scalar.cast(pa.timestamp(scalar.type.unit, target.tz))

    def _between(self, node: exp.Between, positive: bool) -> Value:
        if node.args.get("symmetric"):
            raise self._unsupported(node)
        sql = self._sql(node)
        value = self.visit(node.this)
        low = self._compare("greater_equal", value, self.visit(node.args["low"]), sql)
        high = self._compare("less_equal", value, self.visit(node.args["high"]), sql)
        return self._call("and_kleene", [low, high], sql)

    def _in(self, node: exp.In, positive: bool) -> Value:
        sql = self._sql(node)
        if node.args.get("query") is not None or not node.expressions:
            raise self._unsupported(node.args.get("query") or node)
        value = self.visit(node.this)
        items = [self.visit(item) for item in node.expressions]
        if value.is_const or not all(item.is_const for item in items):
            # a general list: an OR of equalities, which has SQL's NULL semantics by construction
            return self._combine("or_kleene", [self._compare("equal", value, i, sql) for i in items], sql)
        coerced = [self._coerce_pair(value, item, sql)[1] for item in items]
        has_null = any(not item.scalar.is_valid for item in coerced)
        values = [item.scalar for item in coerced if item.scalar.is_valid]
        if any(v.type != values[0].type for v in values):  # some literal kept its own type
            return self._combine("or_kleene", [self._compare("equal", value, i, sql) for i in coerced], sql)
        value_set = pa.array([v.as_py() for v in values], type=values[0].type if values else value.type)
        found = self._call("is_in", [value], sql, value_set=value_set)
        if positive:
            # only AND/OR above: FALSE and NULL both drop the row, so Arrow's is_in (NULL input -> FALSE)
            # is already right and stays prunable by row-group statistics
            return found
        # under NOT (or inside another expression) SQL's three-valued result matters:
        # NULL when the input is NULL, or when nothing matched and the list holds a NULL
        if has_null:
            found = self._call("or_kleene", [found, self._null_bool()], sql)
        return self._call("if_else", [self._call("is_valid", [value], sql), found, self._null_bool()], sql)

    def _null_safe(self, node: exp.NullSafeEQ | exp.NullSafeNEQ, positive: bool) -> Value:
        sql = self._sql(node)
        left, right = self.visit(node.this), self.visit(node.expression)
        if left.is_const and not right.is_const:
            left, right = right, left
        if right.is_const and not right.scalar.is_valid:  # x IS [NOT] DISTINCT FROM NULL
            return self._call("is_valid" if isinstance(node, exp.NullSafeNEQ) else "is_null", [left], sql)
        equal = self._compare("equal", left, right, sql)
        both_valid = self._call(
            "and_kleene", [self._call("is_valid", [left], sql), self._call("is_valid", [right], sql)], sql
        )
        both_null = self._call(
            "and_kleene", [self._call("is_null", [left], sql), self._call("is_null", [right], sql)], sql
        )
        same = self._call("or_kleene", [self._call("and_kleene", [equal, both_valid], sql), both_null], sql)
        return self._call("invert", [same], sql) if isinstance(node, exp.NullSafeNEQ) else same

    def _like(self, node: exp.Expression, positive: bool) -> Value:
        sql = self._sql(node)
        escape: str | None = None
        if isinstance(node, exp.Escape):
            escape_value = self.visit(node.expression)
            if not escape_value.is_const or type_category(escape_value.type) != "string":
                raise self.fail(f"ESCAPE needs a string literal: {sql!r}", escape_value.sql)
            escape = escape_value.scalar.as_py()
            if escape is None or len(escape) != 1:
                raise self.fail(f"ESCAPE needs exactly one character: {sql!r}", escape_value.sql)
            node = node.this
            if not isinstance(node, exp.Like | exp.ILike):
                raise self._unsupported(node)
        value = self._decoded(self.visit(node.this))
        pattern = self.visit(node.expression)
        if not pattern.is_const or type_category(pattern.type) not in ("string", "null"):
            raise self.fail(f"LIKE needs a string literal as its pattern: {sql!r}", pattern.sql)
        if type_category(value.type) != "string":
            raise self.fail(
                f"type mismatch in {sql!r}: LIKE needs a string, but {value.sql} is {value.type}", value.sql
            )
        if not pattern.scalar.is_valid:
            return self._null_bool()
        text = pattern.scalar.as_py()
        if escape is not None:
            text = _rewrite_escape(text, escape)
        result = self._call("match_like", [value], sql, pattern=text, ignore_case=isinstance(node, exp.ILike))
        if node.args.get("negate"):
            result = self._call("invert", [result], sql)
        return result

    # ---- arithmetic

    def _arithmetic(self, node: exp.Expression, positive: bool) -> Value:
        sql = self._sql(node)
        left, right = self.visit(node.this), self.visit(node.expression)
        self._check_numeric(left, sql, allow_temporal=not isinstance(node, exp.Mul | exp.Div))
        self._check_numeric(right, sql, allow_temporal=not isinstance(node, exp.Mul | exp.Div))
        if isinstance(node, exp.Div):
            self._check_not_zero(right, sql)
        return self._call(_ARITHMETIC[type(node)], [left, right], sql)

    def _mod(self, node: exp.Mod, positive: bool) -> Value:
        """SQL remainder, sign of the dividend: a - trunc(a / b) * b (integer `/` already truncates)."""
        sql = self._sql(node)
        left, right = self.visit(node.this), self.visit(node.expression)
        self._check_numeric(left, sql)
        self._check_numeric(right, sql)
        self._check_not_zero(right, sql)
        quotient = self._call("divide", [left, right], sql)
        if not pa.types.is_integer(quotient.type):
            quotient = self._call("trunc", [quotient], sql)
        return self._call("subtract", [left, self._call("multiply", [quotient, right], sql)], sql)

    def _neg(self, node: exp.Neg, positive: bool) -> Value:
        if isinstance(node.this, exp.Literal) and not node.this.is_string:
            return self._number("-" + node.this.this, self._sql(node))
        operand = self.visit(node.this)
        self._check_numeric(operand, self._sql(node), allow_temporal=True)
        return self._call("negate_checked", [operand], self._sql(node))

    def _check_numeric(self, value: Value, sql: Text, allow_temporal: bool = False) -> None:
        allowed = {"number", "null"} | ({"datetime", "time", "duration"} if allow_temporal else set())
        if type_category(value.type) not in allowed:
            raise self.fail(f"type mismatch in {sql!r}: {value.sql} is {value.type}, not a number", value.sql)

    def _check_not_zero(self, value: Value, sql: Text) -> None:
        if value.is_const and value.scalar.is_valid and value.scalar.as_py() == 0:
            raise self.fail(f"division by zero in {sql!r}", value.sql)

    # ---- leaves

    def _literal(self, node: exp.Literal, positive: bool) -> Value:
        if node.is_string:
            return self._const(pa.scalar(node.this, pa.string()), self._sql(node))
        return self._number(node.this, self._sql(node))

    def _number(self, text: str, sql: Text) -> Value:
        """int64 where it fits (then uint64, then decimal), float64 for anything with a point or exponent."""
        if text.lstrip("+-").isdigit():
            value = int(text)
            if -(2**63) <= value < 2**63:
                return self._const(pa.scalar(value, pa.int64()), sql, text)
            if 0 <= value < 2**64:
                return self._const(pa.scalar(value, pa.uint64()), sql, text)
            if len(str(abs(value))) <= 38:
                return self._const(pa.scalar(decimal.Decimal(value), pa.decimal128(38, 0)), sql, text)
            raise self.fail(f"integer literal {text} is out of range", sql)
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise self.fail(f"not a finite number: {text}", sql)
        return self._const(pa.scalar(number, pa.float64()), sql, text)

    def _column(self, node: exp.Column | exp.Dot, positive: bool) -> Value:
        parts = _column_parts(node)
        if parts is None:
            raise self._unsupported(node)
        sql = self._sql(node)
        path, field = self._resolve(parts, sql)
        self.columns.add(path[0])
        return Value(pc.field(*self._physical_path(path)), field.type, sql)

    def _physical_path(self, path: list[str]) -> list[str]:
        """The same column in the physical schema: walk both schemas by position."""
        if self.physical is None:
            return path
        logical, physical, out = self.schema, self.physical, []
        for part in path:
            index = logical.get_field_index(part)
            out.append(physical.field(index).name)
            logical, physical = logical.field(index).type, physical.field(index).type
        return out

    def _resolve(self, parts: list[str], sql: Text) -> tuple[list[str], pa.Field]:
        """Case-sensitive lookup of a column, then of struct children for `a.b.c`."""
        names = self.schema.names
        if parts[0] not in names and ".".join(parts) in names:
            parts = [".".join(parts)]  # an unquoted reference to a column whose name contains dots
        head = parts[0]
        if head not in names:
            raise self.fail(unknown_column_problem(head, names), sql)
        if names.count(head) > 1:
            raise self.fail(f"column {head!r} is ambiguous: the schema has it {names.count(head)} times", sql)
        field = self.schema.field(head)
        for depth, part in enumerate(parts[1:], start=1):
            if not pa.types.is_struct(field.type):
                raise self.fail(
                    f"{'.'.join(parts[:depth])!r} is {field.type}, not a struct, so it has no field {part!r}", sql
                )
            children = [field.type.field(i).name for i in range(field.type.num_fields)]
            if part not in children:
                raise self.fail(
                    f"unknown field {part!r} in struct column {'.'.join(parts[:depth])!r}; "
                    f"its fields: {', '.join(children)}",
                    sql,
                )
            field = field.type.field(part)
        return parts, field

    def _cast(self, node: exp.Cast, positive: bool) -> Value:
        sql = self._sql(node)
        if isinstance(node, exp.TryCast) or node.args.get("format") is not None:
            raise self._unsupported(node)
        target = self._arrow_type(node.to, sql)
        value = self.visit(node.this)
        if pa.types.is_floating(value.type) and pa.types.is_integer(target):
            # SQL (DataFusion, PostgreSQL's trunc) drops the fraction; Arrow's safe cast would fail mid-scan
            value = self._call("trunc", [value], sql)
        if not value.is_const:
            try:
                pc.cast(pa.array([], value.type), target)  # raises for a pair Arrow cannot cast
                return Value(value.expr.cast(target), target, sql)
            except ARROW_ERRORS as e:
                raise self.fail(f"cannot cast {value.sql} ({value.type}) to {target}", sql) from e
        scalar = value.scalar
        try:
            if type_category(value.type) == "string" and pa.types.is_timestamp(target):
                try:
                    return self._const(self._parse_string(scalar.as_py(), target), sql)
                except pa.ArrowInvalid:
                    if target.tz is not None:
                        raise
                    # TIMESTAMP '... +02:00' names an instant: keep it, as a UTC timestamp
                    return self._const(scalar.cast(pa.timestamp(target.unit, "UTC")), sql)
            if type_category(value.type) == "string":
                return self._const(self._parse_string(scalar.as_py(), target), sql)
            return self._const(scalar.cast(target), sql)
        except ARROW_ERRORS as e:
            raise self.fail(f"cannot cast {value.sql} to {target}{literal_hint(e)}", sql) from e

    def _arrow_type(self, data_type: exp.DataType, sql: Text) -> pa.DataType:
        name = data_type.this.name
        params = [int(p.this.name) for p in data_type.expressions if isinstance(p.this, exp.Literal)]
        if name in _SIMPLE_TYPES:
            return _SIMPLE_TYPES[name]
        if name in _TIMESTAMP_TYPES:
            precision = params[0] if params else 6
            if precision not in _TIMESTAMP_UNITS:
                raise self.fail(f"unsupported timestamp precision {precision} in {sql!r} (use 0, 3, 6 or 9)", sql)
            return pa.timestamp(_TIMESTAMP_UNITS[precision], _TIMESTAMP_TYPES[name])
        if name == "DECIMAL":
            # DECIMAL alone is DataFusion's default; DECIMAL(p) has scale 0, as in standard SQL
            precision, scale = (38, 10) if not params else (params[0], params[1] if len(params) > 1 else 0)
            try:
                return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
            except ARROW_ERRORS + (ValueError,) as e:
                raise self.fail(f"bad DECIMAL({precision}, {scale}) in {sql!r}: {first_line(e)}", sql) from e
        raise self.fail(f"unsupported type {data_type.sql(dialect=PredicateDialect)} in {sql!r}", sql)

    # ---- functions

    def _function(self, node: exp.Expression, positive: bool) -> Value:
        sql = self._sql(node)
        value = self._decoded(self.visit(node.this))
        family = type_category(value.type)
        if isinstance(node, exp.Abs):
            self._check_numeric(value, sql)
            return self._call("abs_checked", [value], sql)
        if isinstance(node, exp.Length) and family == "binary":
            return self._call("binary_length", [value], sql)
        if family not in ("string", "null"):
            raise self.fail(f"type mismatch in {sql!r}: {value.sql} is {value.type}, not a string", value.sql)
        functions: dict[type[exp.Expression], str] = {
            exp.Lower: "utf8_lower",
            exp.Upper: "utf8_upper",
            exp.Length: "utf8_length",
        }
        function = functions[type(node)]
        return self._call(function, [value], sql)

    def _coalesce(self, node: exp.Coalesce, positive: bool) -> Value:
        sql = self._sql(node)
        args = [self.visit(a) for a in [node.this, *node.expressions]]
        anchor = next((a for a in args if not a.is_const), None)
        if anchor is not None:
            args = [self._coerce_pair(anchor, a, sql)[1] if a.is_const else a for a in args]
        for a in args[1:]:
            self._check_families(args[0], a, sql)
        return self._call("coalesce", args, sql)

    def _starts_ends_with(self, node: exp.StartsWith | exp.EndsWith, positive: bool) -> Value:
        sql = self._sql(node)
        value, pattern = self._decoded(self.visit(node.this)), self.visit(node.expression)
        if not pattern.is_const or type_category(pattern.type) not in ("string", "null"):
            raise self.fail(
                f"{node.sql_name().lower()}() needs a string literal as its second argument: {sql!r}", pattern.sql
            )
        if type_category(value.type) != "string":
            raise self.fail(f"type mismatch in {sql!r}: {value.sql} is {value.type}, not a string", value.sql)
        if not pattern.scalar.is_valid:
            return self._null_bool()
        function = "starts_with" if isinstance(node, exp.StartsWith) else "ends_with"
        return self._call(function, [value], sql, pattern=pattern.scalar.as_py())

    def _sql(self, node: exp.Expression) -> Snippet:
        return Snippet(node, self.source)


def _column_parts(node: exp.Expression) -> list[str] | None:
    """The identifier path of a column reference (`a.b.c`), or None if it is not a plain path."""
    if isinstance(node, exp.Column):
        if isinstance(node.this, exp.Star):
            return None
        return [part.name for part in node.parts]
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Identifier):
        head = _column_parts(node.this)
        return None if head is None else [*head, node.expression.name]
    return None


def _rewrite_escape(pattern: str, escape: str) -> str:
    """Re-spell a LIKE pattern with a custom ESCAPE character in Arrow's backslash convention."""
    out: list[str] = []
    chars = iter(pattern)
    for char in chars:
        if char == escape:
            following = next(chars, "")
            out.append("\\" + following if following in ("%", "_", "\\") else following)
        elif char == "\\":
            out.append("\\\\")
        else:
            out.append(char)
    return "".join(out)
