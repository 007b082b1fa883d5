"""Opening and writing tables by URI: `open_table`, `open_tags`, `write_table`, `create_table_from_fragments`,
`manifest_violations`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import pyarrow as pa

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import (
    TableExistsError,
    TableNotFoundError,
)
from mvcc_core.format.fragments import DEFAULT_MAX_ROWS_PER_FILE
from mvcc_core.format.manifest import location_of, manifest_problems
from mvcc_core.format.naming import ManifestNaming
from mvcc_core.format.tags import Tags
from mvcc_core.io import open_store
from mvcc_core.ops import write
from mvcc_core.table.arguments import Uri, as_uri, check_retries
from mvcc_core.table.handle import Table
from mvcc_core.txn.commit import DEFAULT_MAX_RETRIES, Committer
from mvcc_core.txn.external_store import ExternalManifestStore, commit_handler, split_storage_options
from mvcc_core.txn.history import VersionRef
from mvcc_core.txn.state import TableState
from mvcc_core.txn.transaction import check_properties


def open_table(
    uri: Uri,
    version: VersionRef | None = None,
    *,
    asof: datetime | None = None,
    storage_options: dict[str, Any] | None = None,
    external_store: str | ExternalManifestStore | None = None,
    branch: str | None = None,
) -> Table:
    """Open the latest version, or `version` (number or tag), or the version current at `asof`.

    Only the manifest asked for is read: an older version opens even when a newer manifest is damaged.

    Args:
        uri: The table's root: a local path, ``memory://...`` or ``s3://bucket/prefix``.
        version: A version number or a tag name (None: the latest).
        asof: Open the version current at this time instead (not with `version`).
        storage_options: The store's options (credentials, endpoint; may name "external_store").
        external_store: An ExternalManifestStore or a URI such as "sqlite:///path/db"; the latest version then
            comes from it, and commits go through it.
        branch: Open this branch (None or "main": main); `version` and `asof` then name its versions.

    Returns:
        A handle on that version.

    Raises:
        ValueError: both `version` and `asof` are given.
        TableNotFoundError: no table is at `uri`.
        VersionNotFoundError: the version, tag or time names no version.
        CorruptManifestError: the latest manifest does not decode (its message and `intact_version` name the
            newest intact version, which `open_table(uri, version=N).restore()` makes the latest again).
    """
    if version is not None and asof is not None:
        raise ValueError("give either version or asof, not both")
    options: dict[str, Any] = {"storage_options": storage_options, "external_store": external_store}
    ref = version if version is not None else asof
    if branch is not None and branch != "main":
        handle = Table(TableState.unread(as_uri(uri), **options)).checkout_branch(branch)
        return handle if ref is None else handle.checkout(ref)
    if ref is None:
        return Table(TableState.open(as_uri(uri), **options))
    return Table(TableState.unread(as_uri(uri), **options)).checkout(ref)


def open_tags(
    uri: Uri,
    *,
    storage_options: dict[str, Any] | None = None,
    external_store: str | ExternalManifestStore | None = None,
) -> Tags:
    """The table's tags, without reading any manifest: what tells a tag from a version number or a time
    before the version is opened (the `mvcc` command's positional references), also when the latest
    manifest is damaged.

    Args:
        uri: The table's root.
        storage_options: The store's options (may name "external_store").
        external_store: The table's external manifest store, if it has one.

    Returns:
        The tags (`get_reference(name)`, `read_all()`); a missing table has none.
    """
    return Table(TableState.unread(as_uri(uri), storage_options=storage_options, external_store=external_store)).tags


def manifest_violations(
    uri: Uri,
    version: int | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
    external_store: str | ExternalManifestStore | None = None,
) -> list[str]:
    """Every problem of one manifest in plain words: it does not decode, or each invariant it breaks.

    Reading a table stops at the first broken invariant (CorruptManifestError); this lists them all
    (docs/reference/format.md, "Invariants of a manifest").

    Args:
        uri: The table's root.
        version: The version to check (None: the latest).
        storage_options: The store's options.
        external_store: The table's external manifest store, if it has one.

    Returns:
        The problems; empty when the manifest is sound.
    """
    external, storage_options = split_storage_options(storage_options, external_store)
    store = open_store(as_uri(uri), storage_options)
    committer = Committer(store, handler=commit_handler(external))
    latest = committer.latest_location()
    location = latest if version is None else location_of(store, version, latest.naming)
    return manifest_problems(store, location, committer.handler)


def write_table(
    data: Any,
    uri: Uri,
    schema: pa.Schema | None = None,
    mode: str = "create",
    *,
    where: str | None = None,
    storage_options: dict[str, Any] | None = None,
    manifest_naming: str | ManifestNaming = "v2",
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    max_retries: int = DEFAULT_MAX_RETRIES,
    external_store: str | ExternalManifestStore | None = None,
    enable_stable_row_ids: bool = False,
    data_storage_version: str | None = None,
    max_rows_per_group: int | None = None,
) -> Table:
    """Create a table, or append to / overwrite an existing one (pylance's `write_dataset`); one commit.

    A first write that another writer beats to version 1 is applied to the winner's table under the usual
    conflict rules (an Append, the partition overwrite, a later Overwrite); `data` must then have the
    winner's schema.

    Args:
        data: The rows: a pyarrow Table, RecordBatch(Reader), pandas DataFrame or anything `pa.table` accepts.
        uri: The table's root, or a handle on the table (pylance: a dataset as the target).
        schema: The table's schema (default: `data`'s); the third positional argument, as pylance's.
        mode: "create" (TableExistsError if a table is there), "append" or "overwrite" (both create the table,
            with `data`'s rows, when there is none).
        where: Mode "overwrite" only, a SQL predicate: replace only the rows matching it
            (`Table.overwrite(where=)`); every row of `data` must match it, also when the write creates the table.
        storage_options: The store's options.
        manifest_naming: The manifest naming scheme of a new table ("v2" or "v1").
        max_rows_per_file: The most rows a data file holds.
        commit_message: The message stored with the transaction.
        transaction_properties: Properties stored with the transaction (`dict[str, str]`).
        max_retries: How many times a lost race is retried.
        external_store: See `open_table`; the object store then needs no conditional writes.
        enable_stable_row_ids: At creation only: every row gets an id that survives updates and compaction
            (`with_row_id=True` in scans); sets the `stable_row_ids` reader and writer flags.
        data_storage_version: pylance's Lance file format version ("legacy", "stable", "2.0", ...): accepted
            and ignored, mvcc writes Parquet (docs/reference/pylance_compat.md).
        max_rows_per_group: pylance's rows per Lance page group: accepted (a positive int) and ignored,
            mvcc sizes Parquet row groups itself (docs/reference/pylance_compat.md).

    Returns:
        A handle on the version committed.

    Raises:
        ValueError: an unknown mode, `where` without mode "overwrite", or a `max_rows_per_group` below 1.
        TypeError: `schema` is not a pyarrow Schema (a mode passed third), `data_storage_version` is not a str
            or `max_rows_per_group` not an int.
        TableExistsError: mode "create" and a table is there.
        SchemaError: `data` does not fit the table's (or the winner's) schema.
        PredicateError: a row of `data` does not match `where` (nothing is left behind).

    Example::

        t = mvcc.write_table(pa.table({"id": [1, 2, 3]}), "/tmp/t", commit_message="initial load")
    """
    if schema is not None and not isinstance(schema, pa.Schema):
        hint = f"; pass mode={schema!r} by keyword" if isinstance(schema, str) else ""
        raise TypeError(
            "write_table(data, uri, schema, mode): the third positional argument is the schema, as pylance's, "
            f"got {type(schema).__name__} {schema!r}{hint}"
        )
    write.check_first_write_mode(mode, where)
    _check_ignored_lance_options(data_storage_version, max_rows_per_group)
    if isinstance(uri, Table):
        uri = uri.uri
    uri = as_uri(uri)
    naming = ManifestNaming.parse(manifest_naming)
    properties = check_properties(transaction_properties)
    external, storage_options = split_storage_options(storage_options, external_store)
    try:
        existing = open_table(uri, storage_options=storage_options, external_store=external)
    except TableNotFoundError:
        existing = None
    common: dict[str, Any] = dict(
        max_rows_per_file=max_rows_per_file,
        commit_message=commit_message,
        transaction_properties=properties,
        max_retries=max_retries,
    )
    if existing is not None:
        write.check_row_ids_on_existing(existing.state, enable_stable_row_ids)
        if mode == "create":
            raise TableExistsError(
                f"a table already exists at {uri} (version {existing.version}); use mode='append' or 'overwrite'",
                uri=uri,
                version=existing.version,
            )
        if mode == "append":
            return existing.append(data, **common)
        return existing.overwrite(data, where=where, schema=schema, **common)
    store = open_store(uri, storage_options)
    state = write.write_new_table(
        data,
        store,
        Committer(store, handler=commit_handler(external)),
        mode=mode,
        where=where,
        schema=schema,
        naming=naming,
        max_rows_per_file=max_rows_per_file,
        commit_message=commit_message,
        transaction_properties=properties,
        max_retries=check_retries(max_retries),
        enable_stable_row_ids=enable_stable_row_ids,
    )
    return Table(state)


def _check_ignored_lance_options(data_storage_version: Any, max_rows_per_group: Any) -> None:
    """Refuse a wrong type for pylance's Lance-file options, which mvcc accepts and ignores."""
    if data_storage_version is not None and not isinstance(data_storage_version, str):
        raise TypeError(f"data_storage_version must be a str, got {type(data_storage_version).__name__}")
    if max_rows_per_group is not None:
        if isinstance(max_rows_per_group, bool) or not isinstance(max_rows_per_group, int):
            raise TypeError(f"max_rows_per_group must be an int, got {type(max_rows_per_group).__name__}")
        if max_rows_per_group < 1:
            raise ValueError(f"max_rows_per_group must be at least 1, got {max_rows_per_group}")


def create_table_from_fragments(
    fragments: Sequence[pb.DataFragment],
    uri: Uri,
    *,
    schema: pa.Schema,
    mode: str = "create",
    where: str | None = None,
    storage_options: dict[str, Any] | None = None,
    external_store: str | ExternalManifestStore | None = None,
    manifest_naming: str | ManifestNaming = "v2",
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    max_retries: int = DEFAULT_MAX_RETRIES,
) -> Table:
    """Create a table (version 1) from fragments `write_fragments` wrote for a new table with `schema`.

    The distributed form of `write_table(data, uri, mode, where=)`. `mode` says what to do if another writer
    creates the table first: "create" raises TableExistsError (the fragments are then removed: write them
    again against it); "append" appends them to the winner's table, "overwrite" replaces its rows (with
    `where`, the rows matching it; the writers must have checked their rows with `write_fragments(where=)`),
    under the usual conflict rules. Appending or partition-overwriting needs the winner's schema
    (SchemaError otherwise; the fragments are removed).

    Args:
        fragments: the fragments `write_fragments` wrote for the new table
        uri: the table's root
        schema: the schema the fragments were written with
        mode: what to do if another writer creates the table first: "create", "append" or "overwrite"
        where: mode "overwrite" only: the SQL predicate of the rows replaced
        storage_options: The store's options.
        external_store: See `open_table`; the object store then needs no conditional writes.
        manifest_naming: The manifest naming scheme of a new table ("v2" or "v1").
        commit_message: The message stored with the transaction.
        transaction_properties: Properties stored with the transaction (`dict[str, str]`).
        max_retries: How many times a lost race is retried.
    """
    write.check_first_write_mode(mode, where)
    uri = as_uri(uri)
    properties = check_properties(transaction_properties)
    external, storage_options = split_storage_options(storage_options, external_store)
    store = open_store(uri, storage_options)
    state = write.commit_first_write(
        Committer(store, handler=commit_handler(external)),
        fragments,
        schema,
        mode=mode,
        where=where,
        naming=ManifestNaming.parse(manifest_naming),
        commit_message=commit_message,
        transaction_properties=properties,
        max_retries=check_retries(max_retries),
    )
    return Table(state)
