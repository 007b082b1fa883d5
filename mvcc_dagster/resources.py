"""`MvccResource`: where the tables live, and how an asset key names one.

A table is named by its asset key (a string such as ``"sales/orders"`` or an `AssetKey`): it lives at
``{root_uri}/{key path joined by '/'}``. A full uri (``s3://...``, ``file://...``, ``memory://...`` or an
absolute path) names a table directly. Everything in `mvcc_dagster` that names a table resolves it this way,
through the resource bound under the resource key ``mvcc`` (`RESOURCE_KEY`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import dagster as dg

import mvcc_core as mvcc

RESOURCE_KEY = "mvcc"

TableName = str | dg.AssetKey | Sequence[str]


def is_uri(name: str) -> bool:
    """A full uri (a scheme such as ``s3://`` or an absolute local path), not an asset key string."""
    return "://" in name or os.path.isabs(name)


def to_asset_key(name: str | dg.AssetKey | Sequence[str]) -> dg.AssetKey:
    """An asset key from a user string (``"a/b"``), an `AssetKey` or a sequence of path parts."""
    if isinstance(name, dg.AssetKey):
        return name
    if isinstance(name, str):
        return dg.AssetKey.from_user_string(name)
    return dg.AssetKey(list(name))


def resolve_uri(root_uri: str, name: TableName) -> str:
    """The uri of the table named `name` (an asset key or a full uri) under `root_uri`."""
    if isinstance(name, str) and is_uri(name):
        return name
    key = to_asset_key(name)
    return "/".join([root_uri.rstrip("/"), *key.path])


def open_with(
    root_uri: str,
    storage_options: dict[str, str],
    external_store: str | None,
    name: TableName,
    version: int | str | None = None,
) -> mvcc.Table:
    """Open table `name` (latest, or `version`: a number or a tag)."""
    return mvcc.open_table(
        resolve_uri(root_uri, name),
        version,
        storage_options=dict(storage_options) or None,
        external_store=external_store,
    )


class MvccResource(dg.ConfigurableResource):
    """The warehouse: opens tables by asset key or uri. Bind it as ``mvcc``; values may come from `EnvVar`.

    Example::

        defs = dg.Definitions(assets=[...], resources={"mvcc": MvccResource(root_uri=dg.EnvVar("MVCC_WAREHOUSE"))})

        @dg.asset
        def report(mvcc: MvccResource) -> None:
            t = mvcc.open("sales/orders")
    """

    root_uri: str
    storage_options: dict[str, str] = {}
    external_store: str | None = None

    def uri(self, name: TableName) -> str:
        """The uri of table `name`: ``{root_uri}/{asset key path joined by '/'}``, or `name` if it is a uri."""
        return resolve_uri(self.root_uri, name)

    def open(self, name_or_uri: TableName, version: int | str | None = None) -> mvcc.Table:
        """Open the table (latest, or `version`); `TableNotFoundError` if there is none."""
        return open_with(self.root_uri, self.storage_options, self.external_store, name_or_uri, version)

    def options(self) -> dict[str, Any] | None:
        """The storage options as the core takes them (None when empty)."""
        return dict(self.storage_options) or None
