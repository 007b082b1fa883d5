"""Which step of which run is writing: its run, root run, step key and partitions, as a catalog asset's
transaction stamps them on the catalog version it publishes (docs/integrations/dagster/catalog.md, "A step run again
after its
publish")."""

from __future__ import annotations

from typing import Any

from ..lineage import lineage_root
from ..properties import PARTITION_KEY_PROPERTY, ROOT_RUN_ID_PROPERTY, RUN_ID_PROPERTY, STEP_KEY_PROPERTY


def run_partitions(context: Any) -> list[str] | None:
    """The partition keys of the run (a single-run backfill: all of them); None when it is unpartitioned.

    Args:
        context: The execution context (None: unpartitioned).

    Returns:
        The keys, or None.
    """
    if context is None:
        return None
    if getattr(context, "has_partition_key", False) or getattr(context, "has_partition_key_range", False):
        return list(context.partition_keys)
    return None


def run_id_of(context: Any) -> str:
    """The run's id (`context.run.run_id`; `context.run_id` is deprecated on the asset context in 1.13).

    Args:
        context: The execution context.

    Returns:
        The run id.
    """
    run = getattr(context, "run", None)
    return str(run.run_id) if run is not None else str(context.run_id)


def partition_label(keys: list[str]) -> str:
    """The run's partitions as one property value: the key, or ``first...last`` for a range.

    Args:
        keys: The run's partition keys (at least one).

    Returns:
        The label.
    """
    return keys[0] if len(keys) == 1 else f"{min(keys)}...{max(keys)}"


def step_stamp(context: Any) -> dict[str, str]:
    """Which step of which run lineage this is, stored on the catalog version the step publishes: the run, its
    root run (itself unless it re-executes another), the step key and the run's partitions. Empty without a
    step context (the helper used outside a run).

    Args:
        context: The asset's execution context (None: outside a run).

    Returns:
        The transaction properties.
    """
    if context is None:
        return {}
    try:
        step_key = context.get_step_execution_context().step.key
        run = context.run
    except Exception:  # not inside a step (a direct invocation): nothing to stamp, no duplicate to detect
        return {}
    stamp = {
        RUN_ID_PROPERTY: str(run.run_id),
        ROOT_RUN_ID_PROPERTY: lineage_root(run),
        STEP_KEY_PROPERTY: str(step_key),
    }
    keys = run_partitions(context)
    if keys:
        stamp[PARTITION_KEY_PROPERTY] = partition_label(keys)
    return stamp
