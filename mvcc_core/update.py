"""Update in REWRITE_ROWS mode: the old versions of the matching rows are deleted with deletion vectors
and their new versions written to new fragments, all in one Update transaction.

Values are SQL expressions over the row (pylance's shape: `{"price": "price * 1.1", "name": "'x'"}`) or
Python literals. REWRITE_COLUMNS (rewriting only the modified columns) is not built yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from . import operations as ops
from . import schema as schema_mod
from ._proto import table_pb2 as pb
from ._proto import transaction_pb2 as tpb
from .delete import delete_addresses, find_rows
from .errors import SchemaError
from .fragments import DEFAULT_MAX_ROWS_PER_FILE, FragmentWriter, fragment_paths
from .predicate import to_value_expression
from .scan import ROW_ADDRESS
from .storage import ObjectStore


@dataclass
class UpdatePlan:
    operation: ops.Update | None
    written: list[str]
    rows_updated: int


def _value_expression(value: Any, column: str, schema: pa.Schema) -> pc.Expression:
    target = schema.field(column).type
    if isinstance(value, pc.Expression):
        return value.cast(target)
    if isinstance(value, str):
        return to_value_expression(value, schema, target, column)
    try:
        return pc.scalar(pa.scalar(value, type=target))
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
        raise SchemaError(f"update value for column {column!r}: {value!r} is not a {target}") from exc


def plan_update(
    store: ObjectStore,
    manifest: pb.Manifest,
    values: dict[str, Any],
    where: str | pc.Expression | None,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
) -> UpdatePlan:
    """Write the updated rows and the deletion vectors of their old versions; return the Update to commit."""
    fields = list(manifest.fields)
    schema = schema_mod.schema_from_fields(fields, dict(manifest.schema_metadata))
    if not values:
        raise SchemaError("update needs at least one column to set")
    unknown = [c for c in values if c not in schema.names]
    if unknown:
        raise SchemaError(f"update sets unknown column(s) {unknown}; columns are {schema.names}")
    expressions = {c: _value_expression(v, c, schema) for c, v in values.items()}  # all checked before any read
    matched = find_rows(store, manifest, where, list(schema.names))
    if matched.num_rows == 0:
        return UpdatePlan(None, [], 0)
    old = matched.drop_columns([ROW_ADDRESS])
    projection = {n: expressions.get(n, pc.field(n)) for n in schema.names}
    try:
        new_rows = ds.dataset(old).to_table(columns=projection)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise SchemaError(f"update values {values!r} cannot be computed for the matching rows: {exc}") from exc
    new_rows = schema_mod.conform(new_rows, schema)

    writer = FragmentWriter(store, fields, schema, max_rows_per_file)
    try:
        for batch in new_rows.to_batches():
            writer.write(batch)
        new_fragments = writer.finish()
    except BaseException:
        writer.abort()
        raise
    written = [p for f in new_fragments for p in fragment_paths(f)]
    try:
        deleted = delete_addresses(store, manifest, matched.column(ROW_ADDRESS).to_numpy())
    except BaseException:
        store.delete_many(written)
        raise
    ids = schema_mod.field_ids_by_name(fields)
    op = ops.Update(
        removed_fragment_ids=deleted.removed_fragment_ids,
        updated_fragments=deleted.updated_fragments,
        new_fragments=new_fragments,
        fields_modified=sorted(ids[c] for c in values),
        update_mode=tpb.Transaction.REWRITE_ROWS,
        affected_rows=deleted.affected_rows,
    )
    return UpdatePlan(op, written + deleted.written, matched.num_rows)
