"""What a data file must agree on with the manifest that references it, checked from the file's footer.

The manifest's check (`format/invariants.py`) cannot see inside data files; a reader that opens one can, at no
extra request (the footer is read to read the file anyway):

- the file holds `physical_rows` rows (its footer's row count);
- every column of the version's schema that the data file says it holds (`DataFile.fields`) is in the file,
  with a type of the same kind as the schema's (any integer width for an integer, any string or dictionary of
  strings for a string, the same nesting; a reader casts within a kind, as the dataset scanner does). A column
  the data file does not claim (added after it was written) reads as nulls, as the format says.

A violation raises `DataFileMismatchError` (a `CorruptManifestError`) naming the file and the column, instead
of Arrow's untyped `ArrowInvalid`/`ArrowNotImplementedError` or, for a missing column, nulls in place of data.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import pyarrow as pa

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import DataFileMismatchError
from mvcc_core.format.schema import physical_name


def _kind(t: pa.DataType) -> str:
    """The kind of `t` a reader casts within (integer widths, string flavours and dictionaries are one kind)."""
    if pa.types.is_dictionary(t):
        return _kind(t.value_type)
    checks = (
        ("integer", pa.types.is_integer),
        ("floating", pa.types.is_floating),
        ("string", lambda x: pa.types.is_string(x) or pa.types.is_large_string(x) or str(x) == "string_view"),
        ("binary", lambda x: pa.types.is_binary(x) or pa.types.is_large_binary(x) or str(x) == "binary_view"),
        ("list", lambda x: pa.types.is_list(x) or pa.types.is_large_list(x) or pa.types.is_fixed_size_list(x)),
        ("timestamp", pa.types.is_timestamp),
        ("date", pa.types.is_date),
        ("time", pa.types.is_time),
        ("decimal", pa.types.is_decimal),
    )
    for name, check in checks:
        if check(t):
            return name
    return (
        str(t.id)
        if not (pa.types.is_struct(t) or pa.types.is_map(t))
        else ("struct" if pa.types.is_struct(t) else "map")
    )


def type_problem(file_type: pa.DataType, table_type: pa.DataType) -> str | None:
    """Why a column stored as `file_type` cannot be read as `table_type` (None: it can).

    Args:
        file_type: the column's type in the data file
        table_type: the column's type in the version's schema (physical names)
    """
    if pa.types.is_null(file_type):  # an all-null column written without a type casts to anything
        return None
    if _kind(file_type) != _kind(table_type):
        return f"has type {file_type} in the file, the table's schema says {table_type}"
    if pa.types.is_struct(table_type):
        for child in table_type:
            index = file_type.get_field_index(child.name)
            if index >= 0:
                problem = type_problem(file_type.field(index).type, child.type)
                if problem is not None:
                    return f"field {child.name}: {problem}"
    elif pa.types.is_map(table_type):
        return type_problem(file_type.key_type, table_type.key_type) or type_problem(
            file_type.item_type, table_type.item_type
        )
    elif _kind(table_type) == "list":
        return type_problem(file_type.value_type, table_type.value_type)
    return None


def held_columns(data_file: pb.DataFile) -> set[str]:
    """Physical names of the columns `data_file` says it holds (a superseded field, -2, is none).

    Args:
        data_file: a fragment's data file entry
    """
    return {physical_name(i) for i in data_file.fields if i >= 0}


def check_data_file(
    file_schema: pa.Schema,
    num_rows: int | None,
    expected: pa.Schema,
    fragment: pb.DataFragment,
    data_file: pb.DataFile,
    where: str,
    logical: Mapping[str, str] | None = None,
) -> None:
    """Raise DataFileMismatchError if the data file's footer disagrees with the manifest.

    Args:
        file_schema: the file's Arrow schema (from its footer)
        num_rows: the file's row count from its footer (None: not checked here)
        expected: the physical columns about to be read, with the version's types
        fragment: the fragment the file belongs to
        data_file: the file's entry in the manifest
        where: the table's location, for the message
        logical: table column names by physical name, for the message
    """
    path = data_file.path
    if num_rows is not None and num_rows != fragment.physical_rows:
        raise DataFileMismatchError(
            f"fragment {fragment.id} of {where}: data file {path} has {num_rows} rows, the manifest's field "
            f"physical_rows says {fragment.physical_rows}",
            path=path,
        )
    held: Collection[str] | None = None
    for field in expected:
        index = file_schema.get_field_index(field.name)
        if index < 0:
            held = held_columns(data_file) if held is None else held
            problem = "is missing from the file" if field.name in held else None
        else:
            problem = type_problem(file_schema.field(index).type, field.type)
        if problem is not None:
            name = (logical or {}).get(field.name, field.name)
            raise DataFileMismatchError(
                f"fragment {fragment.id} of {where}: data file {path} does not match the table's schema: "
                f"column {name!r} ({field.name}) {problem}",
                path=path,
                column=name,
            )
