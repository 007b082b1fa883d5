"""Backfills via restore: roll a table back to before the backfill's partitions were first written, then
recompute them.

The target, the refusal, the lock and once-per-backfill: docs/integrations/dagster/backfills.md ("Backfills via
restore").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

import mvcc_core as mvcc

from .._dagster_internals import CheckError
from ..error_mapping import no_retry_failure
from ..lineage import lineage_root
from ..metadata import RESTORE_ALLOW_DATA_LOSS, RESTORE_TAG
from ..properties import (
    ASSET_KEY_PROPERTY,
    BACKFILL_PROPERTY,
    BACKFILL_TAG,
    MAINTENANCE_PROPERTY,
    PARTITION_KEY_PROPERTY,
    PARTITION_TAG,
    RANGE_END_TAG,
    RANGE_START_TAG,
    ROOT_BACKFILL_TAG,
    RUN_ID_PROPERTY,
)
from ..versions import is_data_changing

RESTORE = "true"
"""`RESTORE_TAG` value: restore, refusing when data outside the backfill would be lost."""
RESTORE_VALUES = (RESTORE, RESTORE_ALLOW_DATA_LOSS)

UNDONE_SUFFIX = "-undone"
LOCK_PREFIX = "dagster-backfill-restore-"
LOCK_WAIT_SECONDS = 300.0
"""How long a run waits for another run of its backfill to finish the restore before failing."""
LOCK_POLL_SECONDS = 0.2
CLOCK_SKEW_SECONDS = 300.0
"""Slack when walking back the history to the backfill's creation time (writers' clocks differ)."""


class BackfillRestoreError(ValueError):
    """A backfill restore that cannot or must not happen; nothing was committed. The message names the table
    and the setting (`RESTORE_TAG`)."""


@dataclass(frozen=True)
class RestorePlan:
    """What a backfill restore of one table would do, computed from its history at `read_version`."""

    uri: str
    read_version: int
    target: int
    """The version restored: the one before `first_write`."""
    first_write: int
    """The first data-changing commit writing a partition of the backfill."""
    first_partition: str
    """The backfill partition that commit wrote (the earliest one written)."""
    never_written: list[str]
    """Partitions of the backfill no commit wrote (they are simply computed)."""
    lost: dict[str, list[int]] = field(default_factory=dict)
    """Partitions outside the backfill written after the target -> those versions."""
    lost_unpartitioned: list[str] = field(default_factory=list)
    """Data-changing commits after the target without a partition: ``"version N (Operation)"``."""
    undone_maintenance: list[int] = field(default_factory=list)
    """Maintenance commits after the target (compaction, index, config): no rows lost."""

    @property
    def loses_data(self) -> bool:
        return bool(self.lost or self.lost_unpartitioned)

    def describe_loss(self) -> str:
        parts = [f"{p} (version{'s' if len(v) > 1 else ''} {', '.join(map(str, v))})" for p, v in self.lost.items()]
        text = f"partitions {', '.join(parts)}" if parts else ""
        if self.lost_unpartitioned:
            text += ("; and " if text else "") + "commits without a partition: " + ", ".join(self.lost_unpartitioned)
        return text


def expand_partition_label(label: str, partitions_def: dg.PartitionsDefinition | None) -> set[str]:
    """The keys a ``dagster/partition_key`` property names: one key, or a range ``first...last``.

    Args:
        label: The property's value.
        partitions_def: The asset's partitions (None: the label is one key).

    Returns:
        The keys.
    """
    if "..." not in label or partitions_def is None:
        return {label}
    first, last = label.split("...", 1)
    try:
        keys = partitions_def.get_partition_keys_in_range(dg.PartitionKeyRange(first, last))
    except (dg.DagsterError, CheckError, KeyError, ValueError):  # keys not of this definition: as written
        return {label}
    return set(keys)


def run_partitions(instance: dg.DagsterInstance, partitions_def: dg.PartitionsDefinition | None) -> Callable:
    """A lookup run id -> the partition keys that run was launched for (its tags), None when unknown.

    Args:
        instance: The Dagster instance (its run storage).
        partitions_def: The asset's partitions (to expand ranges).

    Returns:
        The lookup (cached per run).
    """
    cache: dict[str, set[str] | None] = {}

    def lookup(run_id: str) -> set[str] | None:
        if run_id not in cache:
            run = instance.get_run_by_id(run_id)
            keys: set[str] | None = None
            if run is not None:
                if PARTITION_TAG in run.tags:
                    keys = {run.tags[PARTITION_TAG]}
                elif RANGE_START_TAG in run.tags and RANGE_END_TAG in run.tags:
                    keys = expand_partition_label(
                        f"{run.tags[RANGE_START_TAG]}...{run.tags[RANGE_END_TAG]}", partitions_def
                    )
            cache[run_id] = keys
        return cache[run_id]

    return lookup


def commit_partitions(
    info: mvcc.VersionInfo,
    partitions_def: dg.PartitionsDefinition | None,
    lookup_run: Callable[[str], set[str] | None] | None = None,
) -> set[str] | None:
    """The partitions a commit wrote: its ``dagster/partition_key`` property, else the partitions of the run
    named by its ``dagster/run_id`` (Dagster's run storage); None when neither tells.

    Args:
        info: The commit (`Table.versions()`' entry).
        partitions_def: The asset's partitions.
        lookup_run: Run id -> partitions (None: properties only).

    Returns:
        The partition keys, or None.
    """
    props = info.transaction_properties or {}
    label = props.get(PARTITION_KEY_PROPERTY)
    if label:
        return expand_partition_label(label, partitions_def)
    run_id = props.get(RUN_ID_PROPERTY)
    if run_id and lookup_run is not None:
        return lookup_run(run_id)
    return None


def plan_restore(
    table: mvcc.Table,
    keys: Iterable[str],
    *,
    partitions_def: dg.PartitionsDefinition | None,
    label: str,
    lookup_run: Callable[[str], set[str] | None] | None = None,
    first_materialized: int | None = None,
) -> RestorePlan:
    """The restore a backfill of `keys` needs on `table` (latest version): see the module docstring.

    `first_materialized`: the ``mvcc/version`` of the first materialization Dagster recorded for any of
    `keys` (None: unknown), used to tell a first write removed by retention. Raises `BackfillRestoreError`
    (nothing committed) when no partition of `keys` was ever written, or the target no longer exists.

    Args:
        table: The table at its latest version.
        keys: The backfill's partition keys.
        partitions_def: The asset's partitions (to expand ranges ``first...last``).
        label: The asset, for messages.
        lookup_run: Run id -> the partitions it was launched for (commits that carry only a run id).
        first_materialized: See above.

    Returns:
        The plan: the target version, the first write, and what a restore would drop or undo.

    Raises:
        BackfillRestoreError: Nothing of `keys` was ever written, or the target no longer exists.
    """
    wanted = set(keys)
    history = table.versions()
    oldest = history[0].version
    first: tuple[int, str] | None = None
    written: set[str] = set()
    for info in history:
        if info.error is not None or not is_data_changing(info.operation):
            continue
        parts = commit_partitions(info, partitions_def, lookup_run)
        hit = (parts or set()) & wanted
        if not hit:
            continue
        if info.version == 1 and table.checkout(1).count_rows() == 0:
            continue  # the IO manager's empty creation of a partitioned table: no rows written
        written |= hit
        if first is None:
            first = (info.version, min(hit))
    setting = f"run tag {RESTORE_TAG!r}"
    if first is None and first_materialized is None:
        raise BackfillRestoreError(
            f"table {label} ({table.uri}): {setting}: none of partitions {sorted(wanted)} was ever written (no "
            "commit carries them and Dagster recorded no materialization of them): there is nothing to restore. "
            f"Run the backfill without {RESTORE_TAG!r}. Nothing was committed."
        )
    if first_materialized is not None and (first is None or first_materialized < first[0]):
        if first_materialized - 1 < oldest:
            raise BackfillRestoreError(
                f"table {label} ({table.uri}): {setting}: the backfill's partitions were first written at version "
                f"{first_materialized} (their first materialization in Dagster's event log); the version before "
                f"it, {first_materialized - 1}, was removed by retention (oldest kept: {oldest}). Restore by hand "
                "to a kept version (the restore job) or run the backfill without the tag. Nothing was committed."
            )
        first = (first_materialized, first[1] if first is not None else min(wanted))
    assert first is not None
    first_write, first_partition = first
    target = first_write - 1
    if target < 1:
        raise BackfillRestoreError(
            f"table {label} ({table.uri}): {setting}: partition {first_partition} was written by version "
            f"{first_write}, the table's first version: there is no version before it to restore to. Nothing was "
            "committed."
        )
    if target < oldest:
        raise BackfillRestoreError(
            f"table {label} ({table.uri}): {setting}: the restore target, version {target} (before partition "
            f"{first_partition} was first written at version {first_write}), was removed by retention (oldest "
            f"kept: {oldest}). Nothing was committed."
        )
    lost: dict[str, list[int]] = {}
    unpartitioned: list[str] = []
    maintenance: list[int] = []
    for info in history:
        if info.version <= target:
            continue
        if info.error is None and not is_data_changing(info.operation):
            maintenance.append(info.version)
            continue
        parts = commit_partitions(info, partitions_def, lookup_run)
        if parts is None:
            unpartitioned.append(f"version {info.version} ({info.operation or 'unreadable'})")
            continue
        for p in sorted(parts - wanted):
            lost.setdefault(p, []).append(info.version)
    return RestorePlan(
        uri=table.uri,
        read_version=table.version,
        target=target,
        first_write=first_write,
        first_partition=first_partition,
        never_written=sorted(wanted - written),
        lost=dict(sorted(lost.items())),
        lost_unpartitioned=unpartitioned,
        undone_maintenance=maintenance,
    )


def find_restore(table: mvcc.Table, restore_id: str, since: float | None) -> int | None:
    """The version of the Restore made for `restore_id` (a backfill id), walking back from `table`'s version
    (not the latest: the caller writes on `table`, so a Restore found must be one that handle contains) to
    commits older than `since` (a POSIX timestamp, less `CLOCK_SKEW_SECONDS`); None if there is none.

    Args:
        table: The table, at the version the caller goes on to write on.
        restore_id: The backfill (or root run) id.
        since: When the backfill was created (None: walk the whole history).

    Returns:
        The Restore's version, or None.
    """
    limit = None if since is None else since - CLOCK_SKEW_SECONDS
    for version in range(table.version, 0, -1):
        try:
            handle = table.checkout(version)
        except mvcc.VersionNotFoundError:
            return None  # retention: nothing older is kept
        except mvcc.errors.CorruptManifestError:
            continue
        txn = handle.transaction()
        if txn is not None and txn.operation.name == mvcc.operations.Restore.name:
            marker = dict(txn.transaction_properties).get(BACKFILL_PROPERTY)
            if marker == restore_id:
                return version
            if marker == restore_id + UNDONE_SUFFIX:
                return None  # that restore was undone (see `_restore_locked`): not restored
        if limit is not None and handle.timestamp.timestamp() < limit:
            return None
    return None


@dataclass(frozen=True)
class BackfillScope:
    """Which restore a run belongs to: its id (the backfill's, else the root run's), the partitions of this
    asset it covers, and since when (to bound the history walk), and whether losing data was allowed."""

    restore_id: str
    keys: list[str]
    since: float | None
    allow_data_loss: bool


def _failure(asset: str, problem: str) -> dg.Failure:
    return no_retry_failure(f"asset {asset}: {problem}", {"asset": asset, "setting": f"run tag {RESTORE_TAG!r}"})


def backfill_scope(context: dg.OutputContext, asset: str) -> BackfillScope | None:
    """The restore this step's run asks for (None: the run has no `RESTORE_TAG`). A Failure when the tag's
    value is unknown, the asset is not partitioned, or the backfill is not in the instance.

    Args:
        context: The IO manager's output context.
        asset: The asset, for messages.

    Returns:
        The scope, or None.
    """
    run = context.step_context.dagster_run
    value = run.tags.get(RESTORE_TAG)
    if value is None:
        return None
    setting = f"run tag {RESTORE_TAG!r}"
    if value not in RESTORE_VALUES:
        raise _failure(asset, f"{setting} must be one of {list(RESTORE_VALUES)}, got {value!r}; nothing was written")
    if not context.has_asset_partitions:
        raise _failure(
            asset,
            f"{setting}: a backfill restore needs a partitioned asset (it restores to before the backfill's "
            "partitions were first written); nothing was written",
        )
    backfill_id = run.tags.get(BACKFILL_TAG)
    instance = context.step_context.instance
    if backfill_id is None:
        root = lineage_root(run)
        record = instance.get_run_record_by_id(root)
        since = record.create_timestamp.timestamp() if record is not None else None
        return BackfillScope(root, sorted(context.asset_partition_keys), since, value == RESTORE_ALLOW_DATA_LOSS)
    backfill = instance.get_backfill(backfill_id)
    if backfill is None:
        raise _failure(asset, f"{setting}: backfill {backfill_id} (tag {BACKFILL_TAG!r}) is not in the instance")
    keys = _backfill_keys(backfill, context, asset)
    # A backfill re-executed from failure is a new backfill of the failed partitions: the first backfill's
    # restore counts for it (restoring again for its partitions would undo the ones that succeeded).
    root_id = run.tags.get(ROOT_BACKFILL_TAG) or backfill_id
    root_backfill = instance.get_backfill(root_id) if root_id != backfill_id else backfill
    since = (root_backfill or backfill).backfill_timestamp
    return BackfillScope(root_id, keys, since, value == RESTORE_ALLOW_DATA_LOSS)


def _backfill_keys(backfill: Any, context: dg.OutputContext, asset: str) -> list[str]:
    """The partitions of this asset the backfill targets (asset backfill: its target subset; job backfill:
    its partition names)."""
    if not backfill.is_asset_backfill:
        return sorted(backfill.partition_names or [])
    asset_graph = context.step_context.job_def.asset_layer.asset_graph
    data = backfill.get_asset_backfill_data(asset_graph)
    key = context.asset_key
    if key not in data.target_subset.asset_keys:
        raise _failure(asset, f"run tag {RESTORE_TAG!r}: backfill {backfill.backfill_id} does not target this asset")
    return sorted(data.target_subset.get_partitions_subset(key).get_partition_keys())


def _first_materialized(instance: dg.DagsterInstance, asset_key: dg.AssetKey, keys: Sequence[str]) -> int | None:
    """The ``mvcc/version`` of the oldest materialization Dagster recorded for any of `keys`."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=list(keys)), limit=1, ascending=True
    ).records
    if not records or records[0].asset_materialization is None:
        return None
    value = records[0].asset_materialization.metadata.get("mvcc/version")
    raw = getattr(value, "value", None)
    return raw if isinstance(raw, int) else None


def restore_for_backfill(
    context: dg.OutputContext, table: mvcc.Table | None, asset: str
) -> tuple[mvcc.Table | None, dict[str, Any]]:
    """The hook `MvccIOManager.handle_output` calls before writing a partition: when the run asks for a
    backfill restore, make sure the table is restored (by this run, or already by another run of the backfill)
    and return the table to write to and the metadata to add to the materialization. Without the tag: the
    table unchanged and no metadata. Failures name the asset and the tag; nothing is committed by a refusal.

    Args:
        context: The IO manager's output context.
        table: The table (None when it does not exist yet).
        asset: The asset, for messages.

    Returns:
        The table to write to, and the metadata to add to the materialization.
    """
    scope = backfill_scope(context, asset)
    if scope is None:
        return table, {}
    setting = f"run tag {RESTORE_TAG!r}"
    if table is None:
        raise _failure(
            asset,
            f"{setting}: table does not exist: none of partitions {scope.keys} was ever written, there is "
            "nothing to restore; nothing was written",
        )
    instance = context.step_context.instance
    partitions_def = context.asset_partitions_def
    lock = LOCK_PREFIX + scope.restore_id
    meta: dict[str, Any] = {"mvcc/backfill": scope.restore_id}
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    while True:
        table = table.checkout_latest()
        done = find_restore(table, scope.restore_id, scope.since)
        if done is not None:
            return table, {**meta, "mvcc/backfill_restore_version": done}
        try:
            plan = plan_restore(
                table,
                scope.keys,
                partitions_def=partitions_def,
                label=asset,
                lookup_run=run_partitions(instance, partitions_def),
                first_materialized=_first_materialized(instance, context.asset_key, scope.keys),
            )
        except BackfillRestoreError as exc:
            raise _failure(asset, str(exc)) from exc
        if plan.loses_data and not scope.allow_data_loss:
            raise _failure(
                asset,
                f"{setting}: restoring table {table.uri} to version {plan.target} (the version before partition "
                f"{plan.first_partition} was first written, at version {plan.first_write}) would drop later writes "
                f"outside the backfill: {plan.describe_loss()}. Nothing was committed. Add those partitions to the "
                f"backfill, or set {RESTORE_TAG}={RESTORE_ALLOW_DATA_LOSS} to drop them.",
            )
        try:
            table.tags.create(lock, plan.target)
        except mvcc.errors.TagError:
            context.log.info(
                "%s: another run of backfill %s holds the table tag %s; waiting", asset, scope.restore_id, lock
            )
            _wait_for_unlock(table, lock, deadline, asset)
            continue
        try:
            restored = _restore_locked(context, table, plan, scope, asset)
        finally:
            table.tags.delete(lock)
        if restored is None:  # the history moved while planning: plan again, for a bounded time
            if time.monotonic() > deadline:
                raise _failure(
                    asset,
                    f"{setting}: table {table.uri} kept changing for {LOCK_WAIT_SECONDS:.0f} s while the backfill "
                    "planned its restore; nothing was committed. Re-run when the other writers are done.",
                )
            continue
        if plan.loses_data:
            context.log.warning("%s: backfill restore dropped %s", asset, plan.describe_loss())
        return restored, {
            **meta,
            "mvcc/backfill_restore_version": restored.version,
            "mvcc/restored_from": plan.target,
            "mvcc/backfill_first_write": plan.first_write,
            "mvcc/backfill_partitions": dg.MetadataValue.json(scope.keys),
            "mvcc/dropped": plan.describe_loss(),
            "mvcc/undone_maintenance": dg.MetadataValue.json(plan.undone_maintenance),
        }


def _wait_for_unlock(table: mvcc.Table, lock: str, deadline: float, asset: str) -> None:
    while time.monotonic() < deadline:
        try:
            table.tags.get_version(lock)
        except mvcc.errors.CorruptTagError:
            pass  # the lock's file is there, so it is held, even if it does not read
        except mvcc.errors.TagError:
            return
        time.sleep(LOCK_POLL_SECONDS)
    raise _failure(
        asset,
        f"run tag {RESTORE_TAG!r}: waited {LOCK_WAIT_SECONDS:.0f} s for another run of the backfill to restore "
        f"table {table.uri} (it holds the table tag {lock!r}). If that run died, delete the tag (the tag job or "
        "`mvcc tag delete`) and re-run. Nothing was written.",
    )


def _restore_locked(
    context: dg.OutputContext, table: mvcc.Table, plan: RestorePlan, scope: BackfillScope, asset: str
) -> mvcc.Table | None:
    """Under the lock: commit the Restore if the history is still the one planned (None: it moved)."""
    latest = table.checkout_latest()
    if find_restore(latest, scope.restore_id, scope.since) is not None or latest.version != plan.read_version:
        return None
    # The Restore is labelled with the backfill's partitions: it reverted those (and, without data loss, only
    # those), so a later backfill's plan counts it as a write of them, not as a loss.
    label = scope.keys[0] if len(scope.keys) == 1 else f"{scope.keys[0]}...{scope.keys[-1]}"
    properties = {
        RUN_ID_PROPERTY: context.run_id,
        ASSET_KEY_PROPERTY: asset,
        PARTITION_KEY_PROPERTY: label,
        BACKFILL_PROPERTY: scope.restore_id,
        MAINTENANCE_PROPERTY: "backfill-restore",
    }
    latest.restore(
        plan.target,
        commit_message=f"dagster: backfill {scope.restore_id} of {asset}: restore to version {plan.target}",
        transaction_properties=properties,
    )
    slipped = [v for v in range(plan.read_version + 1, latest.version) if _changes_data(latest, v)]
    if slipped and not scope.allow_data_loss:
        # A writer outside the backfill committed between the check and the Restore (Restore lands over any
        # concurrent commit): put its data back with one more Restore and fail, naming it.
        latest.restore(
            latest.version - 1,
            commit_message=f"dagster: backfill {scope.restore_id} of {asset}: undo the restore (versions {slipped} "
            "were committed concurrently)",
            transaction_properties={**properties, BACKFILL_PROPERTY: scope.restore_id + UNDONE_SUFFIX},
        )
        raise _failure(
            asset,
            f"run tag {RESTORE_TAG!r}: versions {slipped} of table {latest.uri} were committed while the backfill "
            "restored it; the restore was undone (a second Restore) so they are kept. Re-run the backfill.",
        )
    return latest


def _changes_data(table: mvcc.Table, version: int) -> bool:
    try:
        txn = table.transaction(version)
    except (mvcc.VersionNotFoundError, mvcc.errors.CorruptManifestError):
        return True
    return is_data_changing(txn.operation.name if txn is not None else None)
