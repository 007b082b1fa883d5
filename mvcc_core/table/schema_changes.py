"""Schema evolution: columns added, merged, dropped, altered or replaced (a mixin of `Table`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Self

import pyarrow as pa

from mvcc_core.format.fragments import to_reader
from mvcc_core.ops.schema_evolution import (
    plan_add_columns,
    plan_add_columns_from_rows,
    plan_alter_columns,
    plan_drop_columns,
    plan_merge,
    plan_replace_column,
)
from mvcc_core.table.branch_replay import with_replay
from mvcc_core.table.host import TableHost
from mvcc_core.txn.commit import DEFAULT_MAX_RETRIES
from mvcc_core.txn.transaction import Transaction


class SchemaChangeMethods(TableHost):
    """Schema evolution: columns added, merged, dropped, altered or replaced (mixed into `Table`)."""

    def add_columns(
        self,
        transforms: dict[str, str] | pa.Field | list[pa.Field] | pa.Schema | Any,
        *,
        reader_schema: pa.Schema | None = None,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Self:
        """New columns from SQL expressions (`{"total": "price * qty"}`), all-null columns from Arrow fields, or
        (pylance's reader form) rows of new columns in table order: a Table, RecordBatchReader or iterator of
        batches with `reader_schema`. Every fragment gets one new data file; existing files are not rewritten.
        One Merge.

        Args:
            transforms: SQL expressions by new column name, Arrow fields, or rows of the new columns.
            reader_schema: The schema of `transforms` when it is an iterator of batches.
            commit_message: the message stored with the transaction (None: no message)
            transaction_properties: properties stored with the transaction (a dict of str to str)
            max_retries: how many lost commit races to retry before giving up

        Returns:
            This handle, moved to the new version.

        Raises:
            SchemaError: a bad expression or name, or rows that do not match the table's (their number, or a
                table with deleted rows).
        """
        txn = self.add_columns_uncommitted(
            transforms,
            reader_schema=reader_schema,
            commit_message=commit_message,
            transaction_properties=transaction_properties,
        )
        return self.commit(txn, max_retries=max_retries)

    def add_columns_uncommitted(
        self,
        transforms: dict[str, str] | pa.Field | list[pa.Field] | pa.Schema | Any,
        *,
        reader_schema: pa.Schema | None = None,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
    ) -> Transaction:
        """`add_columns` without the commit: its new data files written, the Merge staged.

        Args:
            transforms: SQL expressions by new column name, Arrow fields, or rows of the new columns.
            reader_schema: The schema of `transforms` when it is an iterator of batches.
            commit_message: the message stored with the transaction (None: no message)
            transaction_properties: properties stored with the transaction (a dict of str to str)
        """
        if reader_schema is not None or isinstance(transforms, pa.Table | pa.RecordBatchReader | pa.RecordBatch):
            rows = to_reader(transforms, reader_schema)
            plan = plan_add_columns_from_rows(self._state.store, self.manifest, rows)
        else:
            plan = plan_add_columns(self._state.store, self.manifest, transforms)
            if isinstance(transforms, dict):  # on a branch: what a publish may run again (docs/guide/branches.md)
                replay = {"op": "add_columns", "transforms": transforms}
                transaction_properties = with_replay(self._state, transaction_properties, replay)
        return self._plan_txn(plan, commit_message, transaction_properties)

    def merge(
        self,
        data: Any,
        left_on: str,
        right_on: str | None = None,
        *,
        schema: pa.Schema | None = None,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Self:
        """Add the columns of `data`, joined on a key column (a left join: no match gives nulls). One Merge.

        Args:
            data: the rows holding the key and the new columns
            left_on: the table's key column
            right_on: the key column of `data` (None: `left_on`)
            schema: the schema of `data` when it is an iterator of batches (pylance's `merge(reader, key, schema=)`)
            commit_message: the message stored with the transaction (None: no message)
            transaction_properties: properties stored with the transaction (a dict of str to str)
            max_retries: how many lost commit races to retry before giving up
        """
        if schema is not None:
            data = to_reader(data, schema)
        plan = plan_merge(self._state.store, self.manifest, data, left_on, right_on)
        txn = self._plan_txn(plan, commit_message, transaction_properties)
        return self.commit(txn, max_retries=max_retries)

    def drop_columns(
        self,
        columns: str | Sequence[str],
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Self:
        """Drop columns or struct fields (`"a.b"`); metadata only. One Project.

        Args:
            columns: the columns, or `a.b` struct fields, to drop
            commit_message: the message stored with the transaction (None: no message)
            transaction_properties: properties stored with the transaction (a dict of str to str)
            max_retries: how many lost commit races to retry before giving up
        """
        replay = {"op": "drop_columns", "columns": [columns] if isinstance(columns, str) else list(columns)}
        return self.commit(
            plan_drop_columns(self.manifest, columns),
            commit_message=commit_message,
            transaction_properties=with_replay(self._state, transaction_properties, replay),
            max_retries=max_retries,
        )

    def drop_columns_uncommitted(
        self,
        columns: str | Sequence[str],
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
    ) -> Transaction:
        """`drop_columns` staged, not committed (nothing is written).

        Args:
            columns: the columns, or `a.b` struct fields, to drop
            commit_message: the message stored with the transaction (None: no message)
            transaction_properties: properties stored with the transaction (a dict of str to str)
        """
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
    ) -> Self:
        """Rename (`{"path": "a", "name": "b"}`) or make nullable (`"nullable": True`): metadata only; change a
        top-level column's type (`"data_type": pa.int32()`): its values are cast into new data files (one Merge).

        Args:
            *alterations: pylance's alteration dicts (`path` and any of `name`, `nullable`, `data_type`).
            commit_message: the message stored with the transaction (None: no message)
            transaction_properties: properties stored with the transaction (a dict of str to str)
            max_retries: how many lost commit races to retry before giving up

        Returns:
            This handle, moved to the new version.

        Raises:
            SchemaError: a bad alteration, a nullable column made non-nullable, or a cast that would change a
                value (nothing is written).
        """
        txn = self.alter_columns_uncommitted(
            *alterations, commit_message=commit_message, transaction_properties=transaction_properties
        )
        return self.commit(txn, max_retries=max_retries)

    def alter_columns_uncommitted(
        self,
        *alterations: dict[str, Any],
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
    ) -> Transaction:
        """`alter_columns` staged, not committed (a type change writes its data files now).

        Args:
            *alterations: pylance's alteration dicts (`path` and any of `name`, `nullable`, `data_type`).
            commit_message: the message stored with the transaction (None: no message)
            transaction_properties: properties stored with the transaction (a dict of str to str)
        """
        plan = plan_alter_columns(self._state.store, self.manifest, alterations)
        replay = {"op": "alter_columns", "alterations": list(alterations)}  # a data_type is not JSON: not recorded
        transaction_properties = with_replay(self._state, transaction_properties, replay)
        return self._plan_txn(plan, commit_message, transaction_properties)

    def replace_column(
        self,
        column: str,
        replacements: dict[int, Any],
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Self:
        """Replace a column's values in some fragments ({fragment id: values for every physical row}).

        The new values go into new files; the old ones are tombstoned. One DataReplacement.

        Args:
            column: the top-level column replaced
            replacements: fragment id -> the new values, one per physical row (deleted rows included)
            commit_message: the message stored with the transaction (None: no message)
            transaction_properties: properties stored with the transaction (a dict of str to str)
            max_retries: how many lost commit races to retry before giving up
        """
        plan = plan_replace_column(self._state.store, self.manifest, column, replacements)
        txn = self._plan_txn(plan, commit_message, transaction_properties)
        return self.commit(txn, max_retries=max_retries)
