"""Write-audit-publish of catalog assets: the step's catalog transaction on the catalog branch
``dagster-wap-<run id>``, its branch checks read on that branch, the branch published to main in one catalog
version when every blocking check passes (docs/guide/write_audit_publish.md, "Catalog assets").

`CatalogAssetTransaction` (catalog.py) drives the flow; this module holds its steps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg

import mvcc_core as mvcc

from .._dagster_internals import log_check_evaluation
from ..error_mapping import no_retry_failure
from ..metadata import BRANCH, CATALOG_BRANCH_VERSION, WAP_BRANCH_PREFIX, WRITE_AUDIT_PUBLISH
from .table import Audits, BranchAudit, evaluate_branch_check, registered_branch_check, wap_enabled


def catalog_wap_enabled(context: Any) -> bool:
    """Whether an asset of the step turns write-audit-publish on: then the step's whole catalog transaction
    goes to the run's catalog branch (its tables are published together or not at all).

    Args:
        context: The asset's execution context (None or a plain op's: off).

    Returns:
        Whether any selected asset has ``mvcc/write_audit_publish: true``.

    Raises:
        dagster.Failure: The metadata value is not a bool (not retried).
    """
    if context is None or not getattr(context, "has_assets_def", False):
        return False
    assets_def = context.assets_def
    keys = sorted(context.selected_asset_keys, key=str)
    return any([wap_enabled(assets_def.metadata_by_key.get(k, {}), k.to_user_string()) for k in keys])


def catalog_branch_audits(context: Any) -> Audits:
    """The step's selected checks that are branch checks, each with its spec, in the asset's order.

    Called before anything is written: a blocking check that is not a branch check is refused, since it would
    be evaluated after the publish.

    Args:
        context: The asset's execution context.

    Returns:
        The (spec, branch check) pairs.

    Raises:
        dagster.Failure: A selected blocking check is not a branch check (not retried).
    """
    selected = context.selected_asset_check_keys
    pairs: Audits = []
    for spec in context.assets_def.check_specs:
        if spec.key not in selected:
            continue
        made = registered_branch_check(spec.key)
        if made is None and spec.blocking:
            asset = spec.asset_key.to_user_string()
            raise no_retry_failure(
                f"asset {asset}: blocking check {spec.name!r} is not a branch check: with {WRITE_AUDIT_PUBLISH} "
                "it would run after the catalog branch is published; make it with mvcc_dagster.branch_check. "
                "Nothing was written.",
                {"asset": asset, "check": spec.name},
            )
        if made is not None:
            pairs.append((spec, made))
    return pairs


def audit_catalog_branch(
    audits: Audits,
    snapshot: Any,
    branch: str,
    *,
    table_name: Callable[[dg.AssetKey], str],
    partition_filters: Mapping[dg.AssetKey, str | None],
    partition_keys: tuple[str, ...],
) -> list[dg.AssetCheckResult]:
    """Evaluate each branch check on the catalog branch's snapshot: the check's asset's table there.

    Args:
        audits: The checks (`catalog_branch_audits`).
        snapshot: The catalog snapshot the checks read (the branch's version the step committed).
        branch: The catalog branch's name (on the results' metadata).
        table_name: The catalog table of an asset key.
        partition_filters: The predicate of the partitions the step wrote, per asset written.
        partition_keys: The run's partition keys (empty when unpartitioned).

    Returns:
        One result per check, in `audits`' order (a check whose asset has no table on the branch fails).
    """
    results = []
    for spec, made in audits:
        name = table_name(spec.asset_key)
        if name not in snapshot.tables():
            results.append(
                dg.AssetCheckResult(
                    asset_key=spec.asset_key,
                    check_name=spec.name,
                    passed=False,
                    description=f"catalog table {name!r} does not exist on branch {branch!r}",
                    metadata={BRANCH: branch, CATALOG_BRANCH_VERSION: int(snapshot.version)},
                )
            )
            continue
        audit = BranchAudit(
            table=snapshot.table(name),
            branch=branch,
            partition_filter=partition_filters.get(spec.asset_key),
            partition_keys=partition_keys,
            catalog=snapshot,
            catalog_version=int(snapshot.version),
        )
        results.append(evaluate_branch_check(spec, made, audit))
    return results


def failed_blocking_checks(audits: Audits, results: list[dg.AssetCheckResult]) -> list[str]:
    """The names of the blocking checks that failed with severity ERROR (what stops the publish).

    Args:
        audits: The checks.
        results: Their results, in the same order.

    Returns:
        The failed checks' names.
    """
    return [
        spec.name
        for (spec, _), result in zip(audits, results, strict=True)
        if spec.blocking and not result.passed and result.severity == dg.AssetCheckSeverity.ERROR
    ]


def refuse_publish(context: Any, results: list[dg.AssetCheckResult], failed: list[str], where: str) -> dg.Failure:
    """Record every check's evaluation in the run's event log and return the step's `Failure` (not retried).

    Args:
        context: The asset's execution context.
        results: The checks' results.
        failed: The failed blocking checks' names.
        where: The branch and its version, as the message names them.

    Returns:
        The failure to raise.
    """
    for result in results:
        log_check_evaluation(context, result)
    return no_retry_failure(
        f"blocking check(s) {failed} failed on {where}; the catalog's main is unchanged and the branch is kept "
        "for inspection",
        {"failed_checks": ", ".join(failed)},
    )


def delete_catalog_wap_branches(
    catalog: mvcc.Catalog, older_than: timedelta, *, now: datetime | None = None, dry_run: bool = False
) -> list[str]:
    """Delete the catalog's write-audit-publish branches (``dagster-wap-*``) whose newest catalog version is
    older than `older_than`: what failed audits left for inspection, once the window has passed. Other catalog
    branches are never touched. Each deletion removes the branch's table forks and their own files.

    Args:
        catalog: The catalog (on main).
        older_than: Keep branches with a catalog version committed more recently than this.
        now: The current time (default: now, UTC).
        dry_run: Only say which would be deleted.

    Returns:
        The (to be) deleted branches' names, sorted.
    """
    cutoff = (now or datetime.now(UTC)) - older_than
    deleted = []
    for name in sorted(catalog.branches()):
        if not name.startswith(WAP_BRANCH_PREFIX):
            continue
        try:
            manifest = catalog.snapshot(branch=name).manifest
        except mvcc.errors.BranchNotFoundError:
            continue  # deleted meanwhile, or its deletion stopped half-way (cleanup reclaims its forks)
        if manifest is None:
            continue  # a snapshot opened from its manifest table always has it; without it, nothing is known
        newest = manifest.timestamp
        if newest < cutoff:
            if not dry_run:
                catalog.delete_branch(name)
            deleted.append(name)
    return deleted
