"""The index jobs: create an index, or bring every index up to date with the fragments added since."""

import re

import dagster as dg

import mvcc_core as mvcc

from ..error_mapping import mvcc_conflicts, no_retry_failure
from ..metadata import MAINTENANCE_IO_KEY, RESOURCE_KEY
from ..resources import TableName
from .target import MaintenanceTarget, observe, one_step_job


def _unindexed_fragments(table: mvcc.Table, index_name: str) -> int | None:
    """Fragments the index named `index_name` does not cover (every index summed when the name is empty)."""
    found = [
        i
        for i in table.list_indices()
        if "num_unindexed_fragments" in i and (not index_name or i["name"] == index_name)
    ]
    return sum(int(i["num_unindexed_fragments"]) for i in found) if found else None


def index_op(
    target: MaintenanceTarget, column: str, index_type: str, idx: str, mode: str, prefix: str, *, gated: bool = False
) -> dg.OpDefinition:
    """The index op of `target` (default `mode`: create, or optimize in the schedule).

    Args:
        target: The table.
        column: The indexed column (``""`` for optimize).
        index_type: The index type (``""`` for optimize).
        idx: The index's name (``""``: every index, for optimize).
        mode: The default of the op's ``mode`` config: ``create`` or ``optimize``.
        prefix: Put before the op's name (each job kind has its own ops).
        gated: A second Nothing input ``due``: the step is skipped when its source yields nothing (the
            maintenance schedule wires it to the reserve step's ``indexed`` output: no index, no step).

    Returns:
        The op.
    """

    @dg.op(
        name=f"create_index__{prefix}{target.suffix}__{re.sub(r'[^A-Za-z0-9_]', '_', idx)}",
        required_resource_keys={RESOURCE_KEY},
        pool=target.pool,
        ins={"after": dg.In(dg.Nothing), **({"due": dg.In(dg.Nothing)} if gated else {})},
        config_schema={"mode": dg.Field(str, default_value=mode, description="create | optimize")},
        out=dg.Out(io_manager_key=MAINTENANCE_IO_KEY),
    )
    def create_index(context: dg.OpExecutionContext) -> int:
        mode = context.op_config["mode"]
        if mode not in ("create", "optimize"):
            raise no_retry_failure(f"index job of {target.label}: mode must be 'create' or 'optimize', got {mode!r}")
        t = target.open(context)
        before = _unindexed_fragments(t, idx)
        props = target.properties(context, f"index:{mode}")
        with mvcc_conflicts(context, what=f"index {idx} of {target.label} (column {column!r}, {index_type})"):
            if mode == "create":
                t.create_index(column, index_type, name=idx, transaction_properties=props)
                updated = 1
            else:
                start = t.version
                updated = t.optimize.optimize_indices(transaction_properties=props)
                if t.version == start:
                    context.log.info("%s: every index is up to date", target.label)
                    return 0
        observe(
            context,
            target,
            t,
            {
                "index": idx,
                "column": column,
                "index_type": index_type,
                "mode": mode,
                "indices_updated": updated,
                "unindexed_fragments_before": before if before is not None else len(t.get_fragments()),
                "unindexed_fragments_after": _unindexed_fragments(t, idx) or 0,
            },
        )
        return updated

    return create_index


def build_index_job(
    table: TableName,
    column: str,
    index_type: str = "BTREE",
    *,
    index_name: str | None = None,
    asset_key: TableName | None = None,
    name: str | None = None,
) -> dg.JobDefinition:
    """A job creating the `index_type` index on `column` (``mode: create``, the default) or bringing every
    index up to date with the fragments added or rewritten since it was built (``mode: optimize``, op config
    of the ``create_index`` step: what the maintenance schedule runs after a compaction). One CreateIndex,
    reported as an observation with the fragments left unindexed before and after.

    Args:
        table: An asset key (string, `AssetKey` or path parts) or a table uri.
        column: The indexed column.
        index_type: The core's index type (``BTREE``, ``BITMAP``, ...).
        index_name: The index's name (default ``<column>_idx``).
        asset_key: The asset the report goes to (default: `table`, or a uri's last segment).
        name: The job's name (default ``mvcc_index__<asset key>__<index>``).

    Returns:
        The job (one step, in the run's process).
    """
    target = MaintenanceTarget(table, asset_key)
    idx = index_name or f"{column}_idx"

    create_index = index_op(target, column, index_type, idx, "create", "")

    return one_step_job(
        create_index,
        "create_index",
        name=name or f"mvcc_index__{target.suffix}__{re.sub(r'[^A-Za-z0-9_]', '_', idx)}",
        target=target,
        description=f"Index {idx} ({index_type} on {column}) of {target.label}.",
    )


def build_index_optimize_job(
    table: TableName, *, asset_key: TableName | None = None, name: str | None = None
) -> dg.JobDefinition:
    """A job bringing every index of `table` up to date with the fragments added or rewritten since it was
    built (one ``optimize_indices`` step, one CreateIndex when any index changed, reported as an observation).

    Why a job of its own: it needs no run config (`build_index_job`'s default mode is ``create``, which fails
    on an index that exists), so a sensor can request it as it is — the health sensor's repair for
    ``unindexed_rows``.

    Args:
        table: An asset key (string, `AssetKey` or path parts) or a table uri.
        asset_key: The asset the report goes to.
        name: The job's name (default ``mvcc_index_optimize__<asset key>``).

    Returns:
        The job (one step, in the run's process).
    """
    target = MaintenanceTarget(table, asset_key)
    optimize = index_op(target, "", "", "", "optimize", "optimize__")
    return one_step_job(
        optimize,
        "optimize_indices",
        name=name or f"mvcc_index_optimize__{target.suffix}",
        target=target,
        description=f"Bring every index of {target.label} up to date (optimize_indices).",
    )
