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

import logging
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import (
    BasePathError,
    CorruptManifestError,
    CorruptTagError,
    IndexExistsError,
    IndexNotFoundError,
    InvalidOperationError,
    SchemaError,
    TableExistsError,
    TableNotFoundError,
    TagError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from mvcc_core.executor import Executor
from mvcc_core.format import operations as ops
from mvcc_core.format import schema as schema_mod
from mvcc_core.format.bases import DatasetBasePath, data_file_uris, find_base
from mvcc_core.format.deletion import live_rows
from mvcc_core.format.features import describe as describe_features
from mvcc_core.format.fragments import DEFAULT_MAX_ROWS_PER_FILE, to_reader, write_fragments_from_reader
from mvcc_core.format.manifest import list_manifests, location_of, manifest_problems, manifest_timestamp, table_exists
from mvcc_core.format.naming import MEM_WAL_INDEX, ManifestNaming
from mvcc_core.format.row_ids import ENABLE_CONFIG_KEY
from mvcc_core.format.row_ids import enabled as row_ids_enabled
from mvcc_core.format.tags import Tags
from mvcc_core.io import open_store
from mvcc_core.maintenance.cleanup import CleanupStats, cleanup_old_versions
from mvcc_core.maintenance.optimize import Optimize
from mvcc_core.ops.clone import check_target, deep_copy
from mvcc_core.ops.delete import plan_delete
from mvcc_core.ops.index_build import build as build_index
from mvcc_core.ops.merge_insert import MergeInsertBuilder
from mvcc_core.ops.replace_where import check_rows, replace_operation
from mvcc_core.ops.schema_evolution import (
    plan_add_columns,
    plan_alter_columns,
    plan_drop_columns,
    plan_merge,
    plan_replace_column,
)
from mvcc_core.ops.update import plan_update
from mvcc_core.progress import Progress
from mvcc_core.read.scan import DEFAULT_BATCH_SIZE, Scan
from mvcc_core.txn.commit import DEFAULT_MAX_RETRIES, Committer
from mvcc_core.txn.external_store import ExternalManifestStore, commit_handler, split_storage_options
from mvcc_core.txn.state import TableState, commit_transaction
from mvcc_core.txn.transaction import Transaction, check_properties

log = logging.getLogger("mvcc.table")

VersionRef = int | str | datetime
Uri = str | os.PathLike[str]


def _uri(uri: Uri) -> str:
    """A table uri from a string or a `pathlib.Path` (pylance accepts both)."""
    if isinstance(uri, os.PathLike):
        return os.fspath(uri)
    if not isinstance(uri, str):
        raise TypeError(f"a table uri is a str or a path, got {type(uri).__name__}")
    return uri


@dataclass(frozen=True)
class VersionInfo(Mapping[str, Any]):
    """One version of a table, as `Table.versions()` lists it.

    Readable by attribute (`v.version`) and, as pylance's version dicts, by key (`v["version"]`,
    `v["timestamp"]`, `v["metadata"]`; `metadata` is the transaction's `transaction_properties`). A
    version whose manifest or transaction cannot be read is listed with `error` saying why, not skipped.
    """

    version: int
    timestamp: datetime | None
    operation: str | None
    read_version: int | None
    uuid: str | None
    message: str | None
    transaction_properties: dict[str, str] = field(default_factory=dict)
    error: str | None = None

    @property
    def metadata(self) -> dict[str, str]:
        """pylance's name: the transaction's `transaction_properties`."""
        return self.transaction_properties

    _KEYS = (
        "version",
        "timestamp",
        "metadata",
        "operation",
        "read_version",
        "uuid",
        "message",
        "transaction_properties",
        "error",
    )

    def __getitem__(self, key: str) -> Any:
        if key not in self._KEYS:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._KEYS)

    def __len__(self) -> int:
        return len(self._KEYS)


class DeleteResult(dict):
    """pylance's result of `delete`: `{"num_deleted_rows": n}`."""

    @property
    def num_deleted_rows(self) -> int:
        """How many rows the delete removed."""
        return int(self["num_deleted_rows"])


class UpdateResult(dict):
    """pylance's result of `update`: `{"num_rows_updated": n}`."""

    @property
    def num_rows_updated(self) -> int:
        """How many rows the update changed."""
        return int(self["num_rows_updated"])


def _as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _check_retries(max_retries: int) -> int:
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ValueError(f"max_retries must be a non-negative int, got {max_retries!r}")
    return max_retries


class Table:
    """A handle on one version of a table (pylance's `LanceDataset`).

    Open one with `mvcc_core.open_table(uri)` or create one with `mvcc_core.write_table(data, uri)`.
    Reads see the handle's version; writes commit on top of it and move the handle to the new version.

    Example::

        t = mvcc.write_table(pa.table({"id": [1, 2]}), "/tmp/t")
        t.append(pa.table({"id": [3]}), commit_message="more")
        t.to_table(filter="id > 1")
    """

    def __init__(self, state: TableState) -> None:
        self._state = state

    @classmethod
    def from_state(cls, state: TableState) -> Table:
        """A handle on `state` (what staged operations return)."""
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
    def config(self) -> dict[str, str]:
        """The table's configuration keys of this version (see `update_config`)."""
        return dict(self.manifest.config)

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
        return Tags(self._state.store, self._version_exists)

    @property
    def latest_version(self) -> int:
        """The newest version of the table (read from the store now; pylance's property)."""
        return self._state.latest_location().version

    def get_fragments(self) -> list[pb.DataFragment]:
        """The fragments of this version (protobuf `DataFragment`s: id, data files, deletion file, rows)."""
        return list(self.manifest.fragments)

    def __repr__(self) -> str:
        return f"Table(uri={self.uri!r}, version={self.version}, rows={self.count_rows()})"

    def __len__(self) -> int:
        return self.count_rows()

    # ---- versions ----------------------------------------------------------------------------

    def _version_exists(self, version: int) -> bool:
        try:
            self._state.load(version)
        except VersionNotFoundError:
            return False
        return True

    def _resolve(self, ref: VersionRef) -> int:
        if isinstance(ref, bool):
            raise VersionNotFoundError(f"not a version: {ref!r}")
        if isinstance(ref, int):
            self._state.load(ref)
            return ref
        if isinstance(ref, str):
            try:
                return self.tags.get_version(ref)
            except CorruptTagError:
                raise
            except TagError as exc:
                raise VersionNotFoundError(str(exc)) from None
        if isinstance(ref, datetime):
            return self._version_asof(ref)
        raise VersionNotFoundError(f"a version is an int, a tag name or a datetime, got {type(ref).__name__}")

    def _version_asof(self, when: datetime) -> int:
        """The newest version committed at or before `when` (binary search: timestamps are monotonic)."""
        when = _as_utc(when)
        locations = list_manifests(self._state.store, self._state.committer.handler)
        lo, hi, found = 0, len(locations) - 1, None
        while lo <= hi:
            mid = (lo + hi) // 2
            if manifest_timestamp(self._state.load(locations[mid].version)) <= when:
                found, lo = locations[mid].version, mid + 1
            else:
                hi = mid - 1
        if found is None:
            raise VersionNotFoundError(f"table {self.uri} has no version committed at or before {when.isoformat()}")
        return found

    def checkout(self, ref: VersionRef) -> Table:
        """A new handle on `ref`: a version number, a tag name, or a datetime (the version current then)."""
        return Table(self._state.checkout(self._resolve(ref)))

    def checkout_version(self, version: VersionRef) -> Table:
        """pylance's name for `checkout`."""
        return self.checkout(version)

    def checkout_latest(self) -> Table:
        """A new handle on the newest version."""
        return Table(self._state.latest())

    def versions(self, *, limit: int | None = None) -> list[VersionInfo]:
        """Every version, oldest first, with its operation, message and transaction properties.

        A version whose manifest or transaction file is corrupt is listed with `error` set (and None for
        what could not be read) instead of failing the whole listing. `limit`: only the newest `limit`
        versions (still oldest first); one listing, and only their manifests and transactions are read,
        so a long history costs nothing (the `mvcc versions --limit` command).
        """
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValueError(f"limit must be a non-negative int, got {limit!r}")
        out = []
        committer = self._state.committer
        locations = list_manifests(self._state.store, committer.handler)
        if limit is not None:
            locations = locations[len(locations) - limit :] if limit else []
        for loc in locations:
            try:
                manifest = self._state.load(loc.version)
            except CorruptManifestError as exc:
                out.append(VersionInfo(loc.version, None, None, None, None, None, error=str(exc)))
                continue
            error = None
            try:
                txn = committer.load_transaction(manifest)
            except CorruptManifestError as exc:
                txn, error = None, str(exc)
            out.append(
                VersionInfo(
                    version=loc.version,
                    timestamp=manifest_timestamp(manifest),
                    operation=txn.operation.name if txn else None,
                    read_version=txn.read_version if txn else None,
                    uuid=txn.uuid if txn else None,
                    message=txn.message if txn else None,
                    transaction_properties=dict(txn.transaction_properties) if txn else {},
                    error=error,
                )
            )
        return out

    def transaction(self, version: int | None = None) -> Transaction | None:
        """The transaction that produced `version` (default: this handle's), None if it has no readable file."""
        manifest = self.manifest if version is None else self._state.load(version)
        return self._state.committer.load_transaction(manifest)

    def get_transactions(self, recent_transactions: int = 10) -> list[Transaction | None]:
        """pylance's `get_transactions`: the transactions of the newest versions up to this handle's,
        newest first (None where a version has no readable transaction)."""
        out: list[Transaction | None] = []
        for version in range(self.version, max(0, self.version - recent_transactions), -1):
            try:
                out.append(self.transaction(version))
            except (VersionNotFoundError, CorruptManifestError):
                out.append(None)
        return out

    # ---- reads -------------------------------------------------------------------------------

    def scanner(
        self,
        columns: Sequence[str] | Mapping[str, str] | None = None,
        filter: str | pc.Expression | None = None,  # noqa: A002 - pylance's name
        *,
        with_row_address: bool = False,
        batch_size: int = DEFAULT_BATCH_SIZE,
        with_row_id: bool = False,
    ) -> Scan:
        """A scan of this version. `columns`: column names, or a dict of output name -> SQL expression over the
        table's columns (pylance's shape: `{"total": "price * qty"}`, the SQL filters accept). `filter`: a SQL
        predicate or a pyarrow Expression over the table's columns (pushed down and answered from scalar
        indices alike). `with_row_id`: a `_rowid` column (stable ids if the table has them, else the row
        address). `with_row_address`: a `_rowaddr` column."""
        return Scan(
            self._state.store,
            self.manifest,
            columns,
            filter,
            with_row_address,
            batch_size,
            with_row_id=with_row_id,
        )

    def to_table(
        self,
        columns: Sequence[str] | Mapping[str, str] | None = None,
        filter: str | pc.Expression | None = None,  # noqa: A002
        *,
        limit: int | None = None,
        offset: int | None = None,
        with_row_address: bool = False,
        with_row_id: bool = False,
    ) -> pa.Table:
        """The rows of this version (matching `filter`), as one Arrow table; `offset` rows skipped and at
        most `limit` returned, in table order."""
        scan = self.scanner(columns, filter, with_row_address=with_row_address, with_row_id=with_row_id)
        if limit is None and not offset:
            return scan.to_table()
        return _sliced(scan, limit, offset)

    def to_batches(
        self,
        columns: Sequence[str] | Mapping[str, str] | None = None,
        filter: str | pc.Expression | None = None,  # noqa: A002
        *,
        with_row_address: bool = False,
        batch_size: int = DEFAULT_BATCH_SIZE,
        with_row_id: bool = False,
    ) -> Iterator[pa.RecordBatch]:
        """Stream the rows of this version as record batches (memory bounded by a few batches)."""
        return self.scanner(
            columns, filter, with_row_address=with_row_address, batch_size=batch_size, with_row_id=with_row_id
        ).to_batches()

    def to_reader(self) -> pa.RecordBatchReader:
        """All rows of this version as a `pyarrow.RecordBatchReader` (what Arrow consumers take)."""
        return self.scanner().to_reader()

    def head(self, num_rows: int = 5, columns: Sequence[str] | Mapping[str, str] | None = None) -> pa.Table:
        """The first `num_rows` rows (pylance's `head`)."""
        return self.to_table(columns, limit=num_rows)

    def take(
        self, indices: Sequence[int] | np.ndarray, columns: Sequence[str] | Mapping[str, str] | None = None
    ) -> pa.Table:
        """The rows at these positions of this version (0 is the first live row), in the order given.

        Only the fragments holding a requested row are read. IndexError names a position past the end.
        """
        positions = np.asarray(indices, dtype=np.int64)
        total = self.count_rows()
        bad = positions[(positions < 0) | (positions >= total)]
        if len(bad):
            raise IndexError(f"take: position {int(bad[0])} is out of range for {total} rows")
        fragments = self.manifest.fragments
        starts = np.cumsum([0] + [live_rows(f) for f in fragments])
        owner = np.searchsorted(starts, positions, side="right") - 1
        parts, order = [], []
        for frag_index in np.unique(owner):
            wanted = np.flatnonzero(owner == frag_index)
            frag = fragments[int(frag_index)]
            rows = Scan(self._state.store, self.manifest, columns, fragments=[frag]).to_table()
            parts.append(rows.take(pa.array(positions[wanted] - starts[frag_index])))
            order.append(wanted)
        if not parts:
            return self.scanner(columns).output_schema.empty_table()
        combined = pa.concat_tables(parts)
        return combined.take(pa.array(np.argsort(np.concatenate(order), kind="stable")))

    def count_rows(self, filter: str | pc.Expression | None = None) -> int:  # noqa: A002
        """Without a filter: from the manifest alone, no data file is opened."""
        return self.scanner(filter=filter, columns=[]).count_rows()

    # ---- committing --------------------------------------------------------------------------

    def _txn(
        self,
        operation: ops.Operation,
        files: Sequence[str] = (),
        *,
        commit_message: str | None,
        transaction_properties: Mapping[str, str] | None,
        read_version: int | None = None,
    ) -> Transaction:
        """A staged transaction on this handle's version; `files` relative to the table root."""
        return Transaction(
            read_version=self.version if read_version is None else read_version,
            operation=operation,
            message=commit_message or "",
            transaction_properties=check_properties(transaction_properties),
            files=self._state.staged(list(files)),
        )

    def commit(
        self,
        operation: Transaction | ops.Operation,
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
        """
        if isinstance(operation, Transaction):
            if read_version is not None or commit_message is not None or transaction_properties is not None:
                raise ValueError("a staged Transaction carries its read version, message and properties already")
            txn = operation
        elif isinstance(operation, ops.Operation):
            txn = self._txn(
                operation,
                commit_message=commit_message,
                transaction_properties=transaction_properties,
                read_version=read_version,
            )
        else:
            raise TypeError(f"commit takes a Transaction or an operation, got {type(operation).__name__}")
        self._state = self._state.commit(txn, max_retries=_check_retries(max_retries))
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
        """Write `data` as new fragments and return the Append, uncommitted (see `append`)."""
        transaction_properties = check_properties(transaction_properties)  # before a byte is written
        base = find_base(self.manifest.base_paths, target_base) if target_base is not None else None
        reader = to_reader(data, self.schema)
        fragments = write_fragments_from_reader(
            self._state.store, reader, list(self.manifest.fields), self.schema, max_rows_per_file, base
        )
        txn = self._txn(
            ops.Append(fragments=fragments),
            commit_message=commit_message,
            transaction_properties=transaction_properties,
        )
        txn.files = data_file_uris(self._state.store, self.manifest.base_paths, fragments)
        return txn

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
        to instead of the table's own `data/`."""
        txn = self.append_uncommitted(
            data,
            max_rows_per_file=max_rows_per_file,
            target_base=target_base,
            commit_message=commit_message,
            transaction_properties=transaction_properties,
        )
        return self.commit(txn, max_retries=max_retries)

    def insert(self, data: Any, *, mode: str = "append", **kwargs: Any) -> Table:
        """pylance's `insert`: `append` (default) or `overwrite` rows of `data`."""
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
        overwrite replacing the rows matching it), uncommitted (see `overwrite`)."""
        transaction_properties = check_properties(transaction_properties)  # before a byte is written
        if where is not None:
            if schema is not None and not schema.equals(self.schema):
                raise SchemaError(
                    f"a partition-scoped overwrite keeps the table's schema; {self.uri} has {self.schema}"
                )
            fragments = write_fragments_from_reader(
                self._state.store,
                to_reader(data, self.schema),
                list(self.manifest.fields),
                self.schema,
                max_rows_per_file,
                check=check_rows(where, self.schema),
            )
            return self.overwrite_fragments_uncommitted(
                fragments, where=where, commit_message=commit_message, transaction_properties=transaction_properties
            )
        reader = to_reader(data, schema)
        new_schema = schema or reader.schema
        fields = _fields_for_overwrite(self.manifest, new_schema)
        fragments = write_fragments_from_reader(self._state.store, reader, fields, new_schema, max_rows_per_file)
        op = ops.Overwrite(fragments=fragments, schema=fields, schema_metadata=dict(new_schema.metadata or {}))
        txn = self._txn(op, commit_message=commit_message, transaction_properties=transaction_properties)
        txn.files = data_file_uris(self._state.store, self.manifest.base_paths, fragments)
        return txn

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
        commit it with `commit`. Its `files` are the fragments' data files (removed if the commit fails)."""
        properties = check_properties(transaction_properties)
        txn = self._txn(
            ops.Append(fragments=list(fragments)), commit_message=commit_message, transaction_properties=properties
        )
        txn.files = data_file_uris(self._state.store, self.manifest.base_paths, fragments)
        return txn

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
        `write_fragments(..., where=...)`), uncommitted. This handle's version is the read version."""
        properties = check_properties(transaction_properties)
        uris = data_file_uris(self._state.store, self.manifest.base_paths, fragments)
        if where is None:
            op: ops.Operation = ops.Overwrite(
                fragments=list(fragments),
                schema=list(self.manifest.fields),
                schema_metadata=dict(self.manifest.schema_metadata),
            )
            written: list[str] = []
        else:
            op, written, _ = replace_operation(self._state.store, self.manifest, fragments, where)
        txn = self._txn(op, written, commit_message=commit_message, transaction_properties=properties)
        txn.files += uris
        return txn

    # ---- row-level changes -------------------------------------------------------------------

    def _stage_delete(
        self,
        predicate: str | pc.Expression,
        commit_message: str | None,
        transaction_properties: Mapping[str, str] | None,
    ) -> tuple[Transaction | None, int]:
        transaction_properties = check_properties(transaction_properties)  # before a byte is written
        plan = plan_delete(self._state.store, self.manifest, predicate)
        if plan.operation is None:
            return None, 0
        txn = self._txn(
            plan.operation, plan.written, commit_message=commit_message, transaction_properties=transaction_properties
        )
        return txn, plan.rows_deleted

    def delete_uncommitted(
        self,
        predicate: str | pc.Expression,
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
    ) -> Transaction | None:
        """Write the deletion vectors for `predicate` and return the Delete, uncommitted; None when no row
        matches (there is nothing to commit)."""
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
        merged = _merged_generations(self.manifest, merged_generations) if merged_generations else []
        plan = plan_update(self._state.store, self.manifest, values, where, mode=mode)
        if plan.operation is not None:
            plan.operation.merged_generations = merged
            op: ops.Operation = plan.operation
        elif merged:
            op = ops.UpdateMemWalState(merged_generations=merged)
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
        no row matches and no generation is to be marked merged."""
        return self._stage_update(values, where, mode, merged_generations, commit_message, transaction_properties)[0]

    def update(
        self,
        values: dict[str, Any],
        where: str | pc.Expression | None = None,
        *,
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
        """
        txn, rows = self._stage_update(values, where, mode, merged_generations, commit_message, transaction_properties)
        if txn is not None:
            self.commit(txn, max_retries=max_retries)
        return UpdateResult(num_rows_updated=rows)

    def merge_insert(self, on: str | Sequence[str]) -> MergeInsertBuilder:
        """Upsert builder with pylance's shape: `t.merge_insert("id").when_matched_update_all()
        .when_not_matched_insert_all().execute(data)`; one Update transaction. `execute_uncommitted(data)`
        returns `(Transaction, stats)` instead of committing."""
        return MergeInsertBuilder(self._state, on, lambda txn, retries: self.commit(txn, max_retries=retries))

    # ---- base paths and clones ---------------------------------------------------------------

    def add_bases(
        self,
        bases: Sequence[DatasetBasePath],
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Table:
        """Register base paths data may be written to (one UpdateBases); ids are assigned at commit.

        A base whose id, name or path clashes with an existing one is refused with BasePathError.
        """
        if not bases:
            raise BasePathError("add_bases needs at least one DatasetBasePath")
        protos = [b.to_proto() if isinstance(b, DatasetBasePath) else DatasetBasePath(**b).to_proto() for b in bases]
        names = [p.name for p in protos if p.HasField("name")]
        paths = [p.path for p in protos]
        if len(set(names)) != len(names) or len(set(paths)) != len(paths):
            raise BasePathError(f"add_bases got the same name or path twice: {[(p.name, p.path) for p in protos]}")
        for proto in protos:
            if proto.path == self.uri.rstrip("/"):
                raise BasePathError(f"base path {proto.path!r} is the table's own root")
            for existing in self.manifest.base_paths:
                if existing.path == proto.path or (
                    proto.HasField("name") and existing.HasField("name") and existing.name == proto.name
                ):
                    raise BasePathError(
                        f"base path {proto.path!r} ({proto.name or 'unnamed'}) clashes with existing base "
                        f"{existing.path!r} ({existing.name or 'unnamed'}, id {existing.id})"
                    )
        try:
            return self.commit(
                ops.UpdateBases(new_bases=protos),
                commit_message=commit_message,
                transaction_properties=transaction_properties,
                max_retries=max_retries,
            )
        except InvalidOperationError as exc:  # a concurrent commit added a clashing base
            raise BasePathError(str(exc)) from exc

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
        """
        ref = self.version if version is None else self._resolve(version)
        source = self._state.load(ref)
        options = self._state.storage_options if storage_options is None else storage_options
        target = open_store(_uri(target_uri), options)
        check_target(self._state.store, target)
        if table_exists(target):
            raise TableExistsError(f"a table already exists at {target.uri}; a clone needs an empty location")
        copied = [] if shallow else deep_copy(self._state.store, source, target)
        op = ops.Clone(
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

    def add_columns(
        self,
        transforms: dict[str, str] | pa.Field | list[pa.Field] | pa.Schema,
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Table:
        """New columns from SQL expressions (`{"total": "price * qty"}`) or all-null columns from Arrow
        fields. Every fragment gets one new data file; existing files are not rewritten. One Merge."""
        txn = self.add_columns_uncommitted(
            transforms, commit_message=commit_message, transaction_properties=transaction_properties
        )
        return self.commit(txn, max_retries=max_retries)

    def add_columns_uncommitted(
        self,
        transforms: dict[str, str] | pa.Field | list[pa.Field] | pa.Schema,
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
    ) -> Transaction:
        """`add_columns` without the commit: its new data files written, the Merge staged."""
        plan = plan_add_columns(self._state.store, self.manifest, transforms)
        return self._txn(
            plan.operation, plan.written, commit_message=commit_message, transaction_properties=transaction_properties
        )

    def merge(
        self,
        data: Any,
        left_on: str,
        right_on: str | None = None,
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Table:
        """Add the columns of `data`, joined on a key column (a left join: no match gives nulls). One Merge."""
        plan = plan_merge(self._state.store, self.manifest, data, left_on, right_on)
        txn = self._txn(
            plan.operation, plan.written, commit_message=commit_message, transaction_properties=transaction_properties
        )
        return self.commit(txn, max_retries=max_retries)

    def drop_columns(
        self,
        columns: str | Sequence[str],
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Table:
        """Drop columns or struct fields (`"a.b"`); metadata only. One Project."""
        return self.commit(
            plan_drop_columns(self.manifest, columns),
            commit_message=commit_message,
            transaction_properties=transaction_properties,
            max_retries=max_retries,
        )

    def drop_columns_uncommitted(
        self,
        columns: str | Sequence[str],
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
    ) -> Transaction:
        """`drop_columns` staged, not committed (nothing is written)."""
        return self._txn(
            plan_drop_columns(self.manifest, columns),
            commit_message=commit_message,
            transaction_properties=transaction_properties,
        )

    def alter_columns(
        self,
        *alterations: dict[str, Any],
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Table:
        """Rename (`{"path": "a", "name": "b"}`) or make nullable (`"nullable": True`); metadata only."""
        return self.commit(
            plan_alter_columns(self.manifest, alterations),
            commit_message=commit_message,
            transaction_properties=transaction_properties,
            max_retries=max_retries,
        )

    def alter_columns_uncommitted(
        self,
        *alterations: dict[str, Any],
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
    ) -> Transaction:
        """`alter_columns` staged, not committed (nothing is written)."""
        return self._txn(
            plan_alter_columns(self.manifest, alterations),
            commit_message=commit_message,
            transaction_properties=transaction_properties,
        )

    def replace_column(
        self,
        column: str,
        replacements: dict[int, Any],
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Table:
        """Replace a column's values in some fragments ({fragment id: values for every physical row}).

        The new values go into new files; the old ones are tombstoned. One DataReplacement.
        """
        plan = plan_replace_column(self._state.store, self.manifest, column, replacements)
        txn = self._txn(
            plan.operation, plan.written, commit_message=commit_message, transaction_properties=transaction_properties
        )
        return self.commit(txn, max_retries=max_retries)

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
        older_than: timedelta = timedelta(days=14),
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
        self._state.committer.cache.manifests.clear()
        return stats

    # ---- scalar indices ----------------------------------------------------------------------

    def create_index_uncommitted(
        self,
        column: str,
        index_type: str = "BTREE",
        *,
        name: str | None = None,
        replace: bool = True,
        executor: Executor | None = None,
        progress: Progress | None = None,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
    ) -> Transaction:
        """Write the index files and return the CreateIndex, uncommitted (see `create_index`)."""
        transaction_properties = check_properties(transaction_properties)  # before a byte is written
        name = name or f"{column}_idx"
        existing = [i for i in self.manifest.indices if i.name == name]
        if existing and not replace:
            raise IndexExistsError(f"table {self.uri} already has an index named {name!r}; pass replace=True")
        built = build_index(
            self._state.store,
            self.manifest,
            column,
            index_type,
            name,
            executor=executor,
            state=self._state,
            progress=progress,
        )
        op = ops.CreateIndex(new_indices=[built.metadata], removed_indices=existing)
        return self._txn(
            op, built.written, commit_message=commit_message, transaction_properties=transaction_properties
        )

    def create_index(
        self,
        column: str,
        index_type: str = "BTREE",
        *,
        name: str | None = None,
        replace: bool = True,
        executor: Executor | None = None,
        progress: Progress | None = None,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Table:
        """A BTREE or BITMAP index on a scalar column over every fragment (one CreateIndex).

        Filters on the column (`=`, `IN`, ranges, `IS NULL`, ...) then read only the rows it names in the
        fragments it covers. `name` defaults to `{column}_idx`; an existing index of that name is replaced,
        or refused with `replace=False` (IndexExistsError). With `executor` (`map(fn, tasks)`: a process pool,
        Spark) the column is read by tasks on it, without one in this process in groups of fragments of about
        a million rows; `progress(done, total)` after each task or group. This process sorts and writes the
        index and commits. An unknown `index_type` raises ValueError.
        """
        txn = self.create_index_uncommitted(
            column,
            index_type,
            name=name,
            replace=replace,
            executor=executor,
            progress=progress,
            commit_message=commit_message,
            transaction_properties=transaction_properties,
        )
        return self.commit(txn, max_retries=max_retries)

    def create_scalar_index(
        self, column: str, index_type: str = "BTREE", *, name: str | None = None, replace: bool = True, **kwargs: Any
    ) -> Table:
        """pylance's name for `create_index` on a scalar column."""
        return self.create_index(column, index_type, name=name, replace=replace, **kwargs)

    def drop_index(
        self,
        name: str,
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Table:
        """Remove an index from the table (its files stay for older versions until retention)."""
        existing = [i for i in self.manifest.indices if i.name == name]
        if not existing:
            names = [i.name for i in self.manifest.indices]
            raise IndexNotFoundError(f"table {self.uri} has no index named {name!r}; indices: {names}")
        return self.commit(
            ops.CreateIndex(removed_indices=existing),
            commit_message=commit_message,
            transaction_properties=transaction_properties,
            max_retries=max_retries,
        )

    def list_indices(self) -> list[dict[str, Any]]:
        """The indices of this version (pylance's shape), including the MemWAL index when regions exist."""
        out = []
        by_id = {f.id: f.name for f in self.manifest.fields}
        live = {f.id for f in self.manifest.fragments}
        for index in self.manifest.indices:
            covered = set(BitMap.deserialize(index.fragment_bitmap)) if index.fragment_bitmap else set()
            out.append(
                {
                    "name": index.name,
                    "type": index.index_type,
                    "uuid": str(uuid.UUID(bytes=index.uuid.uuid)),
                    "fields": [by_id.get(i, str(i)) for i in index.fields],
                    "version": index.dataset_version,
                    "fragment_ids": sorted(covered & live),
                    "num_indexed_fragments": len(covered & live),
                    "num_unindexed_fragments": len(live - covered),
                }
            )
        if len(self.manifest.mem_wal_regions):
            out.append({"name": MEM_WAL_INDEX, "type": "MemWal", "fields": [], "regions": self.mem_wal_state()})
        return out

    # ---- MemWAL state ------------------------------------------------------------------------

    def mark_generations_merged(
        self,
        generations: dict[str | uuid.UUID, int],
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Table:
        """Record that MemWAL regions' generations up to these numbers are merged (one UpdateMemWalState).

        `generations` maps a region id (UUID or its string) to a generation; a region's merged generation
        only moves forward, so a number at or below the recorded one is refused.
        """
        merged = _merged_generations(self.manifest, generations)
        return self.commit(
            ops.UpdateMemWalState(merged_generations=merged),
            commit_message=commit_message,
            transaction_properties=transaction_properties,
            max_retries=max_retries,
        )

    def mem_wal_state(self) -> dict[str, int]:
        """MemWAL regions (UUID string) -> their merged generation, in this version."""
        return {str(uuid.UUID(bytes=r.region_id.uuid)): r.merged_generation for r in self.manifest.mem_wal_regions}

    # ---- restore and configuration -----------------------------------------------------------

    def restore(
        self,
        ref: VersionRef | None = None,
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Table:
        """Make `ref` (default: this handle's version) the latest version again; history is kept.

        Restore works past a corrupt latest manifest: the new version is committed after it, and the
        corrupt one stays in the history (where `versions()` reports it) until retention removes it.
        """
        version = self.version if ref is None else self._resolve(ref)
        latest = self._state.latest_location()
        try:
            self._state = self._state.checkout(latest.version)
        except CorruptManifestError as exc:
            log.warning(
                "restoring %s to version %s past corrupt latest version %s: %s", self.uri, version, latest.version, exc
            )
        return self.commit(
            ops.Restore(version=version),
            read_version=latest.version,
            commit_message=commit_message,
            transaction_properties=transaction_properties,
            max_retries=max_retries,
        )

    def update_config(
        self,
        upsert: dict[str, str] | None = None,
        delete: Sequence[str] | None = None,
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Table:
        """Set (`upsert`) and remove (`delete`) table configuration keys (one UpdateConfig)."""
        return self.commit(
            ops.UpdateConfig.of(upsert, list(delete or [])),
            commit_message=commit_message,
            transaction_properties=transaction_properties,
            max_retries=max_retries,
        )

    def update_metadata(
        self,
        table_metadata: dict[str, str | None] | None = None,
        schema_metadata: dict[str, str | None] | None = None,
        field_metadata: dict[str, dict[str, str | None]] | None = None,
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Table:
        """Change table, schema or field metadata (a None value removes the key). Fields are named by column."""
        by_name = schema_mod.field_ids_by_name(list(self.manifest.fields))
        unknown = [name for name in (field_metadata or {}) if name not in by_name]
        if unknown:
            raise SchemaError(f"table {self.uri} has no column(s) {unknown}; columns are {list(by_name)}")
        op = ops.UpdateConfig.of(
            table_metadata=table_metadata,
            schema_metadata=schema_metadata,
            field_metadata={by_name[n]: md for n, md in (field_metadata or {}).items()},
        )
        return self.commit(
            op, commit_message=commit_message, transaction_properties=transaction_properties, max_retries=max_retries
        )


def _sliced(scan: Scan, limit: int | None, offset: int | None) -> pa.Table:
    """`offset` rows skipped, then at most `limit`, reading no further than needed."""
    for name, value in (("limit", limit), ("offset", offset)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    skip, left = offset or 0, limit
    batches = []
    for batch in scan.to_batches():
        if left is not None and left <= 0:
            break
        if skip >= batch.num_rows:
            skip -= batch.num_rows
            continue
        batch = batch.slice(skip)
        skip = 0
        if left is not None:
            batch = batch.slice(0, left)
            left -= batch.num_rows
        batches.append(batch)
    return pa.Table.from_batches(batches, schema=scan.output_schema)


def _merged_generations(manifest: pb.Manifest, generations: dict[str | uuid.UUID, int]) -> list[pb.MergedGeneration]:
    """Validate region ids and generation numbers; a region's merged generation only moves forward."""
    if not generations:
        raise ValueError("give at least one region and generation")
    current = {r.region_id.uuid: r.merged_generation for r in manifest.mem_wal_regions}
    out = []
    for region, generation in generations.items():
        try:
            region_id = region if isinstance(region, uuid.UUID) else uuid.UUID(str(region))
        except ValueError:
            raise ValueError(f"MemWAL region id {region!r} is not a UUID") from None
        if isinstance(generation, bool) or not isinstance(generation, int) or generation < 0:
            raise ValueError(f"MemWAL region {region_id}: generation must be a non-negative int, got {generation!r}")
        if region_id.bytes in current and generation <= current[region_id.bytes]:
            raise ValueError(
                f"MemWAL region {region_id} has merged generation {current[region_id.bytes]} already; "
                f"{generation} would not move it forward"
            )
        out.append(pb.MergedGeneration(region_id=pb.UUID(uuid=region_id.bytes), generation=generation))
    return out


def _fields_for_overwrite(current: pb.Manifest | None, schema: pa.Schema) -> list[pb.Field]:
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


# ---- module-level entry points ---------------------------------------------------------------


def open_table(
    uri: Uri,
    version: VersionRef | None = None,
    *,
    asof: datetime | None = None,
    storage_options: dict[str, Any] | None = None,
    external_store: str | ExternalManifestStore | None = None,
) -> Table:
    """Open the latest version, or `version` (number or tag), or the version current at `asof`.

    Only the manifest asked for is read: an older version opens even when a newer manifest is damaged.
    `external_store` (or storage option "external_store"): an ExternalManifestStore or a URI such as
    "sqlite:///path/db"; the latest version then comes from it, and commits go through it.

    Raises TableNotFoundError when no table is at `uri`, VersionNotFoundError for an unknown version, and
    CorruptManifestError when the latest manifest does not decode (its message and `intact_version` name the
    newest intact version, which `open_table(uri, version=N).restore()` makes the latest again).
    """
    if version is not None and asof is not None:
        raise ValueError("give either version or asof, not both")
    external, storage_options = split_storage_options(storage_options, external_store)
    store = open_store(_uri(uri), storage_options)
    committer = Committer(store, handler=commit_handler(external))
    location = committer.latest_location()
    if version is None and asof is None:
        try:
            manifest = committer.load_manifest(location)
        except CorruptManifestError as exc:
            why = f"it is the latest version of {store.uri}, so the table cannot be opened at its latest version"
            raise committer.corrupt_history(exc, location, why) from exc
        return Table(TableState(store, manifest, location.naming, committer))
    handle = Table(TableState(store, pb.Manifest(), location.naming, committer))
    return handle.checkout(version if version is not None else asof)


def manifest_violations(
    uri: Uri,
    version: int | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
    external_store: str | ExternalManifestStore | None = None,
) -> list[str]:
    """Every problem of the manifest of `version` (default the latest) in plain words: a manifest that does not
    decode, or each invariant it breaks (docs/format.md, "Invariants of a manifest"). Empty when it is sound.

    Reading a table stops at the first broken invariant (CorruptManifestError); this lists them all.

    :param uri: the table's root
    :param version: the version to check (None: the latest)
    :param storage_options: the store's options
    :param external_store: the table's external manifest store, if it has one
    """
    external, storage_options = split_storage_options(storage_options, external_store)
    store = open_store(_uri(uri), storage_options)
    committer = Committer(store, handler=commit_handler(external))
    latest = committer.latest_location()
    location = latest if version is None else location_of(store, version, latest.naming)
    return manifest_problems(store, location, committer.handler)


def write_table(
    data: Any,
    uri: Uri,
    mode: str = "create",
    *,
    where: str | None = None,
    schema: pa.Schema | None = None,
    storage_options: dict[str, Any] | None = None,
    manifest_naming: str | ManifestNaming = "v2",
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    max_retries: int = DEFAULT_MAX_RETRIES,
    external_store: str | ExternalManifestStore | None = None,
    enable_stable_row_ids: bool = False,
) -> Table:
    """Create a table, or append to / overwrite an existing one (pylance's `write_dataset`); one commit.

    `mode`: "create" (TableExistsError if a table is there), "append" or "overwrite" (both create the
    table, with `data`'s rows, when there is none). `where` (mode "overwrite" only, a SQL predicate):
    replace only the rows matching it (`Table.overwrite(where=)`); every row of `data` must match it, also
    when the write creates the table. A first write that another writer beats to version 1 is applied to
    the winner's table under the usual conflict rules (an Append, the partition overwrite, a later
    Overwrite); `data` must then have the winner's schema (SchemaError otherwise). With `external_store`
    (see `open_table`) the object store needs no conditional writes. `enable_stable_row_ids` (at creation
    only): every row gets an id that survives updates and compaction (`with_row_id=True` in scans); sets
    the `stable_row_ids` reader and writer flags.

    Example::

        t = mvcc.write_table(pa.table({"id": [1, 2, 3]}), "/tmp/t", commit_message="initial load")
    """
    _check_first_write_mode(mode, where)
    uri = _uri(uri)
    naming = ManifestNaming.parse(manifest_naming)
    properties = check_properties(transaction_properties)
    external, storage_options = split_storage_options(storage_options, external_store)
    try:
        existing = open_table(uri, storage_options=storage_options, external_store=external)
    except TableNotFoundError:
        existing = None
    common = dict(
        max_rows_per_file=max_rows_per_file,
        commit_message=commit_message,
        transaction_properties=properties,
        max_retries=max_retries,
    )
    if existing is not None:
        _check_row_ids_on_existing(existing.state, enable_stable_row_ids)
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
    reader = to_reader(data, schema)
    table_schema = schema or reader.schema
    check = check_rows(where, table_schema) if where is not None else None
    fields, _ = schema_mod.fields_from_schema(table_schema)
    fragments = write_fragments_from_reader(store, reader, fields, table_schema, max_rows_per_file, check=check)
    return _commit_first_write(
        Committer(store, handler=commit_handler(external)),
        fragments,
        table_schema,
        mode=mode,
        where=where,
        naming=naming,
        commit_message=commit_message,
        transaction_properties=properties,
        max_retries=_check_retries(max_retries),
        enable_stable_row_ids=enable_stable_row_ids,
    )


FIRST_WRITE_MODES = ("create", "append", "overwrite")


def _check_first_write_mode(mode: str, where: str | None) -> None:
    if mode not in FIRST_WRITE_MODES:
        raise ValueError(f"mode must be 'create', 'append' or 'overwrite', got {mode!r}")
    if where is not None and mode != "overwrite":
        raise ValueError(f"where= replaces the rows matching it, so it needs mode='overwrite', got {mode!r}")


def _check_row_ids_on_existing(state: TableState, enable_stable_row_ids: bool) -> None:
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


def _commit_first_write(
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
) -> Table:
    """Commit `fragments` (written with `schema`'s field ids) as version 1 of a new table, in one commit.

    If another writer creates the table first, the write is what `mode` means on the winner's latest version:
    "create" raises TableExistsError (the caller asked for a new table); "append" appends the fragments;
    "overwrite" with `where` replaces the winner's rows matching it; a plain "overwrite" replaces the whole
    table as the version after the winner's. Both reuse the fragments already written.
    """
    store = committer.store
    fields, _ = schema_mod.fields_from_schema(schema)
    overwrite = ops.Overwrite(
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
        _check_row_ids_on_existing(winner, enable_stable_row_ids)
        table = Table(winner)
        written: dict[str, Any] = {"commit_message": commit_message, "transaction_properties": transaction_properties}
        if mode == "overwrite" and where is None:
            replaced = table._txn(overwrite, **written)
            replaced.files = list(files)
            return replaced
        _check_winner_schema(winner, schema, fields)
        if mode == "append":
            return table.append_fragments_uncommitted(fragments, **written)
        return table.overwrite_fragments_uncommitted(fragments, where=where, **written)

    manifest, naming = commit_transaction(
        committer,
        txn,
        naming=naming,
        create=True,
        if_exists=None if mode == "create" else onto,
        max_retries=max_retries,
    )
    return Table(TableState(store, manifest, naming, committer))


def write_fragments(
    data: Any,
    uri: Uri,
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

    For an existing table the data must fit the schema of its latest version (or of `version`); for a new
    table the field ids are those `fields_from_schema(schema)` assigns, so `create_table_from_fragments`
    with the same schema matches. `where`: every row must match this SQL predicate (a partition-scoped
    overwrite's; PredicateError names a row that does not, and nothing is left behind). `file_prefix`: data
    file names start with it (a write id), so every file of a failed distributed write can be found by
    listing `data/`.
    """
    uri = _uri(uri)
    external, storage_options = split_storage_options(storage_options, external_store)
    store = open_store(uri, storage_options)
    try:
        table = open_table(uri, version, storage_options=storage_options, external_store=external)
        fields, table_schema = list(table.manifest.fields), table.schema
        reader = to_reader(data, table_schema)
    except TableNotFoundError:
        reader = to_reader(data, schema)
        table_schema = schema or reader.schema
        fields, _ = schema_mod.fields_from_schema(table_schema)
    check = check_rows(where, table_schema) if where is not None else None
    return write_fragments_from_reader(
        store, reader, fields, table_schema, max_rows_per_file, file_prefix=file_prefix, check=check
    )


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
    """
    _check_first_write_mode(mode, where)
    uri = _uri(uri)
    properties = check_properties(transaction_properties)
    external, storage_options = split_storage_options(storage_options, external_store)
    store = open_store(uri, storage_options)
    return _commit_first_write(
        Committer(store, handler=commit_handler(external)),
        fragments,
        schema,
        mode=mode,
        where=where,
        naming=ManifestNaming.parse(manifest_naming),
        commit_message=commit_message,
        transaction_properties=properties,
        max_retries=_check_retries(max_retries),
    )
