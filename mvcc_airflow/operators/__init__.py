"""The provider's operators and task groups.

- `maintenance`: compaction in one task, indices, cleanup, restore, tags;
- `publish_branch`: `MvccPublishBranchOperator`, the publish of write-audit-publish;
- `compaction_group`: `mvcc_compaction_group`, compaction as three tasks (the rewrites mapped);
- `base`: `MvccBaseOperator`, what they share.
"""

from __future__ import annotations

from .base import MvccBaseOperator
from .compaction_group import mvcc_compaction_group
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
    "MvccBaseOperator",
    "MvccCleanupOperator",
    "MvccCompactOperator",
    "MvccCreateIndexOperator",
    "MvccOptimizeIndicesOperator",
    "MvccPublishBranchOperator",
    "MvccRestoreOperator",
    "MvccTagOperator",
    "mvcc_compaction_group",
    "tagged_text",
    "to_duration",
    "to_timestamp",
]
