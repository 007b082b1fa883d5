"""Write-audit-publish: an asset's materialization written to a branch named after the run, audited there by
its blocking checks, and published to main only when they all pass (docs/guide/write_audit_publish.md).

Turned on per asset by the definition metadata ``mvcc/write_audit_publish: true``; `MvccIOManager` then
calls `write_audit_publish` instead of writing to main. The audits are the asset's own checks
(``@dg.asset(check_specs=[...])``) made with `branch_check`, evaluated in the asset's step against the
branch version, before the publish; the asset's body yields its output with `audited_output`, which hands the
results back to Dagster.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg
import pyarrow as pa

import mvcc_core as mvcc

from .._dagster_internals import check_evaluation_event, selected_check_specs, separate_check_specs
from ..error_mapping import fresh_branch_retry, no_retry_failure
from ..metadata import BRANCH, BRANCH_VERSION, CATALOG_BRANCH_VERSION, WAP_BRANCH_PREFIX, WRITE_AUDIT_PUBLISH

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class BranchAudit:
    """What a branch check sees: the materialization on its branch, before anything reaches main.

    Attributes:
        table: The table on the branch, at the version the step wrote.
        branch: The branch's name.
        partition_filter: The written partitions' predicate (None: unpartitioned, or an append / merge).
        partition_keys: The partitions the step wrote (empty when unpartitioned).
        catalog: A catalog asset's: the catalog branch's snapshot the checks read (every table of the catalog
            as the step leaves it: ``audit.catalog.table("sales.customers")``); None for a table asset.
        catalog_version: A catalog asset's: that snapshot's catalog version on the branch.
    """

    table: mvcc.Table
    branch: str
    partition_filter: str | None = None
    partition_keys: tuple[str, ...] = ()
    catalog: Any = None
    catalog_version: int | None = None

    def rows(self, columns: list[str] | None = None) -> pa.Table:
        """The rows the step wrote: the written partitions' rows, or the whole table on the branch.

        Args:
            columns: The columns to read (None: all).

        Returns:
            The rows.
        """
        return self.table.to_table(columns=columns, filter=self.partition_filter)


AuditFunction = Callable[[BranchAudit], dg.AssetCheckResult | bool]


@dataclass(frozen=True)
class BranchCheck:
    """An asset check evaluated on the write-audit-publish branch: put `spec` in the asset's ``check_specs``.

    Attributes:
        spec: The check's spec (blocking unless made with ``blocking=False``).
        audit: The function evaluating it.
    """

    spec: dg.AssetCheckSpec
    audit: AuditFunction = field(repr=False)


_BRANCH_CHECKS: dict[dg.AssetCheckKey, BranchCheck] = {}
# (run id, asset) -> the branch checks' results of the step's publish; present (None) while `audited_output`
# drives the step, filled by the IO manager after the publish.
_STEP_RESULTS: dict[tuple[str, str], list[dg.AssetCheckResult] | None] = {}


def branch_check(
    asset: str | dg.AssetKey | list[str],
    *,
    name: str | None = None,
    description: str | None = None,
    blocking: bool = True,
) -> Callable[[AuditFunction], BranchCheck]:
    """Make a function of a `BranchAudit` into a check of a write-audit-publish asset.

    The function returns an `AssetCheckResult` (its ``asset_key`` and ``check_name`` may be left out) or a
    bool. It runs in the asset's step, after the write to the branch and before the publish; a failed
    blocking check (severity ERROR) stops the publish::

        @branch_check("orders")
        def amounts_non_negative(audit: BranchAudit) -> dg.AssetCheckResult:
            bad = audit.table.count_rows("amount < 0")
            return dg.AssetCheckResult(passed=bad == 0, metadata={"negative_rows": bad})

        @dg.asset(metadata={WRITE_AUDIT_PUBLISH: True}, check_specs=[amounts_non_negative.spec])
        def orders(context: dg.AssetExecutionContext):
            yield from audited_output(context, rows)

    Args:
        asset: The asset the check belongs to.
        name: The check's name (default: the function's).
        description: The check's description (default: the function's docstring).
        blocking: Whether a failure stops the publish (and so downstream assets).

    Returns:
        A decorator returning the `BranchCheck`.
    """

    def decorate(fn: AuditFunction) -> BranchCheck:
        spec = dg.AssetCheckSpec(
            name or fn.__name__,
            asset=asset,
            description=description if description is not None else (fn.__doc__ or "").strip() or None,
            blocking=blocking,
            metadata={WRITE_AUDIT_PUBLISH: True},
        )
        made = BranchCheck(spec=spec, audit=fn)
        _BRANCH_CHECKS[spec.key] = made
        return made

    return decorate


def audited_output(
    context: dg.AssetExecutionContext, value: Any, *, output_name: str | None = None
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Yield a write-audit-publish asset's output, then its branch checks' results: the asset's body ends with
    ``yield from audited_output(context, rows)``; a `multi_asset` yields each output so, naming it
    (``yield from audited_output(context, rows, output_name="orders")``).

    Dagster needs every check of ``check_specs`` reported by the asset's body; the branch checks are evaluated
    by `MvccIOManager` while it stores the output (on the branch, before the publish), so their results come
    back here after it. When a blocking one failed the IO manager fails the step itself, and nothing follows.
    Each output of a `multi_asset` is its own table, so it has its own branch, audit and publish, in the
    order the body yields them: an output published before another output's blocking check fails stays
    published (as any output Dagster stored before a step failed).

    Args:
        context: The asset's execution context.
        value: The output (anything `MvccIOManager` stores).
        output_name: The output (a `multi_asset`'s; None: the asset's only output). An output this run did
            not select (a subset of a ``can_subset`` multi_asset) yields nothing.

    Yields:
        The `Output`, then one `AssetCheckResult` per branch check.

    Raises:
        dagster.Failure: The asset does not have ``mvcc/write_audit_publish: true`` (before anything is written),
            its IO manager is not `MvccIOManager` (after that IO manager stored the output), or `output_name`
            is missing in a multi_asset or not one of its outputs.
    """
    assets_def = context.assets_def
    outputs = sorted(assets_def.node_keys_by_output_name)  # every output, selected in this run or not
    if output_name is None:
        if len(outputs) > 1:
            raise no_retry_failure(
                f"audited_output: {assets_def.node_def.name} has several outputs ({outputs}): name the one "
                "yielded (output_name=...)",
                {"outputs": ", ".join(outputs)},
            )
        output_name = outputs[0]
    elif output_name not in outputs:
        raise no_retry_failure(
            f"audited_output: {assets_def.node_def.name} has no output {output_name!r} (its outputs: {outputs})",
            {"output": output_name},
        )
    if output_name not in assets_def.keys_by_output_name:
        return  # not selected in this run: Dagster refuses an output it did not ask for
    asset_key = assets_def.keys_by_output_name[output_name]
    asset = asset_key.to_user_string()
    if not wap_enabled(assets_def.metadata_by_key.get(asset_key, {}), asset):
        raise no_retry_failure(
            f"asset {asset}: audited_output needs the metadata {WRITE_AUDIT_PUBLISH}: true (and MvccIOManager)",
            {"asset": asset},
        )
    key = (context.run.run_id, asset)
    _STEP_RESULTS[key] = None
    try:
        yield dg.Output(value, output_name=output_name)
        results = _STEP_RESULTS.get(key)
    finally:
        _STEP_RESULTS.pop(key, None)
    if results is None:
        raise no_retry_failure(
            f"asset {asset}: its output was not written by MvccIOManager (io_manager_key), so no branch was "
            "written, audited or published",
            {"asset": asset},
        )
    yield from results


def registered_branch_check(key: dg.AssetCheckKey) -> BranchCheck | None:
    """The branch check made with `branch_check` for `key`, or None (a check of another kind).

    Args:
        key: The check's key.

    Returns:
        The branch check, or None.
    """
    return _BRANCH_CHECKS.get(key)


def check_write_audit_publish(defs: dg.Definitions) -> dg.Definitions:
    """Refuse, when the code location loads, a blocking check on a write-audit-publish asset that is not a
    `branch_check`: such a check (a separate ``@dg.asset_check(asset=..., blocking=True)``, or a plain
    ``AssetCheckSpec`` in the asset's ``check_specs``) is evaluated after the asset's step, so after the
    publish, and could not keep bad rows off main. `MvccIOManager` refuses it too, in the step before anything
    is written; this check says so at load, before any run::

        defs = check_write_audit_publish(dg.Definitions(assets=[...], asset_checks=[...], resources=...))

    Args:
        defs: The code location's definitions.

    Returns:
        `defs`, unchanged.

    Raises:
        dagster.DagsterInvalidDefinitionError: A blocking check on an asset with
            ``mvcc/write_audit_publish: true`` is not a branch check (every one named), or the metadata value
            is not a bool.
    """
    graph = defs.resolve_asset_graph()
    refused = []
    for key in sorted(graph.asset_check_keys, key=lambda k: (k.asset_key.to_user_string(), k.name)):
        spec = graph.get_check_spec(key)
        if not spec.blocking or key in _BRANCH_CHECKS or not graph.has(key.asset_key):
            continue
        asset = key.asset_key.to_user_string()
        try:
            wap = wap_enabled(graph.get(key.asset_key).metadata, asset)
        except dg.Failure as exc:
            raise dg.DagsterInvalidDefinitionError(str(exc.description)) from exc
        if wap:
            refused.append(f"{spec.name!r} on asset {asset}")
    if refused:
        raise dg.DagsterInvalidDefinitionError(
            f"blocking check(s) {', '.join(refused)} are not branch checks: with {WRITE_AUDIT_PUBLISH} a check "
            "made with @dg.asset_check or a plain AssetCheckSpec runs after the publish, so it could not keep bad "
            "rows off main. Make each with mvcc_dagster.branch_check (it audits the run's branch inside the asset's "
            "step) and list its .spec in the asset's check_specs, or make it non-blocking."
        )
    return defs


def wap_enabled(metadata: Mapping[str, Any], asset: str) -> bool:
    """Whether the asset's definition metadata turns write-audit-publish on.

    Args:
        metadata: The asset's definition metadata.
        asset: The asset, named in the error.

    Returns:
        Whether ``mvcc/write_audit_publish`` is true.

    Raises:
        dagster.Failure: The value is not a bool (not retried).
    """
    value = metadata.get(WRITE_AUDIT_PUBLISH, False)
    if isinstance(value, dg.BoolMetadataValue):
        value = value.value
    if not isinstance(value, bool):
        raise no_retry_failure(
            f"asset {asset}: metadata {WRITE_AUDIT_PUBLISH!r}: must be true or false, got {value!r}",
            {"asset": asset, "setting": f"metadata {WRITE_AUDIT_PUBLISH!r}"},
        )
    return value


def wap_branch_name(run_id: str) -> str:
    """The branch a run writes its write-audit-publish materializations to: ``dagster-wap-<run id>``.

    Dagster's run ids are UUIDs (hex digits and ``-``); any other character is replaced by ``-``, so the
    name is always letters, digits, ``_`` and ``-`` (a valid branch name).

    Args:
        run_id: The Dagster run id.

    Returns:
        The branch name.
    """
    return WAP_BRANCH_PREFIX + _UNSAFE.sub("-", run_id)


Audits = list[tuple[dg.AssetCheckSpec, BranchCheck]]


def branch_audits(context: dg.OutputContext, asset: str) -> Audits:
    """The asset's checks selected in this run that are branch checks, each with its spec.

    Called before anything is written: a blocking check that is not a branch check is refused, since it
    would be evaluated after the publish.

    Args:
        context: The IO manager's output context.
        asset: The asset, named in the error.

    Returns:
        The (spec, branch check) pairs, in the asset's order.

    Raises:
        dagster.Failure: A selected blocking check of the asset is not a branch check (a separate blocking
            ``@dg.asset_check`` included), or the asset's body does not yield its output through
            `audited_output` (not retried).
    """
    pairs: Audits = []
    for spec in separate_check_specs(context):
        if spec.blocking:
            raise no_retry_failure(
                f"asset {asset}: blocking check {spec.name!r} is a separate asset check: it runs after the asset's "
                f"step, so with {WRITE_AUDIT_PUBLISH} it would run after the publish and could not keep bad rows "
                "off main. Make it with mvcc_dagster.branch_check (it audits the branch inside the step) and list "
                "its .spec in the asset's check_specs, or make it non-blocking. Nothing was written.",
                {"asset": asset, "check": spec.name},
            )
    for spec in selected_check_specs(context):
        made = _BRANCH_CHECKS.get(spec.key)
        if made is None and spec.blocking:
            raise no_retry_failure(
                f"asset {asset}: blocking check {spec.name!r} is not a branch check: with "
                f"{WRITE_AUDIT_PUBLISH} it would run after the publish; make it with mvcc_dagster.branch_check",
                {"asset": asset, "check": spec.name},
            )
        if made is not None:
            pairs.append((spec, made))
    if pairs and (context.run_id, asset) not in _STEP_RESULTS:
        raise no_retry_failure(
            f"asset {asset}: an asset with branch checks yields its output with "
            "`yield from mvcc_dagster.audited_output(context, value)` (Dagster needs the checks' results from the "
            "asset's body)",
            {"asset": asset},
        )
    return pairs


def evaluate_branch_check(spec: dg.AssetCheckSpec, made: BranchCheck, audit: BranchAudit) -> dg.AssetCheckResult:
    """The check's result on the branch, with the branch and its version in its metadata; an audit that
    raises is a failed evaluation naming the error (the step then fails if the check is blocking).

    Args:
        spec: The check's spec (its asset key and name go on the result).
        made: The branch check (its audit function).
        audit: What the audit reads: the branch at the version written.

    Returns:
        The result.
    """
    where: dict[str, Any] = {BRANCH: audit.branch, BRANCH_VERSION: audit.table.version}
    if audit.catalog_version is not None:
        where[CATALOG_BRANCH_VERSION] = audit.catalog_version

    def result(
        passed: bool,
        description: str | None = None,
        severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR,
        metadata: Mapping[str, Any] | None = None,
    ) -> dg.AssetCheckResult:
        return dg.AssetCheckResult(
            asset_key=spec.asset_key,
            check_name=spec.name,
            passed=passed,
            severity=severity,
            description=description,
            metadata={**(metadata or {}), **where},
        )

    try:
        outcome = made.audit(audit)
    except Exception as exc:  # noqa: BLE001 - any error of the audit is its failure, reported on the check
        return result(False, f"the audit raised {type(exc).__name__}: {exc}")
    if isinstance(outcome, bool):
        return result(outcome)
    if not isinstance(outcome, dg.AssetCheckResult):
        return result(False, f"the audit returned {type(outcome).__name__}, not an AssetCheckResult or a bool")
    return result(outcome.passed, outcome.description, outcome.severity, outcome.metadata)


@dataclass
class WapOutcome:
    """What `write_audit_publish` published.

    Attributes:
        branch: The branch written.
        branch_version: The branch's version the checks read.
        table: Main at the published version.
    """

    branch: str
    branch_version: int
    table: mvcc.Table

    @property
    def metadata(self) -> dict[str, Any]:
        """The materialization's extra metadata: the branch and its version (``mvcc/version`` is main's)."""
        return {BRANCH: self.branch, BRANCH_VERSION: self.branch_version}


def _fresh_branch(main: mvcc.Table, name: str) -> mvcc.Table:
    """The run's branch from main's current version; one left by an earlier attempt of this step (a retry
    after a conflict) is replaced."""
    if name in main.branches.list():
        main.branches.delete(name)
    return main.create_branch(name)


def write_audit_publish(
    context: dg.OutputContext,
    main: mvcc.Table,
    write: Callable[[mvcc.Table], mvcc.Table],
    audits: Audits,
    *,
    asset: str,
    partition_filter: str | None,
    commit_message: str,
    transaction_properties: Mapping[str, str],
) -> Iterator[dg.DagsterEvent | WapOutcome]:
    """Write to the run's branch, evaluate the asset's branch checks there, publish when every blocking one
    passed.

    When every blocking check passed, the results go back to `audited_output` (which yields them from the
    asset's body) and the `WapOutcome` is yielded. A failed blocking check (severity ERROR) fails the step:
    the evaluations are yielded as events here, then a `Failure` is raised; main is untouched and the branch
    is kept for inspection.

    Args:
        context: The IO manager's output context.
        main: The table on main.
        write: Writes the output through a table handle and returns the handle after the commit.
        audits: The checks to evaluate (`branch_audits`).
        asset: The asset, named in errors.
        partition_filter: The written partitions' predicate (None when not partition-scoped).
        commit_message: The publish's commit message.
        transaction_properties: The publish's transaction properties.

    Yields:
        Check evaluation events (failed audits only), then the outcome.

    Raises:
        dagster.Failure: A blocking check failed (not retried).
    """
    name = wap_branch_name(context.run_id)
    fresh = _fresh_branch(main, name)
    try:
        branch = write(fresh)
    except BaseException:
        main.branches.delete(name)  # nothing was written to audit: leave nothing behind
        raise
    keys = tuple(context.asset_partition_keys) if context.has_asset_partitions else ()
    audit = BranchAudit(table=branch, branch=name, partition_filter=partition_filter, partition_keys=keys)
    results = [evaluate_branch_check(spec, made, audit) for spec, made in audits]
    failed = [
        spec.name
        for (spec, _), result in zip(audits, results, strict=True)
        if spec.blocking and not result.passed and result.severity == dg.AssetCheckSeverity.ERROR
    ]
    if failed:
        for result in results:
            yield check_evaluation_event(context, result)
        raise no_retry_failure(
            f"asset {asset}: blocking check(s) {failed} failed on branch {name!r} (version {branch.version}); "
            "main is unchanged and the branch is kept for inspection",
            {"asset": asset, BRANCH: name, BRANCH_VERSION: branch.version, "failed_checks": ", ".join(failed)},
        )
    try:
        version = main.publish_branch(
            name, delete_branch=True, commit_message=commit_message, transaction_properties=dict(transaction_properties)
        )
    except mvcc.errors.BranchNotReplayableError as exc:
        raise fresh_branch_retry(exc) from exc
    if (context.run_id, asset) in _STEP_RESULTS:
        _STEP_RESULTS[(context.run_id, asset)] = results
    yield WapOutcome(branch=name, branch_version=branch.version, table=main.checkout_version(version))


def delete_wap_branches(
    table: mvcc.Table, older_than: timedelta, *, now: datetime | None = None, dry_run: bool = False
) -> list[str]:
    """Delete the write-audit-publish branches (``dagster-wap-*``) whose newest version is older than
    `older_than`: what failed audits left for inspection, once the retention window has passed. Other
    branches are never touched, nor one another branch was forked from.

    Args:
        table: The table (on main).
        older_than: Keep branches with a version committed more recently than this.
        now: The current time (default: now, UTC).
        dry_run: Only say which would be deleted.

    Returns:
        The (to be) deleted branches' names, sorted.
    """
    cutoff = (now or datetime.now(UTC)) - older_than
    infos = table.branches.list()
    parents = {info.parent_branch for info in infos.values()}
    deleted = []
    for name in sorted(infos):
        if not name.startswith(WAP_BRANCH_PREFIX) or name in parents:
            continue
        if table.checkout_branch(name).timestamp < cutoff:
            if not dry_run:
                table.branches.delete(name)
            deleted.append(name)
    return deleted
