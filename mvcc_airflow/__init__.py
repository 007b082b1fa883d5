"""mvcc_airflow: the Airflow provider for mvcc tables (docs/integrations/airflow/index.md).

`get_provider_info` is what Airflow's providers manager reads (entry point `apache_airflow_provider`); it
imports neither Airflow nor the core. The other public names load on first use (PEP 562), so that reading the
provider's info stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

from .provider_info import get_provider_info

_LAZY = {
    "MvccHook": "hooks",
    "MvccBaseOperator": "operators",
    "MvccCompactOperator": "operators",
    "MvccCreateIndexOperator": "operators",
    "MvccOptimizeIndicesOperator": "operators",
    "MvccCleanupOperator": "operators",
    "MvccRestoreOperator": "operators",
    "MvccTagOperator": "operators",
    "MvccPublishBranchOperator": "branch_operators",
    "mvcc_compaction_group": "compaction_group",
    "MvccVersionSensor": "sensors",
    "MvccVersionTrigger": "triggers",
    "table_asset": "assets",
    "mvcc_errors": "conflicts",
}

__all__ = ["get_provider_info", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mvcc_airflow' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)


def __dir__() -> list[str]:
    return sorted(__all__)
