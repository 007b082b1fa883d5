"""The provider's triggers: `MvccVersionTrigger` (`mvcc_airflow.triggers.table_version`), the deferred version sensor.

A deferred task's trigger is stored by its classpath, ``mvcc_airflow.triggers.table_version.MvccVersionTrigger``;
the name re-exported here keeps the classpath of earlier releases, ``mvcc_airflow.triggers.MvccVersionTrigger``,
resolving for triggers deferred before an upgrade.
"""

from __future__ import annotations

from .table_version import MvccVersionTrigger

__all__ = ["MvccVersionTrigger"]
