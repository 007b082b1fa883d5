"""The data changes of a catalog transaction on one table: `tx.table(name)` and the chain of the core's staged
transactions it builds (read-your-writes)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Protocol

import pyarrow as pa

from mvcc_core.catalog.names import qualified
from mvcc_core.executor import Executor, ThreadExecutor
from mvcc_core.format import operations
from mvcc_core.maintenance import compaction
from mvcc_core.ops.merge_insert import MergeInsertBuilder
from mvcc_core.table import Table
from mvcc_core.table.branch_replay import recorded
from mvcc_core.txn.state import TableState
from mvcc_core.txn.transaction import BuildContext, Transaction, build_manifest


@dataclass
class TableWrite:
    """Every data change of a transaction on one table directory: a chain of the core's staged transactions.

    `base` is the table at the version the snapshot publishes (or version 1 of a table created here); `state`
    is the table as the chain leaves it, in memory, which is what the next change of the chain reads.
    """

    path: str
    origin: str  # the name the table had in the snapshot (or was created with): what conflict checks compare
    created: bool
    base: TableState
    state: TableState
    chain: list[Transaction] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)  # this attempt's transaction files, staged manifests
    superseded: list[str] = field(default_factory=list)  # our deletion files a rebase replaced
    staged_bytes: dict[str, bytes] = field(default_factory=dict)  # this attempt's staged manifests
    published: TableState | None = None  # the table as this attempt's last staged manifest leaves it

    def add(self, txn: Transaction, kinds: list[str]) -> None:
        """Extend the chain with `txn`, applied in memory on the chain's latest state.

        Args:
            txn: a staged transaction of the core, built on the chain's latest state
            kinds: what it means for the conflict rules (`inserted_into_table`, ...)
        """
        manifest = build_manifest(
            self.state.manifest,
            txn,
            version=self.state.version + 1,
            transaction_file="",
            ctx=BuildContext(load_version=self.base.load),
        )
        self.chain.append(txn)
        self.kinds.extend(k for k in kinds if k not in self.kinds)
        self.state = replace(self.state, manifest=manifest)


class TableWrites(Protocol):
    """What a `TransactionTable` needs of its transaction (a `CatalogTransaction`)."""

    #: the chains of staged changes of the transaction, by table directory
    writes: dict[str, TableWrite]
    #: whether each change records what it did, for a branch publish to run again (a catalog branch's)
    records_writes: bool

    def check_open(self) -> None:
        """Raise ValueError when the transaction is no longer open (published or abandoned)."""

    def write_for(self, name: str) -> TableWrite:
        """The chain of staged changes to extend for table `name` (started on first use).

        Args:
            name: the table's full name
        """
        ...


def merge_kinds(op: operations.Operation) -> list[str]:
    """What an Update (a merge_insert's, or a published branch's) means for the conflict rules: an updated or
    deleted row is a delete (an update is a delete and an insert, as in DuckLake), a new fragment an insert.

    Args:
        op: The staged operation.

    Returns:
        The change kinds (`deleted_from_table`, `inserted_into_table`).
    """
    kinds = []
    if isinstance(op, operations.Update) and (op.updated_fragments or op.removed_fragment_ids):
        kinds.append("deleted_from_table")
    if isinstance(op, operations.Update) and op.new_fragments:
        kinds.append("inserted_into_table")
    return kinds


class TransactionTable:
    """`tx.table(name)`: the data changes of a catalog transaction on one table (the core's staged forms).

    Each change reads the table as the transaction's earlier changes left it (read-your-writes).

    Args:
        tx: the catalog transaction
        name: the table's name
    """

    def __init__(self, tx: TableWrites, name: str) -> None:
        """The changes of `tx` on table `name`."""
        self._tx = tx
        self.name = qualified(name)

    def _stage(self, kind: str, make: Any, replay: dict[str, Any] | None = None) -> Any:
        w = self._tx.write_for(self.name)
        txn = make(Table.from_state(w.state))
        if txn is not None:
            self._record(txn, replay)
            w.add(txn, [kind])
        return txn

    def _record(self, txn: Transaction, replay: dict[str, Any] | None) -> None:
        """On a catalog branch, store how to run `txn`'s write again (`branch_replay.REPLAY_PROPERTY`): the
        first write of a table on a branch reads main's version, so the core's own record does not fire."""
        if replay is not None and self._tx.records_writes:
            txn.transaction_properties = recorded(txn.transaction_properties, replay)

    def append(self, data: Any, **kwargs: Any) -> None:
        """Stage an append of `data` (the core's `Table.append`).

        Args:
            data: Rows fitting the table's schema (anything `pa.table` accepts, or a RecordBatchReader).
            **kwargs: `Table.append_uncommitted`'s keywords: `max_rows_per_file`, `target_base`, `commit_message`,
                `transaction_properties`
        """
        self._stage("inserted_into_table", lambda t: t.append_uncommitted(data, **kwargs))

    def delete(self, predicate: Any, **kwargs: Any) -> None:
        """Stage a delete of the rows matching `predicate` (the core's `Table.delete`).

        Args:
            predicate: the rows to delete, SQL or a pyarrow Expression
            **kwargs: `Table.delete_uncommitted`'s keywords: `commit_message`, `transaction_properties`
        """
        replay = {"op": "delete", "where": predicate} if isinstance(predicate, str) else None
        self._stage("deleted_from_table", lambda t: t.delete_uncommitted(predicate, **kwargs), replay)

    def overwrite(self, data: Any, *, where: str | None = None, **kwargs: Any) -> None:
        """Replace every row, or with `where` the rows matching it (DuckLake: a delete and an insert).

        Args:
            data: The new rows.
            where: A SQL predicate: replace only the rows matching it (every row of `data` must match it).
            **kwargs: `Table.overwrite_uncommitted`'s keywords: `schema`, `max_rows_per_file`, `commit_message`,
                `transaction_properties`
        """
        self._stage("overwrote_table", lambda t: t.overwrite_uncommitted(data, where=where, **kwargs))

    def merge_insert(self, on: str | list[str]) -> MergeInsertBuilder:
        """The core's upsert builder on the table as this transaction leaves it; its `execute(data)` stages the
        upsert in the transaction (returning pylance's counts) instead of committing. Build and execute it in
        one statement: it reads the table as it is when built.

        Args:
            on: the key column(s) rows are matched on
        """
        w = self._tx.write_for(self.name)

        def stage(txn: Transaction, _retries: int) -> None:
            self._tx.check_open()
            if self._tx.writes.get(w.path) is not w or w.state.manifest is not state.manifest:
                raise ValueError(f"{self.name} changed in this transaction since this merge_insert was built")
            self._record(txn, builder.describe())
            w.add(txn, merge_kinds(txn.operation))

        state = w.state
        builder = MergeInsertBuilder(state, on, stage)
        return builder

    # Schema evolution: an `altered_table` for DuckLake's rules (an insert or delete racing it conflicts, as
    # does another alter or a drop); staged like the data changes, so later changes in this transaction see
    # the new schema.

    def add_columns(self, transforms: Any, **kwargs: Any) -> None:
        """The core's `add_columns` (SQL expressions or all-null Arrow fields), staged.

        Args:
            transforms: SQL expressions by new column name, Arrow fields, or rows of the new columns.
            **kwargs: `Table.add_columns_uncommitted`'s keywords: `reader_schema`, `commit_message`,
                `transaction_properties`
        """
        self._stage("altered_table", lambda t: t.add_columns_uncommitted(transforms, **kwargs))

    def drop_columns(self, columns: str | list[str], **kwargs: Any) -> None:
        """The core's `drop_columns`, staged (metadata only).

        Args:
            columns: the columns, or `a.b` struct fields, to drop
            **kwargs: `Table.drop_columns_uncommitted`'s keywords: `commit_message`, `transaction_properties`
        """
        self._stage("altered_table", lambda t: t.drop_columns_uncommitted(columns, **kwargs))

    def alter_columns(self, *alterations: dict[str, Any], **kwargs: Any) -> None:
        """The core's `alter_columns` (rename, make nullable), staged (metadata only).

        Args:
            *alterations: pylance's alteration dicts (`path` and any of `name`, `nullable`, `data_type`).
            **kwargs: `Table.alter_columns_uncommitted`'s keywords: `commit_message`, `transaction_properties`
        """
        self._stage("altered_table", lambda t: t.alter_columns_uncommitted(*alterations, **kwargs))

    def compact_files(
        self,
        options: compaction.CompactionOptions | None = None,
        *,
        executor: Executor | None = None,
        commit_message: str | None = None,
        transaction_properties: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> int:
        """Compact the table's small fragments (the core's compaction) as a staged Rewrite published with the
        transaction (DuckLake's `compacted_table`).

        No ReserveFragments is committed first (a catalog table changes only through a catalog publish): the
        new fragments take the ids after the table's highest and are renumbered at publish time if a
        concurrent append took those ids.

        Args:
            options: The core's `CompactionOptions` (or give its fields as keyword arguments).
            executor: Where the rewrite tasks run (default: a thread pool in this process).
            commit_message: The message of the table version the Rewrite becomes.
            transaction_properties: Its string properties.
            **kwargs: `CompactionOptions` fields.

        Returns:
            The number of fragments rewritten (the compaction's `summarize`); 0 when there was nothing to do.
        """
        w = self._tx.write_for(self.name)
        plan = compaction.plan_unreserved(w.state, options, **kwargs)
        if not plan.tasks:
            return 0
        if plan.state is None:  # a plan of a table's state carries it
            raise ValueError(f"the compaction plan of {self.name!r} has no table state")
        run = partial(compaction.run_task, state=plan.state)
        results = list((executor or ThreadExecutor()).map(run, plan.tasks))
        txn = compaction.rewrite_transaction(
            w.state,
            results,
            commit_message=commit_message,
            transaction_properties=transaction_properties,
            defer_index_remap=plan.options.defer_index_remap,
        )
        w.add(txn, ["compacted_table"])
        return compaction.summarize(results, read_state=plan.state).fragments_removed

    def to_table(self, **kwargs: Any) -> pa.Table:
        """The rows as this transaction leaves the table so far (read-your-writes).

        Args:
            **kwargs: `Table.to_table`'s arguments: `columns`, `filter`, `limit`, `offset`, `with_row_address`,
                `with_row_id`
        """
        return Table.from_state(self._tx.write_for(self.name).state).to_table(**kwargs)
