"""mvcc_airflow: the Airflow provider for mvcc tables (docs/integrations/airflow/index.md).

Laid out as Airflow's providers are: `hooks/`, `operators/`, `sensors/`, `triggers/`, `assets/`, and `utils/`
for what they share. `get_provider_info` is what Airflow's providers manager reads (entry point
`apache_airflow_provider`); it imports neither Airflow nor the core. The other public names load on first use
(PEP 562), so that reading the provider's info stays cheap.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

from . import _moved_modules
from .provider_info import get_provider_info

_LAZY = {
    "MvccAdviseOperator": "operators.advice",
    "MvccBaseOperator": "operators.base",
    "MvccCleanupOperator": "operators.maintenance",
    "MvccCompactOperator": "operators.maintenance",
    "MvccCreateIndexOperator": "operators.maintenance",
    "MvccHook": "hooks.mvcc",
    "MvccOptimizeIndicesOperator": "operators.maintenance",
    "MvccPlanFleetOperator": "operators.fleet",
    "MvccPublishBranchOperator": "operators.publish_branch",
    "MvccRestoreOperator": "operators.maintenance",
    "MvccTableChangeTrigger": "triggers.table_change",
    "MvccTagOperator": "operators.maintenance",
    "MvccVersionSensor": "sensors.table_version",
    "MvccVersionTrigger": "triggers.table_version",
    "mvcc_compaction_group": "operators.compaction_group",
    "mvcc_errors": "utils.conflicts",
    "table_asset": "assets.mvcc",
}

__all__ = [
    "MvccAdviseOperator",
    "MvccBaseOperator",
    "MvccCleanupOperator",
    "MvccCompactOperator",
    "MvccCreateIndexOperator",
    "MvccHook",
    "MvccOptimizeIndicesOperator",
    "MvccPlanFleetOperator",
    "MvccPublishBranchOperator",
    "MvccRestoreOperator",
    "MvccTableChangeTrigger",
    "MvccTagOperator",
    "MvccVersionSensor",
    "MvccVersionTrigger",
    "get_provider_info",
    "mvcc_compaction_group",
    "mvcc_errors",
    "table_asset",
]

if TYPE_CHECKING:  # what type checkers see; at run time `__getattr__` imports each on first use
    from .assets.mvcc import table_asset
    from .hooks.mvcc import MvccHook
    from .operators.advice import MvccAdviseOperator
    from .operators.base import MvccBaseOperator
    from .operators.compaction_group import mvcc_compaction_group
    from .operators.fleet import MvccPlanFleetOperator
    from .operators.maintenance import (
        MvccCleanupOperator,
        MvccCompactOperator,
        MvccCreateIndexOperator,
        MvccOptimizeIndicesOperator,
        MvccRestoreOperator,
        MvccTagOperator,
    )
    from .operators.publish_branch import MvccPublishBranchOperator
    from .sensors.table_version import MvccVersionSensor
    from .triggers.table_change import MvccTableChangeTrigger
    from .triggers.table_version import MvccVersionTrigger
    from .utils.conflicts import mvcc_errors

_moved_modules.register(__name__)


def __getattr__(name: str) -> Any:
    if name in _moved_modules.MOVED_MODULES:
        return sys.modules[f"{__name__}.{name}"]
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mvcc_airflow' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)


def __dir__() -> list[str]:
    return sorted(__all__)
