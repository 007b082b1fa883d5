"""Table health: asset checks and the sensors that watch tables (docs/integrations/dagster/sensors_and_health.md).

- `checks`: the health checks (`build_table_health_checks`), their thresholds and the automation condition
  that runs them (`health_automation_condition`).
- `repair`: the health sensor (`build_health_sensor`), which launches the maintenance the core's advice calls for.
- `sensors`: the version sensor (`build_version_sensor`): a table's commits made outside Dagster reported as
  observations or materializations.
"""

from __future__ import annotations

from .._deprecated import forwarding_getattr
from .checks import (
    CHECKS,
    HealthThresholds,
    Level,
    build_table_health_checks,
    evaluate_health,
    health_automation_condition,
)
from .repair import build_health_sensor
from .sensors import build_version_sensor

__all__ = [
    "CHECKS",
    "HealthThresholds",
    "Level",
    "build_health_sensor",
    "build_table_health_checks",
    "build_version_sensor",
    "evaluate_health",
    "health_automation_condition",
]

# The names of the former module `mvcc_dagster.health` (now `checks`), with a DeprecationWarning.
__getattr__ = forwarding_getattr(__name__, f"{__name__}.checks")
