"""The provider's triggers: `MvccVersionTrigger` (`mvcc_airflow.triggers.table_version`), the deferred version sensor,
and `MvccTableChangeTrigger` (`mvcc_airflow.triggers.table_change`), an `AssetWatcher`'s event trigger.

A deferred task's trigger is stored by its classpath, ``mvcc_airflow.triggers.table_version.MvccVersionTrigger``;
the name re-exported here keeps the classpath of earlier releases, ``mvcc_airflow.triggers.MvccVersionTrigger``,
resolving for triggers deferred before an upgrade.
"""

from __future__ import annotations

from .table_change import MvccTableChangeTrigger
from .table_version import MvccVersionTrigger

__all__ = ["MvccTableChangeTrigger", "MvccVersionTrigger"]
