"""Appends and overwrites: the transactions that write new fragments, and the first write of a new table.

Each function takes a `TableState` (or a store and committer for a table that is not there yet) and returns a
staged `Transaction` or the state committed; the `Table` facade and the module-level writers call them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import SchemaError, TableNotFoundError, UnsupportedFeatureError
from mvcc_core.format import operations
from mvcc_core.format import schema as schema_mod
from mvcc_core.format.bases import data_file_uris, find_base
from mvcc_core.format.fragments import (
    DEFAULT_MAX_ROWS_PER_FILE,
    to_reader,
    with_missing_nullable,
    write_fragments_from_reader,
)
from mvcc_core.format.naming import ManifestNaming
from mvcc_core.format.row_ids import ENABLE_CONFIG_KEY
from mvcc_core.format.row_ids import enabled as row_ids_enabled
from mvcc_core.io import ObjectStore, open_store
from mvcc_core.ops.replace_where import check_rows, replace_operation, rows_match
from mvcc_core.txn.commit import Committer
from mvcc_core.txn.external_store import ExternalManifestStore, split_storage_options
from mvcc_core.txn.state import TableState, commit_transaction
from mvcc_core.txn.transaction import Transaction, check_properties

#: The modes of a write to a URI: a new table, or an append to / overwrite of the table there.
FIRST_WRITE_MODES = ("create", "append", "overwrite")


def stage(
    state: TableState,
    operation: operations.Operation,
    files: Sequence[str] = (),
    *,
    commit_message: str | None,
    transaction_properties: Mapping[str, str] | None,
    read_version: int | None = None,
) -> Transaction:
    """A staged transaction on `state`'s version.

    Args:
        state: The version the transaction reads.
        operation: What it does.
        files: The files it wrote, relative to the table root (removed if its commit definitely fails).
        commit_message: The message stored with it.
        transaction_properties: Properties stored with it (checked: `dict[str, str]`).
        read_version: Its read version, when not `state`'s.

    Returns:
        The uncommitted transaction.
    """
    return Transaction(
        read_version=state.version if read_version is None else read_version,
        operation=operation,
        message=commit_message or "",
        transaction_properties=check_properties(transaction_properties),
        files=state.staged(list(files)),
    )


def append_transaction(
    state: TableState,
    data: Any,
    *,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    target_base: str | int | None = None,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
) -> Transaction:
    """Write `data` as new fragments of `state`'s table and return the Append, uncommitted.

    Args:
        state: The version appended to.
        data: Rows fitting the table's schema (anything `pa.table` accepts, or a RecordBatchReader).
        max_rows_per_file: The most rows a data file holds.
        target_base: The name or id of a base path to write the data files to, instead of `data/`.
        commit_message: The message stored with the transaction.
        transaction_properties: Properties stored with the transaction.

    Returns:
        The Append; its `files` are the data files written.

    Raises:
        SchemaError: `data` does not fit the table's schema (nothing is written).
    """
    transaction_properties = check_properties(transaction_properties)  # before a byte is written
    manifest = state.manifest
    base = find_base(manifest.base_paths, target_base) if target_base is not None else None
    reader = with_missing_nullable(to_reader(data, state.schema), state.schema)
    fragments = write_fragments_from_reader(
        state.store, reader, list(manifest.fields), state.schema, max_rows_per_file, base
    )
    txn = stage(
        state,
        operations.Append(fragments=fragments),
        commit_message=commit_message,
        transaction_properties=transaction_properties,
    )
    txn.files = data_file_uris(state.store, manifest.base_paths, fragments)
    return txn


def overwrite_transaction(
    state: TableState,
    data: Any,
    *,
    where: str | None = None,
    schema: pa.Schema | None = None,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
) -> Transaction:
    """Write `data` and return the Overwrite of every row, or with `where` the partition-scoped overwrite.

    Args:
        state: The version overwritten.
        data: The new rows.
        where: A SQL predicate: replace only the rows matching it (every row of `data` must match it).
        schema: The new schema (default: `data`'s); a partition-scoped overwrite keeps the table's.
        max_rows_per_file: The most rows a data file holds.
        commit_message: The message stored with the transaction.
        transaction_properties: Properties stored with the transaction.

    Returns:
        The Overwrite (or the Update recording `where`), uncommitted.

    Raises:
        SchemaError: `schema` differs from the table's in a partition-scoped overwrite.
        PredicateError: a row of `data` does not match `where` (nothing is left behind).
    """
    transaction_properties = check_properties(transaction_properties)  # before a byte is written
    manifest = state.manifest
    if where is not None:
        if schema is not None and not schema.equals(state.schema):
            raise SchemaError(f"a partition-scoped overwrite keeps the table's schema; {state.uri} has {state.schema}")
        fragments = write_fragments_from_reader(
            state.store,
            to_reader(data, state.schema),
            list(manifest.fields),
            state.schema,
            max_rows_per_file,
            check=check_rows(where, state.schema),
        )
        return overwrite_fragments_transaction(
            state, fragments, where=where, commit_message=commit_message, transaction_properties=transaction_properties
        )
    reader = to_reader(data, schema)
    new_schema = schema or reader.schema
    fields = fields_for_overwrite(manifest, new_schema)
    fragments = write_fragments_from_reader(state.store, reader, fields, new_schema, max_rows_per_file)
    op = operations.Overwrite(fragments=fragments, schema=fields, schema_metadata=dict(new_schema.metadata or {}))
    txn = stage(state, op, commit_message=commit_message, transaction_properties=transaction_properties)
    txn.files = data_file_uris(state.store, manifest.base_paths, fragments)
    return txn


def append_fragments_transaction(
    state: TableState,
    fragments: Sequence[pb.DataFragment],
    *,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
) -> Transaction:
    """The Append of fragments written elsewhere (by `write_fragments`), uncommitted.

    Args:
        state: The version appended to.
        fragments: The fragments (without ids).
        commit_message: The message stored with the transaction.
        transaction_properties: Properties stored with the transaction.

    Returns:
        The Append; its `files` are the fragments' data files (removed if the commit fails).
    """
    properties = check_properties(transaction_properties)
    txn = stage(
        state,
        operations.Append(fragments=list(fragments)),
        commit_message=commit_message,
        transaction_properties=properties,
    )
    txn.files = data_file_uris(state.store, state.manifest.base_paths, fragments)
    return txn


def overwrite_fragments_transaction(
    state: TableState,
    fragments: Sequence[pb.DataFragment],
    *,
    where: str | None = None,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
) -> Transaction:
    """The Overwrite by fragments written elsewhere with the table's schema, or with `where` the
    partition-scoped overwrite, uncommitted.

    Args:
        state: The version overwritten (the read version).
        fragments: The fragments (without ids); with `where`, their rows were checked against it.
        where: A SQL predicate: replace only the rows matching it.
        commit_message: The message stored with the transaction.
        transaction_properties: Properties stored with the transaction.

    Returns:
        The transaction; its `files` are the fragments' data files and any deletion files written.
    """
    properties = check_properties(transaction_properties)
    manifest = state.manifest
    uris = data_file_uris(state.store, manifest.base_paths, fragments)
    if where is None:
        op: operations.Operation = operations.Overwrite(
            fragments=list(fragments),
            schema=list(manifest.fields),
            schema_metadata=dict(manifest.schema_metadata),
        )
        written: list[str] = []
    else:
        op, written, _ = replace_operation(state.store, manifest, fragments, where)
    txn = stage(state, op, written, commit_message=commit_message, transaction_properties=properties)
    txn.files += uris
    return txn


def fields_for_overwrite(current: pb.Manifest | None, schema: pa.Schema) -> list[pb.Field]:
    """The fields of an overwrite with `schema`: the current ones when the schema is unchanged, new ids above the
    highest used otherwise.

    Args:
        current: The manifest overwritten (None or fieldless: a new table).
        schema: The new schema.

    Returns:
        The manifest fields.
    """
    if current is not None and len(current.fields):
        old = schema_mod.manifest_schema(current)
        if old.remove_metadata().equals(schema.remove_metadata()) and all(
            old.field(i).equals(schema.field(i), check_metadata=True) for i in range(len(schema))
        ):
            return list(current.fields)
        fields, _ = schema_mod.fields_from_schema(schema, next_field_id=max(current.max_field_id, 0) + 1)
        return fields
    fields, _ = schema_mod.fields_from_schema(schema)
    return fields


def check_metadata_utf8(schema: pa.Schema) -> None:
    """Refuse schema or field metadata that is not UTF-8 text, as pylance does (before a byte is written).

    Args:
        schema: The schema of a new table.

    Raises:
        SchemaError: a metadata key or value is not UTF-8 (e.g. a pickle); encode it (base64) first.
    """
    owners = [("the schema", schema.metadata)] + [(f"field {f.name!r}", f.metadata) for f in schema]
    for owner, metadata in owners:
        for key, value in (metadata or {}).items():
            try:
                key.decode("utf-8")
                value.decode("utf-8")
            except UnicodeDecodeError:
                raise SchemaError(
                    f"metadata key {key[:40]!r} of {owner} is not UTF-8 text; encode binary values (base64) first"
                ) from None


def check_first_write_mode(mode: str, where: str | None) -> None:
    """Refuse an unknown mode, or `where` without mode "overwrite".

    Args:
        mode: "create", "append" or "overwrite".
        where: The partition predicate, if any.

    Raises:
        ValueError: the mode is unknown, or `where` comes with another mode.
    """
    if mode not in FIRST_WRITE_MODES:
        raise ValueError(f"mode must be 'create', 'append' or 'overwrite', got {mode!r}")
    if where is not None and mode != "overwrite":
        raise ValueError(f"where= replaces the rows matching it, so it needs mode='overwrite', got {mode!r}")


def check_row_ids_on_existing(state: TableState, enable_stable_row_ids: bool) -> None:
    """Refuse to turn stable row ids on for a table that exists without them.

    Args:
        state: The existing table.
        enable_stable_row_ids: Whether the write asks for stable row ids.

    Raises:
        UnsupportedFeatureError: it asks for them and the table has none.
    """
    if enable_stable_row_ids and not row_ids_enabled(state.manifest):
        raise UnsupportedFeatureError(
            f"stable row ids can only be enabled when a table is created; {state.uri} exists without them"
        )


def _check_winner_schema(winner: TableState, schema: pa.Schema, fields: Sequence[pb.Field]) -> None:
    """A first write that lost the race for version 1 wrote its files with its own schema's field ids: they
    can join the winner's table only if it has the same columns (names, order, types, nullability) and ids."""
    ids = [(f.id, f.parent_id, f.name) for f in fields]
    if winner.schema.equals(schema, check_metadata=False) and ids == [
        (f.id, f.parent_id, f.name) for f in winner.fields
    ]:
        return
    raise SchemaError(
        f"another writer created the table at {winner.uri} first (version {winner.version}) with the schema "
        f"{winner.schema.remove_metadata()}; this write's data has the schema {schema.remove_metadata()}, so it "
        "cannot be added to that table: write data of the table's schema (or overwrite it explicitly)"
    )


def write_new_table(
    data: Any,
    store: ObjectStore,
    committer: Committer,
    *,
    mode: str,
    where: str | None,
    schema: pa.Schema | None,
    naming: ManifestNaming,
    max_rows_per_file: int,
    commit_message: str | None,
    transaction_properties: dict[str, str],
    max_retries: int,
    enable_stable_row_ids: bool,
) -> TableState:
    """Write `data` as version 1 of a table that is not there yet (see `commit_first_write`).

    Args:
        data: The rows.
        store: The table's store.
        committer: Its committer (with the table's commit handler).
        mode: What the write means if another writer creates the table first ("create", "append", "overwrite").
        where: The partition predicate of an "overwrite" (every row of `data` must match it).
        schema: The table's schema (default: `data`'s).
        naming: The manifest naming scheme of the new table.
        max_rows_per_file: The most rows a data file holds.
        commit_message: The message stored with the transaction.
        transaction_properties: Properties stored with the transaction (checked).
        max_retries: How many times a lost race is retried.
        enable_stable_row_ids: Give every row a stable id.

    Returns:
        The state of the version committed.
    """
    reader = to_reader(data, schema)
    table_schema = schema or reader.schema
    check_metadata_utf8(table_schema)
    check = check_rows(where, table_schema) if where is not None else None
    fields, _ = schema_mod.fields_from_schema(table_schema)
    fragments = write_fragments_from_reader(store, reader, fields, table_schema, max_rows_per_file, check=check)
    return commit_first_write(
        committer,
        fragments,
        table_schema,
        mode=mode,
        where=where,
        naming=naming,
        commit_message=commit_message,
        transaction_properties=transaction_properties,
        max_retries=max_retries,
        enable_stable_row_ids=enable_stable_row_ids,
    )


def commit_first_write(
    committer: Committer,
    fragments: Sequence[pb.DataFragment],
    schema: pa.Schema,
    *,
    mode: str,
    where: str | None,
    naming: ManifestNaming,
    commit_message: str | None,
    transaction_properties: dict[str, str],
    max_retries: int,
    enable_stable_row_ids: bool = False,
) -> TableState:
    """Commit `fragments` (written with `schema`'s field ids) as version 1 of a new table, in one commit.

    If another writer creates the table first, the write is what `mode` means on the winner's latest version:
    "create" raises TableExistsError (the caller asked for a new table); "append" appends the fragments;
    "overwrite" with `where` replaces the winner's rows matching it; a plain "overwrite" replaces the whole
    table as the version after the winner's. Both reuse the fragments already written.

    Args:
        committer: The new table's committer.
        fragments: The fragments written (without ids).
        schema: The schema they were written with.
        mode: "create", "append" or "overwrite".
        where: The partition predicate of an "overwrite".
        naming: The manifest naming scheme of the new table.
        commit_message: The message stored with the transaction.
        transaction_properties: Properties stored with the transaction (checked).
        max_retries: How many times a lost race is retried.
        enable_stable_row_ids: Give every row a stable id.

    Returns:
        The state of the version committed.
    """
    store = committer.store
    fields, _ = schema_mod.fields_from_schema(schema)
    overwrite = operations.Overwrite(
        fragments=list(fragments),
        schema=fields,
        schema_metadata=dict(schema.metadata or {}),
        config_upsert_values={ENABLE_CONFIG_KEY: "true"} if enable_stable_row_ids else {},
    )
    files = data_file_uris(store, [], fragments)
    txn = Transaction(
        read_version=0,
        operation=overwrite,
        message=commit_message or "",
        transaction_properties=transaction_properties,
        files=list(files),
    )

    def onto(winner: TableState) -> Transaction:
        check_row_ids_on_existing(winner, enable_stable_row_ids)
        written: dict[str, Any] = {"commit_message": commit_message, "transaction_properties": transaction_properties}
        if mode == "overwrite" and where is None:
            replaced = stage(winner, overwrite, **written)
            replaced.files = list(files)
            return replaced
        _check_winner_schema(winner, schema, fields)
        if mode == "append":
            return append_fragments_transaction(winner, fragments, **written)
        return overwrite_fragments_transaction(winner, fragments, where=where, **written)

    manifest, naming = commit_transaction(
        committer,
        txn,
        naming=naming,
        create=True,
        if_exists=None if mode == "create" else onto,
        max_retries=max_retries,
        rows_match=rows_match,
    )
    return TableState(store, manifest, naming, committer)


def write_fragments(
    data: Any,
    uri: str,
    *,
    schema: pa.Schema | None = None,
    storage_options: dict[str, Any] | None = None,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    external_store: str | ExternalManifestStore | None = None,
    where: str | None = None,
    file_prefix: str | None = None,
    version: int | None = None,
) -> list[pb.DataFragment]:
    """Write data files for a later commit (distributed writers): fragments without ids, no new version.

    Args:
        data: The rows. For an existing table they must fit the schema of its latest version (or of
            `version`); for a new table the field ids are those `fields_from_schema(schema)` assigns, so
            `create_table_from_fragments` with the same schema matches.
        uri: The table's root.
        schema: The schema of a new table (default: `data`'s).
        storage_options: The store's options.
        max_rows_per_file: The most rows a data file holds.
        external_store: The table's external manifest store, if it has one.
        where: Every row must match this SQL predicate (a partition-scoped overwrite's; PredicateError names a
            row that does not, and nothing is left behind).
        file_prefix: Data file names start with it (a write id), so every file of a failed distributed write
            can be found by listing `data/`.
        version: The version whose schema the rows must fit (default: the latest).

    Returns:
        The fragments written, to commit with `Table.commit` or `create_table_from_fragments`.
    """
    external, storage_options = split_storage_options(storage_options, external_store)
    store = open_store(uri, storage_options)
    try:
        state = TableState.open(uri, version, storage_options=storage_options, external_store=external)
        fields, table_schema = state.fields, state.schema
        reader = to_reader(data, table_schema)
    except TableNotFoundError:
        reader = to_reader(data, schema)
        table_schema = schema or reader.schema
        fields, _ = schema_mod.fields_from_schema(table_schema)
    check = check_rows(where, table_schema) if where is not None else None
    return write_fragments_from_reader(
        store, reader, fields, table_schema, max_rows_per_file, file_prefix=file_prefix, check=check
    )
