"""`MvccBaseOperator`: what every mvcc operator shares (the table, the connection, the retry defaults)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

import mvcc_core as mvcc

from ..hooks.mvcc import DEFAULT_CONN_ID, MvccHook
from ..utils.conflicts import DEFAULT_RETRY_ARGS

__all__ = ["MvccBaseOperator"]


class MvccBaseOperator(BaseOperator):
    """What every mvcc operator shares: the table, the connection, the retry defaults.

    Args:
        table: A table name under the connection's root uri, or a full uri.
        mvcc_conn_id: The Airflow connection of type ``mvcc``.
        **kwargs: `BaseOperator`'s arguments; `retries`, `retry_delay`, `retry_exponential_backoff` and
            `max_retry_delay` default to `DEFAULT_RETRY_ARGS` unless given here or in the DAG's default_args.
    """

    template_fields: Sequence[str] = ("table",)
    ui_color = "#cfe8ff"

    def __init__(self, *, table: str, mvcc_conn_id: str = DEFAULT_CONN_ID, **kwargs: Any) -> None:
        for key, value in DEFAULT_RETRY_ARGS.items():
            kwargs.setdefault(key, value)
        super().__init__(**kwargs)
        if not isinstance(table, str) or not table.strip():
            raise ValueError(f"{self.task_id}: table must be a table name or a uri, got {table!r}")
        self.table = table
        self.mvcc_conn_id = mvcc_conn_id

    @property
    def hook(self) -> MvccHook:
        """The hook of `mvcc_conn_id`."""
        return MvccHook(self.mvcc_conn_id)

    def open(self) -> mvcc.Table:
        """The table at its latest version (a missing table or bad connection fails the task, unretried)."""
        return self.hook.open_table(self.table)
