"""Operators for the maintenance of one mvcc table: compaction, indices, cleanup, restore, tags.

Each takes `table` (a name under the `mvcc` connection's root uri, or a full uri) and `mvcc_conn_id`, and
returns through XCom ``{"table", "version", "operation", "metrics"}`` (JSON; docs/integrations/airflow/index.md).
Unless the DAG or the task says otherwise they retry 4 times with exponential backoff (`DEFAULT_RETRY_ARGS`),
which is what a `RetryableConflictError` uses; what would fail again fails at once (`utils/conflicts.py`).
Compaction and retention follow the table's policy for what they are not told; with ``when_advised=True`` a
step is skipped when it has nothing to do. Only `MvccRestoreOperator` changes the table's data, so only it has
the table's asset as outlet by default; every operator given `outlets` emits asset events whose ``extra``
carries ``mvcc/version``, ``mvcc/operation`` and the table's health figures after the task (`utils/health.py`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

import mvcc_core as mvcc
from mvcc_core.durations import parse_duration

from ..assets.mvcc import table_asset
from ..hooks.mvcc import DEFAULT_CONN_ID
from ..utils import compaction_calls
from ..utils.conflicts import mvcc_errors
from ..utils.health import advice_of, kinds_of
from ..utils.task_results import airflow_properties, task_result
from .base import MvccBaseOperator

# The table's retention policy keys (docs/operations/maintenance.md), read only to say which setting applied.
_OLDER_THAN_KEY = "mvcc.retention.older_than"
_RETAIN_KEY = "mvcc.retention.retain_versions"

__all__ = [
    "MvccCleanupOperator",
    "MvccCompactOperator",
    "MvccCreateIndexOperator",
    "MvccOptimizeIndicesOperator",
    "MvccRestoreOperator",
    "MvccTagOperator",
    "tagged_text",
    "to_duration",
    "to_timestamp",
]


class MvccCompactOperator(MvccBaseOperator):
    """Compaction in one task: plan (ReserveFragments), rewrite and commit (`compact_files`).

    Every option not given follows the table's policy (its ``mvcc.compaction.*`` configuration keys: target,
    budget, layout), then the core's defaults, as ``t.optimize.compact_files()`` does. A lost Rewrite (a concurrent
    delete of a rewritten fragment) removes what it wrote and fails the try; the next try plans again on the new
    version. With `partial_progress` the finished groups land in up to `max_commits` Rewrites and a group that
    loses is planned again once, then dropped and reported (``metrics["conflicted_groups"]``, ``["conflicts"]``),
    never the whole run (when every group is dropped and nothing landed, the try fails and a retry plans
    again). With no table there yet the task is skipped ("nothing to maintain"), as are the tasks
    after it; with `when_advised` it is skipped too when compaction has nothing to rewrite.

    Args:
        table: A table name under the connection's root uri, or a full uri.
        options: The core's `CompactionOptions` as a dict (e.g. ``{"target_rows_per_fragment": 1_000_000}``).
        where: Scope: a SQL filter; only fragments whose statistics may hold a matching row are rewritten.
        sort_by: Layout: rewrite every fragment in scope sorted by these columns (a list, or ``"a,b"``).
        zorder_by: Layout: rewrite every fragment in scope in z-order of these 2 to 4 columns.
        max_bytes: Budget: about this many on-disk bytes of input at most (an int or a size such as ``"512MiB"``);
            the rest is left for the next run (``metrics["deferred_bytes"]``).
        partial_progress: Commit finished groups as they complete; a conflict costs only its own group.
        max_commits: With `partial_progress`: the most Rewrites (None: 10).
        when_advised: Skip the task (and, by their trigger rules, the tasks after it) when a compaction with
            these options would rewrite nothing (the core's plan, nothing committed).
        mvcc_conn_id: The Airflow connection of type ``mvcc``.
        **kwargs: `BaseOperator`'s arguments.
    """

    template_fields: Sequence[str] = ("table", "where", "sort_by", "zorder_by", "max_bytes")

    def __init__(
        self,
        *,
        table: str,
        options: Mapping[str, Any] | None = None,
        where: str | None = None,
        sort_by: Sequence[str] | str | None = None,
        zorder_by: Sequence[str] | str | None = None,
        max_bytes: int | str | None = None,
        partial_progress: bool = False,
        max_commits: int | None = None,
        when_advised: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, **kwargs)
        # bad options fail the DAG file's import, naming the argument
        compaction_calls.compaction_fields(
            options, where=where, sort_by=sort_by, zorder_by=zorder_by, max_bytes=max_bytes
        )
        self.options = dict(options) if options else None
        self.where = where
        self.sort_by = list(sort_by) if isinstance(sort_by, list | tuple) else sort_by
        self.zorder_by = list(zorder_by) if isinstance(zorder_by, list | tuple) else zorder_by
        self.max_bytes = max_bytes
        self.partial_progress = _flag(partial_progress, "partial_progress", self.task_id)
        if max_commits is not None and not partial_progress:
            raise ValueError(
                f"{self.task_id}: max_commits bounds the Rewrites of partial progress: give partial_progress=True too"
            )
        if max_commits is not None and (
            isinstance(max_commits, bool) or not isinstance(max_commits, int) or max_commits < 1
        ):
            raise ValueError(f"{self.task_id}: max_commits must be a positive integer, got {max_commits!r}")
        self.max_commits = max_commits
        self.when_advised = _flag(when_advised, "when_advised", self.task_id)

    def fields(self) -> dict[str, Any]:
        """The `CompactionOptions` fields this task gives the core (rendered); the others follow the table's policy.

        Raises:
            AirflowFailException: a rendered value is not valid (naming the argument).
        """
        try:
            fields = compaction_calls.compaction_fields(
                self.options,
                where=self.where or None,
                sort_by=self.sort_by or None,
                zorder_by=self.zorder_by or None,
                max_bytes=None if self.max_bytes in (None, "", "None") else self.max_bytes,
            )
            return compaction_calls.rendered_fields(fields)
        except ValueError as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from None

    def execute(self, context: Context) -> dict[str, Any]:
        """Compact the table.

        Args:
            context: the Airflow task context

        Returns:
            ``{"table", "version", "operation": "Rewrite" (None when nothing needed it), "metrics"}``.

        Raises:
            AirflowSkipException: No table yet, or `when_advised` and nothing to rewrite.
        """
        fields = self.fields()
        t = self.open_to_maintain()  # skipped when no table is there yet
        with mvcc_errors(f"compaction of {t.uri}"):
            if self.when_advised and not compaction_calls.would_compact(t, fields):
                raise AirflowSkipException(f"{t.uri} version {t.version}: no compaction advised (nothing to rewrite)")
            metrics, t = compaction_calls.compact(
                t,
                fields,
                message=f"airflow: compaction of {self.table}",
                properties=airflow_properties(context, "compaction"),
                partial_progress=self.partial_progress,
                max_commits=self.max_commits,
            )
        self.log.info("%s: %s", t.uri, metrics)
        if metrics["conflicted_groups"]:
            self.log.warning(
                "%s: %d group(s) lost to concurrent commits and were dropped (fragments %s): %s",
                t.uri,
                len(metrics["conflicted_groups"]),
                metrics["conflicted_groups"],
                metrics["conflicts"],
            )
            if metrics["version"] is None:  # nothing landed: a retry plans again on the new version
                raise AirflowException(
                    f"compaction of {t.uri}: every group lost to a concurrent commit, even after planning again; "
                    "nothing was committed (the files written were removed)"
                )
        operation = mvcc.operations.Rewrite.name if metrics["version"] is not None else None
        self.set_asset_extras(context, t, operation)
        return task_result(t, operation, metrics)


def _flag(value: Any, name: str, task_id: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{task_id}: {name} must be True or False, got {value!r}")
    return value


class MvccCreateIndexOperator(MvccBaseOperator):
    """A scalar index (BTREE or BITMAP) on a column over every fragment (one CreateIndex).

    Args:
        table: A table name under the connection's root uri, or a full uri.
        column: The column to index.
        index_type: ``"BTREE"`` or ``"BITMAP"``.
        replace: Replace an index of the same name (``{column}_idx``); False fails when it exists.
        mvcc_conn_id: The Airflow connection of type ``mvcc``.
        **kwargs: `BaseOperator`'s arguments.
    """

    template_fields: Sequence[str] = ("table", "column")

    def __init__(
        self, *, table: str, column: str, index_type: str = "BTREE", replace: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(table=table, **kwargs)
        if not isinstance(column, str) or not column:
            raise ValueError(f"{self.task_id}: column must be a column name, got {column!r}")
        self.column = column
        self.index_type = index_type
        self.replace = replace

    def execute(self, context: Context) -> dict[str, Any]:
        """Build and commit the index.

        Args:
            context: the Airflow task context

        Returns:
            ``{"table", "version", "operation": "CreateIndex", "metrics": {"index", "column", "index_type"}}``.
        """
        t = self.open()
        with mvcc_errors(f"index on {t.uri} column {self.column!r}"):
            t.create_index(
                self.column,
                self.index_type,
                replace=self.replace,
                commit_message=f"airflow: index on {self.column}",
                transaction_properties=airflow_properties(context, "create_index"),
            )
        name = f"{self.column}_idx"
        return task_result(
            t,
            mvcc.operations.CreateIndex.name,
            {"index": name, "column": self.column, "index_type": self.index_type.upper()},
        )


class MvccOptimizeIndicesOperator(MvccBaseOperator):
    """Bring fragments added or rewritten since each index was built into it (one CreateIndex for all).

    With no table there yet the task is skipped ("nothing to maintain"); with `when_advised` it is skipped too
    unless the core's advice on the latest version names ``optimize_indices`` (an index misses fragments).

    Args:
        table: A table name under the connection's root uri, or a full uri.
        when_advised: Skip the task unless an index misses fragments.
        mvcc_conn_id: The Airflow connection of type ``mvcc``.
        **kwargs: `BaseOperator`'s arguments.
    """

    def __init__(self, *, table: str, when_advised: bool = False, **kwargs: Any) -> None:
        super().__init__(table=table, **kwargs)
        self.when_advised = _flag(when_advised, "when_advised", self.task_id)

    def execute(self, context: Context) -> dict[str, Any]:
        """Optimize the indices.

        Args:
            context: the Airflow task context

        Returns:
            ``{"table", "version", "operation": "CreateIndex" (None when no index changed),
            "metrics": {"indices_updated"}}``.

        Raises:
            AirflowSkipException: No table yet, or `when_advised` and every index covers every fragment.
        """
        t = self.open_to_maintain()  # skipped when no table is there yet
        with mvcc_errors(f"index optimization of {t.uri}"):
            if self.when_advised and "optimize_indices" not in kinds_of(advice_of(t)):
                raise AirflowSkipException(f"{t.uri} version {t.version}: no index optimization advised")
            count = t.optimize.optimize_indices(
                commit_message="airflow: optimize indices",
                transaction_properties=airflow_properties(context, "optimize_indices"),
            )
        operation = mvcc.operations.CreateIndex.name if count else None
        self.set_asset_extras(context, t, operation)
        return task_result(t, operation, {"indices_updated": count})


def to_duration(value: timedelta | str, name: str = "older_than") -> timedelta:
    """A timedelta from a timedelta or a duration string in the `mvcc` CLI's words ("7d", "12h", "1w2d", "0s").

    Args:
        value: the operator's argument
        name: the argument's name, for the error

    Raises:
        ValueError: Naming `name` when the value is no duration or is negative.
    """
    if isinstance(value, timedelta):
        delta = value
    elif isinstance(value, str):
        try:
            delta = parse_duration(value)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
    else:
        raise ValueError(f"{name} must be a timedelta or a duration such as '7d', got {value!r}")
    if delta < timedelta(0):
        raise ValueError(f"{name} must not be negative, got {value!r}")
    return delta


class MvccCleanupOperator(MvccBaseOperator):
    """Remove old versions and the files only they use; a DRY RUN unless ``dry_run=False`` (as the CLI).

    `older_than` and `retain_versions` not given follow the table's retention policy (its
    ``mvcc.retention.older_than`` and ``mvcc.retention.retain_versions`` configuration keys), then 14 days and
    no floor, as ``t.cleanup_old_versions()`` does; ``metrics["retention"]`` says which applied. The latest and
    tagged versions are always kept: a tagged version older than `older_than` is kept and the
    rest removed (as ``mvcc cleanup --keep-tagged``); the task's log and return value name the tags that kept
    one (``metrics["kept_tagged_versions"]``, ``{tag: version}``). With ``error_if_tagged_old_versions=True``
    such a tag fails the task instead, naming the tags (nothing removed, not retried). Nothing is committed, so
    no asset event is emitted unless the task is given `outlets`. With no table there yet the task is skipped
    ("nothing to maintain"); with `when_advised` it is skipped too when no version would go (under the policy:
    the core's advice names no ``retention``; with arguments: a dry run removes nothing).

    Args:
        table: A table name under the connection's root uri, or a full uri.
        older_than: Versions older than this go: a timedelta or a duration string such as ``"7d"`` (None: the
            table's policy, else 14 days).
        retain_versions: Keep at least the newest N versions (None: the table's policy, else no floor).
        dry_run: Only report what would go (the default).
        error_if_tagged_old_versions: Fail on a tagged version older than `older_than` instead of keeping it.
        when_advised: Skip the task when no version would be removed.
        mvcc_conn_id: The Airflow connection of type ``mvcc``.
        **kwargs: `BaseOperator`'s arguments.
    """

    # The argument, kept under its own name as every operator keeps its arguments. It hides
    # `BaseOperator.dry_run()`, a method that renders the template fields and that nothing in Airflow 3.3 calls.
    dry_run: bool  # type: ignore[assignment]

    def __init__(
        self,
        *,
        table: str,
        older_than: timedelta | str | None = None,
        retain_versions: int | None = None,
        dry_run: bool = True,
        error_if_tagged_old_versions: bool = False,
        when_advised: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, **kwargs)
        self.older_than = None if older_than is None else to_duration(older_than)
        if retain_versions is not None and (
            isinstance(retain_versions, bool) or not isinstance(retain_versions, int) or retain_versions < 1
        ):
            raise ValueError(f"{self.task_id}: retain_versions must be a positive integer, got {retain_versions!r}")
        self.retain_versions = retain_versions
        self.dry_run = bool(dry_run)
        if not isinstance(error_if_tagged_old_versions, bool):
            raise ValueError(
                f"{self.task_id}: error_if_tagged_old_versions must be True or False, got "
                f"{error_if_tagged_old_versions!r}"
            )
        self.error_if_tagged_old_versions = error_if_tagged_old_versions
        self.when_advised = _flag(when_advised, "when_advised", self.task_id)

    def _due(self, table: mvcc.Table) -> bool:
        """Whether the cleanup would remove a version now (manifests and a listing; nothing removed)."""
        if self.older_than is None and self.retain_versions is None:
            return "retention" in kinds_of(advice_of(table))
        stats = table.cleanup_old_versions(
            self.older_than, self.retain_versions, error_if_tagged_old_versions=False, dry_run=True
        )
        return bool(stats.removed_versions)

    def _setting(self, table: mvcc.Table) -> dict[str, Any]:
        """The retention setting that applied, each value with where it came from: the argument, the table's
        policy or the default."""
        config = table.config

        def source(given: Any, key: str) -> str:
            return "argument" if given is not None else ("table policy" if key in config else "default")

        return {
            "older_than": str(self.older_than) if self.older_than is not None else config.get(_OLDER_THAN_KEY, "14d"),
            "older_than_from": source(self.older_than, _OLDER_THAN_KEY),
            "retain_versions": self.retain_versions if self.retain_versions is not None else config.get(_RETAIN_KEY),
            "retain_versions_from": source(self.retain_versions, _RETAIN_KEY),
        }

    def execute(self, context: Context) -> dict[str, Any]:
        """Clean up (or report what would go).

        Args:
            context: the Airflow task context

        Returns:
            ``{"table", "version" (the latest, unchanged), "operation": "cleanup" or "cleanup (dry run)",
            "metrics": the core's CleanupStats plus "dry_run" and "kept_tagged_versions"}``.

        Raises:
            AirflowFailException: `error_if_tagged_old_versions` and a tagged version older than `older_than`
                (nothing removed), or the table opens at an older version than its newest after the cleanup.
        """
        t = self.open_to_maintain()  # skipped when no table is there yet
        kept: dict[str, int] = {}
        with mvcc_errors(f"cleanup of {t.uri}"):
            if self.when_advised and not self._due(t):
                raise AirflowSkipException(f"{t.uri} version {t.version}: no retention advised (no version would go)")
            try:
                stats = t.cleanup_old_versions(self.older_than, self.retain_versions, dry_run=self.dry_run)
            except mvcc.errors.TagError as exc:
                if not exc.tags:
                    raise
                kept = {str(name): int(version) for name, version in exc.tags.items()}
                if self.error_if_tagged_old_versions:
                    raise AirflowFailException(
                        f"cleanup of {t.uri}: tagged versions older than older_than={self._setting(t)['older_than']}: "
                        f"{tagged_text(kept)}; nothing was removed, since error_if_tagged_old_versions=True (pass "
                        "False to keep them and remove the rest, or delete those tags first)"
                    ) from exc
                stats = t.cleanup_old_versions(
                    self.older_than, self.retain_versions, error_if_tagged_old_versions=False, dry_run=self.dry_run
                )
        metrics = {**dataclasses.asdict(stats), "dry_run": self.dry_run, "kept_tagged_versions": kept}
        metrics["bad_tags"] = [list(pair) for pair in stats.bad_tags]
        metrics["retention"] = self._setting(t)
        if kept:
            self.log.info(
                "%s: kept tagged versions older than %s: %s", t.uri, self._setting(t)["older_than"], tagged_text(kept)
            )
        self.log.info("%s%s: %s", t.uri, " (dry run)" if self.dry_run else "", metrics)
        if kept and not self.dry_run and stats.removed_versions:
            self._check_latest(t, kept)
        operation = "cleanup (dry run)" if self.dry_run else "cleanup"
        self.set_asset_extras(context, t, operation)
        return task_result(t, operation, metrics)

    def _check_latest(self, table: mvcc.Table, kept: dict[str, int]) -> None:
        """The cleanup kept tagged versions and left gaps in the version numbers: the table, opened anew, must
        still find its newest version, or the next commit would build on an older one; fail saying so."""
        listed = max(v.version for v in table.versions())
        found = self.open().version
        if found != listed:
            raise AirflowFailException(
                f"cleanup of {table.uri}: after keeping tagged versions {tagged_text(kept)}, opening the table "
                f"finds version {found} as its latest, not {listed}: a commit now would build on version {found}. "
                "Do not write to the table until this is resolved (the core's latest-version lookup on a local "
                "disk stops at the gap left below a kept tagged version)"
            )


def tagged_text(tags: dict[str, int]) -> str:
    """Tags in words, oldest version first: ``release-1 (version 3), audit (version 5)``.

    Args:
        tags: ``{tag: version}``.

    Returns:
        The words.
    """
    return ", ".join(f"{name} (version {v})" for name, v in sorted(tags.items(), key=lambda kv: (kv[1], kv[0])))


def to_timestamp(value: datetime | str) -> datetime:
    """A timezone-aware datetime from a datetime or an ISO-8601 string (UTC when it names no zone).

    Args:
        value: the operator's argument

    Raises:
        ValueError: a string that is not an ISO-8601 time
    """
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"timestamp: not an ISO-8601 time: {value!r}") from None
    if not isinstance(value, datetime):
        raise ValueError(f"timestamp must be a datetime or an ISO-8601 string, got {value!r}")
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _given(value: Any) -> bool:
    return value is not None and value != ""


class MvccRestoreOperator(MvccBaseOperator):
    """Make an earlier version the latest again (one Restore; history is kept). Emits the table's asset event.

    Exactly one of `version`, `tag` and `timestamp` (all templated, so they can come from DAG `params`;
    with ``render_template_as_native_obj=True`` an unset param stays None).

    Args:
        table: A table name under the connection's root uri, or a full uri.
        version: The version number to restore.
        tag: The tag whose version to restore.
        timestamp: Restore the version that was current at this time (datetime or ISO-8601 string).
        mvcc_conn_id: The Airflow connection of type ``mvcc``.
        **kwargs: `BaseOperator`'s arguments.
    """

    template_fields: Sequence[str] = ("table", "version", "tag", "timestamp")
    ui_color = "#ffd8a8"

    def __init__(
        self,
        *,
        table: str,
        version: int | str | None = None,
        tag: str | None = None,
        timestamp: datetime | str | None = None,
        mvcc_conn_id: str = DEFAULT_CONN_ID,
        **kwargs: Any,
    ) -> None:
        if "outlets" not in kwargs and "{{" not in table:
            kwargs["outlets"] = [table_asset(table, mvcc_conn_id=mvcc_conn_id)]
        super().__init__(table=table, mvcc_conn_id=mvcc_conn_id, **kwargs)
        if sum(_given(v) for v in (version, tag, timestamp)) != 1 and not any(
            isinstance(v, str) and "{{" in v for v in (version, tag, timestamp)
        ):
            raise ValueError(f"{self.task_id}: give exactly one of version, tag and timestamp")
        self.version = version
        self.tag = tag
        self.timestamp = timestamp

    def reference(self) -> int | str | datetime:
        """The version reference the (rendered) arguments name.

        Raises:
            AirflowFailException: Not exactly one is given, or the version is not a number.
        """
        given = {n: v for n, v in (("version", self.version), ("tag", self.tag), ("timestamp", self.timestamp))}
        chosen = {n: v for n, v in given.items() if _given(v) and v != "None"}
        if len(chosen) != 1:
            raise AirflowFailException(f"{self.task_id}: give exactly one of version, tag and timestamp; got {given}")
        ((name, value),) = chosen.items()
        try:
            if name == "version":
                if isinstance(value, bool) or not str(value).strip().isdigit():
                    raise ValueError(f"version must be a version number, got {value!r}")
                return int(str(value))
            if name == "timestamp":
                if not isinstance(value, datetime | str):
                    raise ValueError(f"timestamp must be a datetime or an ISO-8601 string, got {value!r}")
                return to_timestamp(value)
            return str(value)
        except ValueError as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from None

    def execute(self, context: Context) -> dict[str, Any]:
        """Restore and emit the asset event.

        Args:
            context: the Airflow task context

        Returns:
            ``{"table", "version" (the Restore's), "operation": "Restore", "metrics": {"restored_version"}}``.
        """
        ref = self.reference()
        t = self.open()
        with mvcc_errors(f"restore of {t.uri} to {ref!r}"):
            restored = t.checkout(ref).version
            t.restore(
                restored,
                commit_message=f"airflow: restore to version {restored}",
                transaction_properties=airflow_properties(context, "restore"),
            )
        self.set_asset_extras(context, t, mvcc.operations.Restore.name)
        return task_result(t, mvcc.operations.Restore.name, {"restored_version": restored})


class MvccTagOperator(MvccBaseOperator):
    """Tag a version (default: the latest). An existing tag of that name fails the task.

    Args:
        table: A table name under the connection's root uri, or a full uri.
        tag: The tag's name.
        version: The version to tag; None for the latest.
        mvcc_conn_id: The Airflow connection of type ``mvcc``.
        **kwargs: `BaseOperator`'s arguments.
    """

    template_fields: Sequence[str] = ("table", "tag", "version")

    def __init__(self, *, table: str, tag: str, version: int | str | None = None, **kwargs: Any) -> None:
        super().__init__(table=table, **kwargs)
        if not isinstance(tag, str) or not tag:
            raise ValueError(f"{self.task_id}: tag must be a tag name, got {tag!r}")
        self.tag = tag
        self.version = version

    def execute(self, context: Context) -> dict[str, Any]:
        """Create the tag.

        Args:
            context: the Airflow task context

        Returns:
            ``{"table", "version" (the latest), "operation": "tag", "metrics": {"tag", "tagged_version"}}``.
        """
        t = self.open()
        with mvcc_errors(f"tag {self.tag!r} of {t.uri}"):
            target = t.version if self.version in (None, "", "None") else int(self.version)
            t.tags.create(self.tag, target)
        return task_result(t, "tag", {"tag": self.tag, "tagged_version": target})
