"""Maintenance as Dagster jobs, one module per job kind (docs/integrations/dagster/maintenance.md, "Maintenance
jobs"); `fleet`: many tables on one nightly budget (docs/integrations/dagster/fleet.md); `catalog`: the health
checks and maintenance job of a catalog's tables."""

from ..metadata import MAINTENANCE_IO_KEY, RESTORED_FROM, TABLE_TAG
from .compaction import EXECUTORS, SPARK_RESOURCE_KEY, build_compaction_job
from .fleet import build_fleet_maintenance
from .indices import build_index_job, build_index_optimize_job
from .restore import build_restore_job
from .retention import build_retention_job
from .schedule import build_maintenance_schedule
from .tags import build_tag_job
from .target import MaintenanceTarget, manifest_metrics, observe

__all__ = [
    "EXECUTORS",
    "MAINTENANCE_IO_KEY",
    "RESTORED_FROM",
    "SPARK_RESOURCE_KEY",
    "TABLE_TAG",
    "MaintenanceTarget",
    "build_compaction_job",
    "build_fleet_maintenance",
    "build_index_job",
    "build_index_optimize_job",
    "build_maintenance_schedule",
    "build_restore_job",
    "build_retention_job",
    "build_tag_job",
    "manifest_metrics",
    "observe",
]
