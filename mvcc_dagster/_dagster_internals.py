"""Every Dagster internal the plugin uses, in one module: none has a public equivalent in Dagster 1.13.

Each name says why it is needed (docs/design/dagster_choices.md, "Dagster internals used"). Should a Dagster release
move
one, this is the only module to change.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg
from dagster._config.pythonic_config.resource import ConfigurableResourceFactoryResourceDefinition

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
    "deferred_resources_job",
    "log_check_evaluation",
    "reuse_sensor_resources",
    "selected_check_specs",
    "separate_check_specs",
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


def separate_check_specs(context: dg.OutputContext) -> list[dg.AssetCheckSpec]:
    """The checks this run executes on the output's asset that are defined apart from it: a separate
    ``@dg.asset_check(asset=...)`` (or a multi_asset_check) is its own node of the job, so it is not among the
    asset's own check specs and runs after the asset's step. Read from the job's asset layer (the nodes this
    run executes), which has no public route from the output context.

    Args:
        context: The IO manager's output context.

    Returns:
        The specs, sorted by name.
    """
    step_context = context.step_context
    layer = step_context.job_def.asset_layer
    own = layer.get_assets_def_for_node(step_context.node_handle)
    found: dict[dg.AssetCheckKey, dg.AssetCheckSpec] = {}
    for data in layer.data:
        assets_def = data.assets_def
        if own is not None and assets_def is own:
            continue
        selected = assets_def.check_keys
        for spec in assets_def.check_specs:
            if spec.key in selected and spec.asset_key == context.asset_key:
                found[spec.key] = spec
    return sorted(found.values(), key=lambda s: s.name)


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


@dataclass(frozen=True)
class _BuiltResources:
    """Resources built once for a sensor's tick, kept for the next ticks of the process."""

    definitions: tuple[Any, ...]  # held so that the ids in the key stay theirs
    env_names: tuple[str, ...]
    env_values: tuple[str | None, ...]
    resources: Any


#: Built resources by the ids of their definitions (a deployment has a few; bounded for tests that rebind).
_BUILT: dict[tuple[tuple[str, int], ...], _BuiltResources] = {}
_BUILT_MAX = 32


def _env_names(config: Any) -> list[str]:
    """The environment variables a resource's config reads (Dagster keeps an `EnvVar` as ``{"env": name}``)."""
    if isinstance(config, Mapping):
        if set(config) == {"env"} and isinstance(config["env"], str):
            return [config["env"]]
        return [n for v in config.values() for n in _env_names(v)]
    if isinstance(config, list | tuple):
        return [n for v in config for n in _env_names(v)]
    return []


def reuse_sensor_resources(context: dg.SensorEvaluationContext, reusable: Callable[[type], bool]) -> bool:
    """Give a sensor's tick the resources an earlier tick of this process built, when they may be reused.

    Dagster builds a sensor's resources again on every tick (`SensorEvaluationContext.resources`, called by
    the sensor's wrapper whenever the sensor has resource definitions): for a `ConfigurableResource` three
    pydantic copies and a config validation, ≈ 2.5 ms, and in the daemon also the tick's `DagsterInstance`
    from its reference (≈ 45 ms), which the resources' init context asks for. Reused here: resources whose
    class `reusable` accepts and that have no setup/teardown context (Dagster's own test of a context
    manager resource), keyed by the identity of their definitions (`Definitions` keeps them for the
    process; a `ConfigurableResource` returns one definition per instance) and the values of the
    environment variables their config reads (an `EnvVar` set differently builds them again). The context's
    resources are set through its private ``_resources``, which its `resources` property returns when set.

    Args:
        context: The tick's context, before the sensor's function is called.
        reusable: Whether resources of a class may serve many ticks (stateless past their config).

    Returns:
        Whether the tick got reused resources (False: Dagster builds them as usual).
    """
    definitions = context.resource_defs or {}
    if not definitions or getattr(context, "_resources", True) is not None:
        return False
    for definition in definitions.values():
        if not isinstance(definition, ConfigurableResourceFactoryResourceDefinition):
            return False
        cls = definition.configurable_resource_cls
        if not reusable(cls) or cls._is_cm_resource_cls():  # type: ignore[attr-defined]  # noqa: SLF001
            return False
    key = tuple(sorted((name, id(d)) for name, d in definitions.items()))
    built = _BUILT.get(key)
    if built is not None and built.env_values == tuple(os.environ.get(n) for n in built.env_names):
        context._resources = built.resources  # noqa: SLF001
        return True
    names = tuple(n for d in definitions.values() for n in _env_names(d.config_schema.as_field().default_value))
    values = tuple(os.environ.get(n) for n in names)
    with dg.build_resources(dict(definitions)) as resources:
        pass  # nothing to tear down: no resource here is a context manager
    if len(_BUILT) >= _BUILT_MAX:
        _BUILT.pop(next(iter(_BUILT)))
    _BUILT[key] = _BuiltResources(tuple(definitions.values()), names, values, resources)
    context._resources = resources  # type: ignore[assignment]  # noqa: SLF001
    return True
