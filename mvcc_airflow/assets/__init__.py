"""The provider's assets: the URI scheme `mvcc` (`mvcc_airflow.assets.mvcc`), one asset per table."""

from __future__ import annotations

from .mvcc import OPERATION_EXTRA, VERSION_EXTRA, asset_uri, create_asset, sanitize_uri, table_asset

__all__ = ["OPERATION_EXTRA", "VERSION_EXTRA", "asset_uri", "create_asset", "sanitize_uri", "table_asset"]
