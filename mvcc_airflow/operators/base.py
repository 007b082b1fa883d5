"""`MvccBaseOperator`: what every mvcc operator shares (the table, the connection, the retry defaults)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

import mvcc_core as mvcc

from ..assets.mvcc import OPERATION_EXTRA, VERSION_EXTRA
from ..hooks.mvcc import DEFAULT_CONN_ID, MvccHook
from ..utils.conflicts import DEFAULT_RETRY_ARGS, mvcc_errors
from ..utils.health import health_extra, health_figures

__all__ = ["MvccBaseOperator", "open_table_to_maintain"]


def open_table_to_maintain(hook: MvccHook, table: str) -> mvcc.Table:
    """Open `table` for a maintenance task, which has nothing to do on a table not written yet.

    A scheduled maintenance DAG often runs before the first write (Airflow starts the latest interval's run
    when the DAG is unpaused): the task is skipped, saying so, rather than failed, as the Dagster plugin's
    nightly schedule skips such a table. A bad connection or a damaged table still fails.

    Args:
        hook: The hook of the task's connection.
        table: A table name under the connection's root uri, or a full uri.

    Returns:
        The table at its latest version.

    Raises:
        AirflowSkipException: No table is there yet (the downstream tasks are skipped too).
        AirflowFailException: The connection is wrong or the table cannot be read.
    """
    try:
        return hook.open_table(table)
    except AirflowFailException as exc:
        if isinstance(exc.__cause__, mvcc.TableNotFoundError):
            raise AirflowSkipException(f"no table {hook.table_uri(table)} yet: nothing to maintain") from None
        raise


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

    def open_to_maintain(self) -> mvcc.Table:
        """The table at its latest version; the task is skipped when no table is there yet.

        Raises:
            AirflowSkipException: No table is there yet: a maintenance task has nothing to do.
        """
        return open_table_to_maintain(self.hook, self.table)

    def set_asset_extras(
        self,
        context: Context,
        table: mvcc.Table,
        operation: str | None,
        advice: Sequence[Mapping[str, Any]] | None = None,
    ) -> dict[str, Any] | None:
        """The extras of the asset events this task emits (one per outlet, at its success): the version, the
        operation and the table's health figures after the task (`utils/health.py`). Nothing without outlets.

        Args:
            context: the Airflow task context
            table: the table after the task
            operation: the operation the task committed (None: nothing)
            advice: the advice on that version, when the task has it

        Returns:
            The extras (None without outlets).
        """
        if not self.outlets:
            return None
        with mvcc_errors(f"health of {table.uri}"):
            figures = health_figures(table, advice)
        extra = {VERSION_EXTRA: table.version, OPERATION_EXTRA: operation, **health_extra(figures)}
        for outlet in self.outlets:
            context["outlet_events"][outlet].extra = extra
        return extra
