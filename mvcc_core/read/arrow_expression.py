"""The reader of a pyarrow Expression's serialized structure (its call tree), for filter analysis."""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import math
import struct
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mvcc_core.read.conjuncts import Comparison, Conjunct

# ---- reading an Expression's structure
#
# pyarrow has no public visitor for Expressions. Pickling one serializes it losslessly as an Arrow IPC
# file (Arrow's `compute::Serialize`): the schema's metadata lists the tree in prefix order as key/value
# pairs (`call` NAME, its arguments, `options` I, `end` NAME; `field_ref` NAME; `nested_field_ref` N
# followed by N `field_ref`s; `literal` I) and the record batch's column I holds each literal or options
# struct, typed. That covers every Expression with field references by name, which Substrait does not
# (pyarrow cannot express `match_like`, `utf8_lower` or safe casts in Substrait, and reads its field
# references back as positions, which bind wrongly to a projected table). The metadata has repeated keys,
# which `Schema.metadata` (a dict) drops, so the pairs are read through the Arrow C data interface. A
# layout this code does not recognise makes the analysis give up (`ExpressionTree.of` returns None):
# the filter is then applied after the read, as correct as before, only slower.


class _ArrowSchema(ctypes.Structure):
    """`struct ArrowSchema` of the Arrow C data interface."""

    _fields_ = [
        ("format", ctypes.c_char_p),
        ("name", ctypes.c_char_p),
        ("metadata", ctypes.c_void_p),
        ("flags", ctypes.c_int64),
        ("n_children", ctypes.c_int64),
        ("children", ctypes.c_void_p),
        ("dictionary", ctypes.c_void_p),
        ("release", ctypes.c_void_p),
        ("private_data", ctypes.c_void_p),
    ]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _metadata_pairs(schema: pa.Schema) -> list[tuple[str, str]]:
    """A schema's metadata in order, repeated keys included (C data interface: int32 count, then
    length-prefixed key and value bytes, native byte order)."""
    capsule = schema.__arrow_c_schema__()  # released when the capsule is collected, after this function
    exported = _ArrowSchema.from_address(_capsule_pointer(capsule, b"arrow_schema"))
    if not exported.metadata:
        return []
    address = exported.metadata

    def int32(at: int) -> int:
        return struct.unpack("=i", ctypes.string_at(address + at, 4))[0]

    pairs, at = [], 4
    for _ in range(int32(0)):
        key_length = int32(at)
        key = ctypes.string_at(address + at + 4, key_length)
        at += 4 + key_length
        value_length = int32(at)
        value = ctypes.string_at(address + at + 4, value_length)
        at += 4 + value_length
        pairs.append((key.decode(), value.decode()))
    return pairs


def serialized(expr: pc.Expression) -> pa.Buffer:
    """The Arrow IPC bytes an Expression pickles to (its serialization).

    Args:
        expr: the Expression

    Raises:
        TypeError: pyarrow pickles Expressions another way
    """
    function, arguments = expr.__reduce__()
    if not arguments or not isinstance(arguments[0], pa.Buffer):
        raise TypeError("unexpected Expression pickle layout")
    return arguments[0]


class _Unrecognised(Exception):
    """The serialized Expression has a shape this module does not know."""


@dataclass
class _Node:
    kind: str  # "call", "field", "literal"
    start: int  # token range [start, end)
    end: int
    name: str = ""  # function name of a call
    path: tuple[str, ...] = ()  # names of a field reference
    args: tuple[_Node, ...] = ()
    options: int | None = None  # batch column of a call's options
    literal: int | None = None  # batch column of a literal


_AND = ("and_kleene", "and")
_COMPARISON_OPS = {"equal": "=", "less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">="}
_SWAPPED_OPS = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_SET_LOOKUP_SKIP_NULLS = 1  # SetLookupOptions.null_matching_behavior: MATCH 0, SKIP 1, EMIT_NULL 2, INCONCLUSIVE 3


class ExpressionTree:
    """An Expression's tokens, literal columns and parsed tree (see above).

    Args:
        tokens: the serialization's metadata (key, value) pairs, in order
        batch: its one row of literal values
    """

    def __init__(self, tokens: list[tuple[str, str]], batch: pa.RecordBatch) -> None:
        """Parse the tokens of a serialized Expression into a tree."""
        self.tokens = tokens
        self.batch = batch
        root, end = self._parse(0)
        if end != len(tokens):
            raise _Unrecognised(f"{len(tokens) - end} tokens after the expression")
        self.root = root

    @classmethod
    def of(cls, expr: pc.Expression) -> ExpressionTree | None:
        """The tree of `expr`, or None when it cannot be read (a positional field reference, a layout
        this module does not recognise).

        Args:
            expr: a caller's Expression
        """
        try:
            reader = pa.ipc.open_file(serialized(expr))
            batch = reader.get_batch(0) if reader.num_record_batches else None
            if batch is None:
                return None
            return cls(_metadata_pairs(reader.schema), batch)
        except (pa.ArrowException, _Unrecognised, TypeError, ValueError, IndexError, UnicodeDecodeError):
            return None

    def _parse(self, at: int) -> tuple[_Node, int]:
        key, value = self.tokens[at]
        if key == "literal":
            return _Node("literal", at, at + 1, literal=int(value)), at + 1
        if key == "field_ref":
            return _Node("field", at, at + 1, path=(value,)), at + 1
        if key == "nested_field_ref":
            parts = self.tokens[at + 1 : at + 1 + int(value)]
            if len(parts) != int(value) or any(k != "field_ref" for k, _ in parts):
                raise _Unrecognised("a nested field reference of something other than names")
            end = at + 1 + int(value)
            return _Node("field", at, end, path=tuple(v for _, v in parts)), end
        if key != "call":
            raise _Unrecognised(f"unexpected key {key!r}")
        args: list[_Node] = []
        options = None
        position = at + 1
        while True:
            if position >= len(self.tokens):
                raise _Unrecognised(f"call {value!r} has no end")
            inner_key, inner_value = self.tokens[position]
            if inner_key == "end":
                if inner_value != value:
                    raise _Unrecognised(f"call {value!r} ends as {inner_value!r}")
                break
            if inner_key == "options":
                options = int(inner_value)
                position += 1
                continue
            node, position = self._parse(position)
            args.append(node)
        return _Node("call", at, position + 1, name=value, args=tuple(args), options=options), position + 1

    def field_paths(self) -> list[tuple[str, ...]]:
        out = []
        stack = [self.root]
        while stack:
            node = stack.pop()
            if node.kind == "field":
                out.append(node.path)
            stack.extend(node.args)
        return out

    def conjunct_nodes(self) -> list[_Node]:
        out: list[_Node] = []
        stack = [self.root]
        while stack:  # depth first, left to right: the operands in the filter's order
            node = stack.pop()
            if node.kind == "call" and node.name in _AND and node.options is None:
                stack.extend(reversed(node.args))
            else:
                out.append(node)
        return out

    def expression(self, node: _Node | None = None) -> pc.Expression:
        """The Expression of `node` (the whole tree by default), deserialized from its tokens.

        Args:
            node: a node of the tree (None: the root)
        """
        tokens = self.tokens if node is None else self.tokens[node.start : node.end]
        schema = self.batch.schema.with_metadata(pa.KeyValueMetadata(tokens))
        # one row of literals; a filter without literals has no columns, and from_arrays would give 0 rows
        struct = pa.StructArray.from_arrays(self.batch.columns, fields=list(self.batch.schema))
        if not self.batch.num_columns:
            struct = pa.array([{}], pa.struct([]))
        batch = pa.RecordBatch.from_struct_array(struct).replace_schema_metadata(schema.metadata)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, schema) as writer:
            writer.write_batch(batch)
        return pc.Expression._deserialize(sink.getvalue())

    def renamed(self, schema: pa.Schema, physical: pa.Schema) -> ExpressionTree:
        """The same tree over `physical`'s names: each field path is walked in both schemas by position.

        Args:
            schema: the schema whose names the tree uses
            physical: the same schema under the data files' names
        """
        tokens = list(self.tokens)
        stack = [self.root]
        while stack:
            node = stack.pop()
            stack.extend(node.args)
            if node.kind != "field":
                continue
            renamed = _physical_path(node.path, schema, physical)
            first = node.start if len(node.path) == 1 else node.start + 1
            for offset, name in enumerate(renamed):
                tokens[first + offset] = ("field_ref", name)
        return ExpressionTree(tokens, self.batch)

    def conjuncts(self, expr: pc.Expression, schema: pa.Schema, names: dict[str, str]) -> tuple[Conjunct, ...]:
        """The top-level AND operands with their columns and comparisons; `names` maps the tree's top-level
        names to the table's.

        Args:
            expr: the Expression the tree was read from
            schema: the table's schema
            names: the tree's top-level names -> the table's
        """
        nodes = self.conjunct_nodes()
        out = []
        for node in nodes:
            fields = _fields(node)
            columns = {names[f.path[0]] for f in fields if f.path[0] in names}
            build = (lambda: expr) if len(nodes) == 1 else functools.partial(self.expression, node)
            comparison = self._comparison(node, schema, names)
            paths = tuple(dict.fromkeys(f.path for f in fields))
            out.append(Conjunct(tuple(n for n in schema.names if n in columns), comparison, build, paths))
        return tuple(out)

    def _nan_ordered(self, node: _Node, schema: pa.Schema, names: dict[str, str]) -> Comparison | None:
        """`x > c OR is_nan(x)` (either order; `>=` too) on a float column: the translator's NaN-ordered `>`, a
        comparison that NaN satisfies (`Comparison.nan_matches`)."""
        for compared, nan_test in (node.args, node.args[::-1]):
            if nan_test.kind != "call" or nan_test.name != "is_nan" or len(nan_test.args) != 1:
                continue
            field = nan_test.args[0]
            if field.kind != "field" or len(field.path) != 1 or field.path[0] not in names:
                continue
            if not pa.types.is_floating(schema.field(names[field.path[0]]).type):
                continue
            comparison = self._comparison(compared, schema, names)
            if comparison is None or comparison.op not in (">", ">=") or comparison.nan_matches:
                continue
            if comparison.column != names[field.path[0]]:
                continue
            return dataclasses.replace(comparison, nan_matches=True)
        return None

    def _scalar(self, node: _Node) -> pa.Scalar:
        assert node.literal is not None
        return self.batch.column(node.literal)[0]

    def _comparison(self, node: _Node, schema: pa.Schema, names: dict[str, str]) -> Comparison | None:
        if node.kind != "call":
            return None
        if node.name == "or_kleene" and len(node.args) == 2:
            return self._nan_ordered(node, schema, names)
        fields = [a for a in node.args if a.kind == "field"]
        if len(fields) != 1 or len(fields[0].path) != 1 or fields[0].path[0] not in names:
            return None
        column = names[fields[0].path[0]]
        column_type = schema.field(column).type
        if node.name in _COMPARISON_OPS and len(node.args) == 2 and node.options is None:
            other = node.args[1] if node.args[0] is fields[0] else node.args[0]
            if other.kind != "literal":
                return None
            op = _COMPARISON_OPS[node.name]
            if node.args[0] is not fields[0]:
                op = _SWAPPED_OPS[op]
            value = _exactly(self._scalar(other), column_type)
            if value is None or not value.is_valid or _is_nan(value):
                return None
            return Comparison(column, op, value)
        if node.name == "is_in" and len(node.args) == 1 and node.options is not None:
            options = self.batch.column(node.options)[0]
            if not isinstance(options, pa.StructScalar) or "value_set" not in options.type.names:
                return None
            value_set = options["value_set"].values
            if value_set is None:
                return None
            if value_set.null_count:  # a NULL in the set: null rows match unless the options skip them
                behaviour = (
                    options["null_matching_behavior"].as_py()
                    if "null_matching_behavior" in options.type.names
                    else None
                )
                skip = options["skip_nulls"].as_py() if "skip_nulls" in options.type.names else False
                if behaviour in (None, 0) and not skip:
                    return None
                value_set = value_set.drop_null()
            values = _exactly(value_set, column_type)
            if values is None or (pa.types.is_floating(column_type) and pc.any(pc.is_nan(values)).as_py()):
                return None
            return Comparison(column, "in", values)
        if node.name == "is_null" and len(node.args) == 1:
            if node.options is not None:
                options = self.batch.column(node.options)[0]
                named = isinstance(options, pa.StructScalar) and "nan_is_null" in options.type.names
                if named and options["nan_is_null"].as_py():
                    return None
            return Comparison(column, "is_null", None)
        return None


def _fields(node: _Node) -> list[_Node]:
    out, stack = [], [node]
    while stack:
        current = stack.pop()
        if current.kind == "field":
            out.append(current)
        stack.extend(current.args)
    return out


def _physical_path(path: tuple[str, ...], logical: pa.Schema, physical: pa.Schema) -> list[str]:
    """The physical names of a table field path, walking both schemas by position."""
    out = []
    logical_type: Any = logical
    physical_type: Any = physical
    for part in path:
        index = logical_type.get_field_index(part)
        if index < 0:
            raise _Unrecognised(f"no field {part!r}")
        out.append(physical_type.field(index).name)
        logical_type, physical_type = logical_type.field(index).type, physical_type.field(index).type
    return out


def _exactly(value: pa.Scalar | pa.Array, target: pa.DataType) -> pa.Scalar | pa.Array | None:
    """`value` as `target` when that is exact (what Arrow compares is then what the bound says), else None."""
    if pa.types.is_dictionary(target) or pa.types.is_nested(target):
        return None
    if value.type == target:
        return value
    try:
        cast = value.cast(target)  # safe: raises on overflow or truncation
        if not cast.cast(value.type).equals(value):
            return None
    except (pa.ArrowException, OverflowError, TypeError):
        return None
    return cast


def _is_nan(value: pa.Scalar) -> bool:
    return pa.types.is_floating(value.type) and math.isnan(value.as_py())
