"""`MvccVersionSensor`: waits for a new version of a table (a commit from anywhere: Spark, a DAG, the CLI)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue
from airflow.sdk.exceptions import AirflowFailException

import mvcc_core as mvcc

from ..hooks.mvcc import DEFAULT_CONN_ID, MvccHook
from ..triggers.table_version import MvccVersionTrigger
from ..utils.conflicts import mvcc_errors
from ..utils.versions import newer_version


class MvccVersionSensor(BaseSensorOperator):
    """Succeeds when the table has a version newer than `after_version` and pushes that version (XCom).

    Args:
        table: A table name under the connection's root uri, or a full uri.
        after_version: The version already seen; default: the latest version when the task first poked (0 when
            there is no table yet: its first version is then the new one).
            Required with ``mode="reschedule"`` (each reschedule is a new start).
        deferrable: Wait in the triggerer (`MvccVersionTrigger`) instead of occupying a worker slot.
        skip_maintenance: Pass over versions whose operation does not change data (compaction, indices).
        mvcc_conn_id: The Airflow connection of type ``mvcc``.
        **kwargs: `BaseSensorOperator`'s arguments (`poke_interval`, `timeout`, `mode`, ...).
    """

    template_fields: Sequence[str] = ("table", "after_version")
    ui_color = "#e0f0d8"

    def __init__(
        self,
        *,
        table: str,
        after_version: int | None = None,
        deferrable: bool = False,
        skip_maintenance: bool = False,
        mvcc_conn_id: str = DEFAULT_CONN_ID,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(table, str) or not table.strip():
            raise ValueError(f"{self.task_id}: table must be a table name or a uri, got {table!r}")
        if after_version is None and self.mode == "reschedule":
            raise ValueError(
                f"{self.task_id}: give after_version with mode='reschedule' (each reschedule would see a new baseline)"
            )
        self.table = table
        self.after_version: int | str | None = after_version  # a template field: a string once rendered
        self.deferrable = deferrable
        self.skip_maintenance = skip_maintenance
        self.mvcc_conn_id = mvcc_conn_id
        self._baseline: int | None = None
        self._table: Any = None  # opened once per try: each poke then reads only the latest version's name

    def _first_baseline(self) -> int:
        if self.after_version not in (None, "", "None"):
            try:
                return int(self.after_version)
            except (TypeError, ValueError):
                raise AirflowFailException(
                    f"{self.task_id}: after_version must be a version number, got {self.after_version!r}"
                ) from None
        t = self._open()
        if t is None:
            self.log.info("%s: no table there yet; waiting for its first version", self.table)
            return 0
        self.log.info("%s: waiting for a version after %d (the latest now)", t.uri, t.version)
        return t.version

    def _open(self) -> mvcc.Table | None:
        """The table, or None while there is none (its first version is then the one waited for)."""
        try:
            return MvccHook(self.mvcc_conn_id).open_table(self.table)
        except AirflowFailException as exc:
            if isinstance(exc.__cause__, mvcc.TableNotFoundError):
                return None
            raise

    def execute(self, context: Context) -> Any:
        """Poke (on the worker) or defer to the triggerer.

        Args:
            context: the Airflow task context

        Returns:
            The new version.
        """
        self._baseline = self._first_baseline()
        if not self.deferrable:
            return super().execute(context)
        self.defer(
            trigger=MvccVersionTrigger(
                table=self.table,
                after_version=self._baseline,
                mvcc_conn_id=self.mvcc_conn_id,
                poll_interval=float(self.poke_interval),
                skip_maintenance=self.skip_maintenance,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=float(self.timeout)) if self.timeout else None,
        )

    def poke(self, context: Context) -> PokeReturnValue:
        """One look at the table's latest version (one request; more with `skip_maintenance`).

        Args:
            context: the Airflow task context

        Returns:
            Done with the new version as XCom value, or not done.
        """
        if self._baseline is None:
            self._baseline = self._first_baseline()
        if self._table is None:
            self._table = self._open()
            if self._table is None:
                return PokeReturnValue(is_done=False)
        t = self._table
        with mvcc_errors(f"version sensor on {t.uri}"):
            version, self._baseline = newer_version(t, self._baseline, skip_maintenance=self.skip_maintenance)
        return PokeReturnValue(is_done=version is not None, xcom_value=version)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> int:
        """Resume after the trigger fired.

        Args:
            context: the Airflow task context
            event: the trigger's event: the new version, or the error it stopped on

        Returns:
            The new version.

        Raises:
            AirflowFailException: The trigger stopped on an error (its words).
        """
        if event.get("status") != "success":
            raise AirflowFailException(
                f"{self.task_id}: waiting for a new version of {event.get('table')} failed: {event.get('message')}"
            )
        self.log.info("%s: version %s", event.get("table"), event["version"])
        return int(event["version"])
