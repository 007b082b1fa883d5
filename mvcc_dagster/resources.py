"""`MvccResource`: where the tables live, and how an asset key names one (docs/integrations/dagster/index.md, "Naming
tables")."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import dagster as dg

import mvcc_core as mvcc

from ._deprecated import moved_names_getattr

TableName = str | dg.AssetKey | Sequence[str]


def is_uri(name: str) -> bool:
    """A full uri (a scheme such as ``s3://`` or an absolute local path), not an asset key string.

    Args:
        name: A table name.

    Returns:
        Whether it is a uri.
    """
    return "://" in name or os.path.isabs(name)


def to_asset_key(name: str | dg.AssetKey | Sequence[str]) -> dg.AssetKey:
    """An asset key from a user string (``"a/b"``), an `AssetKey` or a sequence of path parts.

    Args:
        name: The name.

    Returns:
        The asset key.
    """
    if isinstance(name, dg.AssetKey):
        return name
    if isinstance(name, str):
        return dg.AssetKey.from_user_string(name)
    return dg.AssetKey(list(name))


def table_key_problem(key: dg.AssetKey) -> str | None:
    """What is wrong with `key` as the name of a table under a root, in words; None when it is a good one.

    Each part of the key is one segment of the table's path (``["sales", "orders"]`` -> ``sales/orders``) and
    follows the rule of an asset key part (`mvcc_core.names.ASSET_KEY_PART`: ASCII letters, digits, '_', '-'
    and '.', starting with a letter or digit; so no '..', '.', empty part, '/', backslash, control character,
    trailing newline or unicode look-alike), and no part after the first is a folder inside a table
    (``data``, ``_versions``, ...): the table stays under its root, apart from every other table.

    Args:
        key: The asset key.

    Returns:
        The reason it is refused (naming the key), or None.
    """
    label = key.to_user_string()
    for part in key.path:
        reason = mvcc.names.problem(mvcc.names.ASSET_KEY_PART, part)
        if reason is not None:
            return f"asset key {label!r} (parts {list(key.path)!r}) cannot name a table under the root: {reason}"
    reason = mvcc.names.table_path_problem("/".join(key.path), mvcc.names.ASSET_KEY_PART)
    if reason is not None:
        return f"asset key {label!r} (parts {list(key.path)!r}) cannot name a table under the root: {reason}"
    return None


def check_table_key(name: TableName) -> dg.AssetKey:
    """The asset key `name` names, once checked to name a table under a root (`table_key_problem`).

    Args:
        name: An asset key (string ``"sales/orders"``, `AssetKey` or path parts).

    Returns:
        The asset key.

    Raises:
        mvcc_core.errors.InvalidNameError: The key would name a table outside its root or inside another table
            (a ValueError).
    """
    key = to_asset_key(name)
    reason = table_key_problem(key)
    if reason is not None:
        raise mvcc.errors.InvalidNameError(reason)
    return key


def resolve_uri(root_uri: str, name: TableName) -> str:
    """The uri of the table named `name` (an asset key or a full uri) under `root_uri`.

    Args:
        root_uri: The warehouse.
        name: An asset key (string, `AssetKey`, path parts) or a uri.

    Returns:
        The table's uri.

    Raises:
        mvcc_core.errors.InvalidNameError: `name` is an asset key that would leave `root_uri` (`check_table_key`).
    """
    if isinstance(name, str) and is_uri(name):
        return name
    key = check_table_key(name)
    return "/".join([root_uri.rstrip("/"), *key.path])


class MvccResource(dg.ConfigurableResource):
    """The warehouse: opens tables by asset key or uri. Bind it as ``mvcc``; values may come from `EnvVar`.

    Attributes:
        root_uri: Where tables named by asset key live (a local path, ``s3://bucket/prefix``, ``memory://``).
        storage_options: Object store options (credentials, endpoint), as the core takes them.
        external_store: The external commit store's uri, for stores without put-if-absent.

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
        """The uri of table `name`: ``{root_uri}/{asset key path joined by '/'}``, or `name` if it is a uri.

        Args:
            name: An asset key (string, `AssetKey`, path parts) or a uri.

        Returns:
            The table's uri.

        Raises:
            mvcc_core.errors.InvalidNameError: `name` is an asset key that would leave `root_uri` (`check_table_key`).
        """
        return resolve_uri(self.root_uri, name)

    def open(self, name_or_uri: TableName, version: int | str | None = None) -> mvcc.Table:
        """Open a table by asset key or uri.

        Args:
            name_or_uri: An asset key (string, `AssetKey` or path parts) or a full uri.
            version: A version number or a tag (None: the latest).

        Returns:
            The table handle.

        Raises:
            TableNotFoundError: There is no table there.
        """
        return self.open_uri(self.uri(name_or_uri), version)

    def open_uri(self, uri: str, version: int | str | None = None) -> mvcc.Table:
        """Open the table at `uri` (already resolved, e.g. by `uri`) with this resource's storage settings.

        Args:
            uri: The table's uri or path.
            version: A version number or a tag (None: the latest).

        Returns:
            The table handle.
        """
        return mvcc.open_table(uri, version, storage_options=self.options(), external_store=self.external_store)

    def options(self) -> dict[str, Any] | None:
        """The storage options as the core takes them (None when empty)."""
        return dict(self.storage_options) or None


# `RESOURCE_KEY` moved to `mvcc_dagster.metadata`; read here it warns, for one more release.
__getattr__ = moved_names_getattr(__name__, {"RESOURCE_KEY": "mvcc_dagster.metadata"})
