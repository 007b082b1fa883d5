"""The table state an executor task reads: what compaction and index-build tasks receive (a picklable
`TableState`) or open themselves (a uri)."""

from __future__ import annotations

from typing import Any

from mvcc_core.txn.state import TableState


def task_state(state: TableState | str, read_version: int, storage_options: dict[str, Any] | None) -> TableState:
    """The table at `read_version`, from the state the task was sent or from the table's uri.

    Args:
        state: the plan's `TableState` (picklable: sent with the task to any executor), or the table's uri
        read_version: the version the task reads
        storage_options: options to open the uri with (ignored with a state)
    """
    if isinstance(state, str):
        return TableState.open(state, read_version, storage_options=storage_options)
    return state if state.version == read_version else state.checkout(read_version)
