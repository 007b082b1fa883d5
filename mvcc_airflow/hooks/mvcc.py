"""`MvccHook`: opens mvcc tables through an Airflow connection of type `mvcc`.

The connection holds the warehouse: its host is the root uri under which table names resolve
(``s3://bucket/warehouse`` + ``events`` -> ``s3://bucket/warehouse/events``), its extra the storage options
(a JSON object) and the external manifest store; login and password, when set, are the S3 access key id
and secret. Without them the S3 client takes the standard ``AWS_*`` variables, as every AWS client does.
A full uri (``s3://...``, ``file://...``, ``memory://...`` or an absolute path) needs no connection.
"""

from __future__ import annotations

import json
import os
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowFailException

import mvcc_core as mvcc

from ..provider_info import CONN_TYPE, UI_FIELD_BEHAVIOUR
from ..utils.conflicts import mvcc_errors

DEFAULT_CONN_ID = "mvcc_default"


def is_uri(table: str) -> bool:
    """Whether `table` is a full uri (a scheme such as ``s3://``, or an absolute local path), not a name.

    Args:
        table: a table name or uri as an operator was given it
    """
    return "://" in table or os.path.isabs(table)


def uri_under_root(root: str, table: str) -> str:
    """The uri of the table named `table` under `root`: ``{root}/{table}``, once `table` is checked to stay there.

    A name follows the one rule of a table's path under a root (`mvcc_core.names.check_table_path`): segments
    of ASCII letters, digits, '_', '-' and '.', separated by '/'; no '..', '.', empty segment, backslash or
    control character, and no segment after the first that is a folder inside a table (``data``, ``_versions``,
    ...). A full uri is not a name and is not checked here (`is_uri`).

    Args:
        root: The connection's root uri.
        table: The table's name under it.

    Returns:
        The table's uri.

    Raises:
        AirflowFailException: `table` breaks the rule (not retried: it would again).
    """
    reason = mvcc.names.table_path_problem(table)
    if reason is not None:
        raise AirflowFailException(
            f"table={table!r}: {reason.removeprefix(f'table name {table!r}: ')} (a table name must stay under "
            "the connection's root uri; give a full uri to name a table elsewhere)"
        )
    return f"{root.rstrip('/')}/{table}"


def settings_of(conn: Any, conn_id: str) -> tuple[str, dict[str, Any], str | None]:
    """A connection's root uri, storage options (login/password as the S3 key id/secret) and external store.

    Args:
        conn: The Airflow connection.
        conn_id: Its id, named in errors.

    Returns:
        ``(root_uri, storage_options, external_store)``.

    Raises:
        AirflowFailException: The storage options are not a JSON object.
    """
    extra = conn.extra_dejson

    def field(name: str) -> Any:  # the form's field; older UIs stored it as extra__mvcc__<name>
        return extra.get(name) or extra.get(f"extra__{CONN_TYPE}__{name}")

    raw = field("storage_options") or {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except ValueError as exc:
            raise AirflowFailException(f"connection {conn_id!r}: storage_options is not JSON ({exc}): {raw!r}") from exc
    if not isinstance(raw, dict):
        raise AirflowFailException(f"connection {conn_id!r}: storage_options must be a JSON object, got {raw!r}")
    options = {str(k): v for k, v in raw.items()}
    if conn.login:
        options.setdefault("aws_access_key_id", conn.login)
    if conn.password:
        options.setdefault("aws_secret_access_key", conn.password)
    return conn.host or "", options, field("external_store") or None


class MvccHook(BaseHook):
    """Opens the tables of an `mvcc` connection (or any table by its full uri).

    Args:
        mvcc_conn_id: The Airflow connection of type ``mvcc`` that names the warehouse.
    """

    conn_name_attr = "mvcc_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = CONN_TYPE
    hook_name = "mvcc table"

    def __init__(self, mvcc_conn_id: str = DEFAULT_CONN_ID) -> None:
        super().__init__()
        self.mvcc_conn_id = mvcc_conn_id
        self._settings: tuple[str, dict[str, Any], str | None] | None = None

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """The connection form's hidden, relabelled and placeholder fields (Airflow's hook convention).

        Returns:
            Airflow's ``hidden_fields``/``relabeling``/``placeholders`` dict.
        """
        return {key.replace("-", "_"): value for key, value in UI_FIELD_BEHAVIOUR.items()}

    def connection_settings(self) -> tuple[str, dict[str, Any], str | None]:
        """The connection's root uri, storage options and external store (read once per hook).

        Returns:
            ``(root_uri, storage_options, external_store)``.

        Raises:
            AirflowFailException: The connection is missing, has no root uri, or its storage options are not a
                JSON object (bad configuration is not retried).
        """
        if self._settings is None:
            try:
                conn = self.get_connection(self.mvcc_conn_id)
            except Exception as exc:  # Airflow raises AirflowNotFoundException; a retry would not create it
                raise AirflowFailException(
                    f"mvcc_conn_id={self.mvcc_conn_id!r}: no such Airflow connection ({exc}); create one of type "
                    "'mvcc' or give the table as a full uri"
                ) from exc
            self._settings = settings_of(conn, self.mvcc_conn_id)
        return self._settings

    def table_uri(self, table: str) -> str:
        """The uri of `table`: itself when it is a full uri, else ``{root uri}/{table}``.

        Args:
            table: A table name under the connection's root uri, or a full uri.

        Returns:
            The table's uri.

        Raises:
            AirflowFailException: `table` is empty, a name that would leave the root uri (`uri_under_root`), or a
                name while the connection has no root uri.
        """
        if not isinstance(table, str) or not table.strip():
            raise AirflowFailException(f"table must be a table name or a uri, got {table!r}")
        if is_uri(table):
            return table
        root = self.connection_settings()[0]
        if not root:
            raise AirflowFailException(
                f"table={table!r} is a name, but connection {self.mvcc_conn_id!r} has no root uri (its host field)"
            )
        return uri_under_root(root, table)

    def storage_options(self, table: str) -> tuple[dict[str, Any] | None, str | None]:
        """The storage options and external store to open `table` with (none for a full uri without a
        connection: the ``AWS_*`` variables then apply).

        Args:
            table: A table name or a full uri.

        Returns:
            ``(storage_options or None, external_store or None)``.
        """
        if is_uri(table) and not self._connection_exists():
            return None, None
        _, options, external = self.connection_settings()
        return (options or None), external

    def _connection_exists(self) -> bool:
        if self._settings is not None:
            return True
        try:
            self.get_connection(self.mvcc_conn_id)
        except Exception:
            return False
        return True

    def open_table(self, table: str, version: int | str | None = None) -> mvcc.Table:
        """Open `table` at its latest version (or `version`: a number or a tag).

        Args:
            table: A table name under the connection's root uri, or a full uri (no connection needed).
            version: A version number or tag name; None for the latest.

        Returns:
            The table handle.

        Raises:
            AirflowFailException: No table is there, the version does not exist, or the connection is wrong.
        """
        uri = self.table_uri(table)
        options, external = self.storage_options(table)
        with mvcc_errors(f"table {uri}"):
            return mvcc.open_table(uri, version, storage_options=options, external_store=external)
