"""`MvccAdviseOperator`: what maintenance would pay on a table now, from the core's advice, as XCom data; with
``short_circuit=True`` the tasks after it are skipped when nothing would pay (Airflow's ShortCircuitOperator)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import Context, SkipMixin

from ..utils.conflicts import mvcc_errors
from ..utils.health import KINDS, advice_of, health_figures, kinds_of
from ..utils.task_results import task_result
from .base import MvccBaseOperator

__all__ = ["MvccAdviseOperator"]


class MvccAdviseOperator(MvccBaseOperator, SkipMixin):
    """Ask the core what maintenance would pay on the table's latest version (`Table.optimize.recommend`, under
    the table's policy; manifests and one listing of the versions, no data file read) and return it.

    With ``short_circuit=True`` and nothing advised (of `kinds`), every task downstream of this one is skipped,
    whatever its trigger rule, as Airflow's `ShortCircuitOperator` does with its default
    ``ignore_downstream_trigger_rules=True``; this task itself succeeds and its XCom value is there. With no
    table there yet the task is skipped ("nothing to maintain"), and so are the tasks after it.

    Args:
        table: A table name under the connection's root uri, or a full uri.
        short_circuit: Skip the downstream tasks when nothing is advised.
        kinds: The advice kinds that count (default: all: ``compact``, ``materialize_deletions``,
            ``optimize_indices``, ``retention``).
        min_score: Advice scoring below this (in [0, 1]) does not count.
        mvcc_conn_id: The Airflow connection of type ``mvcc``.
        **kwargs: `BaseOperator`'s arguments.
    """

    template_fields: Sequence[str] = ("table",)
    ui_color = "#e2f0d9"
    inherits_from_skipmixin = True

    def __init__(
        self,
        *,
        table: str,
        short_circuit: bool = False,
        kinds: Sequence[str] | None = None,
        min_score: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, **kwargs)
        if not isinstance(short_circuit, bool):
            raise ValueError(f"{self.task_id}: short_circuit must be True or False, got {short_circuit!r}")
        chosen = list(KINDS if kinds is None else ([kinds] if isinstance(kinds, str) else kinds))
        unknown = sorted(set(chosen) - set(KINDS))
        if unknown or not chosen:
            raise ValueError(f"{self.task_id}: kinds must name advice kinds of {list(KINDS)}, got {kinds!r}")
        if isinstance(min_score, bool) or not isinstance(min_score, int | float) or not 0.0 <= min_score <= 1.0:
            raise ValueError(f"{self.task_id}: min_score is a score in [0, 1], got {min_score!r}")
        self.short_circuit = short_circuit
        self.kinds = chosen
        self.min_score = float(min_score)

    def execute(self, context: Context) -> dict[str, Any]:
        """Read the advice; skip the downstream tasks when `short_circuit` and nothing counts.

        Args:
            context: the Airflow task context

        Returns:
            ``{"table", "version", "operation": None, "metrics": the health figures (utils/health.py),
            "advice": [the advice that counts, best first, as dicts], "due": [their kinds],
            "all_advice": [every piece of advice]}``.
        """
        t = self.open_to_maintain()  # skipped (and the tasks after it) when no table is there yet
        with mvcc_errors(f"advice on {t.uri}"):
            every = advice_of(t)
            figures = health_figures(t, every)
        counted = [a for a in every if a["kind"] in self.kinds and a["score"] >= self.min_score]
        result = {**task_result(t, None, figures), "advice": counted, "due": kinds_of(counted), "all_advice": every}
        for a in counted:
            self.log.info("%s: %s (score %.3f): %s", t.uri, a["kind"], a["score"], a["reason"])
        self.set_asset_extras(context, t, None, every)
        if counted or not self.short_circuit:
            if not counted:
                self.log.info("%s version %d: nothing advised", t.uri, t.version)
            return result
        self.log.info("%s version %d: nothing advised; skipping the downstream tasks", t.uri, t.version)
        downstream = [task for task in context["task"].get_flat_relatives(upstream=False) if not task.is_teardown]
        if downstream:
            context["ti"].xcom_push(key="return_value", value=result)  # the skip below ends the task here
            self.skip(ti=context["ti"], tasks=downstream)
        return result
