"""The provider's operators and task groups.

- `maintenance`: compaction in one task, indices, cleanup, restore, tags;
- `advice`: `MvccAdviseOperator`, what maintenance would pay now (optionally skipping the tasks after it);
- `fleet`: `MvccPlanFleetOperator`, one maintenance plan over many tables on one budget;
- `publish_branch`: `MvccPublishBranchOperator`, the publish of write-audit-publish;
- `compaction_group`: `mvcc_compaction_group`, compaction as three tasks (the rewrites mapped);
- `base`: `MvccBaseOperator`, what they share.
"""

from __future__ import annotations

from .advice import MvccAdviseOperator
from .base import MvccBaseOperator
from .compaction_group import mvcc_compaction_group
from .fleet import MvccPlanFleetOperator, fleet_steps
from .maintenance import (
    MvccCleanupOperator,
    MvccCompactOperator,
    MvccCreateIndexOperator,
    MvccOptimizeIndicesOperator,
    MvccRestoreOperator,
    MvccTagOperator,
    tagged_text,
    to_duration,
    to_timestamp,
)
from .publish_branch import PUBLISH_OPERATION, MvccPublishBranchOperator

__all__ = [
    "PUBLISH_OPERATION",
    "MvccAdviseOperator",
    "MvccBaseOperator",
    "MvccCleanupOperator",
    "MvccCompactOperator",
    "MvccCreateIndexOperator",
    "MvccOptimizeIndicesOperator",
    "MvccPlanFleetOperator",
    "MvccPublishBranchOperator",
    "MvccRestoreOperator",
    "MvccTagOperator",
    "fleet_steps",
    "mvcc_compaction_group",
    "tagged_text",
    "to_duration",
    "to_timestamp",
]
