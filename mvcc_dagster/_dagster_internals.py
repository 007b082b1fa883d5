"""Every Dagster internal the plugin uses, in one module: none has a public equivalent in Dagster 1.13.

Each name says why it is needed (docs/dagster.md, "Dagster internals used"). Should a Dagster release move
one, this is the only module to change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg

# `dagster/row_count`, `dagster/column_schema`, ... as one typed set. Not exported from `dagster` in 1.13
# (dagster-sling imports it from here too); the keys it writes are the standard ones.
from dagster._core.definitions.metadata import normalize_metadata
from dagster._core.definitions.metadata.metadata_set import TableMetadataSet

# What Dagster raises for a bad argument to its own helpers (e.g. a partition key range of keys the
# definition does not have); not exported from `dagster`.
from dagster_shared.check import CheckError

__all__ = [
    "CheckError",
    "TableMetadataSet",
    "check_evaluation_event",
    "log_check_evaluation",
    "deferred_resources_job",
    "selected_check_specs",
    "set_loaded_input_metadata",
]


def set_loaded_input_metadata(context: dg.InputContext, metadata: Mapping[str, Any]) -> bool:
    """Put `metadata` on the LOADED_INPUT event only, without the `AssetObservation` per load.

    Dagster 1.13's public `add_input_metadata` also logs an observation of the upstream asset per load, which
    tops the upstream's event list with one observation per downstream step and buries its
    materializations. The LOADED_INPUT event's metadata is the input context's logged metadata
    (`_user_generated_metadata`, read by Dagster after `load_input`), so it is set there directly.

    Args:
        context: The IO manager's input context.
        metadata: The metadata to add.

    Returns:
        False when this Dagster release has no such attribute (the caller then uses `add_input_metadata`).
    """
    current = getattr(context, "_user_generated_metadata", None)
    if not isinstance(current, dict):
        return False
    context._user_generated_metadata = {**current, **normalize_metadata(metadata)}
    return True


def deferred_resources_job(**kwargs: Any) -> dg.JobDefinition:
    """A `JobDefinition` whose `resource_defs` are its own, the rest bound later by `Definitions`.

    `@dg.job(resource_defs=...)` demands every resource at definition time (the resource ``mvcc`` is the
    deployment's); Dagster's own `_was_explicitly_provided_resources=False` is how its jobs defer the check to
    `Definitions`, which then binds the top-level resources and keeps the job's own IO manager.

    Args:
        **kwargs: `dg.JobDefinition`'s arguments.

    Returns:
        The job.
    """
    return dg.JobDefinition(**kwargs, _was_explicitly_provided_resources=False)


def selected_check_specs(context: dg.OutputContext) -> list[dg.AssetCheckSpec]:
    """The checks of the output's asset that this run selected (write-audit-publish evaluates them in
    `handle_output`). The output context has no public route to its asset's check specs: they are read from
    the step's `AssetsDefinition`, as Dagster's own `AssetCheckResult.to_asset_check_evaluation` does.

    Args:
        context: The IO manager's output context.

    Returns:
        The specs, in the asset's order.
    """
    step_context = context.step_context
    assets_def = step_context.job_def.asset_layer.get_assets_def_for_node(step_context.node_handle)
    if assets_def is None:
        return []
    selected = assets_def.check_keys
    return [s for s in assets_def.check_specs if s.key in selected and s.asset_key == context.asset_key]


def check_evaluation_event(context: dg.OutputContext, result: dg.AssetCheckResult) -> dg.DagsterEvent:
    """The ASSET_CHECK_EVALUATION event of `result`, for `handle_output` to yield.

    An IO manager may yield `DagsterEvent`s only; the step's compute function is where Dagster turns an
    `AssetCheckResult` into this event, with the same two calls.

    Args:
        context: The IO manager's output context.
        result: The check's result (with its asset key and check name).

    Returns:
        The event.
    """
    step_context = context.step_context
    return dg.DagsterEvent.asset_check_evaluation(step_context, result.to_asset_check_evaluation(step_context))


def log_check_evaluation(context: Any, result: dg.AssetCheckResult) -> None:
    """Record `result` as an ASSET_CHECK_EVALUATION of the running step, from an asset's body.

    Catalog write-audit-publish evaluates the checks when the `with` block of the catalog transaction ends; a
    failed blocking one then raises, so the body cannot yield its results. `log_event` is public, but the
    `AssetCheckEvaluation` it takes is built from the step's execution context, as `check_evaluation_event`
    does; the event is written to the run's event log when it is made.

    Args:
        context: The asset's execution context.
        result: The check's result (with its asset key and check name).
    """
    step_context = context.get_step_execution_context()
    context.log_event(result.to_asset_check_evaluation(step_context))
