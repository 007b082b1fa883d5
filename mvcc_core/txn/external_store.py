"""External manifest stores: commits on object stores that cannot put-if-not-exists (spec "External Manifest Store").

Design notes: docs/external_store.md, "How the module works".
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import threading
import time
import uuid
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import parse_qsl

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import (
    ExternalStoreError,
    ExternalStoreMismatchError,
    ExternalStoreSyncError,
    ExternalStoreUnavailableError,
    ObjectNotFoundError,
    StorageError,
)
from mvcc_core.failpoints import failpoint
from mvcc_core.format.manifest import (
    PUT_IF_NOT_EXISTS,
    CommitHandler,
    ManifestLocation,
    encode_manifest,
    write_latest_hint,
)
from mvcc_core.format.naming import VERSIONS_DIR, ManifestNaming, manifest_path, parse_manifest_name
from mvcc_core.io import ObjectStore

__all__ = [
    "DynamoDBManifestStore",
    "ExternalStoreHandler",
    "commit_handler",
    "ExternalManifestStore",
    "ExternalStoreError",
    "ExternalStoreMismatchError",
    "ExternalStoreSyncError",
    "ExternalStoreUnavailableError",
    "SQLiteManifestStore",
    "STORAGE_OPTION",
    "finalize",
    "is_staged",
    "open_external_store",
    "split_storage_options",
    "staged_manifest_path",
    "synchronize",
    "unreferenced_staged_manifests",
]

#: The storage_options key that names an external store (a URI or an ExternalManifestStore).
STORAGE_OPTION = "external_store"

T = TypeVar("T")


# ---- staged names --------------------------------------------------------------------------------------

_STAGED = re.compile(r"^(?P<final>.+\.manifest)-(?P<uuid>[0-9a-fA-F-]{32,36})$")


def staged_manifest_path(version: int, naming: ManifestNaming, uuid_hex: str) -> str:
    """``_versions/{final name}-{uuid}``: unique per attempt, ignored by listings (it does not end in .manifest).

    Args:
        version: the version being committed
        naming: the table's manifest naming scheme
        uuid_hex: a fresh uuid of this attempt
    """
    return f"{manifest_path(version, naming)}-{uuid_hex}"


def is_staged(path: str) -> bool:
    """Whether `path` names a staged manifest (ends with ``.manifest-{uuid}``).

    Args:
        path: a path under `_versions/`
    """
    return _STAGED.match(path.rsplit("/", 1)[-1]) is not None


def final_of(path: str) -> str:
    """The final manifest path a staged path is copied to (a final path is returned unchanged).

    Args:
        path: a staged (or final) manifest path
    """
    directory, _, name = path.rpartition("/")
    match = _STAGED.match(name)
    if match is None:
        return path
    return f"{directory}/{match.group('final')}" if directory else match.group("final")


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
        """This store's :meth:`ExternalManifestStore.put_if_not_exists`.

        Args: see :meth:`ExternalManifestStore.put_if_not_exists`
        """
        with self._db("put_if_not_exists") as db:
            cur = db.execute(
                "INSERT INTO mvcc_manifests (base_uri, version, path) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                (base_uri, version, path),
            )
            return cur.rowcount == 1

    def get(self, base_uri: str, version: int) -> str | None:
        """This store's :meth:`ExternalManifestStore.get`.

        Args: see :meth:`ExternalManifestStore.get`
        """
        with self._db("get") as db:
            row = db.execute(
                "SELECT path FROM mvcc_manifests WHERE base_uri = ? AND version = ?", (base_uri, version)
            ).fetchone()
        return row[0] if row else None

    def get_latest_version(self, base_uri: str) -> tuple[int, str] | None:
        """This store's :meth:`ExternalManifestStore.get_latest_version`.

        Args: see :meth:`ExternalManifestStore.get_latest_version`
        """
        with self._db("get_latest_version") as db:
            row = db.execute(
                "SELECT version, path FROM mvcc_manifests WHERE base_uri = ? ORDER BY version DESC LIMIT 1",
                (base_uri,),
            ).fetchone()
        return (int(row[0]), row[1]) if row else None

    def put(self, base_uri: str, version: int, path: str) -> None:
        """This store's :meth:`ExternalManifestStore.put`.

        Args: see :meth:`ExternalManifestStore.put`
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
        """This store's :meth:`ExternalManifestStore.put_if_not_exists`.

        Args: see :meth:`ExternalManifestStore.put_if_not_exists`
        """
        from botocore.exceptions import ClientError

        def put(client: Any) -> bool:
            try:
                client.put_item(
                    TableName=self.table_name,
                    Item={"base_uri": {"S": base_uri}, "version": {"N": str(version)}, "path": {"S": path}},
                    ConditionExpression="attribute_not_exists(#v)",
                    ExpressionAttributeNames={"#v": "version"},
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                    return False
                raise
            return True

        return self._call("put_if_not_exists", put)

    def get(self, base_uri: str, version: int) -> str | None:
        """This store's :meth:`ExternalManifestStore.get`.

        Args: see :meth:`ExternalManifestStore.get`
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
        """This store's :meth:`ExternalManifestStore.get_latest_version`.

        Args: see :meth:`ExternalManifestStore.get_latest_version`
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
        """This store's :meth:`ExternalManifestStore.put`.

        Args: see :meth:`ExternalManifestStore.put`
        """
        from botocore.exceptions import ClientError

        def update(client: Any) -> None:
            try:
                client.put_item(
                    TableName=self.table_name,
                    Item={"base_uri": {"S": base_uri}, "version": {"N": str(version)}, "path": {"S": path}},
                    ConditionExpression="attribute_exists(#v)",
                    ExpressionAttributeNames={"#v": "version"},
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                    raise ExternalStoreError(
                        f"DynamoDB manifest store {self.uri}: no entry for {base_uri} version {version} to update"
                    ) from None
                raise

        self._call("put", update)

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


# ---- configuration -------------------------------------------------------------------------------------

_DYNAMODB_QUERY_KEYS = {
    "region": "region",
    "endpoint": "endpoint_url",
    "endpoint_url": "endpoint_url",
    "access_key_id": "aws_access_key_id",
    "aws_access_key_id": "aws_access_key_id",
    "secret_access_key": "aws_secret_access_key",
    "aws_secret_access_key": "aws_secret_access_key",
    "session_token": "aws_session_token",
    "aws_session_token": "aws_session_token",
    "connect_timeout": "connect_timeout",
    "read_timeout": "read_timeout",
    "max_attempts": "max_attempts",
}
# Credentials and region may come from the table's storage options when the store URI does not give them.
_FROM_STORAGE_OPTIONS = {
    "aws_access_key_id": "aws_access_key_id",
    "aws_secret_access_key": "aws_secret_access_key",
    "aws_session_token": "aws_session_token",
    "aws_region": "region",
    "region": "region",
}


def open_external_store(
    spec: str | ExternalManifestStore | None, storage_options: dict[str, Any] | None = None
) -> ExternalManifestStore | None:
    """An ExternalManifestStore from an instance (returned as is), None, or a URI.

    ``sqlite:///abs/path.db`` (``?timeout=S``), ``dynamodb://table?region=R&endpoint=URL&connect_timeout=S
    &read_timeout=S&max_attempts=N`` (credentials from the URI, the storage options' aws_* keys, or the
    usual AWS environment).

    Args:
        spec: a store, None, or a URI (`sqlite:///...`, `dynamodb://...`)
        storage_options: the table's storage options, whose aws_* keys a DynamoDB store uses for credentials

    Raises:
        ExternalStoreError: the URI's scheme or options are not supported
    """
    if spec is None or isinstance(spec, ExternalManifestStore):
        return spec
    if not isinstance(spec, str):
        raise ExternalStoreError(f"external_store must be a URI or an ExternalManifestStore, got {type(spec).__name__}")
    scheme, sep, rest = spec.partition("://")
    if not sep:
        raise ExternalStoreError(f"external_store URI {spec!r} has no scheme (sqlite:// or dynamodb://)")
    rest, _, query_string = rest.partition("?")
    query = dict(parse_qsl(query_string, keep_blank_values=True))
    scheme = scheme.lower()
    if scheme == "sqlite":
        unknown = set(query) - {"timeout"}
        if unknown:
            raise ExternalStoreError(f"external_store URI {spec!r}: unknown option(s) {sorted(unknown)}")
        return SQLiteManifestStore(rest, timeout=float(query.get("timeout", 60.0)))
    if scheme == "dynamodb":
        kwargs: dict[str, Any] = {}
        for key, value in (storage_options or {}).items():
            if key.lower() in _FROM_STORAGE_OPTIONS and isinstance(value, str):
                kwargs[_FROM_STORAGE_OPTIONS[key.lower()]] = value
        for key, value in query.items():
            name = _DYNAMODB_QUERY_KEYS.get(key.lower())
            if name is None:
                raise ExternalStoreError(f"external_store URI {spec!r}: unknown option {key!r}")
            kwargs[name] = value
        for name, cast in (("connect_timeout", float), ("read_timeout", float), ("max_attempts", int)):
            if name in kwargs:
                kwargs[name] = cast(kwargs[name])
        return DynamoDBManifestStore(rest.strip("/"), **kwargs)
    raise ExternalStoreError(f"external_store URI {spec!r}: unknown scheme {scheme!r} (sqlite:// or dynamodb://)")


def split_storage_options(
    storage_options: dict[str, Any] | None,
    external_store: str | ExternalManifestStore | None = None,
) -> tuple[ExternalManifestStore | None, dict[str, Any] | None]:
    """The external store (argument first, else storage option ``external_store``) and the options without it.

    Args:
        storage_options: the table's storage options, maybe holding `external_store`
        external_store: the store the caller passed explicitly; it wins over the storage option
    """
    options = dict(storage_options) if storage_options else None
    from_options = options.pop(STORAGE_OPTION, None) if options else None
    spec = external_store if external_store is not None else from_options
    return open_external_store(spec, storage_options), options


# ---- the reader's synchronization protocol -------------------------------------------------------------


def full_path(store: ObjectStore, rel: str) -> str:
    """The path recorded in the store: the table URI plus the relative path (what Lance records too).

    Args:
        store: the table's store
        rel: a path relative to the table root
    """
    return f"{store.uri}/{rel}"


def relative_path(store: ObjectStore, version: int, path: str) -> tuple[str, ManifestNaming]:
    """Check that a store entry belongs to this table and version; its path relative to the table root.

    Args:
        store: the table's store
        version: the version the entry is for
        path: the full path the entry records

    Raises:
        ExternalStoreMismatchError: the path is outside this table's `_versions/`
    """
    prefix = f"{store.uri}/{VERSIONS_DIR}/"
    if not path.startswith(prefix) or "/" in path[len(prefix) :]:
        raise ExternalStoreMismatchError(
            f"external store entry for {store.uri} version {version} points to {path!r}, outside this table's "
            f"{VERSIONS_DIR}/: the store belongs to another table (or the table was moved)"
        )
    rel = path[len(store.uri) + 1 :]
    parsed = parse_manifest_name(final_of(rel))
    if parsed is None or parsed[0] != version:
        raise ExternalStoreMismatchError(
            f"external store entry for {store.uri} version {version} points to {path!r}, which is not a manifest "
            f"of version {version}"
        )
    return rel, parsed[1]


def finalize(store: ObjectStore, external: ExternalManifestStore, version: int, staged: str) -> str:
    """Steps 3 and 4: copy the staged manifest to its final name, point the store at it; the final path.

    Writers run it after winning step 2 and readers run it on a staged entry (the synchronization). Both
    steps are idempotent, so a reader racing the writer or another reader is harmless. The staged file is
    removed afterwards; whoever still holds its name finds the final manifest instead.

    Args:
        store: the table's store
        external: the table's external manifest store
        version: the committed version
        staged: the staged manifest's path relative to the table root
    """
    final = final_of(staged)
    try:
        store.copy(staged, final)
    except ObjectNotFoundError:
        # Someone else finished and removed the staged file, or it never existed.
        if not store.exists(final):
            raise ExternalStoreSyncError(
                f"cannot synchronize {store.uri} version {version}: the external store names the staged "
                f"manifest {full_path(store, staged)}, which does not exist, and neither does {final}"
            ) from None
    failpoint("commit.after_copy")
    failpoint("commit.before_external_update")
    external.put(store.uri, version, full_path(store, final))
    with contextlib.suppress(StorageError):
        store.delete_many([staged])
    return final


def synchronize(store: ObjectStore, external: ExternalManifestStore, version: int, path: str) -> str:
    """The reader's protocol for one store entry: its final path relative to the table root.

    A staged entry is finalized first. Any failure raises ExternalStoreSyncError (or
    ExternalStoreUnavailableError): returning a version that exists only as a staged file would make the
    table depend on the store, and a copy of its directory would lose that version.

    Args:
        store: the table's store
        external: the table's external manifest store
        version: the version of the entry
        path: the full path the entry records
    """
    rel, _ = relative_path(store, version, path)
    if not is_staged(rel):
        return rel
    try:
        return finalize(store, external, version, rel)
    except (ExternalStoreSyncError, ExternalStoreUnavailableError):
        raise
    except (StorageError, ExternalStoreError) as exc:
        raise ExternalStoreSyncError(
            f"cannot synchronize {store.uri} version {version} (staged {path}): {type(exc).__name__}: {exc}"
        ) from exc


# ---- garbage --------------------------------------------------------------------------------------------


def unreferenced_staged_manifests(
    store: ObjectStore, external: ExternalManifestStore | None = None, min_age_seconds: float = 3600.0
) -> list[str]:
    """Staged manifests that nothing needs any more (for retention): paths relative to the table root.

    A staged file is needed while the store entry of its version names it (committed, not yet synchronized)
    and while its writer is still between steps 1 and 2 -- which looks exactly like a dead writer's orphan,
    hence `min_age_seconds` (files younger than that, or of unknown age, are kept). Of the older ones: with
    the store, every staged file its version's entry does not name is garbage; without the store, only those
    whose final manifest exists (the others might be committed versions awaiting synchronization).

    Args:
        store: the table's store
        external: the table's external manifest store (None: judged from the object store alone)
        min_age_seconds: staged files younger than this are kept (their writer may still be committing)
    """
    now = time.time()
    out = []
    for meta in store.list(VERSIONS_DIR):
        if not is_staged(meta.path):
            continue
        if meta.last_modified is None or now - meta.last_modified.timestamp() < min_age_seconds:
            continue
        parsed = parse_manifest_name(final_of(meta.path))
        if parsed is None:
            continue
        if external is not None:
            if external.get(store.uri, parsed[0]) != full_path(store, meta.path):
                out.append(meta.path)
        elif store.exists(final_of(meta.path)):
            out.append(meta.path)
    return out


# ---- the commit handler ---------------------------------------------------------------------------------


class ExternalStoreHandler(CommitHandler):
    """Commits through an external manifest store: the specification's stage / commit / finalize / update.

    Readers take the latest version from the store and synchronize an entry that still names a staged
    manifest; the object store needs no conditional write at all.
    """

    lists_latest = False

    def __init__(self, external: ExternalManifestStore) -> None:
        """Commits through `external`.

        Args:
            external: the table's external manifest store
        """
        self.external = external

    def __reduce__(self) -> tuple[Any, ...]:
        return (ExternalStoreHandler, (self.external,))

    def __repr__(self) -> str:
        return f"ExternalStoreHandler({self.external!r})"

    def check_supported(self, store: ObjectStore) -> None:
        """Any store will do: the external store's put-if-not-exists is the commit point.

        Args: see :meth:`CommitHandler.check_supported`
        """

    def latest_location(self, store: ObjectStore) -> ManifestLocation | None:
        """Reader protocol: the store's latest version, synchronized; None if the store knows no version
        (a table created before the store was used: the object store is listed instead).

        Args: see :meth:`CommitHandler.latest_location`
        """
        entry = self.external.get_latest_version(store.uri)
        if entry is None:
            return None
        version, path = entry
        _, naming = relative_path(store, version, path)
        rel = synchronize(store, self.external, version, path)
        return ManifestLocation(version, naming, rel)

    def read_unpublished(self, store: ObjectStore, location: ManifestLocation) -> bytes | None:
        """The manifest of a version the external store committed, synchronized first.

        Args: see :meth:`CommitHandler.read_unpublished`
        """
        path = self.external.get(store.uri, location.version)
        if path is None:
            return None
        rel = synchronize(store, self.external, location.version, path)
        try:
            return store.get(rel)
        except ObjectNotFoundError:
            raise ExternalStoreSyncError(
                f"table {store.uri}: the external store names {path} for version {location.version}, "
                "and that manifest does not exist"
            ) from None

    def publish(self, store: ObjectStore, manifest: pb.Manifest, naming: ManifestNaming) -> bool:
        """Steps 1-4; False if another writer committed this version first.

        Args: see :meth:`CommitHandler.publish`
        """
        version, uri = manifest.version, store.uri
        staged = staged_manifest_path(version, naming, uuid.uuid4().hex)
        store.put(staged, encode_manifest(manifest))  # 1. stage: a plain PUT, invisible to readers
        failpoint("commit.after_stage")
        staged_full = full_path(store, staged)
        won = self.external.put_if_not_exists(uri, version, staged_full)  # 2. the commit point
        # A retried request whose first attempt succeeded also "loses": then the entry is ours.
        if not won and self.external.get(uri, version) != staged_full:
            with contextlib.suppress(StorageError):
                store.delete_many([staged])
            return False
        failpoint("commit.after_external_commit")
        try:
            finalize(store, self.external, version, staged)  # 3. copy to the final name, 4. update the store
        except (StorageError, ExternalStoreError) as exc:
            # The commit stands (step 2 made it); the next reader synchronizes, so do not report a failure.
            warnings.warn(
                f"{uri} version {version} is committed but not finalized ({type(exc).__name__}: {exc}); "
                "the next reader through the external store will finalize it",
                RuntimeWarning,
                stacklevel=4,
            )
            return True
        write_latest_hint(store, version, naming)
        return True


def commit_handler(external: ExternalManifestStore | None) -> CommitHandler:
    """The handler for a table: through `external` when given, else the object store's put-if-not-exists.

    Args:
        external: the table's external manifest store, or None
    """
    return PUT_IF_NOT_EXISTS if external is None else ExternalStoreHandler(external)
