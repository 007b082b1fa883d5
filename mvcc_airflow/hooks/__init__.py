"""The provider's hooks: `MvccHook` (`mvcc_airflow.hooks.mvcc`), the tables of an Airflow connection of type `mvcc`."""

from __future__ import annotations

from .mvcc import DEFAULT_CONN_ID, MvccHook, is_uri, settings_of, uri_under_root

__all__ = ["DEFAULT_CONN_ID", "MvccHook", "is_uri", "settings_of", "uri_under_root"]
