"""Write-audit-publish: a materialization written to a branch, audited there, published to main when the audits
pass (docs/guide/write_audit_publish.md).

- `table`: one table's write-audit-publish (``mvcc/write_audit_publish: true``), `branch_check`, `audited_output`.
- `catalog`: a catalog asset's step staged on a catalog branch the same way.
- `publish_job`: a job that audits and publishes a branch written outside Dagster.
"""

from __future__ import annotations

from .._deprecated import forwarding_getattr
from .catalog import delete_catalog_wap_branches
from .publish_job import RowAudit, build_publish_branch_job
from .table import (
    BranchAudit,
    BranchCheck,
    audited_output,
    branch_check,
    check_write_audit_publish,
    delete_wap_branches,
    wap_branch_name,
)

__all__ = [
    "BranchAudit",
    "BranchCheck",
    "RowAudit",
    "audited_output",
    "branch_check",
    "build_publish_branch_job",
    "check_write_audit_publish",
    "delete_catalog_wap_branches",
    "delete_wap_branches",
    "wap_branch_name",
]

# The names of the former module `mvcc_dagster.write_audit_publish` (now `table`), with a DeprecationWarning.
__getattr__ = forwarding_getattr(__name__, f"{__name__}.table")
