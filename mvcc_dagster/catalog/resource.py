"""The catalog side of the plugin: several tables of one step published in ONE catalog version.

Why a transaction on the resource and not an IO manager: docs/integrations/dagster/catalog.md ("Multi-table assets").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import dagster as dg
import pyarrow as pa

import mvcc_core as mvcc

from ..arrow import to_arrow_table
from ..error_mapping import (
    DEFAULT_DELAY,
    DEFAULT_MAX_RETRIES,
    as_retryable,
    cannot_replay_branch,
    fresh_branch_retry,
    lost_implicit_create,
    mvcc_conflicts,
    no_retry_failure,
)
from ..lineage import as_int, metadata_value, pinned_value
from ..metadata import (
    BRANCH,
    CATALOG_BRANCH_VERSION,
    CATALOG_PUBLISHED_BY_RUN,
    CATALOG_READ_VERSION,
    CATALOG_TABLE,
    CATALOG_URI,
    CATALOG_VERSION,
    PARTITION_EXPR,
)
from ..partitions import PartitionPredicateError, partition_predicate
from ..properties import (
    ASSET_KEY_PROPERTY,
    PARTITION_KEY_PROPERTY,
    ROOT_RUN_ID_PROPERTY,
    RUN_ID_PROPERTY,
    STEP_KEY_PROPERTY,
)
from ..resources import to_asset_key
from ..versions import table_metadata, uri_value
from ..write_audit_publish.catalog import (
    audit_catalog_branch,
    catalog_branch_audits,
    catalog_wap_enabled,
    failed_blocking_checks,
    refuse_publish,
)
from ..write_audit_publish.table import Audits, wap_branch_name
from .step_identity import partition_label, run_id_of, run_partitions, step_stamp

DEFAULT_SCHEMA = "main"  # the schema a one-part asset key's table lives in (the catalog's default schema)

# Materialization metadata of a catalog table (besides the IO manager's keys, see `versions.table_metadata`).
# Set only when this attempt did not publish because an earlier attempt of the same step had (see `publish`).

# Properties of the catalog version a step publishes: which step of which run lineage published it.

_NAME_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")
# How far back (seconds) and how many materializations `_reported` looks at for a catalog version's report.
_CLOCK_SLACK_SECONDS = 3600.0
_REPORTED_LOOKUP_LIMIT = 1000
# How often the helper re-reads the catalog when a concurrent step created the same table or schema first.
_CREATE_ATTEMPTS = 3

AssetName = str | dg.AssetKey | Sequence[str]


def catalog_table_name(key: AssetName, key_prefix: Sequence[str] = ()) -> str:
    """The catalog table (``schema.table``) an asset key names.

    After removing `key_prefix` (when the key starts with it): ``["orders"]`` is ``main.orders`` (the
    catalog's default schema), ``["sales", "orders"]`` is ``sales.orders``. A longer key, or a part that is
    not a plain name (letters, digits, ``_``, ``-``; a catalog name uses ``.`` as its separator), is refused
    with a `ValueError` naming the key: set ``key_prefix`` on the resource to drop the leading parts.

    Args:
        key: The asset key.
        key_prefix: Leading parts that are not part of the catalog name.

    Returns:
        ``schema.table``.

    Raises:
        ValueError: The key cannot name a catalog table.
    """
    asset_key = to_asset_key(key)
    parts = list(asset_key.path)
    prefix = list(key_prefix)
    if prefix and parts[: len(prefix)] == prefix:
        parts = parts[len(prefix) :]
    shown = asset_key.to_user_string()
    if not 1 <= len(parts) <= 2:
        raise ValueError(
            f"asset key {shown!r} names a catalog table as [table] or [schema, table]"
            + (f" after removing key_prefix {prefix}" if prefix else "")
            + f", got {len(parts)} part(s); set key_prefix on the catalog resource to drop leading parts"
        )
    bad = [p for p in parts if not _NAME_PART.match(p)]
    if bad:
        raise ValueError(
            f"asset key {shown!r}: part(s) {bad} cannot name a catalog schema or table "
            "(letters, digits, '_' and '-' only; '.' separates schema and table)"
        )
    return ".".join(parts) if len(parts) == 2 else f"{DEFAULT_SCHEMA}.{parts[0]}"


@dataclass
class _Write:
    """One write the step asked for (what `materialize_results` reports on)."""

    key: dg.AssetKey
    name: str
    kind: str  # append, overwrite, delete, merge
    data: pa.Table | None = None  # until staged
    where: str | None = None  # overwrite: the rows replaced (a partition); delete: the predicate
    partition_filter: str | None = None  # the partition's predicate, for dagster/partition_row_count
    on: list[str] | None = None  # merge: the key column(s)
    update: bool | str = True  # merge: update matched rows (a str: only where this condition holds)
    insert: bool = True  # merge: insert the source rows no target row matches
    delete_not_in_source: bool | str = False  # merge: delete target rows no source row matches (a str: where)


class CatalogAssetTransaction:
    """The writes of one step, staged on one catalog snapshot and published together (see the module doc).

    Made by `MvccCatalogResource.transaction`; not reusable. Writes name their table by asset key:
    `append`, `overwrite` (in a partitioned run, with ``where`` left out: exactly the run's partitions, from
    the asset's ``partition_expr`` metadata, as `MvccIOManager` does), `delete` and `merge` (an upsert,
    the core's staged ``merge_insert``). Several writes to one table form a chain: each reads the table as
    the earlier ones left it. `snapshot` is the catalog snapshot the writes are staged on: reads made from it
    are what the publish is checked against.

    With write-audit-publish (`audits` not None) the writes go to the catalog branch ``dagster-wap-<run id>``
    and `publish` audits them there before publishing the branch (docs/guide/write_audit_publish.md, "Catalog assets").

    Args:
        resource: the catalog resource that made it
        context: the asset's execution context (its run, partitions and asset keys)
        catalog: the catalog written
        commit_message: the message of the catalog version it publishes
        audits: the branch checks of a write-audit-publish step (`catalog_branch_audits`); None: publish on main
    """

    def __init__(
        self,
        resource: MvccCatalogResource,
        context: Any,
        catalog: mvcc.Catalog,
        commit_message: str | None,
        audits: Audits | None = None,
    ) -> None:
        self._resource = resource
        self._context = context
        self.catalog = catalog
        self._writes: list[_Write] = []
        self._created: set[str] = set()  # tables and schemas this step creates implicitly (first write)
        self._created_schemas: dict[str, pa.Schema] = {}  # the Arrow schema of each table created here
        self._stamp = step_stamp(context)
        self._message = commit_message
        self._audits = audits or []
        self.wap_branch = wap_branch_name(run_id_of(context)) if audits is not None else None
        self.branch_version: int | None = None  # write-audit-publish: the branch's catalog version audited
        self.audit_results: list[dg.AssetCheckResult] = []
        self._tx = self._open()
        self._read_snapshot = self._tx.snapshot
        self._state = "open"
        self.published_version: int | None = None
        self.published_by_run: str | None = None  # set when an earlier attempt of this step published instead

    def _open(self) -> Any:
        """The core transaction: on main, or on a fresh write-audit-publish branch from main's newest version (one
        an earlier attempt of the run left is deleted first)."""
        if self.wap_branch is None:
            return self.catalog.transaction(commit_message=self._message, transaction_properties=self._stamp)
        if self.wap_branch in self.catalog.branches():
            self.catalog.delete_branch(self.wap_branch)
        self.catalog.create_branch(self.wap_branch)
        return self.catalog.transaction(
            commit_message=self._message, transaction_properties=self._stamp, branch=self.wap_branch
        )

    # ---- what the step sees --------------------------------------------------------------------

    @property
    def snapshot(self) -> Any:
        """The catalog snapshot the writes are staged on (`CatalogSnapshot`: ``.table(name)``, ``.version``; with
        write-audit-publish the catalog branch's)."""
        return self._read_snapshot

    @property
    def is_open(self) -> bool:
        """Whether writes can still be added (neither published, nor aborted, nor failed)."""
        return self._state == "open"

    @property
    def read_version(self) -> int:
        """The catalog version the transaction read."""
        return int(self._read_snapshot.version)

    @property
    def created_tables(self) -> list[str]:
        """The catalog tables this step creates (from their first write), published with its writes (with
        write-audit-publish none: a new table is created on main before the branch)."""
        return sorted(n for n in self._created if "." in n)

    def table_name(self, key: AssetName) -> str:
        """The catalog table (``schema.table``) of an asset key (the resource's `table_name`).

        Args:
            key: The asset key (string, `AssetKey` or path parts).

        Returns:
            The catalog table (``schema.table``).
        """
        return self._resource.table_name(key)

    def to_table(self, key: AssetName, **kwargs: Any) -> pa.Table:
        """The asset's table as this step's writes so far leave it (read-your-writes; nothing is published).

        Args:
            key: The asset key (string, `AssetKey` or path parts).
            **kwargs: `Table.to_table`'s arguments (columns, filter).

        Returns:
            The rows.
        """
        asset = to_asset_key(key).to_user_string()
        with self._mapping(asset):
            self._check_open()
            return self._tx.table(self.table_name(key)).to_table(**kwargs)

    # ---- staging -------------------------------------------------------------------------------

    def append(self, key: AssetName, data: Any) -> None:
        """Add `data`'s rows to the asset's table (created from `data`'s schema on the first write).

        Args:
            key: The asset key (string, `AssetKey` or path parts).
            data: A pyarrow Table, RecordBatch or RecordBatchReader or a pandas DataFrame.
        """
        self._add(_Write(to_asset_key(key), "", "append", data))

    def overwrite(self, key: AssetName, data: Any, *, where: str | None = None) -> None:
        """Replace the table's rows with `data`; with `where` only the rows matching it. In a partitioned run,
        `where` defaults to the run's partitions (the asset's ``partition_expr`` metadata names the column).

        Args:
            key: The asset key (string, `AssetKey` or path parts).
            data: The rows (as `append` takes them).
            where: The rows replaced (SQL; default: all, or the run's partitions).
        """
        self._add(_Write(to_asset_key(key), "", "overwrite", data, where=where))

    def delete(self, key: AssetName, predicate: str) -> None:
        """Delete the rows matching `predicate` (SQL); the table must exist.

        Args:
            key: The asset key (string, `AssetKey` or path parts).
            predicate: The rows deleted (SQL).
        """
        self._add(_Write(to_asset_key(key), "", "delete", None, where=predicate))

    def merge(
        self,
        key: AssetName,
        data: Any,
        *,
        on: str | Sequence[str],
        update: bool | str = True,
        insert: bool = True,
        delete_not_in_source: bool | str = False,
    ) -> dict[str, int]:
        """Upsert `data` into the asset's table on the key column(s) `on` (the IO manager's write mode ``merge``),
        staged with the core's ``merge_insert``; returns its counts (``num_inserted_rows``, ``num_updated_rows``,
        ``num_deleted_rows``).

        `update`: replace matched rows by their source rows (a str: only where that condition holds, with
        ``source.col`` / ``target.col``); `insert`: add the source rows no target row matches;
        `delete_not_in_source`: delete the target rows no source row matches (a str: only those matching
        it). In a partitioned run, ``delete_not_in_source=True`` deletes only within the run's partitions
        (the asset's ``partition_expr``), as an overwrite without ``where`` replaces only them. A table that
        does not exist yet is created from `data`'s schema (every row is then an insert).

        Args:
            key: The asset key (string, `AssetKey` or path parts).
            data: The source rows (as `append` takes them).
            on: The key column(s).
            update: See above.
            insert: See above.
            delete_not_in_source: See above.

        Returns:
            The merge's counts.
        """
        on_list = [on] if isinstance(on, str) else list(on)
        write = _Write(to_asset_key(key), "", "merge", data, on=on_list, update=update, insert=insert)
        write.delete_not_in_source = delete_not_in_source
        return self._add(write) or {}

    def _check_open(self) -> None:
        if self._state != "open":
            raise ValueError(f"the catalog transaction is {self._state}; open a new one")

    def _table_exists(self, name: str) -> bool:
        return name in self._created or name in self._read_snapshot.tables()

    def _create(self, name: str, schema: pa.Schema) -> None:
        """Create the table (and its schema) in this step's catalog transaction: published with its writes.
        With write-audit-publish (a branch creates nothing): created empty on main first, then the branch made
        again from main and the earlier writes staged on it again."""
        if self.wap_branch is not None:
            self._resource.create_tables(self.catalog, {name: schema})
            self._tx.abort()
            self._tx = self._open()
            self._read_snapshot = self._tx.snapshot
            for earlier in self._writes:
                self._stage(earlier)
            return
        schema_name = name.split(".")[0]
        if schema_name not in self._created and schema_name not in self._read_snapshot.schemas():
            self._tx.create_schema(schema_name)
            self._created.add(schema_name)
        self._tx.create_table(name, schema)
        self._created.add(name)
        self._created_schemas[name] = schema

    def _add(self, write: _Write) -> dict[str, int] | None:
        self._check_open()
        asset = write.key.to_user_string()
        with self._mapping(asset):
            write.name = self.table_name(write.key)
            if write.data is not None:
                write.data = to_arrow_table(
                    write.data,
                    accepts=f"asset {asset}: a catalog write takes a pyarrow Table, RecordBatch or RecordBatchReader "
                    "or a pandas or polars DataFrame",
                )
            if not self._table_exists(write.name):
                if write.data is None:
                    raise ValueError(
                        f"asset {asset}: cannot {write.kind} from catalog table {write.name!r}, which does not exist"
                    )
                self._create(write.name, write.data.schema)
            schema = (
                self._created_schemas[write.name]
                if write.name in self._created_schemas
                else self._read_snapshot.table(write.name).schema
            )
            write.partition_filter = self._partition_filter(write.key, schema)
            if write.kind == "overwrite" and write.where is None:
                if write.partition_filter is None and run_partitions(self._context) is not None:
                    raise ValueError(
                        f"asset {asset}: an overwrite in a partitioned run needs the partition's predicate; pass "
                        f"where= (this step has no asset specs to take {PARTITION_EXPR!r} from)"
                    )
                write.where = write.partition_filter
            if write.kind == "merge" and write.delete_not_in_source is True and write.partition_filter is not None:
                write.delete_not_in_source = write.partition_filter
            counts = self._stage(write)
            if self.wap_branch is None:  # a branch made again (`_create`) stages the earlier writes again
                write.data = None  # staged: its files are written, the rows need not stay in memory
            self._writes.append(write)
            return counts

    def _partition_filter(self, key: dg.AssetKey, schema: pa.Schema | None) -> str | None:
        """The run's partitions of asset `key` as a predicate; None when the run or the asset is unpartitioned."""
        context = self._context
        keys = run_partitions(context)
        if keys is None or schema is None or not getattr(context, "has_assets_def", False):
            return None  # unpartitioned, nothing to type the predicate with, or a plain op (no asset specs)
        assets_def = context.assets_def
        partitions_def = assets_def.partitions_def
        if partitions_def is None:
            return None
        metadata = assets_def.specs_by_key[key].metadata if key in assets_def.specs_by_key else {}
        try:
            return partition_predicate(
                partitions_def,
                keys,
                metadata.get(PARTITION_EXPR),
                schema,
                asset=key.to_user_string(),
            )
        except PartitionPredicateError as exc:
            raise no_retry_failure(
                f"asset {key.to_user_string()}: metadata {PARTITION_EXPR!r}: {exc}",
                {"asset": key.to_user_string(), "setting": f"metadata {PARTITION_EXPR!r}"},
            ) from exc

    def _properties(self, key: dg.AssetKey) -> dict[str, str]:
        props = {ASSET_KEY_PROPERTY: key.to_user_string()}
        context = self._context
        if context is not None:
            props[RUN_ID_PROPERTY] = run_id_of(context)
            keys = run_partitions(context)
            if keys:
                props[PARTITION_KEY_PROPERTY] = partition_label(keys)
        return props

    def _stage(self, write: _Write) -> dict[str, int] | None:
        """Write the data (or deletion) files of one write in the catalog transaction; nothing is committed.
        A merge returns the core's counts."""
        common = {
            "commit_message": f"dagster: {write.key.to_user_string()}",
            "transaction_properties": self._properties(write.key),
        }
        target = self._tx.table(write.name)
        if write.kind == "append":
            target.append(write.data, **common)
        elif write.kind == "overwrite":
            target.overwrite(write.data, where=write.where, **common)
        elif write.kind == "delete":
            target.delete(write.where, **common)
        else:
            builder = target.merge_insert(write.on)
            if write.update is not False:
                builder.when_matched_update_all(write.update if isinstance(write.update, str) else None)
            if write.insert:
                builder.when_not_matched_insert_all()
            if write.delete_not_in_source is not False:
                condition = write.delete_not_in_source
                builder.when_not_matched_by_source_delete(condition if isinstance(condition, str) else None)
            return dict(builder.execute(write.data, **common))
        return None

    # ---- publishing ----------------------------------------------------------------------------

    @contextmanager
    def _mapping(self, what: str) -> Iterator[None]:
        with mvcc_conflicts(
            self._context,
            max_retries=self._resource.max_conflict_retries,
            delay=self._resource.conflict_retry_delay,
            what=what,
        ):
            yield

    def abort(self) -> None:
        """Remove every staged file; nothing is published."""
        if self._state == "open":
            self._state = "aborted"
            self._tx.abort()

    def publish(self) -> int:
        """Publish every write as ONE catalog version (returned); on any failure nothing is visible.

        Tables created by their first write are created in the same catalog version as the writes. Conflicts
        go through the plugin's one mapping: retryable ones become `RetryRequested` with backoff, incompatible
        ones a `Failure` naming the object and both versions. A concurrent step that created the same new
        table (or schema) first is retryable here, not incompatible: this step never asked to *create* it,
        only to write it, and on the next attempt the table exists.
        """
        if self._state != "open":
            raise ValueError(f"the catalog transaction is {self._state}")
        self._state = "publishing"
        what = ", ".join(dict.fromkeys(w.key.to_user_string() for w in self._writes)) or "catalog"
        try:
            with self._mapping(what):
                earlier = self._earlier_unreported_publish()
                if earlier is not None:
                    version, self.published_by_run = earlier
                    self._tx.abort()
                    if self.wap_branch is not None:  # the checks' results: on what was published
                        self.catalog.delete_branch(self.wap_branch)
                        self.audit_results = self._audit(self.catalog.snapshot(version))
                    self._state = "published"
                    self.published_version = version
                    log = getattr(self._context, "log", None)
                    if log is not None:
                        log.warning(
                            f"catalog {self.catalog.root}: catalog version {version} was published by an earlier "
                            f"attempt of step {self._stamp[STEP_KEY_PROPERTY]!r} (run {self.published_by_run}) and "
                            "never reported; not publishing again, reporting that version"
                        )
                    return version
                try:
                    version = int(self._tx.commit()) if self.wap_branch is None else self._audit_and_publish()
                except mvcc.errors.CatalogConflictError as exc:
                    if self.wap_branch is not None and cannot_replay_branch(exc):
                        raise fresh_branch_retry(exc) from exc
                    if lost_implicit_create(exc, self._created):
                        raise as_retryable(
                            exc,
                            f"this step created {exc.object_name!r} from its first write; it exists now, so the step "
                            "runs again and writes to it",
                        ) from exc
                    raise
        except BaseException:
            self._state = "failed"
            self._tx.abort()  # a no-op unless staging failed; a failed commit removed its own files
            raise
        self._state = "published"
        self.published_version = version
        return version

    def _audit(self, snapshot: Any) -> list[dg.AssetCheckResult]:
        filters: dict[dg.AssetKey, str | None] = {}
        for write in self._writes:
            filters.setdefault(write.key, write.partition_filter)
        keys = tuple(run_partitions(self._context) or ())
        name = str(self.wap_branch)
        return audit_catalog_branch(
            self._audits, snapshot, name, table_name=self.table_name, partition_filters=filters, partition_keys=keys
        )

    def _audit_and_publish(self) -> int:
        """Write-audit-publish: commit the writes on the branch, evaluate the branch checks on its snapshot, and
        publish the branch to main in one catalog version (returned) when every blocking one passed; otherwise
        record the evaluations and raise a `Failure`, main untouched and the branch kept."""
        name = str(self.wap_branch)
        self.branch_version = int(self._tx.commit())
        self.audit_results = self._audit(self.catalog.snapshot(self.branch_version, branch=name))
        failed = failed_blocking_checks(self._audits, self.audit_results)
        if failed:
            where = f"catalog branch {name!r} (catalog version {self.branch_version}) of catalog {self.catalog.root}"
            raise refuse_publish(self._context, self.audit_results, failed, where)
        version = int(
            self.catalog.publish_branch(name, commit_message=self._message, transaction_properties=self._stamp)
        )
        self.catalog.delete_branch(name)  # published: its forks' files are main's now
        return version

    def _earlier_unreported_publish(self) -> tuple[int, str] | None:
        """(catalog version, run id) of a publish by an earlier attempt of this very step that Dagster never
        recorded a materialization for; None when there is none, or this is a first attempt.

        The rule (docs/integrations/dagster/catalog.md, "A step run again after its publish"): only a step retry
        (retry number > 0)
        or a re-execution (a root run other than this run) can follow an earlier attempt. The newest catalog
        version stamped with the same root run, step key and partitions is that attempt's publish. If Dagster
        recorded a materialization naming it, the attempt completed and this run is a deliberate re-run: it
        publishes again. If not, the attempt published and died (or failed) before reporting: its publish is
        this step's effect, so this attempt discards its staged writes and reports that version.
        """
        stamp = self._stamp
        if not stamp:
            return None
        retry = getattr(self._context, "retry_number", 0) or 0
        if retry == 0 and stamp[ROOT_RUN_ID_PROPERTY] == stamp[RUN_ID_PROPERTY]:
            return None
        keys = (ROOT_RUN_ID_PROPERTY, STEP_KEY_PROPERTY, PARTITION_KEY_PROPERTY)
        for version in reversed(self.catalog.versions()):
            props = version.properties
            if all(props.get(k) == stamp.get(k) for k in keys):
                run_id = props.get(RUN_ID_PROPERTY, "")
                snapshot_tables = set(self.catalog.snapshot(version.version).tables())
                if self._reported(version) or not {w.name for w in self._writes} <= snapshot_tables:
                    return None
                return version.version, run_id
        return None

    def _reported(self, version: Any) -> bool:
        """Whether any run recorded a materialization naming `version` (a `CatalogVersion`) for this step's first
        asset (tables published together are reported together), among those made since it was published (from
        an hour earlier, for clocks that disagree)."""
        if not self._writes:
            return False
        after = version.timestamp.timestamp() - _CLOCK_SLACK_SECONDS
        records = self._context.instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=self._writes[0].key, after_timestamp=after), limit=_REPORTED_LOOKUP_LIMIT
        ).records
        return any(metadata_value(r, CATALOG_VERSION) == version.version for r in records)

    def materialize_results(self) -> tuple[dg.MaterializeResult | dg.AssetCheckResult, ...]:
        """One `MaterializeResult` per asset written, in the order first written, after `publish`.

        Metadata: the IO manager's (``mvcc/version`` = the table version this catalog version publishes, row counts,
        schema, ``dagster/uri`` = the table's directory, ``mvcc/data_version``), plus ``mvcc/catalog_version``,
        ``mvcc/catalog_read_version``, ``mvcc/catalog_table`` and ``mvcc/catalog_uri``. The data version is
        ``<table directory>@<latest data-changing table version>`` (a dropped and re-created table gets a
        new directory, so its versions never repeat an old table's).
        """
        if self.published_version is None:
            raise ValueError(
                f"the catalog transaction is {self._state}, not published: call materialize_results() after the "
                "`with mvcc_catalog.transaction(context) as tx:` block, which publishes when it ends"
            )
        try:
            return self._results(self.published_version)
        except Exception as exc:
            # The data is published: a retry of the step would publish it again (an append twice). Fail
            # without a retry, saying what was published, rather than let a RetryPolicy run the step again.
            raise no_retry_failure(
                f"catalog {self.catalog.root}: the step's tables were published as catalog version "
                f"{self.published_version}, but reading them back for the materializations failed "
                f"({type(exc).__name__}: {exc}); not retried, so they are not published twice",
                {CATALOG_VERSION: self.published_version, CATALOG_URI: self.catalog.root},
            ) from exc

    def _results(self, published: int) -> tuple[dg.MaterializeResult | dg.AssetCheckResult, ...]:
        snapshot = self.catalog.snapshot(published)
        results: list[dg.MaterializeResult] = []
        seen: dict[dg.AssetKey, _Write] = {}
        for write in self._writes:
            seen.setdefault(write.key, write)
        for key, write in seen.items():
            table = snapshot.table(write.name)
            meta = table_metadata(
                table, table_name=write.name, read_version=None, partition_filter=write.partition_filter
            )
            meta[CATALOG_VERSION] = published
            meta[CATALOG_READ_VERSION] = self.read_version
            meta[CATALOG_TABLE] = write.name
            meta[CATALOG_URI] = uri_value(self.catalog.root)
            if self.published_by_run is not None:
                meta[CATALOG_PUBLISHED_BY_RUN] = self.published_by_run
            if self.wap_branch is not None:
                meta[BRANCH] = self.wap_branch
                if self.branch_version is not None:
                    meta[CATALOG_BRANCH_VERSION] = self.branch_version
            version = f"{table.uri.rstrip('/').rsplit('/', 1)[-1]}@{meta['mvcc/data_version']}"
            checks = [r for r in self.audit_results if r.asset_key == key]
            data_version = dg.DataVersion(version)
            results.append(
                dg.MaterializeResult(asset_key=key, metadata=meta, data_version=data_version, check_results=checks)
            )
        return (*results, *(r for r in self.audit_results if r.asset_key not in seen))


def _int_only(value: Any) -> int | None:
    """A catalog version recorded as an int (what `materialize_results` writes)."""
    return as_int(value) if isinstance(value, int) else None


class MvccCatalogResource(dg.ConfigurableResource):
    """A catalog of mvcc tables (`mvcc_core.Catalog`) whose tables are assets. Bind it as ``mvcc_catalog``.

    Example::

        @dg.multi_asset(specs=[dg.AssetSpec("sales/orders"), dg.AssetSpec("sales/customers")])
        def load(context: dg.AssetExecutionContext, mvcc_catalog: MvccCatalogResource):
            with mvcc_catalog.transaction(context) as tx:
                tx.append("sales/orders", orders)
                tx.overwrite("sales/customers", customers)
            return tx.materialize_results()  # one catalog version holds both
    """

    root_uri: str
    """The catalog's root (a local path or ``s3://bucket/prefix``)."""
    storage_options: dict[str, str] = {}
    key_prefix: list[str] = []
    """Leading asset key parts that are not part of the catalog name (``["warehouse"]``: the asset key
    ``warehouse/sales/orders`` is the table ``sales.orders``)."""
    create_if_missing: bool = True
    """Create the catalog at `root_uri` on first use (otherwise a missing catalog fails the step)."""
    max_conflict_retries: int = DEFAULT_MAX_RETRIES
    """How often a step is re-run after a retryable catalog conflict (`RetryRequested`)."""
    conflict_retry_delay: float = DEFAULT_DELAY
    """The base of the exponential backoff between those re-runs, in seconds."""

    def table_name(self, key: AssetName) -> str:
        """The catalog table (``schema.table``) of an asset key (`catalog_table_name`, after `key_prefix`).

        Args:
            key: The asset key (string, `AssetKey` or path parts).

        Returns:
            ``schema.table``.
        """
        return catalog_table_name(key, self.key_prefix)

    def options(self) -> dict[str, Any] | None:
        return dict(self.storage_options) or None

    def open(self) -> mvcc.Catalog:
        """The catalog at `root_uri`, created (empty, with the schema ``main``) when missing and allowed."""
        try:
            return mvcc.Catalog.open(self.root_uri, storage_options=self.options())
        except mvcc.TableNotFoundError:
            if not self.create_if_missing:
                raise
        try:
            return mvcc.Catalog.create(self.root_uri, storage_options=self.options())
        except mvcc.TableExistsError:  # a concurrent step created it first
            return mvcc.Catalog.open(self.root_uri, storage_options=self.options())

    def create_tables(self, catalog: mvcc.Catalog, schemas: dict[str, pa.Schema]) -> int:
        """Create the tables of `schemas` (``schema.table`` -> Arrow schema) that do not exist yet, and their
        schemas, in one catalog version; a concurrent step that created some of them first is not an error.
        Returns the catalog version that has them all.

        Args:
            catalog: The catalog.
            schemas: ``schema.table`` -> Arrow schema.

        Returns:
            The catalog version.
        """
        for attempt in range(_CREATE_ATTEMPTS):
            snapshot = catalog.snapshot()
            tables, existing_schemas = set(snapshot.tables()), set(snapshot.schemas())
            todo = {n: s for n, s in schemas.items() if n not in tables}
            if not todo:
                return int(snapshot.version)
            try:
                with catalog.transaction(commit_message="dagster: create " + ", ".join(sorted(todo))) as tx:
                    for schema_name in sorted({n.split(".")[0] for n in todo} - existing_schemas):
                        tx.create_schema(schema_name)
                    for name, schema in todo.items():
                        tx.create_table(name, schema)
                published = tx.published_version
                assert published is not None  # the with block published it
                return published
            except mvcc.MvccError:
                # A concurrent creator won (a CatalogConflictError or "exists already"): look again; give up
                # after a few rounds, so an error that is not that race still surfaces.
                if attempt == _CREATE_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    @contextmanager
    def transaction(
        self, context: Any = None, *, commit_message: str | None = None
    ) -> Iterator[CatalogAssetTransaction]:
        """Stage the step's writes, publish them as one catalog version when the block ends without an error.

        `context`: the asset execution context (run id, partitions, retry number, the assets' metadata).
        An exception in the block removes every staged file and propagates; nothing is published.

        Args:
            context: See above.
            commit_message: The catalog version's message (default: the assets and the run).

        Returns:
            A context manager giving the `CatalogAssetTransaction`.
        """
        audits = catalog_branch_audits(context) if catalog_wap_enabled(context) else None
        with mvcc_conflicts(context, max_retries=self.max_conflict_retries, delay=self.conflict_retry_delay):
            catalog = self.open()
        message = commit_message
        if message is None and context is not None:
            keys = ", ".join(k.to_user_string() for k in sorted(context.selected_asset_keys, key=str))
            message = f"dagster: {keys} (run {run_id_of(context)})"
        tx = CatalogAssetTransaction(self, context, catalog, message, audits)
        try:
            yield tx
        except BaseException:
            tx.abort()
            raise
        if tx.is_open:
            tx.publish()

    # ---- reading ---------------------------------------------------------------------------------

    def pinned_catalog_version(self, context: Any, key: AssetName) -> int | None:
        """The catalog version recorded by the materialization of `key` a step depends on (`pinned_version`'s order):

        1. `key` was materialized in this run: that materialization's ``mvcc/catalog_version``;
        2. the run re-executes an earlier one (its root run): the root run's own materialization of `key`,
           else the newest materialization created before the root run was (what the root run read);
        3. otherwise the newest materialization. None when none records a catalog version (read the latest).

        Args:
            context: The asset or op execution context (its run and instance).
            key: The asset key (string, `AssetKey` or path parts).

        Returns:
            The catalog version, or None.
        """
        run = getattr(context, "run", None)
        if run is None:
            raise ValueError("pinned_catalog_version needs an asset or op execution context (its run)")
        return pinned_value(context.instance, run, to_asset_key(key), CATALOG_VERSION, convert=_int_only)

    def snapshot_for(self, context: Any, keys: Iterable[AssetName]) -> Any:
        """One consistent catalog snapshot for reading the tables of `keys`: the newest catalog version their
        materializations recorded (tables published together recorded the same one), or the latest.

        Args:
            context: The asset or op execution context.
            keys: The assets read.

        Returns:
            The catalog snapshot (`CatalogSnapshot`).
        """
        versions = [v for v in (self.pinned_catalog_version(context, k) for k in keys) if v is not None]
        catalog = self.open()
        return catalog.snapshot(max(versions)) if versions else catalog.snapshot()

    def load_table(self, context: Any, key: AssetName) -> mvcc.Table:
        """The table of `key` at the catalog version its materialization recorded (`snapshot_for`).

        Args:
            context: The asset or op execution context.
            key: The asset key (string, `AssetKey` or path parts).

        Returns:
            The table handle.
        """
        return self.snapshot_for(context, [key]).table(self.table_name(key))
