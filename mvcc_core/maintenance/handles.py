"""What maintenance functions take: a `TableState`, or a handle that holds one (the `Table` facade, which is
unwrapped here: maintenance sits below the facade and never imports it)."""

from __future__ import annotations

from typing import Protocol

from mvcc_core.txn.state import TableState
from mvcc_core.txn.transaction import Transaction

__all__ = ["TableHandle", "TableLike", "state_of"]


class TableHandle(Protocol):
    """A handle on one version of a table (`Table`): its state, and a commit that moves it."""

    @property
    def state(self) -> TableState:
        """The version the handle is on."""
        ...

    def commit(self, operation: Transaction, *, max_retries: int = ...) -> object:
        """Commit a staged transaction; the handle moves to the new version.

        Args:
            operation: the staged transaction
            max_retries: how many lost commit races to retry
        """
        ...


TableLike = TableState | TableHandle


def state_of(table: TableLike) -> TableState:
    """The state itself, or the state a handle is on.

    Args:
        table: a `TableState` or a `Table`
    """
    return table if isinstance(table, TableState) else table.state
