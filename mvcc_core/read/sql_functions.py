"""pylance's filter functions beyond the core operators (docs/reference/pylance_compat.md): binary literals `X'616263'`,
`current_date()` / `now()`, `regexp_match` / `regexp_like`, and the list tests `array_has` / `array_contains`,
`array_has_any`, `array_has_all`. Each becomes an Arrow expression the scan evaluates per batch; the list tests
are Arrow scalar functions registered once per list type (Arrow has no list-membership kernel)."""

from __future__ import annotations

import datetime
import hashlib
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from mvcc_core.read.sql_values import TranslatorHost, Value

_REGISTERED: set[str] = set()


def function_handlers(t: TranslatorHost) -> dict[type[exp.Expression], Callable[[Any, bool], Value]]:
    """The translator's handlers for these functions, bound to translator `t`.

    Args:
        t: The translator whose building blocks (visit, constants, errors) the handlers use.

    Returns:
        sqlglot node type -> handler(node, positive).
    """
    return {
        exp.HexString: lambda n, _: t._const(pa.scalar(bytes.fromhex(n.this), pa.binary()), t._sql(n)),
        exp.CurrentDate: lambda n, _: t._const(
            pa.scalar(datetime.datetime.now(datetime.UTC).date(), pa.date32()), t._sql(n)
        ),
        exp.CurrentTimestamp: lambda n, _: t._const(
            pa.scalar(datetime.datetime.now(datetime.UTC), pa.timestamp("us", "UTC")), t._sql(n)
        ),
        exp.RegexpLike: lambda n, _: _regexp(t, n, n.this, n.expression),
        exp.ArrayContains: lambda n, _: _array_test(t, n, "has", n.this, [n.expression]),
        exp.ArrayContainsAll: lambda n, _: _array_test(t, n, "has_all", n.this, _elements(n.expression)),
        exp.Anonymous: lambda n, _: _anonymous(t, n),
        exp.IsNan: lambda n, _: _isnan(t, n, n.this),
        exp.Array: lambda n, _: _list_literal(t, n),
        exp.Alias: lambda n, _: _double_quoted_literal(t, n),
        exp.Bracket: lambda n, _: _subscript(t, n),
    }


def _subscript(t: TranslatorHost, node: exp.Bracket) -> Value:
    """`list_col[1]` (1-based, as DataFusion) and `struct_col['x']`: a list element or a struct field."""
    sql = t._sql(node)
    if len(node.expressions) != 1:
        raise t.fail(f"one subscript at a time: {sql!r}", node)
    value, key = t.visit(node.this), t.visit(node.expressions[0])
    if not key.is_const or not key.scalar.is_valid:
        raise t.fail(f"the subscript of {sql!r} must be a literal", key.sql)
    if pa.types.is_struct(value.type) and key.type == pa.string():
        name = key.scalar.as_py()
        if value.type.get_field_index(name) < 0:
            children = [value.type.field(i).name for i in range(value.type.num_fields)]
            raise t.fail(f"{value.sql} has no field {name!r}; its fields: {', '.join(children)}", key.sql)
        return t._call("struct_field", [value], sql, indices=[value.type.get_field_index(name)])
    is_list = pa.types.is_list(value.type) or pa.types.is_large_list(value.type)
    if (is_list or pa.types.is_fixed_size_list(value.type)) and pa.types.is_integer(key.type):
        index = key.scalar.as_py()
        if index < 1:
            raise t.fail(f"list subscripts start at 1: {sql!r}", key.sql)
        return t._call("list_element", [value, t._const(pa.scalar(index - 1, pa.int64()), key.sql)], sql)
    raise t.fail(f"{value.sql} ({value.type}) cannot be subscripted by {key.sql} ({key.type})", sql)


def _list_literal(t: TranslatorHost, node: exp.Array) -> Value:
    """`[3.0, 4.0]`: a list of literals (pylance's value for a list column in `update`)."""
    values = [t.visit(e) for e in node.expressions]
    if not all(v.is_const for v in values):
        raise t.fail("a list literal holds literals only", t._sql(node))
    try:
        scalar = pa.scalar([v.scalar.as_py() for v in values])
    except (pa.ArrowException, OverflowError) as e:
        raise t.fail(f"the elements of {t._sql(node)!r} are not of one type", t._sql(node)) from e
    return t._const(scalar, t._sql(node))


def _double_quoted_literal(t: TranslatorHost, node: exp.Alias) -> Value:
    """`TIMESTAMP "2021-01-02 00:00:00"` (pylance accepts double quotes there), read as TIMESTAMP '...'."""
    kind, alias = node.this, node.args.get("alias")
    if (
        isinstance(kind, exp.Column)
        and not kind.table
        and kind.name.upper() in ("TIMESTAMP", "DATE")
        and not kind.this.quoted
        and isinstance(alias, exp.Identifier)
        and alias.quoted
    ):
        cast = exp.Cast(this=exp.Literal.string(alias.this), to=exp.DataType.build(kind.name.upper()))
        return t.visit(cast)
    raise t._unsupported(node)


def _anonymous(t: TranslatorHost, node: exp.Anonymous) -> Value:
    name, args = node.name.lower(), node.expressions
    if name in ("regexp_match", "regexp_like") and len(args) == 2:
        return _regexp(t, node, args[0], args[1])
    if name == "now" and not args:
        return t._const(pa.scalar(datetime.datetime.now(datetime.UTC), pa.timestamp("us", "UTC")), t._sql(node))
    if name == "arrow_cast" and len(args) == 2:
        return _arrow_cast(t, node, args[0], args[1])
    if name in ("array_has_any", "array_has_all") and len(args) == 2:
        return _array_test(t, node, name.removeprefix("array_"), args[0], _elements(args[1]))
    raise t._unsupported(node)


def _regexp(t: TranslatorHost, node: exp.Expression, subject: exp.Expression, pattern_node: exp.Expression) -> Value:
    """`regexp_match(s, 'pattern')` as a condition: the rows where the pattern matches somewhere in `s`."""
    sql = t._sql(node)
    value, pattern = t._decoded(t.visit(subject)), t.visit(pattern_node)
    if not pattern.is_const or pattern.type != pa.string():
        raise t.fail(f"the pattern of {sql!r} must be a string literal", pattern.sql)
    if value.type not in (pa.string(), pa.large_string()):
        raise t.fail(f"type mismatch in {sql!r}: {value.sql} is {value.type}, not a string", value.sql)
    return t._call("match_substring_regex", [value], sql, pattern=pattern.scalar.as_py())


_ARROW_NAMES = {
    "Null": pa.null(),
    "Boolean": pa.bool_(),
    **{f"Int{b}": getattr(pa, f"int{b}")() for b in (8, 16, 32, 64)},
    **{f"UInt{b}": getattr(pa, f"uint{b}")() for b in (8, 16, 32, 64)},
    "Float16": pa.float16(),
    "Float32": pa.float32(),
    "Float64": pa.float64(),
    "Utf8": pa.string(),
    "LargeUtf8": pa.large_string(),
    "Binary": pa.binary(),
    "LargeBinary": pa.large_binary(),
    "Date32": pa.date32(),
    "Date64": pa.date64(),
}
_UNITS = {"Second": "s", "Millisecond": "ms", "Microsecond": "us", "Nanosecond": "ns"}
_TYPE_TOKEN = re.compile(r"\s*([A-Za-z0-9_]+|\(|\)|,|\"[^\"]*\")")


def arrow_type_named(text: str) -> pa.DataType:
    """The Arrow type DataFusion's `arrow_cast` names: `Int32`, `Utf8`, `FixedSizeList(32, Float32)`,
    `List(Int64)`, `Timestamp(Microsecond, Some("UTC"))`, `Decimal128(10, 2)`, ...

    Args:
        text: the type's name as DataFusion displays it

    Raises:
        ValueError: not a type name this reads
    """
    tokens = _TYPE_TOKEN.findall(text)
    if "".join(tokens).replace(" ", "") != text.replace(" ", ""):
        raise ValueError(f"cannot read the type name {text!r}")
    position = 0

    def parse() -> Any:
        nonlocal position
        word = tokens[position]
        position += 1
        if position < len(tokens) and tokens[position] == "(":
            position += 1
            args = []
            while tokens[position] != ")":
                args.append(parse())
                if tokens[position] == ",":
                    position += 1
            position += 1
            return (word, args)
        return word

    try:
        tree = parse()
    except IndexError:  # an unclosed parenthesis
        tree = None
    if tree is None or position != len(tokens):
        raise ValueError(f"cannot read the type name {text!r}")
    return _type_of(tree, text)


def _type_of(tree: Any, text: str) -> pa.DataType:
    if isinstance(tree, str) and tree in _ARROW_NAMES:
        return _ARROW_NAMES[tree]
    if isinstance(tree, tuple):
        word, args = tree
        if word == "FixedSizeList" and len(args) == 2 and str(args[0]).isdigit():
            return pa.list_(_type_of(args[1], text), int(args[0]))
        if word in ("List", "LargeList") and len(args) == 1:
            item = _type_of(args[0], text)
            return pa.list_(item) if word == "List" else pa.large_list(item)
        if word in ("Decimal128", "Decimal256") and len(args) == 2 and all(str(a).isdigit() for a in args):
            kind = pa.decimal128 if word == "Decimal128" else pa.decimal256
            return kind(int(args[0]), int(args[1]))
        if word == "Timestamp" and len(args) == 2 and args[0] in _UNITS:
            zone = args[1]
            if zone == "None":
                return pa.timestamp(_UNITS[args[0]])
            if isinstance(zone, tuple) and zone[0] == "Some" and len(zone[1]) == 1:
                return pa.timestamp(_UNITS[args[0]], zone[1][0].strip('"'))
    raise ValueError(f"cannot read the type name {text!r}")


def _arrow_cast(t: TranslatorHost, node: exp.Expression, operand: exp.Expression, type_node: exp.Expression) -> Value:
    """DataFusion's `arrow_cast(x, 'FixedSizeList(32, Float32)')`: a cast to a type named as Arrow displays it."""

    sql = t._sql(node)
    value, name = t.visit(operand), t.visit(type_node)
    if not name.is_const or name.type != pa.string() or not name.scalar.is_valid:
        raise t.fail(f"the type of {sql!r} must be a string literal", name.sql)
    try:
        target = arrow_type_named(name.scalar.as_py())
    except ValueError as e:
        raise t.fail(str(e), name.sql) from e
    try:
        if value.is_const:
            return t._const(value.scalar.cast(target), sql)
        return Value(value.expr.cast(target), target, sql)
    except (pa.ArrowException, OverflowError) as e:
        raise t.fail(f"cannot cast {value.sql} ({value.type}) to {target}: {e}", sql) from e


def _isnan(t: TranslatorHost, node: exp.Expression, operand: exp.Expression) -> Value:
    """DataFusion's `isnan(x)`: whether a number is NaN (FALSE for integers, NULL for NULL)."""
    sql = t._sql(node)
    value = t.visit(operand)
    if not (pa.types.is_floating(value.type) or pa.types.is_integer(value.type) or pa.types.is_null(value.type)):
        raise t.fail(f"type mismatch in {sql!r}: {value.sql} is {value.type}, not a number", value.sql)
    if not pa.types.is_floating(value.type):  # an integer is never NaN: as a double, for Arrow's kernel
        const = value.scalar.cast(pa.float64()) if value.is_const else None
        value = Value(value.expr.cast(pa.float64()), pa.float64(), value.sql, const)
    return t._call("is_nan", [value], sql)


def _elements(node: exp.Expression) -> list[exp.Expression]:
    """The elements of a list literal (`['a', 'b']`, `Array['a', 'b']`, `make_array('a', 'b')`)."""
    if isinstance(node, exp.Array):
        return list(node.expressions)
    return [node]


def _array_test(
    t: TranslatorHost, node: exp.Expression, test: str, column: exp.Expression, elements: list[exp.Expression]
) -> Value:
    """`array_has(list, x)`, `array_has_any(list, [..])`, `array_has_all(list, [..])` over a list column."""

    sql = t._sql(node)
    value = t.visit(column)
    if not (pa.types.is_list(value.type) or pa.types.is_large_list(value.type)):
        raise t.fail(f"type mismatch in {sql!r}: {value.sql} is {value.type}, not a list", value.sql)
    item_type = value.type.value_type
    needles = []
    for element in elements:
        needle = t.visit(element)
        if not needle.is_const:
            raise t.fail(f"the values {sql!r} looks for must be literals", needle.sql)
        try:
            needles.append(needle.scalar.cast(item_type).as_py())
        except (pa.ArrowException, OverflowError) as e:
            raise t.fail(f"{needle.sql} is not a value of the list's {item_type}", needle.sql) from e
    name = _register(test, value.type)
    needle_scalar = pa.scalar(needles, pa.list_(item_type))
    return Value(pc.Expression._call(name, [value.expr, pc.scalar(needle_scalar)]), pa.bool_(), sql)


def _register(test: str, list_type: pa.DataType) -> str:
    """The name of the Arrow scalar function for `test` over `list_type`, registered on first use."""
    key = hashlib.sha1(f"{test}:{list_type}".encode()).hexdigest()[:16]
    name = f"mvcc_array_{test}_{key}"
    if name in _REGISTERED:
        return name

    def kernel(ctx: Any, lists: pa.Array, needles: pa.Scalar) -> pa.Array:
        wanted = needles.values if needles.is_valid else pa.array([], list_type.value_type)
        lists = lists if isinstance(lists, pa.Array) else pa.array([lists.as_py()], list_type)
        flat = pc.list_flatten(lists)
        parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
        hit = pc.is_in(flat, value_set=wanted).to_numpy(zero_copy_only=False).astype(bool)
        if test == "has_all":
            distinct = {(int(p), v) for p, v, h in zip(parents, flat.to_pylist(), hit, strict=True) if h}
            counts = np.bincount([p for p, _ in distinct], minlength=len(lists))
            result = counts >= len(set(wanted.to_pylist()))
        else:
            result = np.bincount(parents[hit], minlength=len(lists)) > 0
        return pa.array(result, pa.bool_(), mask=lists.is_null().to_numpy(zero_copy_only=False))

    pc.register_scalar_function(
        kernel,
        name,
        {"summary": f"array_{test}", "description": f"pylance's array_{test} over {list_type}"},
        {"lists": list_type, "needles": pa.list_(list_type.value_type)},
        pa.bool_(),
    )
    _REGISTERED.add(name)
    return name
