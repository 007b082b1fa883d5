"""Table: the user-facing API (pylance's shapes), and `write_table` / `open_table`.

A `Table` is a handle on one version. Every write commits with the handle's version as read version
and then advances the handle to the version it committed, as pylance does. The handle is the only
mutable thing here: below it, operations receive an immutable `TableState` and return a staged
`Transaction`, which `TableState.commit` commits (removing its files if the commit definitely failed).

Every write has an uncommitted form (`append_uncommitted`, `delete_uncommitted`, ...,
`merge_insert(...).execute_uncommitted`) for callers that commit elsewhere: a Spark driver, a catalog's
multi-table publish, a Dagster op. Public options are keyword-only.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import (
    ObjectNotFoundError,
    TableExistsError,
)
from mvcc_core.format import operations
from mvcc_core.format.features import describe as describe_features
from mvcc_core.format.fragments import DEFAULT_MAX_ROWS_PER_FILE
from mvcc_core.format.manifest import manifest_timestamp, table_exists
from mvcc_core.format.naming import ManifestNaming
from mvcc_core.format.tags import Tags
from mvcc_core.io import open_store
from mvcc_core.maintenance.cleanup import CleanupStats, cleanup_old_versions
from mvcc_core.maintenance.optimize import Optimize
from mvcc_core.ops import write
from mvcc_core.ops.clone import check_target, deep_copy
from mvcc_core.ops.delete import plan_delete
from mvcc_core.ops.merge_insert import MergeInsertBuilder
from mvcc_core.ops.replace_where import rows_match
from mvcc_core.ops.update import plan_update
from mvcc_core.progress import Progress
from mvcc_core.table.arguments import Uri, as_uri, check_retries, pylance_update_values
from mvcc_core.table.branch_replay import with_replay
from mvcc_core.table.branches import BranchMethods
from mvcc_core.table.configuration import ConfigurationMethods, checked_merged_generations
from mvcc_core.table.fragments import Fragment
from mvcc_core.table.indices import IndexMethods
from mvcc_core.table.reading import ReadingMethods
from mvcc_core.table.results import DeleteResult, UpdateResult
from mvcc_core.table.schema_changes import SchemaChangeMethods
from mvcc_core.table.versions import VersionMethods
from mvcc_core.txn import history
from mvcc_core.txn.commit import DEFAULT_MAX_RETRIES, Committer
from mvcc_core.txn.history import VersionRef
from mvcc_core.txn.state import TableState, commit_transaction
from mvcc_core.txn.transaction import Transaction, check_properties


class ConfigView(dict):
    """The configuration keys of a version: a dict (mvcc's `t.config["k"]`) that can be called for a copy
    (pylance's `ds.config()["k"]`)."""

    def __call__(self) -> dict[str, str]:
        return dict(self)


class Table(ReadingMethods, VersionMethods, SchemaChangeMethods, IndexMethods, ConfigurationMethods, BranchMethods):
    """A handle on one version of a table (pylance's `LanceDataset`).

    Open one with `mvcc_core.open_table(uri)` or create one with `mvcc_core.write_table(data, uri)`.
    Reads see the handle's version; writes commit on top of it and move the handle to the new version.

    Example::

        t = mvcc.write_table(pa.table({"id": [1, 2]}), "/tmp/t")
        t.append(pa.table({"id": [3]}), commit_message="more")
        t.to_table(filter="id > 1")

    Args:
        state: the table version the handle starts on
    """

    def __init__(self, state: TableState) -> None:
        """A handle on `state`; use `open_table` or `write_table` to get one."""
        self._state = state

    @classmethod
    def from_state(cls, state: TableState) -> Table:
        """A handle on `state` (what staged operations return).

        Args:
            state: a table version (what staged operations return)
        """
        return cls(state)

    # ---- identity and metadata ---------------------------------------------------------------

    @property
    def state(self) -> TableState:
        """This handle's version as an immutable `TableState` (store, manifest, committer): what
        operations, maintenance and executor tasks receive."""
        return self._state

    @property
    def uri(self) -> str:
        """The table's root, normalized (an absolute path for local tables, `s3://bucket/prefix` on S3)."""
        return self._state.uri

    @property
    def version(self) -> int:
        """The version this handle reads (and writes on top of)."""
        return self._state.version

    @property
    def manifest(self) -> pb.Manifest:
        """This version's manifest protobuf (read-only by convention: copy before changing it)."""
        return self._state.manifest

    @property
    def manifest_naming(self) -> ManifestNaming:
        """How the table names its manifests (V1 or V2), detected from the files."""
        return self._state.naming

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of this version."""
        return self._state.schema

    @property
    def config(self) -> ConfigView:
        """The table's configuration keys of this version (see `update_config`): a dict, which can also be
        called (`t.config()`, pylance's method) for a copy."""
        return ConfigView(self.manifest.config)

    @property
    def schema_metadata(self) -> dict[str, str]:
        """pylance's `schema_metadata`: the schema's metadata of this version, decoded."""
        return {k.decode(): v.decode() for k, v in (self.schema.metadata or {}).items()}

    @property
    def metadata(self) -> dict[str, str]:
        """pylance's `metadata`: the table's metadata of this version (the same as `table_metadata`)."""
        return self.table_metadata

    @property
    def table_metadata(self) -> dict[str, str]:
        """The table's metadata of this version (see `update_metadata`)."""
        return dict(self.manifest.table_metadata)

    @property
    def timestamp(self) -> datetime:
        """When this version was committed (UTC)."""
        return manifest_timestamp(self.manifest)

    @property
    def feature_flags(self) -> dict[str, list[str]]:
        """This version's reader and writer feature flags by name (`{"reader": [...], "writer": [...]}`):
        what a reader or writer of the table must support (`mvcc show` prints them)."""
        return {
            "reader": describe_features(self.manifest.reader_feature_flags),
            "writer": describe_features(self.manifest.writer_feature_flags),
        }

    @property
    def tags(self) -> Tags:
        """pylance's tags namespace: `t.tags.create(name, version)`, `.update`, `.delete`, `.list()`."""
        return history.tags_of(self._state)

    @property
    def latest_version(self) -> int:
        """The newest version of the table (read from the store now; pylance's property)."""
        return self._state.latest_location().version

    def get_fragments(self) -> list[Fragment]:
        """The fragments of this version, in the manifest's order (pylance's `LanceFragment`s: `fragment_id`,
        `data_files()`, `deletion_file()`, `count_rows(filter)`, `metadata`, ...)."""
        return [Fragment(self._state.store, self.manifest, entry) for entry in self.manifest.fragments]

    def get_fragment(self, fragment_id: int) -> Fragment | None:
        """The fragment of this version with id `fragment_id`, or None when it has none (pylance's).

        Args:
            fragment_id: the fragment's id
        """
        for entry in self.manifest.fragments:
            if entry.id == fragment_id:
                return Fragment(self._state.store, self.manifest, entry)
        return None

    def __repr__(self) -> str:
        on = "" if self.branch is None else f", branch={self.branch!r}"
        return f"Table(uri={self.uri!r}{on}, version={self.version}, rows={self.count_rows()})"

    def __len__(self) -> int:
        return self.count_rows()

    # ---- versions ----------------------------------------------------------------------------

    # ---- reads -------------------------------------------------------------------------------

    # ---- committing --------------------------------------------------------------------------

    def _txn(
        self,
        operation: operations.Operation,
        files: Sequence[str] = (),
        *,
        commit_message: str | None,
        transaction_properties: Mapping[str, str] | None,
        read_version: int | None = None,
    ) -> Transaction:
        """A staged transaction on this handle's version; `files` relative to the table root."""
        return write.stage(
            self._state,
            operation,
            files,
            commit_message=commit_message,
            transaction_properties=transaction_properties,
            read_version=read_version,
        )

    def _plan_txn(
        self, plan: Any, commit_message: str | None, transaction_properties: Mapping[str, str] | None
    ) -> Transaction:
        """The staged transaction of an operation's plan: its `operation`, with the files it `written`."""
        return self._txn(
            plan.operation, plan.written, commit_message=commit_message, transaction_properties=transaction_properties
        )

    def commit(
        self,
        operation: Transaction | operations.Operation,
        *,
        read_version: int | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
    ) -> Table:
        """Commit a staged `Transaction` (from an `*_uncommitted` call), or any of the 15 operations on top of
        `read_version` (default: this handle's version). The handle moves to the new version.

        Raises RetryableConflictError / IncompatibleConflictError when a concurrent commit wins (a staged
        transaction's files are then removed), InvalidOperationError when the operation cannot apply.

        Args:
            operation: a staged `Transaction`, or an operation to wrap in a new one
            read_version: the version an operation is built on (default: this handle's); not with a Transaction
            max_retries: how many lost commit races to retry before giving up
            commit_message: the message stored with the transaction; not with a Transaction
            transaction_properties: properties stored with the transaction (a dict of str to str); not with a
                Transaction
        """
        if isinstance(operation, Transaction):
            if read_version is not None or commit_message is not None or transaction_properties is not None:
                raise ValueError("a staged Transaction carries its read version, message and properties already")
            txn = operation
        elif isinstance(operation, operations.Operation):
            txn = self._txn(
                operation,
                commit_message=commit_message,
                transaction_properties=transaction_properties,
                read_version=read_version,
            )
        else:
            raise TypeError(f"commit takes a Transaction or an operation, got {type(operation).__name__}")
        self._state = self._state.commit(txn, max_retries=check_retries(max_retries), rows_match=rows_match)
        return self

    # ---- appends and overwrites --------------------------------------------------------------

    def append_uncommitted(
        self,
        data: Any,
        *,
        max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
        target_base: str | int | None = None,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
    ) -> Transaction:
        """Write `data` as new fragments and return the Append, uncommitted (see `append`).

        Args:
            data: Rows fitting the table's schema (anything `pa.table` accepts, or a RecordBatchReader).
            max_rows_per_file: The most rows a data file holds.
            target_base: The name or id of a base path to write the data files to, instead of `data/`.
            commit_message: The message stored with the transaction.
            transaction_properties: Properties stored with the transaction.
        """
        return write.append_transaction(
            self._state,
            data,
            max_rows_per_file=max_rows_per_file,
            target_base=target_base,
            commit_message=commit_message,
            transaction_properties=transaction_properties,
        )

    def append(
        self,
        data: Any,
        *,
        max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
        target_base: str | int | None = None,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Table:
        """Add rows as new fragments (one Append). `data`: a pyarrow Table, RecordBatch(Reader), pandas
        DataFrame or anything `pa.table` accepts, fitting the table's schema (SchemaError otherwise, before a
        byte is written). `target_base`: the name or id of a base path (see `add_bases`) to write the data files
        to instead of the table's own `data/`.

        Args:
            data: Rows fitting the table's schema (anything `pa.table` accepts, or a RecordBatchReader).
            max_rows_per_file: The most rows a data file holds.
            target_base: The name or id of a base path to write the data files to, instead of `data/`.
            commit_message: The message stored with the transaction.
            transaction_properties: Properties stored with the transaction.
            max_retries: how many lost commit races to retry before giving up
        """
        txn = self.append_uncommitted(
            data,
            max_rows_per_file=max_rows_per_file,
            target_base=target_base,
            commit_message=commit_message,
            transaction_properties=transaction_properties,
        )
        return self.commit(txn, max_retries=max_retries)

    def insert(self, data: Any, *, mode: str = "append", **kwargs: Any) -> Table:
        """pylance's `insert`: `append` (default) or `overwrite` rows of `data`.

        Args:
            data: the rows
            mode: "append" or "overwrite"
            **kwargs: the keywords of `append` or `overwrite`

        Raises:
            ValueError: another mode
        """
        if mode == "append":
            return self.append(data, **kwargs)
        if mode == "overwrite":
            return self.overwrite(data, **kwargs)
        raise ValueError(f"insert mode must be 'append' or 'overwrite', got {mode!r}")

    def overwrite_uncommitted(
        self,
        data: Any,
        *,
        where: str | None = None,
        schema: pa.Schema | None = None,
        max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
    ) -> Transaction:
        """Write `data` and return the Overwrite replacing every row (or, with `where`, the partition-scoped
        overwrite replacing the rows matching it), uncommitted (see `overwrite`).

        Args:
            data: The new rows.
            where: A SQL predicate: replace only the rows matching it (every row of `data` must match it).
            schema: The new schema (default: `data`'s); a partition-scoped overwrite keeps the table's.
            max_rows_per_file: The most rows a data file holds.
            commit_message: The message stored with the transaction.
            transaction_properties: Properties stored with the transaction.
        """
        return write.overwrite_transaction(
            self._state,
            data,
            where=where,
            schema=schema,
            max_rows_per_file=max_rows_per_file,
            commit_message=commit_message,
            transaction_properties=transaction_properties,
        )

    def overwrite(
        self,
        data: Any,
        *,
        where: str | None = None,
        schema: pa.Schema | None = None,
        max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Table:
        """Replace all rows (one Overwrite); the schema may change (field ids of unchanged columns are kept).

        With `where` (a SQL predicate; Delta's `replaceWhere`), replace exactly the rows matching it by `data`,
        in one commit (an Update recording the predicate). It fails closed: if any row of `data` does not match
        `where`, PredicateError names the predicate and the row and nothing is written; an empty `data` only
        deletes. A concurrent commit that inserted rows matching `where` makes it a RetryableConflictError;
        inserts into other partitions do not conflict.

        Args:
            data: The new rows.
            where: A SQL predicate: replace only the rows matching it (every row of `data` must match it).
            schema: The new schema (default: `data`'s); a partition-scoped overwrite keeps the table's.
            max_rows_per_file: The most rows a data file holds.
            commit_message: The message stored with the transaction.
            transaction_properties: Properties stored with the transaction.
            max_retries: how many lost commit races to retry before giving up

        Example::

            t.overwrite(day_rows, where="day = DATE '2026-11-01'")
        """
        txn = self.overwrite_uncommitted(
            data,
            where=where,
            schema=schema,
            max_rows_per_file=max_rows_per_file,
            commit_message=commit_message,
            transaction_properties=transaction_properties,
        )
        return self.commit(txn, max_retries=max_retries)

    # ---- distributed writers: fragments written elsewhere ----------------------------------------

    def append_fragments_uncommitted(
        self,
        fragments: Sequence[pb.DataFragment],
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
    ) -> Transaction:
        """The Append of fragments written by `mvcc_core.write_fragments` (on executors, say), uncommitted;
        commit it with `commit`. Its `files` are the fragments' data files (removed if the commit fails).

        Args:
            fragments: The fragments (without ids).
            commit_message: The message stored with the transaction.
            transaction_properties: Properties stored with the transaction.
        """
        return write.append_fragments_transaction(
            self._state, fragments, commit_message=commit_message, transaction_properties=transaction_properties
        )

    def overwrite_fragments_uncommitted(
        self,
        fragments: Sequence[pb.DataFragment],
        *,
        where: str | None = None,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
    ) -> Transaction:
        """The Overwrite by fragments written with this table's schema by `mvcc_core.write_fragments`, or with
        `where` the partition-scoped overwrite (see `overwrite`; the writer must have checked the rows with
        `write_fragments(..., where=...)`), uncommitted. This handle's version is the read version.

        Args:
            fragments: The fragments (without ids); with `where`, their rows were checked against it.
            where: A SQL predicate: replace only the rows matching it.
            commit_message: The message stored with the transaction.
            transaction_properties: Properties stored with the transaction.
        """
        return write.overwrite_fragments_transaction(
            self._state,
            fragments,
            where=where,
            commit_message=commit_message,
            transaction_properties=transaction_properties,
        )

    # ---- row-level changes -------------------------------------------------------------------

    def _stage_delete(
        self,
        predicate: str | pc.Expression,
        commit_message: str | None,
        transaction_properties: Mapping[str, str] | None,
    ) -> tuple[Transaction | None, int]:
        transaction_properties = check_properties(transaction_properties)  # before a byte is written
        if isinstance(predicate, str):  # on a branch: what a publish may run again (docs/guide/branches.md)
            replay = {"op": "delete", "where": predicate}
            transaction_properties = with_replay(self._state, transaction_properties, replay)
        plan = plan_delete(self._state.store, self.manifest, predicate)
        if plan.operation is None:
            return None, 0
        return self._plan_txn(plan, commit_message, transaction_properties), plan.rows_deleted

    def delete_uncommitted(
        self,
        predicate: str | pc.Expression,
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
    ) -> Transaction | None:
        """Write the deletion vectors for `predicate` and return the Delete, uncommitted; None when no row
        matches (there is nothing to commit).

        Args:
            predicate: the rows to delete, SQL or a pyarrow Expression
            commit_message: the message stored with the transaction
            transaction_properties: properties stored with the transaction (a dict of str to str)
        """
        return self._stage_delete(predicate, commit_message, transaction_properties)[0]

    def delete(
        self,
        predicate: str | pc.Expression,
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> DeleteResult:
        """Delete the rows matching `predicate` (SQL or pyarrow Expression) with deletion vectors.

        One Delete transaction; when no row matches, nothing is committed (the handle stays where it is).
        Returns pylance's `{"num_deleted_rows": n}`.

        Args:
            predicate: the rows to delete, SQL or a pyarrow Expression
            commit_message: the message stored with the transaction
            transaction_properties: properties stored with the transaction (a dict of str to str)
            max_retries: how many lost commit races to retry before giving up
        """
        txn, rows = self._stage_delete(predicate, commit_message, transaction_properties)
        if txn is not None:
            self.commit(txn, max_retries=max_retries)
        return DeleteResult(num_deleted_rows=rows)

    def _stage_update(
        self,
        values: dict[str, Any],
        where: str | pc.Expression | None,
        mode: str | None,
        merged_generations: dict[str | uuid.UUID, int] | None,
        commit_message: str | None,
        transaction_properties: Mapping[str, str] | None,
    ) -> tuple[Transaction | None, int]:
        transaction_properties = check_properties(transaction_properties)  # before a byte is written
        if not merged_generations and (where is None or isinstance(where, str)):
            replay = {"op": "update", "values": values, "where": where, "mode": mode}
            transaction_properties = with_replay(self._state, transaction_properties, replay)
        merged = checked_merged_generations(self.manifest, merged_generations) if merged_generations else []
        plan = plan_update(self._state.store, self.manifest, values, where, mode=mode)
        if plan.operation is not None:
            plan.operation.merged_generations = merged
            op: operations.Operation = plan.operation
        elif merged:
            op = operations.UpdateMemWalState(merged_generations=merged)
        else:
            return None, 0
        txn = self._txn(op, plan.written, commit_message=commit_message, transaction_properties=transaction_properties)
        return txn, plan.rows_updated

    def update_uncommitted(
        self,
        values: dict[str, Any],
        where: str | pc.Expression | None = None,
        *,
        mode: str | None = None,
        merged_generations: dict[str | uuid.UUID, int] | None = None,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
    ) -> Transaction | None:
        """Write the updated rows or columns and return the Update, uncommitted (see `update`); None when
        no row matches and no generation is to be marked merged.

        Args:
            values: column -> new value, as a SQL expression over the row's columns or a literal
            where: the rows to update, SQL or a pyarrow Expression (None: every row)
            mode: "rewrite_rows", "rewrite_columns", or None for the cheaper
            merged_generations: MemWAL region -> generation to mark merged in the same transaction
            commit_message: the message stored with the transaction
            transaction_properties: properties stored with the transaction (a dict of str to str)
        """
        return self._stage_update(values, where, mode, merged_generations, commit_message, transaction_properties)[0]

    def update(
        self,
        values: dict[str, Any] | None = None,
        where: str | pc.Expression | None = None,
        *,
        updates: dict[str, Any] | None = None,
        conflict_retries: int | None = None,
        retry_timeout: timedelta | None = None,
        mode: str | None = None,
        merged_generations: dict[str | uuid.UUID, int] | None = None,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> UpdateResult:
        """Set columns to SQL expressions or literals on the rows matching `where` (all rows for None).

        pylance's shape; one Update transaction. `mode`: "rewrite_rows", "rewrite_columns", or None to
        pick the cheaper (see `mvcc_core.ops.update`). `merged_generations` (MemWAL region -> generation) are
        marked merged by the same transaction (a flush of a MemWAL into the table). Returns
        `{"num_rows_updated": n}`; when no row matches only the generations, if any, are committed.

        Args:
            values: column -> new value, as a SQL expression over the row's columns or a literal
            where: the rows to update, SQL or a pyarrow Expression (None: every row)
            mode: "rewrite_rows", "rewrite_columns", or None for the cheaper
            merged_generations: MemWAL region -> generation to mark merged in the same transaction
            commit_message: the message stored with the transaction
            transaction_properties: properties stored with the transaction (a dict of str to str)
            max_retries: how many lost commit races to retry before giving up
            updates: pylance's keyword for `values` (give one of them)
            conflict_retries: pylance's, accepted (an int); mvcc does not re-run an update that loses a
                conflict, it raises it
            retry_timeout: pylance's, accepted (a timedelta), for the same reason unused
        """
        values = pylance_update_values(values, updates, conflict_retries, retry_timeout)
        txn, rows = self._stage_update(values, where, mode, merged_generations, commit_message, transaction_properties)
        if txn is not None:
            self.commit(txn, max_retries=max_retries)
        return UpdateResult(num_rows_updated=rows)

    def merge_insert(self, on: str | Sequence[str]) -> MergeInsertBuilder:
        """Upsert builder with pylance's shape: `t.merge_insert("id").when_matched_update_all()
        .when_not_matched_insert_all().execute(data)`; one Update transaction. `execute_uncommitted(data)`
        returns `(Transaction, stats)` instead of committing.

        Args:
            on: the key column(s) rows are matched on
        """

        def commit(txn: Transaction, retries: int) -> Table:
            # on a branch: what a publish may run again (docs/guide/branches.md)
            txn.transaction_properties = with_replay(self._state, txn.transaction_properties, builder.describe())
            return self.commit(txn, max_retries=retries)

        builder = MergeInsertBuilder(self._state, on, commit)
        return builder

    # ---- base paths and clones ---------------------------------------------------------------

    @staticmethod
    def drop(uri: Uri, ignore_not_found: bool = False, *, storage_options: dict[str, Any] | None = None) -> None:
        """pylance's `LanceDataset.drop`: remove the table at `uri`, every version and data file under its root.

        Args:
            uri: The table's root.
            ignore_not_found: Return quietly when no table is there.
            storage_options: The store's options.

        Raises:
            ObjectNotFoundError: no table is at `uri` (an OSError, as pylance's) and `ignore_not_found` is False.
        """
        root = as_uri(uri)
        store = open_store(root, storage_options)
        if not table_exists(store):
            if ignore_not_found:
                return
            raise ObjectNotFoundError(f"no table at {root} to drop")
        store.delete_many([meta.path for meta in store.list("")])
        if store.scheme == "file" and os.path.isdir(store.full_path("")):
            shutil.rmtree(store.full_path(""), ignore_errors=True)  # the emptied directories

    def clone(
        self,
        target_uri: Uri,
        version: VersionRef | None = None,
        *,
        shallow: bool = True,
        storage_options: dict[str, Any] | None = None,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
    ) -> Table:
        """A new table at `target_uri` whose history starts at `version` (default: this handle's).

        Shallow (default): no data is copied, the clone's files point at this table through a base path,
        so it breaks if this table's files are removed (reads then raise ObjectNotFoundError). Deep: every
        file is copied and the clone stands alone. Writes to a clone never touch this table.

        Args:
            target_uri: where the clone is created (it must hold no table)
            version: the version (number or tag) the clone starts from (default: this handle's)
            shallow: point at this table's files instead of copying them
            storage_options: the clone's store options (default: this table's)
            commit_message: the message stored with the transaction
            transaction_properties: properties stored with the transaction (a dict of str to str)

        Raises:
            TableExistsError: a table exists at `target_uri`
        """
        ref = self.version if version is None else self._resolve(version)
        source = self._state.load(ref)
        options = self._state.storage_options if storage_options is None else storage_options
        target = open_store(as_uri(target_uri), options)
        check_target(self._state.store, target)
        if table_exists(target):
            raise TableExistsError(f"a table already exists at {target.uri}; a clone needs an empty location")
        copied = [] if shallow else deep_copy(self._state.store, source, target)
        op = operations.Clone(
            is_shallow=shallow,
            ref_name=version if isinstance(version, str) else None,
            ref_version=ref,
            ref_path=self.uri,
        )
        committer = Committer(target)
        txn = Transaction(
            read_version=0,
            operation=op,
            message=commit_message or "",
            transaction_properties=check_properties(transaction_properties),
            files=[f"{target.uri}/{p}" for p in copied],
        )
        manifest, naming = commit_transaction(committer, txn, naming=self.manifest_naming, create=True)
        return Table(TableState(target, manifest, naming, committer))

    # ---- schema evolution (pylance's shapes) --------------------------------------------------

    # ---- maintenance -------------------------------------------------------------------------

    @property
    def optimize(self) -> Optimize:
        """pylance's `optimize` namespace: `t.optimize.compact_files(...)`, `t.optimize.optimize_indices()`."""
        return Optimize(self._state, self._advance)

    def _advance(self, state: TableState) -> None:
        """Move this handle to `state` (what `t.optimize` calls after it commits)."""
        self._state = state

    def cleanup_old_versions(
        self,
        older_than: timedelta | None = None,
        retain_versions: int | None = None,
        *,
        delete_unverified: bool = False,
        error_if_tagged_old_versions: bool = True,
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> CleanupStats:
        """Remove old versions and the files only they use (Lance's semantics; see maintenance/cleanup.py).

        The latest and tagged versions are always kept; unreferenced files younger than 7 days are kept
        unless `delete_unverified`; `dry_run` only reports. A corrupt old manifest is counted in
        `CleanupStats.corrupt_versions` and removed like any other old version.
        `progress(done, total)` is called as files are removed.

        Args:
            older_than: versions committed longer ago than this are removed (None: the table's
                `mvcc.retention.older_than`, else 14 days)
            retain_versions: keep at least this many newest versions, whatever their age (None: the table's
                `mvcc.retention.retain_versions`, else no such floor)
            delete_unverified: also remove files no version references that are younger than the safety window
                (only when no writer can be running)
            error_if_tagged_old_versions: raise instead of keeping an old version a tag names
            dry_run: count what would be removed, remove nothing
            progress: called as `progress(done, total)` as files are removed
        """
        stats = cleanup_old_versions(
            self._state,
            older_than,
            retain_versions,
            delete_unverified=delete_unverified,
            error_if_tagged_old_versions=error_if_tagged_old_versions,
            dry_run=dry_run,
            progress=progress,
        )
        self._state.committer.forget_manifests()
        return stats

    # ---- scalar indices ----------------------------------------------------------------------

    # ---- MemWAL state ------------------------------------------------------------------------

    # ---- restore and configuration -----------------------------------------------------------


# ---- module-level entry points ---------------------------------------------------------------
