"""`MvccIOManager`: asset outputs become table versions; inputs are read at the version the run depends on.

How outputs are written and inputs pinned: docs/integrations/dagster/io_manager.md ("Writing", "Reading").
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator, Mapping
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

import mvcc_core as mvcc
from mvcc_core import Table as MvccTable

from .._dagster_internals import CheckError, set_loaded_input_metadata
from ..error_mapping import DEFAULT_DELAY, DEFAULT_MAX_RETRIES, mvcc_conflicts, no_retry_failure
from ..lineage import pinned_partition_versions, pinned_version
from ..metadata import COLUMNS, MERGE_ON, PARTITION_EXPR, PARTITION_VERSIONS, WRITE_MODE
from ..partitions import PartitionPredicateError, partition_predicate
from ..properties import ASSET_KEY_PROPERTY, PARTITION_KEY_PROPERTY, RUN_ID_PROPERTY
from ..resources import MvccResource
from ..versions import table_metadata, uri_value
from ..write_audit_publish.table import WapOutcome, branch_audits, wap_enabled, write_audit_publish
from .backfill import restore_for_backfill
from .type_handlers import (
    MvccTypeHandler,
    SparkTypeHandler,
    default_type_handlers,
    handler_for_input,
    handler_for_output,
)

WRITE_MODES = ("overwrite", "append", "merge")

__all__ = ["MERGE_ON", "WRITE_MODE", "MvccIOManager", "pinned_partition_versions", "pinned_version"]


def _bad(asset: str, setting: str, problem: str) -> dg.Failure:
    """A bad setting or input: a Failure that no RetryPolicy retries (it would fail again)."""
    prefix = f"asset {asset}: "
    return no_retry_failure(f"{prefix}{setting}: {problem.removeprefix(prefix)}", {"asset": asset, "setting": setting})


def _as_arrow(obj: Any, asset: str, handlers: list[MvccTypeHandler]) -> pa.Table | pa.RecordBatchReader | None:
    """The output as Arrow data through its type handler, None for a Spark DataFrame (Spark writes it); a
    Failure for a type no handler takes."""
    try:
        handler = handler_for_output(obj, handlers, writer="MvccIOManager")
    except TypeError as exc:
        raise _bad(asset, "output type", str(exc)) from exc
    return None if isinstance(handler, SparkTypeHandler) else handler.to_arrow(obj)


def _input_columns(context: dg.InputContext, schema: pa.Schema, asset: str) -> list[str] | None:
    """The input's ``columns`` metadata (``dg.AssetIn(metadata={"columns": [...]})``), checked against the
    table; None reads every column."""
    columns = (context.definition_metadata or {}).get(COLUMNS)
    if columns is None:
        return None
    if (
        isinstance(columns, str)
        or not isinstance(columns, list | tuple)
        or not all(isinstance(c, str) and c for c in columns)
    ):
        raise _bad(asset, f"input metadata {COLUMNS!r}", f"must be a list of column names, got {columns!r}")
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise _bad(asset, f"input metadata {COLUMNS!r}", f"column(s) {missing} are not in the table ({schema.names})")
    return list(columns)


def _write_settings(meta: Mapping[str, Any], asset: str) -> tuple[str, list[str] | None]:
    mode = meta.get(WRITE_MODE, "overwrite")
    if mode not in WRITE_MODES:
        raise _bad(asset, f"metadata {WRITE_MODE!r}", f"must be one of {list(WRITE_MODES)}, got {mode!r}")
    if mode != "merge":
        return mode, None
    on = meta.get(MERGE_ON)
    if isinstance(on, str) and on:
        return mode, [on]
    if isinstance(on, list | tuple) and on and all(isinstance(c, str) and c for c in on):
        return mode, list(on)
    raise _bad(
        asset, f"metadata {MERGE_ON!r}", f"write mode 'merge' needs the key column(s): a name or a list, got {on!r}"
    )


def _check_unique_keys(rows: pa.Table, on: list[str], asset: str) -> None:
    """A merge's source keys must be unique (which source row would win is undefined), also when the merge
    creates the table: the same rule, and the same kind of error, as the core's merge_insert."""
    counts = rows.select(on).group_by(on).aggregate([([], "count_all")])
    for row in counts.filter(pc.greater(counts.column("count_all"), 1)).to_pylist():
        if all(row[c] is not None for c in on):  # NULL keys match nothing, so they may repeat
            key = {c: row[c] for c in on}
            raise _bad(
                asset,
                f"metadata {MERGE_ON!r}",
                f"the output has {row['count_all']} rows with key {key}; a merge needs unique keys (deduplicate it)",
            )


@dataclasses.dataclass(frozen=True)
class _Write:
    """One output's write: where, how (`mode`, the merge keys, a partition's predicate) and what it records."""

    uri: str
    mode: str
    merge_on: list[str] | None
    where: str | None
    properties: dict[str, str]
    message: str

    def commit_keywords(self) -> dict[str, Any]:
        """The commit message and transaction properties, as every mvcc write takes them."""
        return {"commit_message": self.message, "transaction_properties": self.properties}


def _partition_label(keys: list[str]) -> str:
    """One key, or a single-run backfill's range as ``first...last``."""
    return keys[0] if len(keys) == 1 else f"{min(keys)}...{max(keys)}"


class MvccIOManager(dg.ConfigurableIOManager):
    """Stores asset outputs as mvcc table versions and loads inputs at their pinned versions.

    Tables are named as `MvccResource` names them (``{root_uri}/{asset key path}``): give the resource
    (``MvccIOManager(mvcc=MvccResource(...))``, the one bound as ``mvcc``) or its fields
    (``MvccIOManager(root_uri=...)``), not both.

    Outputs and inputs are converted by type handlers (`type_handlers`: pyarrow, pandas, polars, Spark), chosen
    by the output's type and the input's annotation; a subclass overriding `type_handlers` stores other types.
    An input's ``columns`` metadata (``dg.AssetIn(metadata={"columns": [...]})``) reads only those columns.

    Spark DataFrames take the fast path both ways: an input annotated with pyspark's ``DataFrame`` is read
    with ``mvcc_core.spark.read`` (Spark's own Parquet reader over the pinned version's files, pruned by the
    partition predicate) and a Spark output is written with ``mvcc_core.spark.write``; neither goes through
    the slower ``format("mvcc")`` data source unless the table is on an object store (docs/guide/spark.md).

    Attributes:
        mvcc: The warehouse resource; built from `root_uri`, `storage_options` and `external_store` when None.
        root_uri: Where the tables live (when `mvcc` is not given).
        storage_options: Object store options (when `mvcc` is not given).
        external_store: The external commit store (when `mvcc` is not given).
        max_conflict_retries: How often a step is re-run after a retryable commit conflict (`RetryRequested`).
        conflict_retry_delay: The base of the exponential backoff between those re-runs, in seconds.
    """

    mvcc: MvccResource | None = None
    root_uri: str | None = None
    storage_options: dict[str, str] = {}
    external_store: str | None = None
    max_conflict_retries: int = DEFAULT_MAX_RETRIES
    conflict_retry_delay: float = DEFAULT_DELAY

    # ---- helpers ---------------------------------------------------------------------------------

    @classmethod
    def type_handlers(cls) -> list[MvccTypeHandler]:
        """The type handlers outputs are written and inputs read with, first match wins.

        Override it in a subclass to store another type (``[MyHandler(), *super().type_handlers()]``).

        Returns:
            pyarrow, pandas, polars and pyspark's handlers (`type_handlers.default_type_handlers`).
        """
        return default_type_handlers()

    def tables(self) -> MvccResource:
        """The resource that names and opens the tables (`mvcc`, or one built from the fields).

        Returns:
            The resource.

        Raises:
            ValueError: Neither `mvcc` nor `root_uri` given, or both.
        """
        if self.mvcc is not None:
            if self.root_uri is not None or self.storage_options or self.external_store is not None:
                raise ValueError(
                    "MvccIOManager: give either mvcc=MvccResource(...) or root_uri (with storage_options, "
                    "external_store), not both"
                )
            return self.mvcc
        if self.root_uri is None:
            raise ValueError("MvccIOManager needs mvcc=MvccResource(...) or root_uri: where the tables live")
        return MvccResource(
            root_uri=self.root_uri, storage_options=self.storage_options, external_store=self.external_store
        )

    def _uri(self, asset_key: dg.AssetKey, asset: str) -> str:
        """The table's uri under the root; a Failure (not retried) for a key that would name a table outside
        it or inside another table, before anything is read or written."""
        tables = self.tables()
        try:
            return tables.uri(asset_key)
        except mvcc.errors.InvalidNameError as exc:
            raise _bad(asset, "asset key", f"{exc}; rename the asset (or give it another io_manager_key)") from exc

    def _open(self, uri: str, asset: str, version: int | None = None) -> MvccTable | None:
        """The table, None if there is none yet; a Failure naming `root_uri` if the store cannot be reached."""
        tables = self.tables()
        try:
            return tables.open_uri(uri, version)
        except mvcc.TableNotFoundError:
            if version is not None:
                raise
            self._check_local_root(uri, asset)
            return None
        except (mvcc.VersionNotFoundError, mvcc.errors.CorruptManifestError):
            raise
        except Exception as exc:  # noqa: BLE001 - any reason the store is unreachable is reported the same way
            raise _bad(
                asset,
                "root_uri",
                f"cannot reach table {uri} under root_uri {tables.root_uri!r}: {type(exc).__name__}: {exc}",
            ) from exc

    def _check_local_root(self, uri: str, asset: str) -> None:
        """A local table that does not exist yet must be creatable: its nearest existing ancestor is a writable
        directory. (A remote store answered the listing already, which is what reachable means there.)"""
        if "://" in uri and not uri.startswith("file://"):
            return
        path = os.path.abspath(uri.removeprefix("file://"))
        while not os.path.exists(path):
            parent = os.path.dirname(path)
            if parent == path:
                break
            path = parent
        if not os.path.isdir(path) or not os.access(path, os.W_OK | os.X_OK):
            raise _bad(
                asset,
                "root_uri",
                f"cannot create table {uri} under root_uri {self.tables().root_uri!r}: {path} is not a writable "
                "directory",
            )

    # ---- outputs ---------------------------------------------------------------------------------

    def handle_output(self, context: dg.OutputContext, obj: Any) -> Iterator[dg.DagsterEvent]:  # type: ignore[override]
        """Write `obj` as one commit (see the module docstring) and report it as the materialization.

        With ``mvcc/write_audit_publish: true`` the output goes to the run's branch, the asset's branch checks
        are evaluated there, and main gets one commit only when every blocking check passed.

        Args:
            context: Dagster's output context.
            obj: The asset's output.

        Yields:
            The branch checks' evaluation events (write-audit-publish only).
        """
        if not context.has_asset_key:
            # An op's output (not an asset's) has no table to go to; say so rather than Dagster's own
            # "Attempting to access asset_key" (seen in benchmarks/week.py: a plain op returning its count).
            raise no_retry_failure(
                f"op output {context.step_key}.{context.name}: MvccIOManager stores asset outputs as "
                "tables; return nothing from the op, or give its output another io_manager_key"
            )
        asset_key = context.asset_key
        asset = asset_key.to_user_string()
        meta = dict(context.definition_metadata or {})
        mode, merge_on = _write_settings(meta, asset)
        wap = wap_enabled(meta, asset)
        data = _as_arrow(obj, asset, self.type_handlers())
        uri = self._uri(asset_key, asset)
        table = self._open(uri, asset)

        properties = {RUN_ID_PROPERTY: context.run_id, ASSET_KEY_PROPERTY: asset}
        where = None
        if context.has_asset_partitions:
            keys = list(context.asset_partition_keys)
            properties[PARTITION_KEY_PROPERTY] = _partition_label(keys)
            if mode == "overwrite":
                schema = table.schema if table is not None else self._schema_of(obj, data)
                try:
                    where = partition_predicate(
                        context.asset_partitions_def, keys, meta.get(PARTITION_EXPR), schema, asset=asset
                    )
                except PartitionPredicateError as exc:
                    raise _bad(asset, f"metadata {PARTITION_EXPR!r}", str(exc)) from exc
        if merge_on is not None:
            schema = table.schema if table is not None else self._schema_of(obj, data)
            missing = [c for c in merge_on if c not in schema.names]
            if missing:
                raise _bad(
                    asset, f"metadata {MERGE_ON!r}", f"column(s) {missing} are not in the table ({schema.names})"
                )

        # A backfill launched with the run tag mvcc/backfill_restore: restore first (once per backfill), or fail
        # before anything is committed (backfill.py).
        with mvcc_conflicts(context, what=f"backfill restore of {asset}"):
            table, restored = restore_for_backfill(context, table, asset)
        message = f"dagster: {asset}" + (f" [{properties[PARTITION_KEY_PROPERTY]}]" if where else "")
        request = _Write(uri, mode, merge_on, where, properties, message)
        published: dict[str, Any] = {}
        with mvcc_conflicts(
            context, max_retries=self.max_conflict_retries, delay=self.conflict_retry_delay, what=asset
        ):
            if wap:
                # Write to the run's branch, audit it with the asset's branch checks, publish to main in one
                # commit when every blocking check passed (write_audit_publish.py).
                audits = branch_audits(context, asset)  # refuses a blocking check that is not one, first
                if data is None:
                    # the branch is written through a table handle, in this process
                    data = SparkTypeHandler().to_arrow(obj)
                if table is None:
                    table = self._create_empty(data.schema, uri, properties, asset)
                arrow = data

                def write(handle: MvccTable) -> MvccTable:
                    return self._write_arrow(arrow, handle, request)

                for item in write_audit_publish(
                    context,
                    table,
                    write,
                    audits,
                    asset=asset,
                    partition_filter=where,
                    commit_message=message,
                    transaction_properties=properties,
                ):
                    if isinstance(item, WapOutcome):
                        table, published = item.table, item.metadata
                    else:
                        yield item
            elif data is None:
                table = self._write_spark(obj, request)
            else:
                table = self._write_arrow(data, table, request)
            txn = table.transaction()
            read_version = txn.read_version if txn is not None else None
            metadata = table_metadata(table, table_name=asset, read_version=read_version, partition_filter=where)
        context.add_output_metadata({**metadata, **restored, **published})
        # The materialization's data version: the latest data-changing commit (versions.py). Set on the step so
        # that Dagster records it as user-provided (the same path as Output(data_version=...)).
        context.step_context.set_data_version(asset_key, dg.DataVersion(str(metadata["mvcc/data_version"])))

    def _create_empty(self, schema: pa.Schema, uri: str, properties: dict[str, str], asset: str) -> MvccTable:
        """A missing table created with no rows (a branch needs a table to fork from); a concurrent step that
        created it first is fine."""
        location = self._location()
        with contextlib.suppress(mvcc.TableExistsError):
            return mvcc.write_table(
                schema.empty_table(),
                uri,
                mode="create",
                commit_message=f"dagster: {asset} (created empty for write-audit-publish)",
                transaction_properties=properties,
                **location,
            )
        return mvcc.open_table(uri, **location)

    @staticmethod
    def _schema_of(obj: Any, data: pa.Table | pa.RecordBatchReader | None) -> pa.Schema:
        if data is not None:
            return data.schema
        return obj.limit(0).toArrow().schema

    def _location(self) -> dict[str, Any]:
        """The keywords that open or create a table under the resource's root (storage options, external store)."""
        tables = self.tables()
        return {"storage_options": tables.options(), "external_store": tables.external_store}

    def _write_arrow(
        self, data: pa.Table | pa.RecordBatchReader, table: MvccTable | None, request: _Write
    ) -> MvccTable:
        common = request.commit_keywords()
        location = self._location()
        if table is None and request.mode != "merge":
            # The first write creates the table with the rows, in one commit (a partitioned overwrite checks
            # every row against its predicate); a concurrent first writer that wins is written into by the core.
            return mvcc.write_table(data, request.uri, mode=request.mode, where=request.where, **location, **common)
        merge_on = request.merge_on
        if table is None:
            # A first merge into a missing table inserts every row (its keys must be unique, as merge_insert's);
            # if a concurrent step creates the table first, it becomes a merge into that table.
            rows = data if isinstance(data, pa.Table) else data.read_all()
            assert merge_on is not None
            _check_unique_keys(rows, merge_on, request.properties[ASSET_KEY_PROPERTY])
            # it was missing when this step looked: a TableExistsError means a concurrent step created it since
            with contextlib.suppress(mvcc.TableExistsError):
                return mvcc.write_table(rows, request.uri, mode="create", **location, **common)
            data, table = rows, mvcc.open_table(request.uri, **location)
        if request.mode == "append":
            return table.append(data, **common)
        if request.mode == "overwrite":
            return table.overwrite(data, where=request.where, **common)
        assert merge_on is not None
        (
            table.merge_insert(merge_on)
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(data if isinstance(data, pa.Table) else data.read_all(), **common)
        )
        return table

    def _write_spark(self, df: Any, request: _Write) -> MvccTable:
        if request.mode == "merge":
            # merge_insert runs in this process: the DataFrame is collected (documented in
            # docs/integrations/dagster/index.md).
            data = SparkTypeHandler().to_arrow(df)
            table = self._open(request.uri, request.properties[ASSET_KEY_PROPERTY])
            return self._write_arrow(data, table, dataclasses.replace(request, where=None))
        from mvcc_core.spark import write  # pyspark is needed only for Spark outputs

        options = self._spark_options()
        return write(
            df,
            request.uri,
            mode=request.mode,
            where=request.where,
            storage_options=options,
            **request.commit_keywords(),
        )

    def _spark_options(self) -> dict[str, str] | None:
        """The storage options as the Spark source takes them (the external store is one of them)."""
        tables = self.tables()
        options = dict(tables.storage_options)
        if tables.external_store is not None:
            options["external_store"] = tables.external_store
        return options or None

    # ---- inputs ----------------------------------------------------------------------------------

    def load_input(self, context: dg.InputContext) -> Any:
        """The upstream at its pinned version, filtered to the mapped partitions, in the annotated type.

        A step reading several upstream partitions whose newest materializations recorded different versions
        (a single-run backfill, a weekly asset over daily ones) reads each partition at its own version
        (`pinned_partition_versions`) and gets the union.

        Args:
            context: Dagster's input context.

        Returns:
            The rows (only the input's ``columns`` metadata's columns, when it has one) in the type its
            annotation names (`type_handlers`): a pyarrow Table by default, a pandas, polars or Spark DataFrame.
        """
        asset_key = context.asset_key
        asset = asset_key.to_user_string()
        uri = self._uri(asset_key, asset)
        handler = handler_for_input(context.dagster_type.typing_type, self.type_handlers())
        spark = isinstance(handler, SparkTypeHandler)
        upstream = context.upstream_output
        has_expr = upstream is not None and (upstream.definition_metadata or {}).get(PARTITION_EXPR) is not None
        pins = pinned_partition_versions(context) if has_expr else None  # without a column: no per-partition read
        if pins is not None and len(set(pins.values())) > 1:
            return self._load_by_partition(context, uri, asset, pins, handler)
        version = pinned_version(context)
        with mvcc_conflicts(context, what=asset):
            table = self.tables().open_uri(uri, version)
            where = self._input_filter(context, table, asset, "spark" if spark else "mvcc")
        columns = _input_columns(context, table.schema, asset)
        _add_input_metadata(
            context,
            {
                "mvcc/version": table.version,
                "mvcc/uri": uri_value(uri),
                "mvcc/filter": where or "",
                **({"mvcc/columns": dg.MetadataValue.json(columns)} if columns is not None else {}),
            },
        )
        if spark:
            return self._load_spark(uri, table.version, where, columns)
        return handler.from_arrow(table.to_table(columns=columns, filter=where or None))

    @staticmethod
    def _input_filter(context: dg.InputContext, table: MvccTable, asset: str, dialect: str) -> str | None:
        if not context.has_asset_partitions:
            return None
        partitions_def = context.asset_partitions_def
        keys = list(context.asset_partition_keys)
        if len(keys) == len(partitions_def.get_partition_keys(dynamic_partitions_store=context.instance)):
            return None  # every partition: no filter needed
        upstream = context.upstream_output
        expr = (upstream.definition_metadata or {}).get(PARTITION_EXPR) if upstream is not None else None
        try:
            return partition_predicate(partitions_def, keys, expr, table.schema, asset=asset, dialect=dialect)
        except PartitionPredicateError as exc:
            raise _bad(asset, f"metadata {PARTITION_EXPR!r}", str(exc)) from exc

    def _load_by_partition(
        self,
        context: dg.InputContext,
        uri: str,
        asset: str,
        pins: dict[str, int | None],
        handler: MvccTypeHandler,
    ) -> Any:
        """Each group of partitions pinned to one version read at that version with its own predicate."""
        groups: dict[int | None, list[str]] = {}
        for key, version in pins.items():
            groups.setdefault(version, []).append(key)
        upstream = context.upstream_output
        expr = (upstream.definition_metadata or {}).get(PARTITION_EXPR) if upstream is not None else None
        spark = isinstance(handler, SparkTypeHandler)
        parts: list[tuple[int, str, list[str]]] = []  # (version read, predicate, partitions)
        columns: list[str] | None = None
        with mvcc_conflicts(context, what=asset):
            for version, keys in sorted(groups.items(), key=lambda g: (g[0] is None, g[0] or 0)):
                table = self.tables().open_uri(uri, version)
                try:
                    where = partition_predicate(
                        context.asset_partitions_def,
                        keys,
                        expr,
                        table.schema,
                        asset=asset,
                        dialect="spark" if spark else "mvcc",
                    )
                except PartitionPredicateError as exc:
                    raise _bad(asset, f"metadata {PARTITION_EXPR!r}", str(exc)) from exc
                parts.append((table.version, where, keys))
                columns = _input_columns(context, table.schema, asset)
        versions = {key: v for v, _, keys in parts for key in keys}
        _add_input_metadata(
            context,
            {
                "mvcc/version": max(v for v, _, _ in parts),
                "mvcc/uri": uri_value(uri),
                "mvcc/filter": " OR ".join(w for _, w, _ in parts),
                PARTITION_VERSIONS: dg.MetadataValue.json(dict(sorted(versions.items()))),
                **({"mvcc/columns": dg.MetadataValue.json(columns)} if columns is not None else {}),
            },
        )
        if spark:
            frames = [self._load_spark(uri, v, w, columns) for v, w, _ in parts]
            result = frames[0]
            for frame in frames[1:]:
                result = result.unionByName(frame, allowMissingColumns=True)
            return result
        tables = [self.tables().open_uri(uri, v).to_table(columns=columns, filter=w) for v, w, _ in parts]
        return handler.from_arrow(pa.concat_tables(tables, promote_options="default"))

    def _load_spark(self, uri: str, version: int, where: str | None, columns: list[str] | None) -> Any:
        from pyspark.sql import SparkSession

        from mvcc_core.spark import read

        spark = SparkSession.getActiveSession()
        if spark is None:
            raise ValueError(
                "a Spark DataFrame input needs an active SparkSession: give the asset dagster-pyspark's "
                "PySparkResource (it creates the session when the step starts)"
            )
        options = self._spark_options()
        # Spark's own Parquet reader over the pinned version's files for local tables (the partition filter
        # prunes files on the driver), the `mvcc` data source otherwise (docs/guide/spark.md, "Native reads").
        return read(spark, uri, version=version, columns=columns, filter=where, storage_options=options)


def _add_input_metadata(context: dg.InputContext, metadata: Mapping[str, Any]) -> None:
    """Metadata on the LOADED_INPUT event only (where re-executions find the versions read).

    Without the internal route (`set_loaded_input_metadata`) the public `add_input_metadata` is used
    (observations again; pinning unchanged). For a step loading several partitions that fallback raises a
    CheckError while building its observation, after storing the metadata for the LOADED_INPUT event.
    """
    if set_loaded_input_metadata(context, metadata):
        return
    try:
        context.add_input_metadata(metadata)
    except CheckError:
        if not (context.has_asset_partitions and len(context.asset_partition_keys) > 1):
            raise
