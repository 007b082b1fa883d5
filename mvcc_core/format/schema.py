"""Arrow schema <-> manifest fields with stable field ids.

Design notes: docs/reference/format.md, "Schema and field ids, as implemented".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.types as pat

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import CorruptManifestError, SchemaError

FIELD_ID_KEY = b"PARQUET:field_id"
# What Arrow raises when values cannot be computed or cast to a column's type (OverflowError: a Python int
# beyond the type's range, from `pa.array`); the operations turn these into a SchemaError in the user's words.
ARROW_VALUE_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError)


def physical_name(field_id: int) -> str:
    """The column name a data file uses for a field: stable across renames.

    Args:
        field_id: the field's id
    """
    return f"c{field_id}"


def _logical_type(t: pa.DataType) -> str:
    if pat.is_struct(t):
        return "struct"
    if pat.is_map(t):
        return "map"
    if pat.is_fixed_size_list(t):
        return f"fixed_size_list:{t.list_size}"
    if pat.is_large_list(t):
        return "large_list"
    if pat.is_list(t):
        return "list"
    return str(t)


def _children(t: pa.DataType) -> list[pa.Field]:
    if pat.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    if pat.is_map(t):
        return [t.key_field, t.item_field]
    if pat.is_list(t) or pat.is_large_list(t) or pat.is_fixed_size_list(t):
        return [t.value_field]
    return []


def _check_storable(f: pa.Field, path: str) -> None:
    t = f.type
    if pat.is_union(t):
        raise SchemaError(f"column {path!r} has a union type ({t}), which mvcc cannot store")
    if isinstance(t, pa.ExtensionType):
        raise SchemaError(f"column {path!r} has an extension type ({t}), which mvcc cannot store")
    if pat.is_list_view(t) or pat.is_large_list_view(t) or pat.is_run_end_encoded(t):
        raise SchemaError(f"column {path!r} has type {t}, which mvcc cannot store in Parquet")


def _leaf_bytes(t: pa.DataType) -> bytes:
    return pa.schema([pa.field("", t)]).serialize().to_pybytes()


def fields_from_schema(schema: pa.Schema, next_field_id: int = 0) -> tuple[list[pb.Field], int]:
    """Flatten `schema` into fields with ids `next_field_id`, `next_field_id + 1`, ... (depth-first).

    Args:
        schema: the Arrow schema to flatten
        next_field_id: the first id to hand out (the table's next free field id)

    Returns:
        The fields and the next free id after them.

    Raises:
        SchemaError: duplicate column names or a type the format cannot store
    """
    names = schema.names
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SchemaError(f"duplicate column names {dupes}")
    out: list[pb.Field] = []
    counter = next_field_id

    def add(f: pa.Field, parent: int, path: str) -> None:
        nonlocal counter
        _check_storable(f, path)
        fid = counter
        counter += 1
        md = {k.decode(): v for k, v in (f.metadata or {}).items() if k != FIELD_ID_KEY}
        field = pb.Field(
            id=fid,
            parent_id=parent,
            name=f.name,
            logical_type=_logical_type(f.type),
            nullable=f.nullable,
            metadata=md,
        )
        children = _children(f.type)
        if pat.is_map(f.type):
            field.keys_sorted = f.type.keys_sorted
        if not children:
            field.arrow_type = _leaf_bytes(f.type)
        out.append(field)
        for child in children:
            add(child, fid, f"{path}.{child.name}")

    for f in schema:
        add(f, -1, f.name)
    return out, counter - 1


def schema_from_fields(
    fields: Sequence[pb.Field],
    schema_metadata: Mapping[str, bytes] | None = None,
    *,
    with_field_ids: bool = False,
    physical: bool = False,
) -> pa.Schema:
    """Rebuild the exact Arrow schema; `with_field_ids` stamps `PARQUET:field_id` for writing Parquet.

    `physical=True` gives the schema of the data files: the same types, with columns and struct
    children named by field id (`physical_name`), and field ids stamped.

    Memoized on the serialized fields: every commit and scan needs the schema, and it rarely changes.

    Args:
        fields: the table's fields, in manifest order
        schema_metadata: the schema's metadata (None: none)
        with_field_ids: stamp `PARQUET:field_id` on every field
        physical: name columns by field id, as data files do
    """
    key = (
        tuple(f.SerializeToString(deterministic=True) for f in fields),
        tuple(sorted((schema_metadata or {}).items())),
        with_field_ids or physical,
        physical,
    )
    cached = _SCHEMA_CACHE.get(key)
    if cached is None:
        cached = _build_schema(fields, schema_metadata, with_field_ids or physical, physical)
        if len(_SCHEMA_CACHE) > 256:
            _SCHEMA_CACHE.clear()
        _SCHEMA_CACHE[key] = cached
    return cached


_SCHEMA_CACHE: dict[tuple[tuple[bytes, ...], tuple, bool, bool], pa.Schema] = {}


def _field_type(f: pb.Field, kids: list[pa.Field]) -> pa.DataType:
    """The Arrow type of the manifest field `f` whose children are `kids`.

    Args:
        f: a field of the manifest's schema
        kids: its children, already built
    """
    lt = f.logical_type
    if lt == "struct":
        return pa.struct(kids)
    if lt == "map":
        return pa.map_(kids[0], kids[1], keys_sorted=f.keys_sorted)
    if lt == "list":
        return pa.list_(kids[0])
    if lt == "large_list":
        return pa.large_list(kids[0])
    if lt.startswith("fixed_size_list:"):
        return pa.list_(kids[0], int(lt.split(":", 1)[1]))
    return pa.ipc.read_schema(pa.py_buffer(f.arrow_type)).field(0).type


def _build_schema(
    fields: Sequence[pb.Field], schema_metadata: Mapping[str, bytes] | None, with_field_ids: bool, physical: bool
) -> pa.Schema:
    children: dict[int, list[pb.Field]] = {}
    for f in fields:
        children.setdefault(f.parent_id, []).append(f)

    def build(f: pb.Field, renamed: bool = True) -> pa.Field:
        kids = [build(c, renamed=f.logical_type == "struct") for c in children.get(f.id, [])]
        try:
            t = _field_type(f, kids)
        except (pa.ArrowException, IndexError, ValueError) as exc:
            raise CorruptManifestError(
                f"the manifest's field {f.name!r} (id {f.id}, logical_type {f.logical_type!r}) has no readable type: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        md: dict[str, str | bytes] = dict(f.metadata)
        if with_field_ids:
            md[FIELD_ID_KEY.decode()] = str(f.id)
        name = physical_name(f.id) if physical and renamed else f.name
        return pa.field(name, t, f.nullable, metadata=md or None)

    top = [build(f) for f in children.get(-1, [])]
    return pa.schema(top, metadata=dict(schema_metadata) if schema_metadata else None)


def relabel(data: pa.Table | pa.RecordBatch, schema: pa.Schema) -> pa.Table | pa.RecordBatch:
    """Give `data` the names of `schema` (same types up to names): physical <-> logical, zero-copy.

    Args:
        data: the data to rename
        schema: the schema whose names it takes
    """
    columns = []
    for col, f in zip(data.columns, schema, strict=True):
        if not col.type.equals(f.type):
            if isinstance(col, pa.ChunkedArray):
                col = pa.chunked_array([c.view(f.type) for c in col.chunks], type=f.type)
            else:
                col = col.view(f.type)
        columns.append(col)
    if isinstance(data, pa.RecordBatch):
        return pa.RecordBatch.from_arrays(columns, schema=schema)
    return pa.Table.from_arrays(columns, schema=schema)


def field_ids_by_name(fields: Sequence[pb.Field]) -> dict[str, int]:
    """Top-level column name -> field id.

    Args:
        fields: the table's fields
    """
    return {f.name: f.id for f in fields if f.parent_id == -1}


def _fits(data_type: pa.DataType, table_type: pa.DataType) -> bool:
    """Whether a column of `data_type` may be cast to `table_type` without changing any value."""
    if data_type.equals(table_type):
        return True
    if pat.is_dictionary(table_type) and not pat.is_dictionary(data_type):
        return data_type.equals(table_type.value_type)
    if pat.is_dictionary(data_type) and not pat.is_dictionary(table_type):
        return data_type.value_type.equals(table_type)
    if pat.is_dictionary(data_type) and pat.is_dictionary(table_type):
        return data_type.value_type.equals(table_type.value_type)
    kids_d, kids_t = _children(data_type), _children(table_type)
    if kids_d and _logical_type(data_type) == _logical_type(table_type) and len(kids_d) == len(kids_t):
        # nested types that differ only in child names ("item" vs "element") or nullability
        if pat.is_struct(data_type) and [k.name for k in kids_d] != [k.name for k in kids_t]:
            return False
        return all(_fits(a.type, b.type) for a, b in zip(kids_d, kids_t, strict=True))
    return False


def column_set_problems(names: Sequence[str], table_names: Sequence[str]) -> list[str]:
    """What is wrong with the set of columns of data written to a table, in words ([] when nothing).

    Args:
        names: the columns of the data
        table_names: the table's columns
    """
    problems = []
    missing = [n for n in table_names if n not in names]
    extra = [n for n in names if n not in table_names]
    if missing:
        problems.append(f"missing column(s) {missing}")
    if extra:
        problems.append(f"column(s) {extra} are not in the table")
    return problems


def conform(data: pa.Table | pa.RecordBatch, table_schema: pa.Schema) -> pa.Table | pa.RecordBatch:
    """Make `data` fit the table's schema for a write, or raise SchemaError naming every bad column.

    Columns are matched by name and reordered. Casts are only those that change no value: a plain
    column into a dictionary-encoded one and back, and nested types whose child fields are named
    differently. Anything else (a missing or extra column, another type, nulls in a non-nullable
    column) is refused, as Lance and Delta refuse an append with a different schema.

    Args:
        data: the rows to write
        table_schema: the table's Arrow schema
    """
    if data.schema.equals(table_schema) and all(
        f.nullable or not col.null_count for f, col in zip(table_schema, data.columns, strict=True)
    ):
        return data  # the common case (scans feeding writes): nothing to check or cast
    names = data.schema.names
    problems = column_set_problems(names, table_schema.names)
    columns = []
    for f in table_schema:
        if f.name not in names:
            continue
        col = data.column(f.name)
        if not _fits(col.type, f.type):
            problems.append(f"column {f.name!r}: table has {f.type}, data has {col.type}")
            continue
        if not f.nullable and col.null_count:
            problems.append(f"column {f.name!r} is not nullable, data has {col.null_count} null(s)")
            continue
        if not col.type.equals(f.type):
            col = col.cast(f.type)
        columns.append(col)
    if problems:
        raise SchemaError("data does not fit the table's schema: " + "; ".join(problems))
    if isinstance(data, pa.RecordBatch):
        return pa.RecordBatch.from_arrays(columns, schema=table_schema)
    return pa.Table.from_arrays(columns, schema=table_schema)


def manifest_schema(manifest: pb.Manifest) -> pa.Schema:
    """The Arrow schema of a version (field and schema metadata included).

    Args:
        manifest: the version's manifest
    """
    return schema_from_fields(list(manifest.fields), dict(manifest.schema_metadata))
