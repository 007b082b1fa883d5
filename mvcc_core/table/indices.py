"""Scalar indices: built, listed and dropped (a mixin of `Table`)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Self

from mvcc_core.errors import (
    IndexExistsError,
    IndexNotFoundError,
)
from mvcc_core.executor import Executor
from mvcc_core.format import operations
from mvcc_core.format.field_paths import path_names
from mvcc_core.format.naming import MEM_WAL_INDEX
from mvcc_core.ops.index_build import build as build_index
from mvcc_core.progress import Progress
from mvcc_core.table.branch_replay import with_replay
from mvcc_core.table.host import TableHost
from mvcc_core.table.index_descriptions import IndexDescription, covered_fragments, describe, display_name
from mvcc_core.txn.commit import DEFAULT_MAX_RETRIES
from mvcc_core.txn.transaction import Transaction, check_properties


class IndexMethods(TableHost):
    """Scalar indices: built, listed and dropped (mixed into `Table`)."""

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
        """Write the index files and return the CreateIndex, uncommitted (see `create_index`).

        Args:
            column: the scalar column indexed, or a struct field by its dotted path (`meta.lang`)
            index_type: "BTREE" or "BITMAP"
            name: the index's name (None: `{column}_idx`)
            replace: replace an index of that name (else IndexExistsError)
            executor: runs the column reads as tasks (`map(fn, tasks)`; None: in this process)
            progress: called as `progress(done, total)` after each task or group
            commit_message: the message stored with the transaction (None: no message)
            transaction_properties: properties stored with the transaction (a dict of str to str)
        """
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
        op = operations.CreateIndex(new_indices=[built.metadata], removed_indices=existing)
        replay = {"op": "create_index", "column": column, "index_type": index_type, "name": name}
        transaction_properties = with_replay(self._state, transaction_properties, replay)  # a publish builds it
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
    ) -> Self:
        """A BTREE or BITMAP index on a scalar column over every fragment (one CreateIndex).

        Filters on the column (`=`, `IN`, ranges, `IS NULL`, ...) then read only the rows it names in the
        fragments it covers. `name` defaults to `{column}_idx`; an existing index of that name is replaced,
        or refused with `replace=False` (IndexExistsError). With `executor` (`map(fn, tasks)`: a process pool,
        Spark) the column is read by tasks on it, without one in this process in groups of fragments of about
        a million rows; `progress(done, total)` after each task or group. This process sorts and writes the
        index and commits. An unknown `index_type` raises ValueError.

        Args:
            column: the scalar column indexed, or a struct field by its dotted path (`meta.lang`)
            index_type: "BTREE" or "BITMAP"
            name: the index's name (None: `{column}_idx`)
            replace: replace an index of that name (else IndexExistsError)
            executor: runs the column reads as tasks (`map(fn, tasks)`; None: in this process)
            progress: called as `progress(done, total)` after each task or group
            commit_message: the message stored with the transaction (None: no message)
            transaction_properties: properties stored with the transaction (a dict of str to str)
            max_retries: how many lost commit races to retry before giving up
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
    ) -> Self:
        """pylance's name for `create_index` on a scalar column.

        Args:
            column: the scalar column indexed, or a struct field by its dotted path (`meta.lang`)
            index_type: "BTREE" or "BITMAP"
            name: the index's name (None: `{column}_idx`)
            replace: replace an index of that name (else IndexExistsError)
            **kwargs: the keywords of `create_index` (`executor`, `progress`, `commit_message`,
                `transaction_properties`, `max_retries`)
        """
        return self.create_index(column, index_type, name=name, replace=replace, **kwargs)

    def drop_index(
        self,
        name: str,
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Self:
        """Remove an index from the table (its files stay for older versions until retention).

        Args:
            name: the index's name
            commit_message: the message stored with the transaction (None: no message)
            transaction_properties: properties stored with the transaction (a dict of str to str)
            max_retries: how many lost commit races to retry before giving up

        Raises:
            IndexNotFoundError: the table has no index of that name
        """
        existing = [i for i in self.manifest.indices if i.name == name]
        if not existing:
            names = [i.name for i in self.manifest.indices]
            raise IndexNotFoundError(f"table {self.uri} has no index named {name!r}; indices: {names}")
        return self.commit(
            operations.CreateIndex(removed_indices=existing),
            commit_message=commit_message,
            transaction_properties=transaction_properties,
            max_retries=max_retries,
        )

    def describe_indices(self) -> list[IndexDescription]:
        """pylance's `describe_indices()`: one description per index of this version (its type as pylance names
        it, "BTree" or "Bitmap", its fields, the live rows it covers and its segments).

        Returns:
            The descriptions, in the order the indices were created.
        """
        return describe(self.manifest)

    def list_indices(self) -> list[dict[str, Any]]:
        """The indices of this version (pylance's shape: `type` is "BTree" or "Bitmap" as pylance reports it),
        including the MemWAL index when regions exist."""
        out = []
        fields = list(self.manifest.fields)
        live = {f.id for f in self.manifest.fragments}
        for index in self.manifest.indices:
            covered = covered_fragments(index, live)
            out.append(
                {
                    "name": index.name,
                    "type": display_name(index.index_type),
                    "uuid": str(uuid.UUID(bytes=index.uuid.uuid)),
                    "fields": [path_names(fields, i) for i in index.fields],  # `meta.lang` for a struct field
                    "version": index.dataset_version,
                    "fragment_ids": sorted(covered),
                    "num_indexed_fragments": len(covered),
                    "num_unindexed_fragments": len(live - covered),
                }
            )
        if len(self.manifest.mem_wal_regions):
            out.append({"name": MEM_WAL_INDEX, "type": "MemWal", "fields": [], "regions": self.mem_wal_state()})
        return out
