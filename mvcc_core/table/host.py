"""What the `Table` mixins (reading, versions, schema changes, indices, configuration, branches) need of the
class they are mixed into: its state, its properties and its committing methods.

Each mixin inherits `TableHost`, so a type checker knows `self._state`, `self.commit(...)` and the rest inside
the mixin's methods; `Table` (mvcc_core/table/handle.py) inherits every mixin and implements all of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Self

from mvcc_core.txn.commit import DEFAULT_MAX_RETRIES
from mvcc_core.txn.state import TableState

if TYPE_CHECKING:
    import pyarrow as pa

    from mvcc_core._proto import table_pb2 as pb
    from mvcc_core.executor import Executor
    from mvcc_core.format import operations
    from mvcc_core.progress import Progress
    from mvcc_core.table.arguments import BranchReference
    from mvcc_core.txn.history import VersionRef
    from mvcc_core.txn.transaction import Transaction


class TableHost(Protocol):
    """The members of `Table` that its mixins call on `self`.

    Args:
        state: the table state the handle is on (as `Table(state)`)
    """

    _state: TableState

    def __init__(self, state: TableState) -> None: ...

    @property
    def state(self) -> TableState: ...

    @property
    def uri(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def manifest(self) -> pb.Manifest: ...

    @property
    def schema(self) -> pa.Schema: ...

    def _txn(
        self,
        operation: operations.Operation,
        files: Sequence[str] = (),
        *,
        commit_message: str | None,
        transaction_properties: Mapping[str, str] | None,
        read_version: int | None = None,
    ) -> Transaction: ...

    def _plan_txn(
        self, plan: Any, commit_message: str | None, transaction_properties: Mapping[str, str] | None
    ) -> Transaction: ...

    def commit(
        self,
        operation: Transaction | operations.Operation,
        *,
        read_version: int | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
    ) -> Self:
        """`Table.commit`: commit `operation` (or a staged Transaction) and move the handle to its version.

        Args:
            operation: the operation, or a Transaction staged on this handle
            read_version: the version the operation was planned on (None: the handle's)
            max_retries: lost races for the next manifest name retried at most
            commit_message: the commit's message
            transaction_properties: the commit's properties
        """

    def _advance(self, state: TableState) -> None: ...

    def _resolve(self, ref: VersionRef) -> int: ...

    def _reference_state(self, reference: BranchReference | None) -> TableState: ...

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
        """`Table.create_index`: build an index on `column` and commit it.

        Args:
            column: the indexed column (a dotted path for a struct field)
            index_type: the index type ("BTREE", "BITMAP", ...)
            name: the index's name (None: derived from the column)
            replace: replace an index of the same name
            executor: where the build's tasks run (None: this process)
            progress: told of the build's progress
            commit_message: the commit's message
            transaction_properties: the commit's properties
            max_retries: lost races for the next manifest name retried at most
        """

    def mem_wal_state(self) -> dict[str, int]: ...
