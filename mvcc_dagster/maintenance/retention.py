"""The retention job: old versions and unreferenced files removed (`Table.cleanup_old_versions`)."""

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import dagster as dg

import mvcc_core as mvcc
from mvcc_core.table import CleanupStats

from ..error_mapping import mvcc_conflicts, no_retry_failure
from ..metadata import MAINTENANCE_IO_KEY, RESOURCE_KEY
from ..resources import TableName
from ..write_audit_publish.table import delete_wap_branches
from .due import policy_retention, retention_tags, window_to
from .target import MaintenanceTarget, observe, one_step_job


def _cleanup_metadata(stats: CleanupStats, *, dry_run: bool) -> dict[str, Any]:
    return {
        "dry_run": dry_run,
        "versions_removed": stats.old_versions,
        "removed_versions": dg.MetadataValue.json(list(stats.removed_versions)),
        "bytes_removed": stats.bytes_removed,
        "data_files_removed": stats.data_files_removed,
        "deletion_files_removed": stats.deletion_files_removed,
        "transaction_files_removed": stats.transaction_files_removed,
        "index_files_removed": stats.index_files_removed,
        "unverified_files_removed": stats.unverified_files_removed,
        "bad_tags": dg.MetadataValue.json(dict(stats.bad_tags)),
    }


def tagged_text(tags: dict[str, int]) -> str:
    """Tags in words, oldest version first: ``release-1 (version 3), audit (version 5)``."""
    return ", ".join(f"{name} (version {v})" for name, v in sorted(tags.items(), key=lambda kv: (kv[1], kv[0])))


def cleanup_keeping_tagged(
    table: mvcc.Table,
    window: timedelta,
    retain_versions: int | None,
    *,
    delete_unverified: bool,
    dry_run: bool,
    error_if_tagged_old_versions: bool = False,
    label: str = "",
) -> tuple[CleanupStats, dict[str, int]]:
    """`Table.cleanup_old_versions`, keeping the tagged versions older than `window` and going on (the CLI's
    ``mvcc cleanup --keep-tagged``); also says which tags kept a version that would otherwise have gone.

    The core names those tags only when it refuses them (`TagError.tags`, raised before anything is removed):
    the cleanup is asked to refuse them first, and only when it does is it run again keeping them. A table
    without such tags is cleaned in one pass.

    Args:
        table: The table.
        window: Versions older than this go.
        retain_versions: Keep at least the newest this many versions (None: no such floor).
        delete_unverified: The core's `delete_unverified`.
        dry_run: Only count what would go.
        error_if_tagged_old_versions: Fail on such a tag instead (nothing removed).
        label: The table, as the failure names it.

    Returns:
        The cleanup's numbers, and ``{tag: version}`` of the old versions kept because a tag names them.

    Raises:
        dagster.Failure: `error_if_tagged_old_versions` and a tagged version older than the window (not retried).
        TagError: A tag problem other than tagged old versions.
    """
    try:
        stats = table.cleanup_old_versions(
            window, retain_versions, delete_unverified=delete_unverified, dry_run=dry_run
        )
        return stats, {}
    except mvcc.errors.TagError as exc:
        if not exc.tags:
            raise
        kept = {str(name): int(version) for name, version in exc.tags.items()}
        if error_if_tagged_old_versions:
            raise no_retry_failure(
                f"retention of {label or table.uri}: tagged versions older than the window: {tagged_text(kept)}; "
                "nothing was removed, since error_if_tagged_old_versions is true (set it false to keep them and "
                "remove the rest, or delete those tags first)",
                {"tagged_versions": dg.MetadataValue.json(kept)},
            ) from exc
    stats = table.cleanup_old_versions(
        window,
        retain_versions,
        delete_unverified=delete_unverified,
        error_if_tagged_old_versions=False,
        dry_run=dry_run,
    )
    return stats, kept


def _check_latest_after_holes(context: Any, target: MaintenanceTarget, table: mvcc.Table, kept: dict[str, int]) -> None:
    """A cleanup that kept tagged versions left holes in the version numbers: the table, opened anew, must still
    find its latest version (the newest manifest listed). If it does not, the next commit would be made on an
    older version; fail loudly rather than leave that unsaid."""
    listed = max(v.version for v in table.versions())
    found = target.open(context).version
    if found != listed:
        raise no_retry_failure(
            f"retention of {target.label}: after keeping tagged versions {tagged_text(kept)}, opening the table "
            f"finds version {found} as its latest, not {listed}: a commit now would build on version {found}. "
            "Do not write to the table until this is resolved (the core's latest-version lookup on a local disk "
            "stops at the gap left below a kept tagged version)",
            {"asset": target.label, "latest_listed": listed, "latest_found": found},
        )


def cleanup_op(
    target: MaintenanceTarget,
    older_than: timedelta | None,
    retain_versions: int | None,
    dry_run: bool,
    prefix: str,
    delete_unverified: bool = False,
    *,
    output_on_dry_run_only: bool = False,
    error_if_tagged_old_versions: bool = False,
) -> dg.OpDefinition:
    """The retention op of `target`; its `after` input (Nothing) orders it after compaction in the schedule.

    Its config: `dry_run`, `delete_unverified`, `error_if_tagged_old_versions` and `cutoff` (`due.window_to`:
    the versions committed before that instant go; the schedule and the health sensor set it from their tick's
    time).

    A tagged version older than the window is kept and the rest removed; the tags that kept one are in the
    output's and the observation's metadata (``kept_tagged_versions``, ``{tag: version}``) and the step's log.
    With ``error_if_tagged_old_versions: true`` such a tag fails the step instead, naming the tags (nothing
    removed, not retried).

    Args:
        target: The table.
        older_than: Versions older than this go (`Table.cleanup_old_versions`); None: the table's retention
            policy (``mvcc.retention.older_than``, default 14 days), read when the step runs.
        retain_versions: Keep at least the newest this many versions (None: no such floor, or with `older_than`
            None the policy's ``mvcc.retention.retain_versions``).
        dry_run: The default of the op's `dry_run` config.
        prefix: Put before the op's name (the schedule's job has its own ops).
        delete_unverified: The default of the op's `delete_unverified` config.
        output_on_dry_run_only: The op's output (the removed versions, with the numbers as its metadata) is
            yielded only by a dry run: a real run's observation carries the same numbers, so the maintenance
            schedule's job, where nothing reads the output, leaves out its three events (the output, the
            pickled file's log line, the IO manager's). False (the retention and compaction jobs): always.
        error_if_tagged_old_versions: The default of the op's `error_if_tagged_old_versions` config: fail on a
            tagged version older than the window instead of keeping it (pylance's parameter; default False).

    Returns:
        The op.

    Raises:
        TypeError: `delete_unverified` or `error_if_tagged_old_versions` is not a bool.
        ValueError: `older_than` or `retain_versions` out of range.
    """
    if not isinstance(delete_unverified, bool):
        raise TypeError(f"retention of {target.label}: delete_unverified must be a bool, got {delete_unverified!r}")
    if not isinstance(error_if_tagged_old_versions, bool):
        raise TypeError(
            f"retention of {target.label}: error_if_tagged_old_versions must be a bool, got "
            f"{error_if_tagged_old_versions!r}"
        )
    if older_than is not None and (not isinstance(older_than, timedelta) or older_than < timedelta(0)):
        raise ValueError(
            f"retention of {target.label}: older_than must be a non-negative timedelta, got {older_than!r}"
        )
    if retain_versions is not None and (isinstance(retain_versions, bool) or retain_versions < 1):
        raise ValueError(
            f"retention of {target.label}: retain_versions must be a positive int, got {retain_versions!r}"
        )

    @dg.op(
        name=f"cleanup_old_versions__{prefix}{target.suffix}",
        required_resource_keys={RESOURCE_KEY},
        pool=target.pool,
        ins={"after": dg.In(dg.Nothing)},
        config_schema={
            "dry_run": dg.Field(bool, default_value=dry_run),
            "delete_unverified": dg.Field(bool, default_value=delete_unverified),
            "error_if_tagged_old_versions": dg.Field(
                bool,
                default_value=error_if_tagged_old_versions,
                description="Fail on a tagged version older than the window (nothing removed) instead of "
                "keeping it and removing the rest (the default).",
            ),
            "cutoff": dg.Field(
                str,
                default_value="",
                description="Remove the versions committed before this ISO-8601 time (with its offset), "
                "never one younger than older_than; empty: older than older_than when the step runs. The "
                "schedule and the health sensor set it to their tick's time minus older_than.",
            ),
        },
        out=dg.Out(io_manager_key=MAINTENANCE_IO_KEY, is_required=not output_on_dry_run_only),
    )
    def cleanup(context: dg.OpExecutionContext) -> Iterator[dg.Output]:
        dry = bool(context.op_config["dry_run"])
        t = target.open(context)
        try:
            # no setting of the job's: the table's policy, as `cleanup_old_versions()` without arguments
            base, floor = (older_than, retain_versions) if older_than is not None else policy_retention(t)
            if older_than is not None or retain_versions is not None:
                floor = retain_versions
            window = window_to(context.op_config["cutoff"], base)
        except ValueError as exc:
            raise no_retry_failure(f"retention of {target.label}: {exc}", {"asset": target.label}) from exc
        if older_than is None:
            context.log.info(f"retention of {target.label}: the table's policy, older_than={base}, retain={floor}")
        with mvcc_conflicts(context, what=f"retention of {target.label} (older_than / retain_versions)"):
            # failed audits' branches past the window first, so that this cleanup reclaims their files
            wap_branches = delete_wap_branches(t, window, dry_run=dry)
            stats, kept = cleanup_keeping_tagged(
                t,
                window,
                floor,
                delete_unverified=bool(context.op_config["delete_unverified"]),
                dry_run=dry,
                error_if_tagged_old_versions=bool(context.op_config["error_if_tagged_old_versions"]),
                label=target.label,
            )
        if kept and not dry and stats.removed_versions:
            _check_latest_after_holes(context, target, t, kept)
        if kept:
            context.log.info(
                f"retention of {target.label}: kept tagged versions older than the window: {tagged_text(kept)}"
            )
        meta = {
            **_cleanup_metadata(stats, dry_run=dry),
            "older_than_seconds": window.total_seconds(),
            "retain_versions": floor if floor is not None else 0,
            "kept_tagged_versions": dg.MetadataValue.json(kept),
            "wap_branches_removed": dg.MetadataValue.json(wap_branches),
        }
        if not dry:
            observe(context, target, t.checkout_latest(), {**meta, "mvcc/operation": "Cleanup"})
        if dry or not output_on_dry_run_only:
            yield dg.Output(list(stats.removed_versions), metadata=meta)

    return cleanup


def build_retention_job(
    table: TableName,
    *,
    older_than: timedelta | None = None,
    retain_versions: int | None = None,
    dry_run: bool = False,
    delete_unverified: bool = False,
    asset_key: TableName | None = None,
    name: str | None = None,
    error_if_tagged_old_versions: bool = False,
) -> dg.JobDefinition:
    """A job removing old versions (`Table.cleanup_old_versions`; the latest and tagged versions are kept).

    Without `older_than` the job follows the table's retention policy (its ``mvcc.retention.older_than`` and
    ``mvcc.retention.retain_versions`` configuration, else 14 days and no floor), read when the step runs, as
    `cleanup_old_versions()` without arguments does; `retain_versions` alone overrides the policy's floor.

    `delete_unverified` has the core's meaning: files no version references (left by a killed or failed
    writer) are removed even when younger than the 7-day unverified window; otherwise they are kept until
    older. Like `dry_run` it is also op config (``config: {delete_unverified: true}``). A writer between
    writing its files and committing loses them with it: run it only when no writer is at work.

    A dry run reports what it would remove as the step's output metadata (visible in the run, not only in
    logs) and records nothing on the asset; a real run reports what it removed as an observation. `dry_run`
    is also op config (``ops: {cleanup_old_versions: {config: {dry_run: true}}}``), so one job serves both.
    ``cutoff`` (op config, ISO-8601) removes the versions committed before that instant instead of those
    older than `older_than` when the step runs (never a version younger than `older_than`): the health
    sensor sets it to its tick's time minus `older_than`, so the run removes what it was requested for.
    A tagged version older than the window is kept (as ``mvcc cleanup --keep-tagged``) and the rest removed;
    the tags that kept one are the metadata ``kept_tagged_versions`` (``{tag: version}``) of the output and the
    observation, and a line of the step's log. With `error_if_tagged_old_versions` (also op config) such a tag
    fails the run instead, naming the table and the tags (nothing removed, not retried).
    Write-audit-publish branches (``dagster-wap-*``, left by failed audits) whose newest version is older than
    `older_than` are deleted first, so that their files go in the same run (``wap_branches_removed``).

    Args:
        table: An asset key (string, `AssetKey` or path parts) or a table uri.
        older_than: Versions older than this are removed (None: the table's policy, above).
        retain_versions: Keep at least the newest this many versions (None: no such floor, or the policy's).
        dry_run: The default of the op's ``dry_run`` config.
        delete_unverified: The default of the op's ``delete_unverified`` config (above).
        asset_key: The asset the observation goes to.
        name: The job's name (default ``mvcc_retention__<asset key>``).
        error_if_tagged_old_versions: The default of the op's ``error_if_tagged_old_versions`` config (above).

    Returns:
        The job (one step, in the run's process).

    Raises:
        TypeError: `delete_unverified` or `error_if_tagged_old_versions` is not a bool.
        ValueError: `older_than` negative or `retain_versions` not a positive int.
    """
    target = MaintenanceTarget(table, asset_key)
    cleanup = cleanup_op(
        target,
        older_than,
        retain_versions,
        dry_run,
        "",
        delete_unverified,
        error_if_tagged_old_versions=error_if_tagged_old_versions,
    )

    return one_step_job(
        cleanup,
        "cleanup_old_versions",
        name=name or f"mvcc_retention__{target.suffix}",
        target=target,
        description=(
            f"Retention of {target.label}: "
            + (
                f"older_than={older_than}, retain_versions={retain_versions}, "
                if older_than is not None
                else "the table's retention policy (mvcc.retention.*), "
            )
            + f"delete_unverified={delete_unverified}, error_if_tagged_old_versions={error_if_tagged_old_versions}."
        ),
        # the health sensor's "anything removable?" (no tags: it reads the table's policy, as the job does)
        tags=retention_tags(older_than, retain_versions) if older_than is not None else None,
    )
