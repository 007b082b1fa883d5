"""The tag job: create, move or delete a tag of a table (tags pin versions against retention)."""

import dagster as dg

import mvcc_core as mvcc

from ..error_mapping import mvcc_conflicts, no_retry_failure
from ..metadata import MAINTENANCE_IO_KEY, RESOURCE_KEY
from ..resources import TableName
from .target import MaintenanceTarget, one_step_job


def build_tag_job(table: TableName, *, asset_key: TableName | None = None, name: str | None = None) -> dg.JobDefinition:
    """A job creating, moving or deleting a tag of `table` (run config of the ``tag`` step: ``action``
    create | update | delete, ``tag``, and ``version`` for create / update, default the latest).

    Why a job: a tag pins a version against retention (retention refuses to pass over a tagged version), so
    tagging before a risky backfill and restoring to the tag are both one click in the UI. A tag is not a
    commit: it is reported as an observation with `mvcc/tag` and `mvcc/tagged_version`, not a new version.

    Args:
        table: An asset key (string, `AssetKey` or path parts) or a table uri.
        asset_key: The asset the observation goes to.
        name: The job's name (default ``mvcc_tag__<asset key>``).

    Returns:
        The job (one step, in the run's process).
    """
    target = MaintenanceTarget(table, asset_key)

    @dg.op(
        name=f"tag__{target.suffix}",
        required_resource_keys={RESOURCE_KEY},
        pool=target.pool,
        config_schema={
            "action": dg.Field(str, default_value="create", description="create | update | delete"),
            "tag": dg.Field(str),
            "version": dg.Field(dg.Noneable(int), default_value=None, description="default: the latest"),
        },
        out=dg.Out(io_manager_key=MAINTENANCE_IO_KEY),
    )
    def tag(context: dg.OpExecutionContext) -> int | None:
        action, name_, version = (context.op_config[k] for k in ("action", "tag", "version"))
        if action not in ("create", "update", "delete"):
            raise no_retry_failure(
                f"tag job of {target.label}: action must be create, update or delete, got {action!r}"
            )
        t = target.open(context)
        with mvcc_conflicts(context, what=f"tag {name_!r} of {target.label} ({action})"):
            if action == "delete":
                try:
                    version = t.tags.get_version(name_)
                except mvcc.errors.CorruptTagError:
                    version = None  # a tag whose file does not read is deleted all the same
                t.tags.delete(name_)
            else:
                version = t.version if version is None else version
                getattr(t.tags, action)(name_, version)
        context.log_event(
            dg.AssetObservation(
                asset_key=target.asset_key,
                metadata={"mvcc/tag": name_, "mvcc/tag_action": action, "mvcc/tagged_version": version},
            )
        )
        return version

    return one_step_job(
        tag,
        "tag",
        name=name or f"mvcc_tag__{target.suffix}",
        target=target,
        description=f"Create, move or delete a tag of {target.label} (run config of the tag step).",
    )
