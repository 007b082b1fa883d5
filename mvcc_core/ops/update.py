"""Update: set columns to SQL expressions or literals on the rows matching a predicate, in one Update transaction,
in either mode of the specification.

Design notes: docs/guide/row_level_changes.md, "update, as implemented".
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap64

from mvcc_core._proto import table_pb2 as pb
from mvcc_core._proto import transaction_pb2 as tpb
from mvcc_core.errors import SchemaError
from mvcc_core.format import operations, row_ids
from mvcc_core.format import schema as schema_mod
from mvcc_core.format.fragments import (
    DEFAULT_MAX_ROWS_PER_FILE,
    field_subtree,
    fragment_paths,
    tombstone,
    write_column_file,
    write_fragments_from_reader,
)
from mvcc_core.format.naming import data_file_path
from mvcc_core.format.row_ids import ROW_ID
from mvcc_core.io import ObjectStore
from mvcc_core.ops.delete import delete_addresses, find_rows
from mvcc_core.read.scan import ROW_ADDRESS, read_fragment
from mvcc_core.read.sql_filter import to_value_expression, value_columns

REWRITE_ROWS = "rewrite_rows"
REWRITE_COLUMNS = "rewrite_columns"


@dataclass
class UpdatePlan:
    operation: operations.Update | None
    written: list[str]
    rows_updated: int
    mode: str = REWRITE_ROWS


@functools.lru_cache(maxsize=256)
def _translated_value(sql: str, column: str, schema: pa.Schema) -> tuple[pc.Expression, tuple[str, ...]]:
    """A SQL value for `column`, translated and checked once per process (a parse costs ~1-2 ms of Python
    and thousands of objects for the garbage collector): its expression and the columns it reads."""
    expr = to_value_expression(sql, schema, schema.field(column).type, column)
    return expr, tuple(value_columns(sql, schema))


def _value_expression(value: Any, column: str, schema: pa.Schema) -> pc.Expression:
    target = schema.field(column).type
    if isinstance(value, pc.Expression):
        return value.cast(target)
    if isinstance(value, str):
        return _translated_value(value, column, schema)[0]
    try:
        return pc.scalar(pa.scalar(value, type=target))
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
        raise SchemaError(f"update value for column {column!r}: {value!r} is not a {target}") from exc


def _leaves(fields: list[pb.Field], top_ids: set[int]) -> int:
    return sum(1 for f in field_subtree(fields, top_ids) if f.arrow_type) or 1


def choose_mode(
    fields: list[pb.Field], modified: set[int], read: set[int], matched_rows: int, fragment_rows: int
) -> str:
    """The cheaper mode, counting the cells (rows x leaf columns) each reads and writes.

    REWRITE_ROWS reads and writes every column of the matched rows; REWRITE_COLUMNS reads the modified
    and referenced columns of every row of the affected fragments and writes the modified ones.

    Args:
        fields: the table's fields
        modified: ids of the fields the update sets
        read: ids of the fields its expressions and predicate read
        matched_rows: rows the update changes
        fragment_rows: physical rows of the fragments holding them
    """
    all_leaves = _leaves(fields, {f.id for f in fields if f.parent_id == -1})
    rows_cost = 2 * matched_rows * all_leaves
    columns_cost = fragment_rows * (_leaves(fields, modified | read) + _leaves(fields, modified))
    return REWRITE_COLUMNS if columns_cost < rows_cost else REWRITE_ROWS


def plan_update(
    store: ObjectStore,
    manifest: pb.Manifest,
    values: dict[str, Any],
    where: str | pc.Expression | None,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    mode: str | None = None,
) -> UpdatePlan:
    """Write what the update needs (new rows or new column files, deletion vectors); return the Update.

    Args:
        store: the table's store
        manifest: the version the operation reads
        values: column -> new value, as SQL over the row's columns
        where: the rows to update (None: every row)
        max_rows_per_file: rows at most in one new data file
        mode: `REWRITE_ROWS` or `REWRITE_COLUMNS` (None: the cheaper one, see `choose_mode`)
    """
    fields = list(manifest.fields)
    schema = schema_mod.schema_from_fields(fields, dict(manifest.schema_metadata))
    if mode not in (None, REWRITE_ROWS, REWRITE_COLUMNS):
        raise ValueError(f"mode must be None, {REWRITE_ROWS!r} or {REWRITE_COLUMNS!r}, got {mode!r}")
    if not values:
        raise SchemaError("update needs at least one column to set")
    unknown = [c for c in values if c not in schema.names]
    if unknown:
        raise SchemaError(f"update sets unknown column(s) {unknown}; columns are {schema.names}")
    expressions = {c: _value_expression(v, c, schema) for c, v in values.items()}  # all checked before any read
    ids = schema_mod.field_ids_by_name(fields)
    modified = {ids[c] for c in values}
    reads: set[str] = set()
    for column, value in values.items():
        if isinstance(value, pc.Expression):
            reads |= set(schema.names)  # a caller's Expression: its columns are not known
        elif isinstance(value, str):
            reads |= set(_translated_value(value, column, schema)[1])
    read_ids = {ids[c] for c in reads}

    if mode is None and _leaves(fields, modified | read_ids) >= _leaves(fields, set(ids.values())):
        mode = REWRITE_ROWS  # REWRITE_COLUMNS would read every column of more rows: it cannot win
    stable = row_ids.enabled(manifest)
    # A scan costs mostly per file, not per column: read whole matching rows once, so REWRITE_ROWS
    # needs no second scan when the estimate picks it.
    columns = [] if mode == REWRITE_COLUMNS else list(schema.names)
    matched = find_rows(store, manifest, where, columns, with_row_id=stable and mode != REWRITE_COLUMNS)
    if matched.num_rows == 0:
        return UpdatePlan(None, [], 0, mode or REWRITE_ROWS)
    addresses = matched.column(ROW_ADDRESS).to_numpy()
    if mode is None:
        fragment_ids = np.unique(addresses >> np.uint64(32))
        by_id = {f.id: f for f in manifest.fragments}
        fragment_rows = sum(by_id[int(fid)].physical_rows for fid in fragment_ids)
        mode = choose_mode(fields, modified, read_ids, len(addresses), fragment_rows)
    if mode == REWRITE_ROWS:
        return _rewrite_rows(store, manifest, schema, expressions, values, matched, max_rows_per_file)
    return _rewrite_columns(store, manifest, schema, expressions, addresses, [c for c in schema.names if c in reads])


def _rewrite_rows(
    store: ObjectStore,
    manifest: pb.Manifest,
    schema: pa.Schema,
    expressions: dict[str, pc.Expression],
    values: dict[str, Any],
    matched: pa.Table,
    max_rows_per_file: int,
) -> UpdatePlan:
    """`matched`: the live matching rows, all columns, with `_rowaddr` (and `_rowid` with stable ids)."""
    fields = list(manifest.fields)
    stable = row_ids.enabled(manifest)
    old = matched.drop_columns([ROW_ADDRESS, *([ROW_ID] if stable else [])])
    projection = {n: expressions.get(n, pc.field(n)) for n in schema.names}
    try:
        import pyarrow.dataset as ds  # imported on first use: it imports pandas

        new_rows = ds.dataset(old).to_table(columns=projection)
    except schema_mod.ARROW_VALUE_ERRORS as exc:
        raise SchemaError(f"update values {values!r} cannot be computed for the matching rows: {exc}") from exc
    new_rows = schema_mod.conform(new_rows, schema).combine_chunks()  # one Parquet write, not one per chunk

    new_fragments = write_fragments_from_reader(store, new_rows.to_reader(), fields, schema, max_rows_per_file)
    if stable:  # the rows moved, their ids did not change
        row_ids.split(matched.column(ROW_ID).to_numpy(), new_fragments)
    written = [p for f in new_fragments for p in fragment_paths(f)]
    try:
        deleted = delete_addresses(store, manifest, matched.column(ROW_ADDRESS).to_numpy())
    except BaseException:
        store.delete_many(written)
        raise
    ids = schema_mod.field_ids_by_name(fields)
    op = operations.Update(
        removed_fragment_ids=deleted.removed_fragment_ids,
        updated_fragments=deleted.updated_fragments,
        new_fragments=new_fragments,
        fields_modified=sorted(ids[c] for c in values),
        update_mode=tpb.Transaction.REWRITE_ROWS,
        affected_rows=deleted.affected_rows,
    )
    return UpdatePlan(op, written + deleted.written, matched.num_rows, REWRITE_ROWS)


def _rewrite_columns(
    store: ObjectStore,
    manifest: pb.Manifest,
    schema: pa.Schema,
    expressions: dict[str, pc.Expression],
    addresses: np.ndarray,
    reads: list[str],
) -> UpdatePlan:
    fields = list(manifest.fields)
    ids = schema_mod.field_ids_by_name(fields)
    names = [c for c in schema.names if c in expressions]
    subtree = field_subtree(fields, {ids[c] for c in names})
    tombstoned = {f.id for f in subtree}
    read_cols = [c for c in schema.names if c in set(names) | set(reads)]
    fragment_ids = addresses >> np.uint64(32)
    by_id = {f.id: f for f in manifest.fragments}
    updated: list[pb.DataFragment] = []
    written: list[str] = []
    try:
        for fid in (int(x) for x in np.unique(fragment_ids)):
            frag = by_id[fid]
            offsets = np.sort((addresses[fragment_ids == fid] & np.uint64(0xFFFFFFFF)).astype(np.int64))
            base = read_fragment(store, manifest, frag, read_cols)
            import pyarrow.dataset as ds  # imported on first use: it imports pandas

            matched = ds.dataset(base.take(offsets))
            # Row i reads the old value, or (for a matched row) its new value placed after the old ones:
            # only the matched rows are computed, so a value invalid for other rows raises nothing.
            source = np.arange(frag.physical_rows, dtype=np.int64)
            source[offsets] = frag.physical_rows + np.arange(len(offsets), dtype=np.int64)
            columns = []
            for c in names:
                try:
                    computed = matched.to_table(columns={c: expressions[c]}).column(0)
                    both = pa.chunked_array(base.column(c).chunks + computed.chunks, type=schema.field(c).type)
                    columns.append(both.take(pa.array(source)))
                except schema_mod.ARROW_VALUE_ERRORS as exc:
                    raise SchemaError(
                        f"update value for column {c!r} cannot be computed in fragment {fid}: {exc}"
                    ) from exc
            table = pa.table(columns, schema=pa.schema([schema.field(c) for c in names]))
            data_file = write_column_file(store, subtree, table)
            written.append(data_file_path(data_file.path))
            new = pb.DataFragment()
            new.CopyFrom(frag)
            tombstone(new, tombstoned)
            new.files.append(data_file)
            updated.append(new)
    except BaseException:
        store.delete_many(written)
        raise
    op = operations.Update(
        updated_fragments=updated,
        fields_modified=sorted(ids[c] for c in names),
        update_mode=tpb.Transaction.REWRITE_COLUMNS,
        affected_rows=BitMap64(addresses.astype(np.uint64)).serialize(),
    )
    return UpdatePlan(op, written, len(addresses), REWRITE_COLUMNS)
