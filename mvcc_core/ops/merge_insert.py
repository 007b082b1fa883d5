"""Upsert: `t.merge_insert(on)` with pylance's builder, committed as one Update transaction.

Design notes: docs/guide/row_level_changes.md, "merge_insert, as implemented".
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mvcc_core._proto import table_pb2 as pb
from mvcc_core._proto import transaction_pb2 as tpb
from mvcc_core.errors import InvalidOperationError, SchemaError
from mvcc_core.format import operations, row_ids
from mvcc_core.format import schema as schema_mod
from mvcc_core.format.fragments import fragment_paths, to_reader, write_fragments_from_reader
from mvcc_core.format.row_ids import ROW_ID
from mvcc_core.io import ObjectStore
from mvcc_core.ops.delete import delete_addresses, find_rows
from mvcc_core.ops.merge_insert_target import key_rows_from_index
from mvcc_core.read.index_lookup import BITMAP, BTREE
from mvcc_core.read.scan import ROW_ADDRESS
from mvcc_core.read.sql_filter import to_expression
from mvcc_core.txn.commit import DEFAULT_MAX_RETRIES
from mvcc_core.txn.state import TableState
from mvcc_core.txn.transaction import Transaction, check_properties

_T, _S = "__target_row", "__source_row"


def key_hash(values: Sequence[Any]) -> int:
    """The u64 hash of one key (a tuple of Python values) recorded in `inserted_rows`.

    Args:
        values: the key columns' values of one row
    """
    if (
        len(values) == 1
        and isinstance(values[0], int)
        and not isinstance(values[0], bool)
        and -(2**63) <= values[0] < 2**63
    ):
        return int(_splitmix64(np.array([values[0]], dtype=np.int64))[0])
    text = "\x1f".join(repr(v) for v in values)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def _splitmix64(values: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer over int64 keys as u64: a vectorized hash for the common integer key."""
    z = values.astype(np.int64).view(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def key_hashes(keys: pa.Table) -> list[int]:
    """`key_hash` of every row of `keys` (vectorized for one integer column without nulls).

    Args:
        keys: the key columns of the inserted rows
    """
    if keys.num_rows == 0:
        return []
    column = keys.column(0)
    if (
        keys.num_columns == 1
        and pa.types.is_integer(column.type)
        and not column.null_count
        and pc.max(column).as_py() < 2**63
    ):
        return _splitmix64(column.to_numpy()).tolist()
    return [key_hash(list(row.values())) for row in keys.to_pylist()]


class MergeInsertBuilder:
    """pylance's `merge_insert` builder: choose the clauses, then `execute(data)` (or `execute_uncommitted`).

    Built by `Table.merge_insert(on)` with the handle's state and the handle's commit, so that `execute`
    commits through the handle and moves it.

    Args:
        state: the table version the upsert reads
        on: the key column(s)
        commit: commits the Update with a retry count (None: the state's own commit)

    Raises:
        SchemaError: no key column is given
    """

    def __init__(
        self,
        state: TableState,
        on: str | Sequence[str],
        commit: Callable[[Transaction, int], Any] | None = None,
    ) -> None:
        """An upsert into the table at `state`, matching rows on the key columns `on`."""
        self._state = state
        self._commit = commit or (lambda txn, retries: state.commit(txn, max_retries=retries))
        self._on = [on] if isinstance(on, str) else list(on)
        if not self._on:
            raise SchemaError("merge_insert needs at least one key column")
        unknown = [c for c in self._on if c not in state.schema.names]
        if unknown:
            raise SchemaError(
                f"merge_insert key column(s) {unknown} are not in the table; columns are {state.schema.names}"
            )
        self._update = False
        self._update_condition: str | None = None
        self._insert = False
        self._delete_by_source = False
        self._delete_condition: str | None = None
        self._fail_on_match = False
        self._max_retries = DEFAULT_MAX_RETRIES
        self._source_columns: list[str] = []

    def when_matched_update_all(self, condition: str | None = None) -> MergeInsertBuilder:
        """Replace matched target rows by their source rows; `condition` may use `source.col` / `target.col`.

        Args:
            condition: update only matched rows for which this SQL holds (None: every matched row)
        """
        self._update, self._update_condition = True, condition
        return self

    def when_not_matched_insert_all(self) -> MergeInsertBuilder:
        self._insert = True
        return self

    def when_matched_fail(self) -> MergeInsertBuilder:
        """pylance's `when_matched_fail`: a source row matching a target row makes the merge raise
        InvalidOperationError (nothing is written)."""
        self._fail_on_match = True
        return self

    def use_index(self, use_index: bool) -> MergeInsertBuilder:
        """pylance's `use_index`: accepted; mvcc asks a key index whenever one covers the key (a bool only).

        Args:
            use_index: pylance's flag (a bool; either value leaves the choice of index to mvcc)

        Returns:
            This builder.

        Raises:
            TypeError: `use_index` is not a bool.
        """
        if not isinstance(use_index, bool):
            raise TypeError(f"use_index must be a bool, got {type(use_index).__name__}")
        return self

    def conflict_retries(self, max_retries: int) -> MergeInsertBuilder:
        """pylance's `conflict_retries`: how many times `execute` retries a lost race for the manifest name (its
        `max_retries`, unless `execute(max_retries=)` says otherwise).

        Args:
            max_retries: how many lost races to retry (a non-negative int)

        Returns:
            This builder.

        Raises:
            ValueError: `max_retries` is not a non-negative int.
        """
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"conflict_retries must be a non-negative int, got {max_retries!r}")
        self._max_retries = max_retries
        return self

    def retry_timeout(self, timeout: timedelta) -> MergeInsertBuilder:
        """pylance's `retry_timeout`: accepted (a timedelta); mvcc retries lost races `max_retries` times and
        raises a conflict for the caller to re-run, with no time budget.

        Args:
            timeout: pylance's time budget for retries (a timedelta; accepted and unused)

        Returns:
            This builder.

        Raises:
            TypeError: `timeout` is not a timedelta.
        """
        if not isinstance(timeout, timedelta):
            raise TypeError(f"retry_timeout must be a timedelta, got {type(timeout).__name__}")
        return self

    def when_not_matched_by_source_delete(self, expr: str | None = None) -> MergeInsertBuilder:
        """Delete target rows that no source row matches (only those matching `expr`, if given).

        Args:
            expr: delete only such rows matching this SQL predicate (None: all of them)
        """
        self._delete_by_source, self._delete_condition = True, expr
        return self

    def execute(
        self,
        data: Any,
        *,
        schema: pa.Schema | None = None,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int | None = None,
    ) -> dict[str, int]:
        """Run the upsert as one Update; returns pylance's counts. Nothing is committed when nothing changes.

        Args:
            data: the source rows (any form `write_dataset` accepts)
            schema: the schema of `data` when it is an iterator of batches (pylance's `execute(data, schema=)`)
            commit_message: the message stored with the transaction
            transaction_properties: properties stored with the transaction (a dict of str to str)
            max_retries: how many lost commit races to retry before giving up (None: the builder's, set by
                `conflict_retries`, else the default)
        """
        txn, stats = self.execute_uncommitted(
            data, schema=schema, commit_message=commit_message, transaction_properties=transaction_properties
        )
        if txn is not None:
            self._commit(txn, max_retries if max_retries is not None else self._max_retries)
        return stats

    def execute_uncommitted(
        self,
        data: Any,
        *,
        schema: pa.Schema | None = None,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
    ) -> tuple[Transaction | None, dict[str, int]]:
        """Write the upsert's files and return `(Transaction, counts)` uncommitted (pylance's shape); the
        transaction is None when nothing would change.

        Args:
            data: the source rows (any form `write_dataset` accepts)
            commit_message: the message stored with the transaction
            transaction_properties: properties stored with the transaction (a dict of str to str)
            schema: the schema of `data` when it is an iterator of batches (pylance's `execute(data, schema=)`)
        """
        if not (self._update or self._insert or self._delete_by_source or self._fail_on_match):
            raise ValueError(
                "merge_insert does nothing without a clause: call when_matched_update_all(), "
                "when_not_matched_insert_all(), when_not_matched_by_source_delete() or when_matched_fail()"
            )
        properties = check_properties(transaction_properties)  # before any file is written
        state = self._state
        store, manifest = state.store, state.manifest
        source = to_reader(data, schema or state.schema).read_all()
        schema = state.schema
        source_schema = self._source_schema(source, schema)
        source = schema_mod.conform(source, source_schema)
        self._source_columns = list(source.column_names)
        partial = len(source_schema) < len(schema)
        self._check_unique(source)
        stable = row_ids.enabled(manifest)
        need_all = self._update_condition is not None or (partial and self._update)
        target_cols = list(schema.names) if need_all else list(self._on)
        delete_filter = None
        if self._delete_condition is not None:
            delete_filter = to_expression(self._delete_condition, schema)
            if not need_all:
                target_cols = list(schema.names)
        if self._update_condition is not None:
            nested = pa.schema(
                [pa.field("source", pa.struct(list(source_schema))), pa.field("target", pa.struct(list(schema)))]
            )
            update_filter = to_expression(self._update_condition, nested)
        prefilter = None if self._delete_by_source else self._key_filter(source, manifest)
        target = None
        if target_cols == self._on and len(self._on) == 1 and not stable and not self._delete_by_source:
            target = key_rows_from_index(store, manifest, self._on[0], source.column(self._on[0]), prefilter)
        if target is None:
            target = find_rows(store, manifest, prefilter, target_cols, with_row_id=stable)
        pairs = self._join(target, source)
        target_idx = pairs.column(_T).to_numpy()
        source_idx = pairs.column(_S).to_numpy()
        if self._fail_on_match and len(pairs):
            raise InvalidOperationError(
                f"merge_insert: {len(pairs)} source row(s) match target rows on {self._on} and "
                "when_matched_fail() was asked for; nothing was written"
            )
        if self._update and self._update_condition is not None and len(pairs):
            both = pa.table(
                {
                    "source": _struct(source.take(source_idx), source_schema),
                    "target": _struct(target.select(schema.names).take(target_idx), schema),
                }
            )
            mask = _filter_mask(both, update_filter)
            target_idx, source_idx = target_idx[mask], source_idx[mask]
        matched_source = np.zeros(source.num_rows, dtype=bool)
        matched_source[pairs.column(_S).to_numpy()] = True
        matched_target = np.zeros(target.num_rows, dtype=bool)
        matched_target[pairs.column(_T).to_numpy()] = True

        updated_src = source_idx if self._update else np.array([], dtype=np.int64)
        updated_tgt = target_idx if self._update else np.array([], dtype=np.int64)
        inserted_src = np.flatnonzero(~matched_source) if self._insert else np.array([], dtype=np.int64)
        deleted_tgt = np.array([], dtype=np.int64)
        if self._delete_by_source:
            unmatched = ~matched_target
            if delete_filter is not None:
                unmatched &= _filter_mask(target, delete_filter)
            deleted_tgt = np.flatnonzero(unmatched)
        stats = {
            "num_inserted_rows": len(inserted_src),
            "num_updated_rows": len(updated_src),
            "num_deleted_rows": len(deleted_tgt),
        }
        if not len(updated_src) and not len(inserted_src) and not len(deleted_tgt):
            return None, stats

        fields = list(manifest.fields)
        updated_rows = _full_rows(source.take(updated_src), schema, target.take(updated_tgt) if partial else None)
        inserted_rows = _full_rows(source.take(inserted_src), schema)
        written: list[str] = []
        new_fragments = []
        try:
            if stable:  # updated rows keep their ids; inserted rows get new ids at commit
                moved = _write(store, fields, schema, [updated_rows])
                written = [p for f in moved for p in fragment_paths(f)]  # removed if what follows fails
                row_ids.split(target.column(ROW_ID).to_numpy()[updated_tgt], moved)
                new_fragments = moved + _write(store, fields, schema, [inserted_rows])
            else:
                new_fragments = _write(store, fields, schema, [updated_rows, inserted_rows])
            written = [p for f in new_fragments for p in fragment_paths(f)]
            addresses = target.column(ROW_ADDRESS).to_numpy()[np.concatenate([updated_tgt, deleted_tgt])]
            deleted = delete_addresses(store, manifest, addresses) if len(addresses) else None
        except BaseException:
            store.delete_many(written)
            raise
        ids = schema_mod.field_ids_by_name(fields)
        op = operations.Update(
            removed_fragment_ids=deleted.removed_fragment_ids if deleted else [],
            updated_fragments=deleted.updated_fragments if deleted else [],
            new_fragments=new_fragments,
            fields_modified=sorted(ids[c] for c in source.column_names if c not in self._on)
            if len(updated_src)
            else [],
            update_mode=tpb.Transaction.REWRITE_ROWS,
            inserted_rows=tpb.Transaction.KeyExistenceFilter(
                field_ids=[ids[c] for c in self._on],
                key_hashes=key_hashes(source.select(self._on).take(inserted_src)),
            ),
            affected_rows=deleted.affected_rows if deleted else b"",
        )
        txn = Transaction(
            read_version=state.version,
            operation=op,
            message=commit_message or "",
            transaction_properties=properties,
            files=state.staged(written + (deleted.written if deleted else [])),
        )
        return txn, stats

    def describe(self) -> dict[str, Any]:
        """What the last `execute_uncommitted` did, in words a branch publish can run again (docs/guide/branches.md).

        Returns:
            {"op": "merge_insert", "on": keys, "upsert_all": whether every source row was written (matched rows
            updated unconditionally, the others inserted), "columns": the source's columns}.
        """
        upsert_all = self._update and self._update_condition is None and self._insert
        upsert_all = upsert_all and not (self._delete_by_source or self._fail_on_match)
        return {"op": "merge_insert", "on": self._on, "upsert_all": upsert_all, "columns": self._source_columns}

    def _source_schema(self, source: pa.Table, schema: pa.Schema) -> pa.Schema:
        """The table's fields the source holds, in the table's order: a source may hold only some columns
        (pylance's partial-schema merge: matched rows get just those columns, inserted rows nulls for the others).

        Raises:
            SchemaError: a key column is missing, or rows would be inserted without a non-nullable column
        """
        names = set(source.column_names)
        missing_keys = [c for c in self._on if c not in names]
        if missing_keys:
            raise SchemaError(
                f"merge_insert source lacks the key column(s) {missing_keys}; it has {source.column_names}"
            )
        required = [f.name for f in schema if f.name not in names and not f.nullable]
        if self._insert and required:
            raise SchemaError(
                f"merge_insert cannot insert rows from a source without the non-nullable column(s) {required}: "
                "add them to the source, or drop when_not_matched_insert_all()"
            )
        return pa.schema([f for f in schema if f.name in names])

    def _key_filter(self, source: pa.Table, manifest: pb.Manifest) -> str | pc.Expression | None:
        """What narrows the target scan to rows that may match: the source keys themselves for one key column
        (a semi-join: a scalar index on the key answers it as pylance's merge_insert uses one; without one,
        files whose statistics hold no key are skipped and the scan keeps, and gives row addresses to, only
        the rows whose key is in the source, so the join sees those instead of every row), else the keys'
        range (`_key_range`)."""
        if len(self._on) == 1 and (_indexed(manifest, self._on[0]) or _semi_joinable(source.column(self._on[0]).type)):
            keys = pc.unique(source.column(self._on[0]).drop_null())
            if not len(keys):
                return "FALSE"  # only NULL keys: nothing can match
            if len(keys) <= _KEY_LOOKUP_MAX:
                return pc.field(self._on[0]).isin(keys)
        return self._key_range(source)

    def _key_range(self, source: pa.Table) -> str | None:
        """`key BETWEEN min AND max` of the source keys (one integer or string key): the scan then skips
        files whose statistics rule the range out. The join still decides what matches."""
        if len(self._on) != 1:
            return None
        column = source.column(self._on[0])
        if not (pa.types.is_integer(column.type) or pa.types.is_string(column.type)):
            return None
        bounds = pc.min_max(column)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if low is None:
            return "FALSE"  # only NULL keys: nothing can match
        name = '"' + self._on[0].replace('"', '""') + '"'
        if isinstance(low, str):
            low, high = ("'" + v.replace("'", "''") + "'" for v in (low, high))
        return f"{name} >= {low} AND {name} <= {high}"

    def _check_unique(self, source: pa.Table) -> None:
        keys = source.select(self._on)
        if len(self._on) == 1 and len(pc.unique(keys.column(0))) == keys.num_rows:
            return  # the common case, without a group-by
        counts = keys.group_by(self._on).aggregate([([], "count_all")])
        dupes = counts.filter(pc.greater(counts.column("count_all"), 1))
        for row in dupes.to_pylist():
            if all(row[c] is not None for c in self._on):  # NULL keys match nothing, so they may repeat
                key = {c: row[c] for c in self._on}
                raise SchemaError(
                    f"merge_insert source has {row['count_all']} rows with key {key}; keys in the source must be "
                    "unique (deduplicate it first)"
                )

    def _join(self, target: pa.Table, source: pa.Table) -> pa.Table:
        """(target row, source row) index pairs of equal, non-NULL keys.

        One integer or string key column (whose equality is plain): each target key's position among the
        source's keys (`index_in`: a hash of the source keys, which `_check_unique` found distinct) instead of
        Acero's hash join, whose plan costs several times that for the few thousand rows a keyed scan returns."""
        kind = source.column(self._on[0]).type
        if len(self._on) == 1 and target.column(self._on[0]).type == kind and _semi_joinable(kind):
            found = pc.index_in(target.column(self._on[0]), value_set=source.column(self._on[0]), skip_nulls=True)
            hits = pc.fill_null(found, -1).to_numpy()
            rows = np.flatnonzero(hits >= 0)
            return pa.table({_T: pa.array(rows, pa.int64()), _S: pa.array(hits[rows].astype(np.int64), pa.int64())})
        left = target.select(self._on).append_column(_T, pa.array(np.arange(target.num_rows), pa.int64()))
        right = source.select(self._on).append_column(_S, pa.array(np.arange(source.num_rows), pa.int64()))
        try:
            joined = left.join(right, keys=self._on, join_type="inner")
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SchemaError(f"merge_insert cannot join on {self._on}: {exc}") from exc
        return joined.select([_T, _S])


def _struct(table: pa.Table, schema: pa.Schema) -> pa.StructArray:
    """A table as one struct column, so a condition can say `source.price` / `target.price`."""
    return pa.StructArray.from_arrays([c.combine_chunks() for c in table.columns], fields=list(schema))


def _full_rows(rows: pa.Table, schema: pa.Schema, target: pa.Table | None = None) -> pa.Table:
    """`rows` (some of the table's columns) with every column of `schema`: a column the source lacks is taken
    from the matched `target` rows (an update) or is all nulls (an insert)."""
    if rows.num_columns == len(schema):
        return rows
    columns = [
        rows.column(f.name)
        if f.name in rows.column_names
        else (target.column(f.name) if target is not None else pa.nulls(rows.num_rows, f.type))
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _filter_mask(table: pa.Table, expr: pc.Expression) -> np.ndarray:
    """Which rows of `table` satisfy `expr` (NULL counts as false)."""
    import pyarrow.dataset as ds  # imported on first use: it imports pandas

    values = ds.dataset(table).to_table(columns={"m": expr}).column("m")
    return pc.fill_null(values, False).to_numpy(zero_copy_only=False).astype(bool)


def _write(
    store: ObjectStore, fields: list[pb.Field], schema: pa.Schema, parts: list[pa.Table]
) -> list[pb.DataFragment]:
    """The rows of `parts`, in order, as new fragments (removed again on error)."""
    return write_fragments_from_reader(store, pa.concat_tables(parts).to_reader(), fields, schema)


# Most source keys merge_insert asks a key index for (an IN list that long is not cached by scans: see
# `predicate.MAX_CACHED_FILTER_BYTES`); beyond, the keys' range (a scan still uses the index when it pays).
_KEY_LOOKUP_MAX = 100_000


def _semi_joinable(kind: pa.DataType) -> bool:
    """Key types whose IN list matches exactly what the join matches (no NaN, no nesting)."""
    return pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _indexed(manifest: pb.Manifest, column: str) -> bool:
    """Whether a scalar index (BTREE or BITMAP, the kinds a scan's planner uses) covers the top-level `column`."""
    ids = [f.id for f in manifest.fields if f.parent_id == -1 and f.name == column]
    return bool(ids) and any(
        list(index.fields) == ids and index.index_type in (BTREE, BITMAP) and index.files for index in manifest.indices
    )
