"""`MvccIOManager`: asset outputs become table versions; inputs are read at the version the run depends on.

Outputs (`handle_output`): a pyarrow Table, a RecordBatchReader, a pandas DataFrame or a pyspark DataFrame
(written through `mvcc_core.spark.write`, on the DataFrame's own session, which dagster-pyspark's
`PySparkResource` provides to the asset). The write mode comes from the asset's definition metadata
``mvcc/write_mode``: ``overwrite`` (default), ``append`` or ``merge`` (upsert on ``mvcc/merge_on``). A
partitioned asset in ``overwrite`` mode replaces exactly its partitions' rows in one commit (the core's
``overwrite(where=...)``), the predicate built by `mvcc_dagster.partitions`; when it cannot be built the step
fails and nothing is written. Every setting is checked before a byte is written, and every commit carries
``dagster/run_id``, ``dagster/asset_key`` and, when partitioned, ``dagster/partition_key``.

Inputs (`load_input`): the upstream table at the version recorded by the materialization the run depends
on (see `pinned_version`), filtered to the mapped partitions, as a pyarrow Table, or a pandas / Spark
DataFrame when the input is annotated so.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
from dagster._core.definitions.metadata import normalize_metadata
from dagster_shared.check import CheckError

import mvcc_core as mvcc

from .backfill import restore_for_backfill
from .conflicts import DEFAULT_DELAY, DEFAULT_MAX_RETRIES, mvcc_conflicts
from .partitions import PARTITION_EXPR, PartitionPredicateError, partition_predicate
from .properties import ASSET_KEY_PROPERTY, PARTITION_KEY_PROPERTY, ROOT_RUN_ID_TAG, RUN_ID_PROPERTY
from .resources import resolve_uri
from .versions import table_metadata, uri_value

WRITE_MODE = "mvcc/write_mode"
MERGE_ON = "mvcc/merge_on"
WRITE_MODES = ("overwrite", "append", "merge")

PARTITION_VERSIONS = "mvcc/partition_versions"


def _bad(asset: str, setting: str, problem: str) -> dg.Failure:
    """A bad setting or input: a Failure that no RetryPolicy retries (it would fail again)."""
    prefix = f"asset {asset}: "
    return dg.Failure(
        description=f"{prefix}{setting}: {problem.removeprefix(prefix)}",
        metadata={"asset": asset, "setting": setting},
        allow_retries=False,
    )


def _is_spark_dataframe(obj: Any) -> bool:
    """A classic or Spark Connect DataFrame, without importing pyspark when the object is not one."""
    module = type(obj).__module__ or ""
    return module.startswith("pyspark.sql") and type(obj).__name__ == "DataFrame"


def _is_pandas_dataframe(obj: Any) -> bool:
    module = type(obj).__module__ or ""
    return module.startswith("pandas") and type(obj).__name__ == "DataFrame"


def _as_arrow(obj: Any, asset: str) -> pa.Table | pa.RecordBatchReader | None:
    """The output as Arrow data, None for a Spark DataFrame; a Failure for anything that is not a table."""
    if isinstance(obj, pa.Table | pa.RecordBatchReader):
        return obj
    if isinstance(obj, pa.RecordBatch):
        return pa.Table.from_batches([obj])
    if _is_pandas_dataframe(obj):
        return pa.Table.from_pandas(obj, preserve_index=False)
    if _is_spark_dataframe(obj):
        return None
    raise _bad(
        asset,
        "output type",
        f"MvccIOManager stores a pyarrow Table or RecordBatchReader, a pandas DataFrame or a pyspark DataFrame, "
        f"got {type(obj).__module__}.{type(obj).__qualname__}",
    )


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


def _partition_label(keys: list[str]) -> str:
    """One key, or a single-run backfill's range as ``first...last``."""
    return keys[0] if len(keys) == 1 else f"{min(keys)}...{max(keys)}"


class MvccIOManager(dg.ConfigurableIOManager):
    """Stores asset outputs as mvcc table versions (see the module docstring). Same fields as `MvccResource`;
    tables live at ``{root_uri}/{asset key path}``."""

    root_uri: str
    storage_options: dict[str, str] = {}
    external_store: str | None = None
    max_conflict_retries: int = DEFAULT_MAX_RETRIES
    """How often a step is re-run after a retryable commit conflict (`RetryRequested`)."""
    conflict_retry_delay: float = DEFAULT_DELAY
    """The base of the exponential backoff between those re-runs, in seconds."""

    # ---- helpers ---------------------------------------------------------------------------------

    def _options(self) -> dict[str, Any] | None:
        return dict(self.storage_options) or None

    def _open(self, uri: str, asset: str, version: int | None = None) -> mvcc.Table | None:
        """The table, None if there is none yet; a Failure naming `root_uri` if the store cannot be reached."""
        try:
            return mvcc.open_table(uri, version, storage_options=self._options(), external_store=self.external_store)
        except mvcc.TableNotFoundError:
            if version is not None:
                raise
            self._check_local_root(uri, asset)
            return None
        except (mvcc.VersionNotFoundError, mvcc.CorruptManifestError):
            raise
        except Exception as exc:  # noqa: BLE001 - any reason the store is unreachable is reported the same way
            raise _bad(
                asset,
                "root_uri",
                f"cannot reach table {uri} under root_uri {self.root_uri!r}: {type(exc).__name__}: {exc}",
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
                f"cannot create table {uri} under root_uri {self.root_uri!r}: {path} is not a writable directory",
            )

    # ---- outputs ---------------------------------------------------------------------------------

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        """Write `obj` as one commit (see the module docstring) and report it as the materialization."""
        if not context.has_asset_key:
            # An op's output (not an asset's) has no table to go to; say so rather than Dagster's own
            # "Attempting to access asset_key" (seen in benchmarks/week.py: a plain op returning its count).
            raise dg.Failure(
                description=f"op output {context.step_key}.{context.name}: MvccIOManager stores asset outputs as "
                "tables; return nothing from the op, or give its output another io_manager_key",
                allow_retries=False,
            )
        asset_key = context.asset_key
        asset = asset_key.to_user_string()
        meta = dict(context.definition_metadata or {})
        mode, merge_on = _write_settings(meta, asset)
        data = _as_arrow(obj, asset)
        uri = resolve_uri(self.root_uri, asset_key)
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
        with mvcc_conflicts(
            context, max_retries=self.max_conflict_retries, delay=self.conflict_retry_delay, what=asset
        ):
            if data is None:
                table = self._write_spark(obj, uri, mode, merge_on, where, properties, message)
            else:
                table = self._write_arrow(data, uri, table, mode, merge_on, where, properties, message)
            txn = table.transaction()
            read_version = txn.read_version if txn is not None else None
            metadata = table_metadata(table, table_name=asset, read_version=read_version, partition_filter=where)
        context.add_output_metadata({**metadata, **restored})
        # The materialization's data version: the latest data-changing commit (versions.py). Set on the step so
        # that Dagster records it as user-provided (the same path as Output(data_version=...)).
        context.step_context.set_data_version(asset_key, dg.DataVersion(str(metadata["mvcc/data_version"])))

    @staticmethod
    def _schema_of(obj: Any, data: pa.Table | pa.RecordBatchReader | None) -> pa.Schema:
        if data is not None:
            return data.schema
        return obj.limit(0).toArrow().schema

    def _write_arrow(
        self,
        data: pa.Table | pa.RecordBatchReader,
        uri: str,
        table: mvcc.Table | None,
        mode: str,
        merge_on: list[str] | None,
        where: str | None,
        properties: dict[str, str],
        message: str,
    ) -> mvcc.Table:
        common: dict[str, Any] = {"commit_message": message, "transaction_properties": properties}
        location: dict[str, Any] = {"storage_options": self._options(), "external_store": self.external_store}
        if table is None and mode != "merge":
            # The first write creates the table with the rows, in one commit (a partitioned overwrite checks
            # every row against its predicate); a concurrent first writer that wins is written into by the core.
            return mvcc.write_table(data, uri, mode=mode, where=where, **location, **common)
        if table is None:
            # A first merge into a missing table inserts every row (its keys must be unique, as merge_insert's);
            # if a concurrent step creates the table first, it becomes a merge into that table.
            rows = data if isinstance(data, pa.Table) else data.read_all()
            assert merge_on is not None
            _check_unique_keys(rows, merge_on, properties[ASSET_KEY_PROPERTY])
            # it was missing when this step looked: a TableExistsError means a concurrent step created it since
            with contextlib.suppress(mvcc.TableExistsError):
                return mvcc.write_table(rows, uri, mode="create", **location, **common)
            data, table = rows, mvcc.open_table(uri, **location)
        if mode == "append":
            return table.append(data, **common)
        if mode == "overwrite":
            return table.overwrite(data, where=where, **common)
        assert merge_on is not None
        (
            table.merge_insert(merge_on)
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(data if isinstance(data, pa.Table) else data.read_all(), **common)
        )
        return table

    def _write_spark(
        self,
        df: Any,
        uri: str,
        mode: str,
        merge_on: list[str] | None,
        where: str | None,
        properties: dict[str, str],
        message: str,
    ) -> mvcc.Table:
        if mode == "merge":
            # merge_insert runs in this process: the DataFrame is collected (documented in docs/dagster.md).
            data = df.toArrow()
            table = self._open(uri, properties[ASSET_KEY_PROPERTY])
            return self._write_arrow(data, uri, table, mode, merge_on, None, properties, message)
        from mvcc_core.spark import write  # pyspark is needed only for Spark outputs

        options = dict(self.storage_options)
        if self.external_store is not None:
            options["external_store"] = self.external_store  # the Spark source takes it as a storage option
        return write(
            df,
            uri,
            mode=mode,
            where=where,
            transaction_properties=properties,
            commit_message=message,
            storage_options=options or None,
        )

    # ---- inputs ----------------------------------------------------------------------------------

    def load_input(self, context: dg.InputContext) -> Any:
        """The upstream at its pinned version, filtered to the mapped partitions, in the annotated type.

        A step reading several upstream partitions whose newest materializations recorded different versions
        (a single-run backfill, a weekly asset over daily ones) reads each partition at its own version
        (`pinned_partition_versions`) and gets the union."""
        asset_key = context.asset_key
        asset = asset_key.to_user_string()
        uri = resolve_uri(self.root_uri, asset_key)
        typing_type = context.dagster_type.typing_type
        module = getattr(typing_type, "__module__", "") or ""
        name = getattr(typing_type, "__name__", "")
        spark = module.startswith("pyspark.sql") and name == "DataFrame"
        upstream = context.upstream_output
        has_expr = upstream is not None and (upstream.definition_metadata or {}).get(PARTITION_EXPR) is not None
        pins = pinned_partition_versions(context) if has_expr else None  # without a column: no per-partition read
        if pins is not None and len(set(pins.values())) > 1:
            return self._load_by_partition(context, uri, asset, pins, spark, module, name)
        version = pinned_version(context)
        with mvcc_conflicts(context, what=asset):
            table = mvcc.open_table(uri, version, storage_options=self._options(), external_store=self.external_store)
            where = self._input_filter(context, table, asset, "spark" if spark else "mvcc")
        _add_input_metadata(
            context, {"mvcc/version": table.version, "mvcc/uri": uri_value(uri), "mvcc/filter": where or ""}
        )
        if spark:
            return self._load_spark(uri, table.version, where)
        result = table.to_table(filter=where) if where else table.to_table()
        if module.startswith("pandas") and name == "DataFrame":
            return result.to_pandas()
        return result

    @staticmethod
    def _input_filter(context: dg.InputContext, table: mvcc.Table, asset: str, dialect: str) -> str | None:
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
        spark: bool,
        module: str,
        name: str,
    ) -> Any:
        """Each group of partitions pinned to one version read at that version with its own predicate."""
        groups: dict[int | None, list[str]] = {}
        for key, version in pins.items():
            groups.setdefault(version, []).append(key)
        upstream = context.upstream_output
        expr = (upstream.definition_metadata or {}).get(PARTITION_EXPR) if upstream is not None else None
        parts: list[tuple[int, str, list[str]]] = []  # (version read, predicate, partitions)
        with mvcc_conflicts(context, what=asset):
            for version, keys in sorted(groups.items(), key=lambda g: (g[0] is None, g[0] or 0)):
                table = mvcc.open_table(
                    uri, version, storage_options=self._options(), external_store=self.external_store
                )
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
        versions = {key: v for v, _, keys in parts for key in keys}
        _add_input_metadata(
            context,
            {
                "mvcc/version": max(v for v, _, _ in parts),
                "mvcc/uri": uri_value(uri),
                "mvcc/filter": " OR ".join(w for _, w, _ in parts),
                PARTITION_VERSIONS: dg.MetadataValue.json(dict(sorted(versions.items()))),
            },
        )
        if spark:
            frames = [self._load_spark(uri, v, w) for v, w, _ in parts]
            result = frames[0]
            for frame in frames[1:]:
                result = result.unionByName(frame, allowMissingColumns=True)
            return result
        tables = [
            mvcc.open_table(uri, v, storage_options=self._options(), external_store=self.external_store).to_table(
                filter=w
            )
            for v, w, _ in parts
        ]
        combined = pa.concat_tables(tables, promote_options="default")
        if module.startswith("pandas") and name == "DataFrame":
            return combined.to_pandas()
        return combined

    def _load_spark(self, uri: str, version: int, where: str | None) -> Any:
        from pyspark.sql import SparkSession

        from mvcc_core.spark import read

        spark = SparkSession.getActiveSession()
        if spark is None:
            raise ValueError(
                "a Spark DataFrame input needs an active SparkSession: give the asset dagster-pyspark's "
                "PySparkResource (it creates the session when the step starts)"
            )
        options = dict(self.storage_options)
        if self.external_store is not None:
            options["external_store"] = self.external_store
        # Spark's own Parquet reader over the pinned version's files for local tables (the partition filter
        # prunes files on the driver), the `mvcc` data source otherwise (docs/spark.md, "Native reads").
        return read(spark, uri, version=version, filter=where, storage_options=options or None)


def _add_input_metadata(context: dg.InputContext, metadata: Mapping[str, Any]) -> None:
    """Metadata on the LOADED_INPUT event only (where re-executions find the versions read; the run's log shows it).

    Dagster 1.13's public `add_input_metadata` also logs an `AssetObservation` of the upstream asset per load
    (the event is written as it is created), which tops the upstream's Events list with one observation per
    downstream step and buries its materializations. The LOADED_INPUT event's metadata is the input context's
    logged metadata (`consume_logged_metadata`, read by Dagster after `load_input`), so it is set there
    directly (`_user_generated_metadata`, internal: docs/dagster.md "Dagster internals used"). Should a Dagster
    release rename it, `add_input_metadata` is used as before (observations again; pinning unchanged). For a
    step loading several partitions (a single-run backfill's range) that fallback raises a CheckError while
    building its observation, after storing the metadata for the LOADED_INPUT event.
    """
    if isinstance(getattr(context, "_user_generated_metadata", None), dict):
        context._user_generated_metadata = {**context._user_generated_metadata, **normalize_metadata(metadata)}
        return
    try:
        context.add_input_metadata(metadata)
    except CheckError:
        if not (context.has_asset_partitions and len(context.asset_partition_keys) > 1):
            raise


def _metadata_int(record: Any, key: str) -> int | None:
    """`key` of a materialization record's metadata as an int (None when absent)."""
    materialization = record.asset_materialization
    if materialization is None:
        return None
    value = materialization.metadata.get(key)
    raw = getattr(value, "value", value)
    return int(raw) if isinstance(raw, int | float | str) and str(raw).isdigit() else None


def pinned_version(context: dg.InputContext) -> int | None:
    """The version of the upstream table the run depends on (None: the latest; no materialization known).

    1. The upstream was materialized in this run: that materialization's ``mvcc/version``.
    2. The run re-executes an earlier one (its root run): the version the root run's step loaded
       (recorded as ``mvcc/version`` on its LOADED_INPUT event), else the root run's own materialization of the
       upstream, else the newest materialization created before the root run was.
    3. Otherwise the newest materialization of the mapped partitions (what Dagster records as the input's
       provenance).
    """
    instance = context.instance
    step = context.step_context
    run = step.dagster_run
    key = context.asset_key
    partitions = set(context.asset_partition_keys) if context.has_asset_partitions else None

    def from_run_materializations(run_id: str) -> int | None:
        records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
        for record in reversed(records):
            mat = record.asset_materialization
            if mat is None or mat.asset_key != key:
                continue
            if partitions is not None and mat.partition not in partitions:
                continue
            version = _metadata_int(record, "mvcc/version")
            if version is not None:
                return version
        return None

    version = from_run_materializations(run.run_id)
    if version is not None:
        return version
    root = run.root_run_id or run.tags.get(ROOT_RUN_ID_TAG)
    before: float | None = None
    if root:
        loaded = instance.get_records_for_run(root, of_type=dg.DagsterEventType.LOADED_INPUT).records
        for record in reversed(loaded):
            event = record.event_log_entry.dagster_event
            data = event.event_specific_data if event is not None else None
            if event is None or event.step_key != step.step.key or getattr(data, "input_name", None) != context.name:
                continue
            value = (data.metadata or {}).get("mvcc/version")
            raw = getattr(value, "value", None)
            if isinstance(raw, int):
                return raw
        version = from_run_materializations(root)
        if version is not None:
            return version
        root_record = instance.get_run_record_by_id(root)
        before = root_record.create_timestamp.timestamp() if root_record is not None else None
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(
            asset_key=key,
            asset_partitions=sorted(partitions) if partitions is not None else None,
            before_timestamp=before,
        ),
        limit=1,
    ).records
    return _metadata_int(records[0], "mvcc/version") if records else None


def pinned_partition_versions(context: dg.InputContext) -> dict[str, int | None] | None:
    """Per mapped upstream partition, the version its own newest materialization recorded (None for a
    partition without one: the latest), when the step reads two or more upstream partitions; None otherwise
    (one version for everything: `pinned_version`).

    Why per partition: a single-run backfill or a weekly asset over daily partitions maps many upstream
    partitions into one step. One version for all (the newest of their materializations) would show the older
    partitions as they are at that version: commits made since their own materializations (an outside append,
    a restore) would leak in, so the backfill would not reproduce what the original runs read. A re-execution
    reads what its root run's same step loaded (``mvcc/partition_versions`` on that LOADED_INPUT event); a
    root run that loaded one version leaves it to `pinned_version`.
    """
    if not context.has_asset_partitions:
        return None
    keys = sorted(set(context.asset_partition_keys))
    if len(keys) < 2:
        return None
    instance = context.instance
    step = context.step_context
    run = step.dagster_run
    root = run.root_run_id or run.tags.get(ROOT_RUN_ID_TAG)
    if root:
        for record in reversed(instance.get_records_for_run(root, of_type=dg.DagsterEventType.LOADED_INPUT).records):
            event = record.event_log_entry.dagster_event
            data = event.event_specific_data if event is not None else None
            if event is None or event.step_key != step.step.key or getattr(data, "input_name", None) != context.name:
                continue
            value = getattr((data.metadata or {}).get(PARTITION_VERSIONS), "value", None)
            if isinstance(value, dict):
                return {k: value.get(k) for k in keys}
            return None
        return None
    pins: dict[str, int | None] = {}
    cursor = None
    while True:
        result = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=context.asset_key, asset_partitions=keys), limit=200, cursor=cursor
        )
        for record in result.records:
            mat = record.asset_materialization
            if mat is not None and mat.partition in keys and mat.partition not in pins:
                pins[mat.partition] = _metadata_int(record, "mvcc/version")
        if len(pins) == len(keys) or not result.has_more:
            break
        cursor = result.cursor
    return {k: pins.get(k) for k in keys}
