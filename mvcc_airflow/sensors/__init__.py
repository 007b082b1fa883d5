"""The provider's sensors: `MvccVersionSensor` (`mvcc_airflow.sensors.table_version`), a new version of a table."""

from __future__ import annotations

from .table_version import MvccVersionSensor

__all__ = ["MvccVersionSensor"]
