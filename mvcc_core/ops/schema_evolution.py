"""Schema evolution: add columns (Merge), drop / rename / relax columns (Project), replace a column's data
(DataReplacement).

Adding or replacing a column writes, for each fragment, one extra data file with just those columns and
as many rows as the fragment has physical rows (deleted rows included), so no existing file is
rewritten. Drops and renames are metadata only: data files name columns by field id, so a renamed
column keeps its files and a dropped one's data simply stops being read (retention removes it once no
version needs it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mvcc_core._proto import table_pb2 as pb
from mvcc_core._proto import transaction_pb2 as tpb
from mvcc_core.errors import SchemaError
from mvcc_core.format import operations
from mvcc_core.format import schema as schema_mod
from mvcc_core.format.fragments import field_subtree, to_reader, write_column_file
from mvcc_core.format.naming import data_file_path
from mvcc_core.io import ObjectStore
from mvcc_core.read.scan import read_fragment
from mvcc_core.read.sql_filter import to_column_expression


@dataclass
class ColumnPlan:
    """The operation to commit and the data files written for it (removed if the commit fails)."""

    operation: operations.Operation
    written: list[str]


def _check_new_names(names: Sequence[str], schema: pa.Schema) -> None:
    if not names:
        raise SchemaError("add_columns needs at least one new column")
    clashes = [n for n in names if n in schema.names]
    if clashes:
        raise SchemaError(f"column(s) {clashes} already exist; columns are {schema.names}")
    empty = [n for n in names if not n]
    if empty:
        raise SchemaError("a new column needs a non-empty name")


def _with_files(
    store: ObjectStore, manifest: pb.Manifest, new_fields: list[pb.Field], compute: Any
) -> tuple[list[pb.DataFragment], list[str]]:
    """For each fragment, write `compute(fragment)` as an extra data file; on error remove what was written."""
    fragments, written = [], []
    try:
        for frag in manifest.fragments:
            data_file = write_column_file(store, new_fields, compute(frag))
            written.append(data_file_path(data_file.path))
            new = pb.DataFragment()
            new.CopyFrom(frag)
            new.files.append(data_file)
            fragments.append(new)
    except BaseException:
        store.delete_many(written)
        raise
    return fragments, written


def plan_add_columns(
    store: ObjectStore,
    manifest: pb.Manifest,
    transforms: Mapping[str, str] | pa.Field | Sequence[pa.Field] | pa.Schema,
) -> ColumnPlan:
    """New columns from SQL expressions over existing columns (`{"b": "a * 2"}`), or all-null columns
    from Arrow fields (pylance's `add_columns` shapes). One Merge transaction.

    Args:
        store: the table's store
        manifest: the version the operation reads
        transforms: new column name -> SQL over existing columns, or Arrow fields (or a schema) for all-null columns
    """
    schema = schema_mod.manifest_schema(manifest)
    if isinstance(transforms, Mapping):
        _check_new_names(list(transforms), schema)
        expressions: dict[str, pc.Expression] = {}
        types: dict[str, pa.DataType] = {}
        reads: set[str] = set()
        for name, sql in transforms.items():
            if not isinstance(sql, str):
                raise SchemaError(f"add_columns: the value for {name!r} must be a SQL expression string")
            expressions[name], types[name], columns = to_column_expression(sql, schema)
            reads |= set(columns)
        new_schema = pa.schema([pa.field(n, t) for n, t in types.items()])
        read_cols = [n for n in schema.names if n in reads]

        def compute(frag: pb.DataFragment) -> pa.Table:
            base = read_fragment(store, manifest, frag, read_cols)
            try:
                import pyarrow.dataset as ds  # imported on first use: it imports pandas

                return ds.dataset(base).to_table(columns=expressions)
            except schema_mod.ARROW_VALUE_ERRORS as exc:
                raise SchemaError(
                    f"add_columns {dict(transforms)!r}: cannot compute fragment {frag.id}: {exc}"
                ) from exc

    else:
        if isinstance(transforms, pa.Field):
            new_schema = pa.schema([transforms])
        elif isinstance(transforms, pa.Schema):
            new_schema = transforms
        elif isinstance(transforms, Sequence) and all(isinstance(f, pa.Field) for f in transforms):
            new_schema = pa.schema(list(transforms))
        else:
            raise SchemaError(
                "add_columns takes a dict of {name: SQL expression}, or pyarrow Field(s) / a Schema for null "
                f"columns; got {type(transforms).__name__}"
            )
        _check_new_names(new_schema.names, schema)
        strict = [f.name for f in new_schema if not f.nullable]
        if strict:
            raise SchemaError(f"new column(s) {strict} would be all nulls, so they must be nullable")

        def compute(frag: pb.DataFragment) -> pa.Table:
            return pa.table([pa.nulls(frag.physical_rows, f.type) for f in new_schema], schema=new_schema)

    new_fields, _ = schema_mod.fields_from_schema(new_schema, next_field_id=max(manifest.max_field_id, -1) + 1)
    fragments, written = _with_files(store, manifest, new_fields, compute)
    op = operations.Merge(
        fragments=fragments, schema=list(manifest.fields) + new_fields, schema_metadata=dict(manifest.schema_metadata)
    )
    return ColumnPlan(op, written)


def plan_add_columns_from_rows(store: ObjectStore, manifest: pb.Manifest, rows: pa.RecordBatchReader) -> ColumnPlan:
    """pylance's `add_columns(reader)`: new columns whose values come row by row, in table order (one Merge).

    Rows are matched by position, so a table with deleted rows is refused (use `merge(data, key)`), and so is
    data with another number of rows than the table's.

    Args:
        store: the table's store, where the new columns' data files are written
        manifest: the version the operation reads
        rows: the new columns' values, one row per live row of the table in table order

    Returns:
        The plan: the Merge and the data files it wrote.

    Raises:
        SchemaError: the table has deleted rows, a new column's name is taken, or `rows` has another number of rows than
            the table.
    """
    schema = schema_mod.manifest_schema(manifest)
    if any(f.HasField("deletion_file") for f in manifest.fragments):
        raise SchemaError(
            "add_columns from rows matches them to the table's rows by position, and the table has deleted rows; "
            "compact it first, or use merge(data, key) to match rows by a key"
        )
    data = rows.read_all()
    _check_new_names(data.column_names, schema)
    total = sum(f.physical_rows for f in manifest.fragments)
    if data.num_rows != total:
        raise SchemaError(f"add_columns: the data has {data.num_rows} rows, the table {total}; they must be equal")
    new_fields, _ = schema_mod.fields_from_schema(data.schema, next_field_id=max(manifest.max_field_id, -1) + 1)
    starts = dict(
        zip(
            [f.id for f in manifest.fragments],
            np.cumsum([0] + [f.physical_rows for f in manifest.fragments]),
            strict=False,
        )
    )

    def compute(frag: pb.DataFragment) -> pa.Table:
        return data.slice(int(starts[frag.id]), frag.physical_rows)

    fragments, written = _with_files(store, manifest, new_fields, compute)
    op = operations.Merge(
        fragments=fragments, schema=list(manifest.fields) + new_fields, schema_metadata=dict(manifest.schema_metadata)
    )
    return ColumnPlan(op, written)


def plan_merge(
    store: ObjectStore, manifest: pb.Manifest, data: Any, left_on: str, right_on: str | None = None
) -> ColumnPlan:
    """Add the columns of `data` joined on a key (pylance's `merge`): a left join, so rows without a match
    get nulls. Keys must be unique in `data`; a NULL key matches nothing.

    Args:
        store: the table's store
        manifest: the version the operation reads
        data: the rows holding the new columns and the key
        left_on: the table's key column
        right_on: the key column of `data` (None: `left_on`)
    """
    schema = schema_mod.manifest_schema(manifest)
    right_on = right_on or left_on
    if left_on not in schema.names:
        raise SchemaError(f"merge: the table has no column {left_on!r}; columns are {schema.names}")
    right = to_reader(data).read_all()
    if right_on not in right.column_names:
        raise SchemaError(f"merge: the data has no column {right_on!r}; its columns are {right.column_names}")
    new_names = [n for n in right.column_names if n != right_on]
    _check_new_names(new_names, schema)
    right = right.filter(pc.is_valid(right.column(right_on)))
    counts = pc.value_counts(right.column(right_on))
    dupes = counts.filter(pc.greater(counts.field("counts"), 1))
    if len(dupes):
        raise SchemaError(
            f"merge: key column {right_on!r} of the data has duplicate values, e.g. {dupes[0]['values'].as_py()!r}"
        )
    if not schema.field(left_on).type.equals(right.schema.field(right_on).type):
        raise SchemaError(
            f"merge: key types differ: table {left_on!r} is {schema.field(left_on).type}, "
            f"data {right_on!r} is {right.schema.field(right_on).type}"
        )
    new_schema = pa.schema([right.schema.field(n).with_nullable(True) for n in new_names])
    right = right.select([right_on, *new_names]).rename_columns(["__key", *new_names])

    def compute(frag: pb.DataFragment) -> pa.Table:
        keys = read_fragment(store, manifest, frag, [left_on])
        left = pa.table({"__key": keys.column(0), "__row": np.arange(keys.num_rows)})
        joined = left.join(right, keys="__key", join_type="left outer").sort_by("__row")
        return joined.select(new_names)

    new_fields, _ = schema_mod.fields_from_schema(new_schema, next_field_id=max(manifest.max_field_id, -1) + 1)
    fragments, written = _with_files(store, manifest, new_fields, compute)
    op = operations.Merge(
        fragments=fragments, schema=list(manifest.fields) + new_fields, schema_metadata=dict(manifest.schema_metadata)
    )
    return ColumnPlan(op, written)


def _resolve_path(fields: list[pb.Field], path: str) -> pb.Field:
    """`a` or `a.b.c` (through struct columns) -> the field; SchemaError naming what is missing."""
    if not isinstance(path, str) or not path:
        raise SchemaError(f"a column path must be a non-empty string, got {path!r}")
    top = [f for f in fields if f.parent_id == -1]
    if path in [f.name for f in top]:
        return next(f for f in top if f.name == path)
    parts, parent, current = path.split("."), -1, None
    for depth, part in enumerate(parts):
        if current is not None and current.logical_type != "struct":
            raise SchemaError(f"{'.'.join(parts[:depth])!r} is not a struct column, so it has no field {part!r}")
        candidates = [f for f in fields if f.parent_id == parent and f.name == part]
        if not candidates:
            where = "the table" if parent == -1 else f"struct {'.'.join(parts[:depth])!r}"
            names = [f.name for f in fields if f.parent_id == parent]
            raise SchemaError(f'Column "{part}" does not exist in {where} (looking up {path!r}); it has {names}')
        current = candidates[0]
        parent = current.id
    assert current is not None
    return current


def plan_drop_columns(manifest: pb.Manifest, columns: Sequence[str]) -> operations.Project:
    """Drop columns (or struct fields, `a.b`): metadata only.

    Args:
        manifest: the version the operation reads
        columns: the columns (or `a.b` struct fields) to drop
    """
    if isinstance(columns, str):
        columns = [columns]
    if not columns:
        raise SchemaError("drop_columns needs at least one column")
    fields = list(manifest.fields)
    targets = [_resolve_path(fields, c) for c in columns]
    dropped = {f.id for f in field_subtree(fields, {t.id for t in targets})}
    kept = [f for f in fields if f.id not in dropped]
    if not any(f.parent_id == -1 for f in kept):
        raise SchemaError(f"drop_columns {list(columns)} would drop every column; use overwrite or a new table")
    for target in targets:
        if target.parent_id != -1 and not any(f.parent_id == target.parent_id for f in kept):
            raise SchemaError(f"drop_columns: {target.name!r} is the last field of its struct; drop the struct")
    return operations.Project(schema=kept)


_ALTER_KEYS = {"path", "name", "nullable", "data_type"}


def plan_alter_columns(
    store: ObjectStore, manifest: pb.Manifest, alterations: Sequence[Mapping[str, Any]]
) -> ColumnPlan:
    """pylance's `alter_columns` dicts: rename (`name`), make nullable (`nullable`: metadata only) and change a
    top-level column's type (`data_type`: its values are cast into a new data file per fragment, under a new
    field id at the same place in the schema, as Lance does; one Merge).

    Making a nullable column non-nullable is refused (existing rows may hold nulls), and so is a cast that
    would change a value (SchemaError naming the first such value; nothing is written).

    Args:
        store: the table's store, where a type change writes its new data files
        manifest: the version the operation reads
        alterations: pylance's dicts: `path`, and any of `name`, `nullable`, `data_type`
    """
    fields, retyped = _altered_fields(manifest, alterations)
    if not retyped:
        return ColumnPlan(operations.Project(schema=fields), [])
    cast_ids = {f.id for f in field_subtree(list(manifest.fields), set(retyped))}
    attached = [i.name for i in manifest.indices if set(i.fields) & cast_ids]
    if attached:  # the cast writes the values under a new field: an index on the old one would describe nothing
        names = sorted(f.name for f in manifest.fields if f.id in retyped)
        raise SchemaError(
            f"alter_columns: cannot change the type of {names}: index(es) {attached} are built on it; drop them "
            "with drop_index() first and create them again after the change (as pylance asks)"
        )
    original = {f.id: f.name for f in manifest.fields}
    next_id = max(manifest.max_field_id, *(f.id for f in fields)) + 1
    replacements: dict[int, list[pb.Field]] = {}
    for field_id, new_type in retyped.items():
        old = next(f for f in fields if f.id == field_id)
        arrow_field = pa.field(old.name, new_type, nullable=old.nullable)
        replacements[field_id], _ = schema_mod.fields_from_schema(pa.schema([arrow_field]), next_id)
        next_id = max(f.id for f in replacements[field_id]) + 1
    new_fields = [f for field_id in retyped for f in replacements[field_id]]
    replaced = {f.id for f in field_subtree(fields, set(retyped))}
    schema: list[pb.Field] = []
    for f in fields:
        if f.id in replacements:
            schema.extend(replacements[f.id])
        elif f.id not in replaced:
            schema.append(f)

    def compute(frag: pb.DataFragment) -> pa.Table:
        old = read_fragment(store, manifest, frag, [original[i] for i in retyped])
        columns = [_cast_column(old.column(i), t, original[fid]) for i, (fid, t) in enumerate(retyped.items())]
        return pa.table(columns, names=[replacements[fid][0].name for fid in retyped])

    fragments, written = _with_files(store, manifest, new_fields, compute)
    return ColumnPlan(
        operations.Merge(fragments=fragments, schema=schema, schema_metadata=dict(manifest.schema_metadata)), written
    )


def _cast_column(values: pa.ChunkedArray, target: pa.DataType, path: str) -> pa.ChunkedArray:
    """`values` as `target`; SchemaError naming the first value the cast would change."""
    try:
        return values.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        first = _first_uncastable(values, target)
        name = _type_name(target)
        raise SchemaError(
            f"Can't cast value {first} to type {name}: alter_columns of {path!r} ({values.type} -> {target}) "
            f"would change it ({exc}); nothing was changed"
        ) from exc


_KINDS = (
    pa.types.is_integer,
    pa.types.is_floating,
    lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
    lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t),
)
_TYPE_NAMES = {"string": "Utf8", "large_string": "LargeUtf8", "large_binary": "LargeBinary", "bool": "Boolean"}
_TYPE_NAMES |= {"double": "Float64", "float": "Float32", "halffloat": "Float16"}


def _same_kind(current: pa.DataType, new: pa.DataType) -> bool:
    """Whether `alter_columns` casts `current` to `new` (pylance's rule: within one kind of type)."""
    lists = (pa.types.is_list, pa.types.is_large_list, pa.types.is_fixed_size_list)
    if any(f(current) for f in lists) and any(f(new) for f in lists):
        return _same_kind(current.value_type, new.value_type)
    return any(kind(current) and kind(new) for kind in _KINDS)


def _type_name(t: pa.DataType) -> str:
    """A type as pylance's messages name it (DataFusion's names: Int32, Utf8, ...)."""
    name = str(t)
    return _TYPE_NAMES.get(
        name, name.replace("uint", "UInt").capitalize() if not name.startswith("uint") else "UInt" + name[4:]
    )


def _first_uncastable(values: pa.ChunkedArray, target: pa.DataType) -> Any:
    for value in values.to_pylist():
        try:
            pa.array([value], values.type).cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return value
    return None


def _altered_fields(
    manifest: pb.Manifest, alterations: Sequence[Mapping[str, Any]]
) -> tuple[list[pb.Field], dict[int, pa.DataType]]:
    """The manifest's fields with renames and nullability applied, and the top-level field ids to retype."""
    if not alterations:
        raise SchemaError("alter_columns needs at least one alteration")
    fields = [pb.Field() for _ in manifest.fields]
    for copy, original in zip(fields, manifest.fields, strict=True):
        copy.CopyFrom(original)
    schema = schema_mod.manifest_schema(manifest)
    retyped: dict[int, pa.DataType] = {}
    for alteration in alterations:
        if not isinstance(alteration, Mapping) or "path" not in alteration:
            raise SchemaError(f"an alteration is a dict with a 'path' key, got {alteration!r}")
        unknown = set(alteration) - _ALTER_KEYS
        if unknown:
            raise SchemaError(
                f"Unknown key: {', '.join(sorted(unknown))} in the alteration of {alteration['path']!r}; "
                f"the keys are {sorted(_ALTER_KEYS)}"
            )
        if all(alteration.get(k) is None for k in ("name", "nullable", "data_type")):
            raise SchemaError(
                f"At least one of name, nullable, or data_type must be specified (alteration of {alteration['path']!r})"
            )
        field = _resolve_path(fields, alteration["path"])
        if alteration.get("data_type") is not None:
            current, new_type = _arrow_type(schema, alteration["path"]), alteration["data_type"]
            if not isinstance(new_type, pa.DataType):
                raise SchemaError(f"'data_type' of {alteration['path']!r} must be a pyarrow DataType, got {new_type!r}")
            if not new_type.equals(current):
                if not _same_kind(current, new_type):
                    raise SchemaError(
                        f'Cannot cast column "{alteration["path"]}" from {_type_name(current)} to '
                        f"{_type_name(new_type)}: alter_columns changes a type within its kind only (integers, "
                        "floats, strings, binaries, lists of those), as pylance; add a column with a CAST expression "
                        "for anything else"
                    )
                if field.parent_id != -1:
                    raise SchemaError(
                        f"alter_columns: changing the type of the struct field {alteration['path']!r} is not "
                        "supported; change the type of a top-level column"
                    )
                retyped[field.id] = new_type
        if "nullable" in alteration:
            nullable = alteration["nullable"]
            if not isinstance(nullable, bool):
                raise SchemaError(f"'nullable' of {alteration['path']!r} must be a bool, got {nullable!r}")
            if field.nullable and not nullable:
                raise SchemaError(
                    f"alter_columns: {alteration['path']!r} is nullable and may hold nulls; it cannot be made "
                    "non-nullable"
                )
            field.nullable = nullable
        if alteration.get("name") is not None:
            name = alteration["name"]
            if not isinstance(name, str) or not name:
                raise SchemaError(f"new name of {alteration['path']!r} must be a non-empty string, got {name!r}")
            siblings = [f.name for f in fields if f.parent_id == field.parent_id and f.id != field.id]
            if name in siblings:
                raise SchemaError(f"cannot rename {alteration['path']!r} to {name!r}: that name exists already")
            field.name = name
    return fields, retyped


def _arrow_type(schema: pa.Schema, path: str) -> pa.DataType:
    if path in schema.names:
        return schema.field(path).type
    parts = path.split(".")
    t = schema.field(parts[0]).type
    for part in parts[1:]:
        t = t.field(part).type
    return t


def plan_replace_column(
    store: ObjectStore, manifest: pb.Manifest, column: str, replacements: Mapping[int, Any]
) -> ColumnPlan:
    """Replace all values of a top-level column in the given fragments (fragment id -> values, one per
    physical row, deleted rows included). One DataReplacement transaction; the old column data is
    tombstoned, not rewritten.

    Args:
        store: the table's store
        manifest: the version the operation reads
        column: the top-level column replaced
        replacements: fragment id -> the column's new values, one per physical row (deleted rows included)
    """
    fields = list(manifest.fields)
    schema = schema_mod.manifest_schema(manifest)
    if column not in schema.names:
        raise SchemaError(f"replace_column: the table has no column {column!r}; columns are {schema.names}")
    if not replacements:
        raise SchemaError("replace_column needs at least one fragment's values")
    by_id = {f.id: f for f in manifest.fragments}
    unknown = [fid for fid in replacements if fid not in by_id]
    if unknown:
        raise SchemaError(f"replace_column: version {manifest.version} has no fragment(s) {unknown}")
    target = next(f for f in fields if f.parent_id == -1 and f.name == column)
    subtree = field_subtree(fields, {target.id})
    field = schema.field(column)
    tables = {}
    for fid, values in replacements.items():
        try:
            array = values if isinstance(values, pa.Array | pa.ChunkedArray) else pa.array(values, type=field.type)
        except schema_mod.ARROW_VALUE_ERRORS as exc:
            raise SchemaError(f"replace_column {column!r}, fragment {fid}: values are not {field.type}: {exc}") from exc
        if len(array) != by_id[fid].physical_rows:
            raise SchemaError(
                f"replace_column {column!r}: fragment {fid} has {by_id[fid].physical_rows} rows, "
                f"the replacement has {len(array)}"
            )
        tables[fid] = schema_mod.conform(pa.table({column: array}), pa.schema([field]))
    groups, written = [], []
    try:
        for fid, table in tables.items():
            data_file = write_column_file(store, subtree, table)
            written.append(data_file_path(data_file.path))
            groups.append(tpb.Transaction.DataReplacementGroup(fragment_id=fid, new_file=data_file))
    except BaseException:
        store.delete_many(written)
        raise
    return ColumnPlan(operations.DataReplacement(replacements=groups), written)
