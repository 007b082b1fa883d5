"""Write-audit-publish for a table written outside Dagster: the writer commits to a branch, this job audits the
branch with row checks and publishes it to main in one commit (docs/guide/write_audit_publish.md, "A table written
outside Dagster").
"""

from collections.abc import Sequence
from dataclasses import dataclass

import dagster as dg

from ..error_mapping import mvcc_conflicts, no_retry_failure
from ..maintenance.target import MaintenanceTarget, one_step_job
from ..metadata import BRANCH, BRANCH_VERSION, MAINTENANCE_IO_KEY, RESOURCE_KEY
from ..properties import ASSET_KEY_PROPERTY, RUN_ID_PROPERTY
from ..resources import TableName
from ..versions import table_metadata
from .table import BranchAudit, BranchCheck, evaluate_branch_check


@dataclass(frozen=True)
class RowAudit:
    """A branch check counting bad rows: the rows of the branch matching `filter` must be at most `max_rows`.

    Attributes:
        name: The check's name.
        filter: The rows that fail the audit (a filter as `Table.count_rows` takes it, e.g. ``"amount <= 0"``).
        max_rows: How many such rows are tolerated.
        blocking: Whether a failure stops the publish.
        description: Shown with the check's evaluation.
    """

    name: str
    filter: str
    max_rows: int = 0
    blocking: bool = True
    description: str | None = None

    def branch_check(self, asset_key: dg.AssetKey) -> BranchCheck:
        """The audit as a `BranchCheck` of `asset_key`.

        Args:
            asset_key: The table's asset.

        Returns:
            The check (its spec and its audit function).
        """
        spec = dg.AssetCheckSpec(
            self.name,
            asset=asset_key,
            description=self.description or f"at most {self.max_rows} rows of the branch match {self.filter!r}",
            blocking=self.blocking,
        )

        def audit(branch: BranchAudit) -> dg.AssetCheckResult:
            bad = branch.table.count_rows(self.filter)
            return dg.AssetCheckResult(
                passed=bad <= self.max_rows, metadata={"matching_rows": bad, "max_rows": self.max_rows}
            )

        return BranchCheck(spec=spec, audit=audit)


def build_publish_branch_job(
    table: TableName,
    audits: Sequence[RowAudit],
    *,
    asset_key: TableName | None = None,
    name: str | None = None,
) -> dg.JobDefinition:
    """A job auditing a branch an outside writer committed to, and publishing it to main when every blocking
    audit passed (one commit, reported as a materialization of the table's asset, with the branch and its
    version). A failed blocking audit fails the step (not retried): main is untouched and the branch is kept.

    Run config: ``ops: {publish_branch: {config: {branch: "staging", delete_branch: true}}}``.

    Args:
        table: An asset key (string, `AssetKey` or path parts) or a table uri.
        audits: The row audits evaluated on the branch (each recorded as an asset check evaluation).
        asset_key: The asset the materialization and the evaluations go to.
        name: The job's name (default ``mvcc_publish_branch__<asset key>``).

    Returns:
        The job (one step, in the run's process).

    Raises:
        ValueError: Two audits share a name.
    """
    target = MaintenanceTarget(table, asset_key)
    names = [a.name for a in audits]
    if len(set(names)) != len(names):
        raise ValueError(f"publish job of {target.label}: audit names must be distinct, got {names}")
    checks = [a.branch_check(target.asset_key) for a in audits]

    @dg.op(
        name=f"publish_branch__{target.suffix}",
        required_resource_keys={RESOURCE_KEY},
        pool=target.pool,
        config_schema={
            "branch": dg.Field(str, description="the branch the outside writer committed to"),
            "delete_branch": dg.Field(bool, default_value=True, description="delete it once published"),
        },
        out=dg.Out(io_manager_key=MAINTENANCE_IO_KEY),
    )
    def publish_branch(context: dg.OpExecutionContext) -> int:
        branch_name = context.op_config["branch"]
        main = target.open(context)
        branches = sorted(main.branches.list())
        if branch_name not in branches:
            raise no_retry_failure(
                f"publish of {target.label}: no branch {branch_name!r} (branches: {branches or 'none'}); nothing "
                "was published",
                {"asset": target.label, BRANCH: branch_name},
            )
        branch = main.checkout_branch(branch_name)
        audit = BranchAudit(table=branch, branch=branch_name)
        results = [evaluate_branch_check(made.spec, made, audit) for made in checks]
        for made, result in zip(checks, results, strict=True):
            context.log_event(
                dg.AssetCheckEvaluation(  # type: ignore[arg-type]  # Dagster logs check evaluations too
                    asset_key=target.asset_key,
                    check_name=made.spec.name,
                    passed=result.passed,
                    metadata=result.metadata,
                    severity=result.severity,
                    description=result.description,
                    blocking=made.spec.blocking,
                )
            )
        failed = [
            made.spec.name
            for made, result in zip(checks, results, strict=True)
            if made.spec.blocking and not result.passed and result.severity == dg.AssetCheckSeverity.ERROR
        ]
        if failed:
            raise no_retry_failure(
                f"publish of {target.label}: blocking audit(s) {failed} failed on branch {branch_name!r} (version "
                f"{branch.version}); main is unchanged and the branch is kept for inspection",
                {"asset": target.label, BRANCH: branch_name, BRANCH_VERSION: branch.version},
            )
        read_version = main.version
        with mvcc_conflicts(context, what=f"publish of branch {branch_name} to {target.label}"):
            version = main.publish_branch(
                branch_name,
                delete_branch=context.op_config["delete_branch"],
                commit_message=f"dagster: publish branch {branch_name} of {target.label}",
                transaction_properties={RUN_ID_PROPERTY: context.run_id, ASSET_KEY_PROPERTY: target.label},
            )
        published = main.checkout_version(version)
        meta = table_metadata(published, table_name=target.label, read_version=read_version)
        context.log_event(
            dg.AssetMaterialization(
                asset_key=target.asset_key,
                metadata={**meta, BRANCH: branch_name, BRANCH_VERSION: branch.version},
                tags={"dagster/data_version": str(meta["mvcc/data_version"])},
            )
        )
        return version

    return one_step_job(
        publish_branch,
        "publish_branch",
        name=name or f"mvcc_publish_branch__{target.suffix}",
        target=target,
        description=f"Audit a branch of {target.label} written outside Dagster and publish it to main when every "
        "blocking audit passes (run config: branch).",
    )
