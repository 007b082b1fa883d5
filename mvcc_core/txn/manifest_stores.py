"""The external manifest store interface and its two implementations (SQLite, DynamoDB): the entries
`(table uri, version) -> manifest path` with an atomic put-if-not-exists. How a commit goes through one:
`external_store.py`; design notes: docs/operations/external_store.md.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from mvcc_core.errors import ExternalStoreError, ExternalStoreUnavailableError

T = TypeVar("T")

# ---- the interface -------------------------------------------------------------------------------------


class ExternalManifestStore(ABC):
    """``(base_uri, version) -> path`` with an atomic put-if-not-exists; paths are full URIs of manifests."""

    #: A URI that reopens this store (for messages and for child processes).
    uri: str

    @abstractmethod
    def put_if_not_exists(self, base_uri: str, version: int, path: str) -> bool:
        """Step 2, the commit point: True if this call created the entry, False if the version was taken.

        Args:
            base_uri: the table's uri (the store's root), which keys its entries
            version: the version to commit
            path: the full path of the staged manifest
        """

    @abstractmethod
    def get(self, base_uri: str, version: int) -> str | None:
        """The path recorded for `version`, or None.

        Args:
            base_uri: the table's uri (the store's root), which keys its entries
            version: the version wanted
        """

    @abstractmethod
    def get_latest_version(self, base_uri: str) -> tuple[int, str] | None:
        """The highest version and its path, or None if the store knows no version of `base_uri`.

        Args:
            base_uri: the table's uri (the store's root), which keys its entries
        """

    @abstractmethod
    def put(self, base_uri: str, version: int, path: str) -> None:
        """Step 4: point an existing entry at the finalized path (an entry that does not exist is an error).

        Args:
            base_uri: the table's uri (the store's root), which keys its entries
            version: the committed version
            path: the full path of the final manifest
        """

    def close(self) -> None:
        """Release connections (the store reconnects when used again)."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.uri!r})"


# ---- SQLite --------------------------------------------------------------------------------------------

_SQLITE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS mvcc_manifests ("
    " base_uri TEXT NOT NULL, version INTEGER NOT NULL, path TEXT NOT NULL,"
    " PRIMARY KEY (base_uri, version)) WITHOUT ROWID"
)


class SQLiteManifestStore(ExternalManifestStore):
    """One SQLite file; its locking makes put-if-not-exists atomic across threads and processes of one machine.

    Not for network file systems (SQLite's locks are not reliable there). The connection is opened lazily and
    reopened after a fork, so a store object may be handed to child processes.

    Args:
        path: the SQLite file (created if missing; `~` is expanded)
        timeout: seconds to wait for another process's lock

    Raises:
        ExternalStoreError: no path is given
    """

    def __init__(self, path: str, timeout: float = 60.0) -> None:
        if not path:
            raise ExternalStoreError("a SQLite manifest store needs a file path")
        self.path = os.path.abspath(os.path.expanduser(path))
        self.timeout = float(timeout)
        self.uri = f"sqlite://{self.path}"
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.timeout))

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        parent = os.path.dirname(self.path)
        if not os.path.isdir(parent):
            raise ExternalStoreUnavailableError(f"SQLite manifest store {self.path}: directory {parent} does not exist")
        conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
        deadline = time.monotonic() + self.timeout
        try:
            while True:  # the first connections of several processes race to switch to WAL and create the table
                try:
                    conn.execute("PRAGMA journal_mode=WAL")
                    conn.execute(_SQLITE_SCHEMA)
                    break
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)
        except sqlite3.Error:
            conn.close()
            raise
        self._conn, self._pid = conn, os.getpid()
        return conn

    @contextmanager
    def _db(self, op: str) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._connect()
            except ExternalStoreError:
                raise
            except sqlite3.OperationalError as exc:
                raise ExternalStoreUnavailableError(f"SQLite manifest store {self.path}: {op} failed: {exc}") from exc
            except sqlite3.Error as exc:
                raise ExternalStoreError(f"SQLite manifest store {self.path}: {op} failed: {exc}") from exc

    def put_if_not_exists(self, base_uri: str, version: int, path: str) -> bool:
        """Insert the entry unless `(base_uri, version)` is there already: one `INSERT ... ON CONFLICT DO NOTHING`.

        Args:
            base_uri: the table's uri (the store's root), which keys its entries
            version: the version to commit
            path: the full path of the staged manifest

        Returns:
            True if this call created the entry, False if the version was taken.

        Raises:
            ExternalStoreUnavailableError: the SQLite file cannot be opened or stays locked past the store's timeout.
        """
        with self._db("put_if_not_exists") as db:
            cur = db.execute(
                "INSERT INTO mvcc_manifests (base_uri, version, path) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                (base_uri, version, path),
            )
            return cur.rowcount == 1

    def get(self, base_uri: str, version: int) -> str | None:
        """The path recorded for `version` of `base_uri`, or None.

        Args:
            base_uri: the table's uri (the store's root), which keys its entries
            version: the version wanted
        """
        with self._db("get") as db:
            row = db.execute(
                "SELECT path FROM mvcc_manifests WHERE base_uri = ? AND version = ?", (base_uri, version)
            ).fetchone()
        return row[0] if row else None

    def get_latest_version(self, base_uri: str) -> tuple[int, str] | None:
        """The highest version recorded for `base_uri` and its path, or None when there is none.

        Args:
            base_uri: the table's uri (the store's root), which keys its entries
        """
        with self._db("get_latest_version") as db:
            row = db.execute(
                "SELECT version, path FROM mvcc_manifests WHERE base_uri = ? ORDER BY version DESC LIMIT 1",
                (base_uri,),
            ).fetchone()
        return (int(row[0]), row[1]) if row else None

    def put(self, base_uri: str, version: int, path: str) -> None:
        """Point the existing entry of `version` at the finalized manifest path.

        Args:
            base_uri: the table's uri (the store's root), which keys its entries
            version: the committed version
            path: the full path of the final manifest

        Raises:
            ExternalStoreError: there is no entry for `version` to update.
        """
        with self._db("put") as db:
            cur = db.execute(
                "UPDATE mvcc_manifests SET path = ? WHERE base_uri = ? AND version = ?", (path, base_uri, version)
            )
            if cur.rowcount != 1:
                raise ExternalStoreError(
                    f"SQLite manifest store {self.path}: no entry for {base_uri} version {version} to update"
                )

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None


# ---- DynamoDB ------------------------------------------------------------------------------------------


class DynamoDBManifestStore(ExternalManifestStore):
    """A DynamoDB table with Lance's layout: hash key ``base_uri`` (S), range key ``version`` (N), ``path`` (S).

    Put-if-not-exists is a PutItem with ``attribute_not_exists(#v)``; reads are strongly consistent. Needs
    botocore (optional extra ``dynamodb``), imported on first use. Timeouts and attempts are options so that an
    unreachable endpoint fails fast with :class:`ExternalStoreUnavailableError`.

    Args:
        table_name: the DynamoDB table holding the entries
        region: its AWS region (None: from the environment)
        endpoint_url: a non-AWS endpoint (a local DynamoDB, moto)
        aws_access_key_id: credentials (None: the usual AWS chain)
        aws_secret_access_key: credentials (None: the usual AWS chain)
        aws_session_token: a session token for temporary credentials
        connect_timeout: seconds to wait for a connection
        read_timeout: seconds to wait for an answer
        max_attempts: attempts per request, retries included

    Raises:
        ExternalStoreError: no table name is given
    """

    def __init__(
        self,
        table_name: str,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        aws_session_token: str | None = None,
        connect_timeout: float = 5.0,
        read_timeout: float = 10.0,
        max_attempts: int = 3,
    ) -> None:
        if not table_name:
            raise ExternalStoreError("a DynamoDB manifest store needs a table name")
        self.table_name = table_name
        self._kwargs: dict[str, Any] = dict(
            region=region,
            endpoint_url=endpoint_url,
            aws_access_key_id=aws_access_key_id,
            aws_secret_access_key=aws_secret_access_key,
            aws_session_token=aws_session_token,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            max_attempts=max_attempts,
        )
        query = "&".join(f"{k}={v}" for k, v in (("region", region), ("endpoint", endpoint_url)) if v)
        self.uri = f"dynamodb://{table_name}" + (f"?{query}" if query else "")
        self._client_obj: Any = None
        self._pid = -1
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_dynamodb, (self.table_name, self._kwargs))

    def _client(self) -> Any:
        if self._client_obj is not None and self._pid == os.getpid():
            return self._client_obj
        with self._lock:
            try:
                import botocore.session
                from botocore.config import Config
            except ImportError as exc:  # pragma: no cover - botocore comes with s3fs
                raise ExternalStoreUnavailableError(
                    "the DynamoDB manifest store needs botocore: pip install 'mvcc[dynamodb]'"
                ) from exc
            k = self._kwargs
            config = Config(
                connect_timeout=k["connect_timeout"],
                read_timeout=k["read_timeout"],
                retries={"max_attempts": int(k["max_attempts"]), "mode": "standard"},
            )
            session = _botocore_session(botocore.session)
            self._client_obj = session.create_client(
                "dynamodb",
                region_name=k["region"] or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
                endpoint_url=k["endpoint_url"],
                aws_access_key_id=k["aws_access_key_id"],
                aws_secret_access_key=k["aws_secret_access_key"],
                aws_session_token=k["aws_session_token"],
                config=config,
            )
            self._pid = os.getpid()
            return self._client_obj

    def _call(self, op: str, fn: Callable[[Any], T]) -> T:
        from botocore.exceptions import BotoCoreError, ClientError

        where = f"DynamoDB manifest store {self.uri}"
        try:
            return fn(self._client())
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code == "ResourceNotFoundException":
                raise ExternalStoreUnavailableError(
                    f"{where}: table {self.table_name!r} does not exist (create it with create_table())"
                ) from exc
            if code in ("ProvisionedThroughputExceededException", "ThrottlingException", "InternalServerError"):
                raise ExternalStoreUnavailableError(f"{where}: {op} failed: {exc}") from exc
            raise ExternalStoreError(f"{where}: {op} failed: {exc}") from exc
        except BotoCoreError as exc:  # connection refused, timeouts, no credentials, ...
            raise ExternalStoreUnavailableError(f"{where}: {op} failed: {type(exc).__name__}: {exc}") from exc

    def create_table(self, wait: bool = True) -> None:
        """Create the DynamoDB table (on-demand billing); an existing table is left as it is.

        Args:
            wait: wait until the table is active
        """
        from botocore.exceptions import ClientError

        def create(client: Any) -> None:
            try:
                client.create_table(
                    TableName=self.table_name,
                    KeySchema=[
                        {"AttributeName": "base_uri", "KeyType": "HASH"},
                        {"AttributeName": "version", "KeyType": "RANGE"},
                    ],
                    AttributeDefinitions=[
                        {"AttributeName": "base_uri", "AttributeType": "S"},
                        {"AttributeName": "version", "AttributeType": "N"},
                    ],
                    BillingMode="PAY_PER_REQUEST",
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ResourceInUseException":
                    raise
            if wait:
                client.get_waiter("table_exists").wait(
                    TableName=self.table_name, WaiterConfig={"Delay": 0.2, "MaxAttempts": 150}
                )

        self._call("create_table", create)

    def put_if_not_exists(self, base_uri: str, version: int, path: str) -> bool:
        """Put the item unless the version is taken: a PutItem conditioned on `attribute_not_exists(#v)`.

        Args:
            base_uri: the table's uri (the store's root), which keys its entries
            version: the version to commit
            path: the full path of the staged manifest

        Returns:
            True if this call created the entry, False if the condition failed (the version was taken).

        Raises:
            ExternalStoreUnavailableError: DynamoDB did not answer within the store's timeouts and attempts.
        """
        return self._put_item("put_if_not_exists", base_uri, version, path, "attribute_not_exists(#v)")

    def get(self, base_uri: str, version: int) -> str | None:
        """The path recorded for `version` of `base_uri` (a strongly consistent GetItem), or None.

        Args:
            base_uri: the table's uri (the store's root), which keys its entries
            version: the version wanted
        """
        resp = self._call(
            "get",
            lambda c: c.get_item(
                TableName=self.table_name,
                Key={"base_uri": {"S": base_uri}, "version": {"N": str(version)}},
                ConsistentRead=True,
            ),
        )
        item = resp.get("Item")
        return item["path"]["S"] if item else None

    def get_latest_version(self, base_uri: str) -> tuple[int, str] | None:
        """The highest version of `base_uri` and its path (a strongly consistent Query, newest first, limit 1), or None.

        Args:
            base_uri: the table's uri (the store's root), which keys its entries
        """
        resp = self._call(
            "get_latest_version",
            lambda c: c.query(
                TableName=self.table_name,
                KeyConditionExpression="base_uri = :b",
                ExpressionAttributeValues={":b": {"S": base_uri}},
                ScanIndexForward=False,
                Limit=1,
                ConsistentRead=True,
            ),
        )
        items = resp.get("Items") or []
        if not items:
            return None
        return int(items[0]["version"]["N"]), items[0]["path"]["S"]

    def put(self, base_uri: str, version: int, path: str) -> None:
        """Point the existing item of `version` at the finalized manifest path (a PutItem conditioned on
        `attribute_exists(#v)`).

        Args:
            base_uri: the table's uri (the store's root), which keys its entries
            version: the committed version
            path: the full path of the final manifest

        Raises:
            ExternalStoreError: there is no item for `version` to update.
        """
        if not self._put_item("put", base_uri, version, path, "attribute_exists(#v)"):
            raise ExternalStoreError(
                f"DynamoDB manifest store {self.uri}: no entry for {base_uri} version {version} to update"
            )

    def _put_item(self, op: str, base_uri: str, version: int, path: str, condition: str) -> bool:
        """Write one entry if `condition` (on the entry's `#v`, its version) holds; False where it does not."""
        from botocore.exceptions import ClientError

        def put(client: Any) -> bool:
            try:
                client.put_item(
                    TableName=self.table_name,
                    Item={"base_uri": {"S": base_uri}, "version": {"N": str(version)}, "path": {"S": path}},
                    ConditionExpression=condition,
                    ExpressionAttributeNames={"#v": "version"},
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                    return False
                raise
            return True

        return self._call(op, put)

    def close(self) -> None:
        with self._lock:
            if self._client_obj is not None and self._pid == os.getpid():
                self._client_obj.close()
            self._client_obj = None


_SESSION_LOCK = threading.Lock()
_SESSIONS: dict[int, Any] = {}


def _botocore_session(module: Any) -> Any:
    """One botocore session per process: it caches the parsed service model, which costs ~0.1 s per client."""
    with _SESSION_LOCK:
        session = _SESSIONS.get(os.getpid())
        if session is None:
            session = _SESSIONS[os.getpid()] = module.get_session()
        return session


def _rebuild_dynamodb(table_name: str, kwargs: dict[str, Any]) -> DynamoDBManifestStore:
    return DynamoDBManifestStore(table_name, **kwargs)
