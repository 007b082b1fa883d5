"""The names the plugin writes into commits and reads from runs, in one place (docs/integrations/dagster/io_manager.md,
"Transaction properties").
"""

from __future__ import annotations

# ---- transaction properties of commits made by Dagster steps
RUN_ID_PROPERTY = "dagster/run_id"
ASSET_KEY_PROPERTY = "dagster/asset_key"
PARTITION_KEY_PROPERTY = "dagster/partition_key"
"""One partition key, or a range `first...last` for a single-run backfill."""
MAINTENANCE_PROPERTY = "dagster/maintenance"
"""The maintenance job (compaction, retention, ..., `backfill-restore`) that made the commit."""
ROOT_RUN_ID_PROPERTY = "dagster/root_run_id"
STEP_KEY_PROPERTY = "dagster/step_key"
BACKFILL_PROPERTY = "dagster/backfill"
"""Transaction property of a backfill's Restore commit: the backfill (or root run) it restored for."""

# ---- Dagster's run tags
ROOT_RUN_ID_TAG = "dagster/root_run_id"
BACKFILL_TAG = "dagster/backfill"
ROOT_BACKFILL_TAG = "dagster/root_backfill_id"
"""On the runs of a backfill re-executed from failure: the first backfill, whose restore counts for it."""
PARTITION_TAG = "dagster/partition"
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"
