"""`MvccPlanFleetOperator`: one maintenance plan over many tables on one byte budget (`mvcc.compaction.plan_fleet`),
returned as XCom data whose ``steps`` a DAG maps its maintenance tasks over (``.expand_kwargs``), in rank order.

The plan reads each table's advice (manifests and one listing of its versions, no data file), ranks the tables
by benefit per byte and fills the budget greedily; what is left says why (over budget, over the table limit,
outside the quiet hours, nothing advised, missing, unreadable). The rules: docs/operations/maintenance.md, "A
fleet on one budget". ``examples/airflow/dags/mvcc_fleet_maintenance.py`` maps the compaction over the chosen
tables with each table's byte share as its `max_bytes`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException

import mvcc_core as mvcc

from ..hooks.mvcc import DEFAULT_CONN_ID, MvccHook
from ..utils.compaction_calls import is_templated, to_size
from ..utils.conflicts import mvcc_errors
from ..utils.health import COMPACTION_KINDS

__all__ = ["FLEET_STEPS", "MvccPlanFleetOperator", "fleet_steps"]

#: The steps of a fleet plan, in the order a run takes them, and the advice kinds that make a table need each.
#: Index optimization follows a compaction too: the rewritten fragments leave the indices (its task asks the
#: advice again, ``when_advised=True``, and skips a table without an index).
FLEET_STEPS: dict[str, tuple[str, ...]] = {
    "compact": COMPACTION_KINDS,
    "optimize_indices": (*COMPACTION_KINDS, "optimize_indices"),
    "retention": ("retention",),
}


def fleet_steps(plan: Mapping[str, Any], tables: Mapping[str, str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """For each step, the keyword arguments of one mapped task per chosen table that needs it, in rank order:
    ``{"table": table}``, plus ``"max_bytes"`` (the table's byte share) for the compaction.

    Args:
        plan: a `FleetPlan` as `to_dict` gives it (the operator's XCom value)
        tables: the plan's names to the tables' names or uris (None: the names are the tables)
    """
    steps: dict[str, list[dict[str, Any]]] = {step: [] for step in FLEET_STEPS}
    for entry in plan["chosen"]:
        kinds = {a["kind"] for a in entry["advice"]}
        for step, acts_on in FLEET_STEPS.items():
            if kinds & set(acts_on):
                kwargs: dict[str, Any] = {"table": (tables or {}).get(entry["name"], entry["name"])}
                if step == "compact":
                    kwargs["max_bytes"] = entry["byte_share"]
                steps[step].append(kwargs)
    return steps


class MvccPlanFleetOperator(BaseOperator):
    """Plan the maintenance of many tables on one budget (`mvcc.compaction.plan_fleet`); nothing is committed.

    Args:
        tables: Table names under the connection's root uri, or full uris (a mapping of names to either works too).
        max_bytes: The most on-disk bytes the chosen compactions read together (an int or a size such as
            ``"10GiB"``; None: no budget).
        max_tables: The most tables chosen (None: no limit).
        quiet_hours: ``(start, end)`` or ``(start, end, zone)`` (e.g. ``("22:00", "06:00", "Europe/Amsterdam")``):
            outside them nothing is chosen (None: always).
        mvcc_conn_id: The Airflow connection of type ``mvcc`` (the tables' root uri and storage options).
        **kwargs: `BaseOperator`'s arguments.

    Returns (XCom): the plan (`FleetPlan.to_dict`: ``chosen`` and ``left`` entries with their advice, rank,
    byte share and the reason in words, ``summary``) plus ``steps`` (`fleet_steps`).
    """

    template_fields: Sequence[str] = ("max_bytes", "max_tables")
    ui_color = "#e2f0d9"

    def __init__(
        self,
        *,
        tables: Sequence[str] | Mapping[str, str],
        max_bytes: int | str | None = None,
        max_tables: int | None = None,
        quiet_hours: Sequence[str] | None = None,
        mvcc_conn_id: str = DEFAULT_CONN_ID,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        names = dict(tables) if isinstance(tables, Mapping) else {t: t for t in tables} if tables else {}
        if isinstance(tables, str) or not names or not all(isinstance(v, str) and v.strip() for v in names.values()):
            raise ValueError(f"{self.task_id}: tables must be a list of table names or uris, got {tables!r}")
        if max_bytes is not None and not is_templated(max_bytes):
            to_size(max_bytes)
        if (
            max_tables is not None
            and not is_templated(max_tables)
            and (isinstance(max_tables, bool) or not isinstance(max_tables, int) or max_tables < 1)
        ):
            raise ValueError(f"{self.task_id}: max_tables must be a positive integer, got {max_tables!r}")
        self.window = None
        if quiet_hours is not None:
            try:
                self.window = mvcc.compaction.QuietHours(*quiet_hours)
            except TypeError:
                raise ValueError(
                    f"{self.task_id}: quiet_hours is (start, end) or (start, end, zone), got {quiet_hours!r}"
                ) from None
        self.tables = names
        self.max_bytes = max_bytes
        self.max_tables = max_tables
        self.mvcc_conn_id = mvcc_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        """Plan the fleet.

        Args:
            context: the Airflow task context

        Returns:
            The plan as JSON data, with ``steps``.
        """
        hook = MvccHook(self.mvcc_conn_id)
        sources: dict[str, Any] = {name: hook.table_uri(table) for name, table in self.tables.items()}
        storage, external = hook.storage_options(next(iter(self.tables.values())))
        if external is not None:  # tables behind an external manifest store open through it
            sources = {name: self._open(hook, table, sources[name]) for name, table in self.tables.items()}
        try:
            budget = None if self.max_bytes in (None, "", "None") else to_size(self.max_bytes)
            rendered: Any = self.max_tables  # a rendered template is a string
            limit = None if rendered in (None, "", "None") else int(str(rendered))
        except ValueError as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from None
        with mvcc_errors("fleet plan"):
            plan = mvcc.compaction.plan_fleet(
                sources, max_bytes=budget, max_tables=limit, window=self.window, storage_options=storage
            )
        self.log.info("fleet plan: %s", plan.summary())
        for entry in plan.chosen:
            self.log.info("chosen %s: %s", entry.name, entry.detail)
        for entry in plan.left:
            self.log.info("left %s (%s): %s", entry.name, entry.reason, entry.detail)
        out = plan.to_dict()
        out["steps"] = fleet_steps(out, self.tables)
        return out

    @staticmethod
    def _open(hook: MvccHook, table: str, uri: str) -> Any:
        """The table through the connection (its external store), or its uri when it cannot be opened (the plan
        then reports it missing or unreadable)."""
        try:
            return hook.open_table(table)
        except AirflowFailException:
            return uri
