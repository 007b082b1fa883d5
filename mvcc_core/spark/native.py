"""`read(spark, uri, ...)`: a table version as a DataFrame read by Spark's own Parquet reader.

Design notes: docs/guide/spark.md, "The native read and write path".
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812 - PySpark's convention
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import DoubleType, FloatType, StructType

import mvcc_core
from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import MvccError, TableNotFoundError
from mvcc_core.format import schema as schema_mod
from mvcc_core.format.bases import data_file_location
from mvcc_core.format.data_file_checks import check_data_file
from mvcc_core.format.deletion import read_deletion_vector
from mvcc_core.format.fragments import DEFAULT_MAX_ROWS_PER_FILE, PARQUET_COMPRESSION, data_file
from mvcc_core.format.naming import data_file_path, new_data_file_name
from mvcc_core.io import open_store
from mvcc_core.io.parquet import parquet_footer
from mvcc_core.read.scan import Scan
from mvcc_core.spark.executor import is_connect
from mvcc_core.spark.options import DEFAULT_ROWS_PER_PARTITION, STORAGE_OPTIONS
from mvcc_core.spark.source import FragmentGroup, MvccDataSource, MvccReader, group_fragments, projected_schema
from mvcc_core.spark.writes import WritePlan, spark_struct

log = logging.getLogger("mvcc.spark")

_FILE = "_mvcc_file"
_ROW = "_mvcc_row"


def read(
    spark: Any,
    uri: str,
    *,
    version: int | str | datetime | None = None,
    columns: list[str] | None = None,
    filter: str | None = None,  # noqa: A002 - the name Delta / pylance use
    storage_options: Mapping[str, Any] | None = None,
    native: bool | None = None,
) -> DataFrame:
    """One version of the table at `uri` as a DataFrame (`version`: a number, a tag or a timestamp).

    `columns` projects; `filter` (SQL) prunes fragments on the driver and is applied by Spark, before the
    projection (it may name columns `columns` leaves out). `native`:
    None reads local tables with Spark's Parquet reader (on a classic session; a Spark Connect client may
    not share the server's disk) and others through the `mvcc` data source; False always uses the data
    source; True refuses a table Spark's Parquet reader cannot reach.

    Args:
        spark: the SparkSession (classic or Spark Connect)
        uri: the table's root
        version: a version number, a tag or a timestamp (None: the latest)
        columns: the columns to read (None: every column)
        filter: a SQL predicate: prunes fragments on the driver, applied by Spark (on any column of the table)
        storage_options: the table store's options
        native: None: Spark's Parquet reader where it can reach the files; True: only it; False: always the data source

    Raises:
        TableNotFoundError: there is no table at `uri`
    """
    opts = dict(storage_options or {}) or None
    try:
        table = mvcc_core.open_table(str(uri), storage_options=opts)
    except TableNotFoundError as exc:
        raise TableNotFoundError(f"no mvcc table at {uri!r} (Spark read): {exc}") from None
    if version is not None:
        table = table.checkout(version)
    projected_schema(table.schema, columns, f"mvcc read of {table.uri}")  # an unknown column, by name
    read_columns = columns
    if filter and columns is not None:  # the filter may read columns the caller leaves out: read, filter, select
        read_columns = columns + [c for c in _filter_columns(table, filter) if c not in columns]
    wanted = projected_schema(table.schema, read_columns, f"mvcc read of {table.uri}")
    local = table.state.store.scheme == "file"
    if native and not local:
        raise ValueError(
            f"mvcc read of {table.uri}: native=True needs a table on a local disk (Spark's Parquet reader has no "
            f"access to {table.state.store.scheme!r} here); leave native unset to read through the data source"
        )
    if native is False or not local or (native is None and is_connect(spark)):
        df = _through_source(spark, table, read_columns, opts)
    else:
        df = _native(spark, table, wanted, filter)
    if not filter:
        return df
    df = df.where(filter)
    if read_columns != columns:
        df = df.select([F.col("`" + c.replace("`", "``") + "`") for c in columns or []])
    return df


def _filter_columns(table: mvcc_core.Table, filter_: str) -> list[str]:
    """The table columns a Spark SQL filter reads: those the core finds in it, or every column when the core
    cannot analyse it (Spark-only SQL such as `<=>`, a column named in another case), so Spark resolves it."""
    try:
        bound = Scan(table.state.store, table.state.manifest, [], filter_).bound
    except (MvccError, ValueError):
        return list(table.schema.names)
    return list(bound.columns) if bound is not None else []


def _through_source(spark: Any, table: mvcc_core.Table, columns: list[str] | None, opts: dict | None) -> DataFrame:
    spark.dataSource.register(MvccDataSource)  # idempotent
    reader = spark.read.format("mvcc").option("version", table.version)
    if columns is not None:
        reader = reader.option("columns", ",".join(columns))
    for key, value in (opts or {}).items():
        if key.lower() not in STORAGE_OPTIONS:
            raise ValueError(f"mvcc read: unknown storage option {key!r}; storage options are {list(STORAGE_OPTIONS)}")
        reader = reader.option(key, str(value).lower() if isinstance(value, bool) else str(value))
    return reader.load(table.uri)


def _candidates(table: mvcc_core.Table, filter_: str | None) -> list[pb.DataFragment]:
    """The version's fragments that may hold a row matching `filter_` (every fragment without one). A filter
    the core cannot analyse (Spark-only SQL such as `<=>`) prunes nothing: Spark still applies it.

    Neither does a filter reading a floating-point column: Spark orders NaN above every number (`NaN > 3`
    and `NaN = NaN` hold), Arrow makes every comparison with NaN false and Parquet statistics leave NaN out
    of min/max, so the core would drop a fragment whose NaN rows Spark's filter keeps."""
    state = table.state
    fragments = list(state.manifest.fragments)
    if not filter_ or not fragments:
        return fragments
    try:
        scan = Scan(state.store, state.manifest, [], filter_)
        bound = scan.bound.columns if scan.bound is not None else ()  # a filter is given: it is bound
        floating = [c for c in bound if _holds_floats(table.schema.field(c).type)]
        if floating:
            log.debug("mvcc read of %s: filter %r not used for pruning (NaN order of %s)", table.uri, filter_, floating)
            return fragments
        return scan.candidate_fragments()
    except (MvccError, ValueError) as exc:
        log.debug("mvcc read of %s: filter %r not used for pruning (%s)", table.uri, filter_, exc)
        return fragments


def _holds_floats(kind: pa.DataType) -> bool:
    """Whether a column of this type holds floating-point values, at any depth."""
    if pa.types.is_floating(kind):
        return True
    if pa.types.is_dictionary(kind):
        return _holds_floats(kind.value_type)
    return any(_holds_floats(kind.field(i).type) for i in range(kind.num_fields))


def _native(spark: Any, table: mvcc_core.Table, wanted: pa.Schema, filter_: str | None) -> DataFrame:
    logical = spark_struct(wanted)  # refuses, by name, a column Spark has no type for
    fragments = _candidates(table, filter_)
    single = [f for f in fragments if len(f.files) == 1]
    multi = [f for f in fragments if len(f.files) != 1]
    parts = []
    if single:
        parts.append(_parquet(spark, table, single, wanted, logical))
    if multi:
        parts.append(_by_core(spark, table, multi, wanted))
    if not parts:
        return spark.createDataFrame([], logical)
    df = parts[0]
    for part in parts[1:]:
        df = df.unionByName(part)
    return df


def _parquet(
    spark: Any, table: mvcc_core.Table, fragments: list[pb.DataFragment], wanted: pa.Schema, logical: StructType
) -> DataFrame:
    state = table.state
    manifest = state.manifest
    ids = schema_mod.field_ids_by_name(list(manifest.fields))
    physical_all = schema_mod.schema_from_fields(list(manifest.fields), physical=True)
    physical = pa.schema([physical_all.field(schema_mod.physical_name(ids[n])) for n in wanted.names])
    names = dict(zip(physical.names, wanted.names, strict=True))
    paths, deleted_files, deleted_rows = [], [], []
    for frag in fragments:
        store, rel = data_file_location(state.store, manifest.base_paths, frag.files[0])
        path = store.arrow_path(rel)
        # Spark's reader would fill a missing column with nulls and number rows past a short file: the footer
        # (read once per process) is checked against the manifest on the driver first
        key = (store.scheme, path, frag.files[0].file_size_bytes)
        footer = parquet_footer(store.arrow_filesystem(), key)
        check_data_file(footer.schema, footer.metadata.num_rows, physical, frag, frag.files[0], state.store.uri, names)
        paths.append(path)
        if frag.HasField("deletion_file"):
            offsets = read_deletion_vector(state.store, frag, manifest.base_paths).to_array()
            deleted_files.append(pa.array([path.rsplit("/", 1)[-1]] * len(offsets), pa.string()))
            deleted_rows.append(pa.array(offsets, pa.int64()))
    df = spark.read.schema(spark_struct(physical)).parquet(*paths)
    if deleted_files:
        deleted = pa.table({_FILE: pa.chunked_array(deleted_files), _ROW: pa.chunked_array(deleted_rows)})
        marked = df.select("*", F.col("_metadata.file_name").alias(_FILE), F.col("_metadata.row_index").alias(_ROW))
        df = marked.join(F.broadcast(spark.createDataFrame(deleted)), on=[_FILE, _ROW], how="left_anti")
    return df.select(
        [
            _unpushable_if_floating(F.col(p.name).cast(target.dataType), target.dataType).alias(target.name)
            for p, target in zip(physical, logical.fields, strict=True)
        ]
    )


def _unpushable_if_floating(column: Any, kind: Any) -> Any:
    """A float or double column behind `nanvl(c, c)` (the same values), which Spark cannot push into its
    Parquet reader. pyarrow writes min/max statistics without NaN, Spark's Parquet reader trusts them, and
    Spark orders NaN above every number: pushed down, `f > 3` skipped a row group of `[1.0, NaN]` whose NaN
    row Spark's own filter keeps. Filters on other columns are still pushed."""
    if isinstance(kind, FloatType | DoubleType):
        return F.nanvl(column, column)
    return column


def _by_core(spark: Any, table: mvcc_core.Table, fragments: list[pb.DataFragment], wanted: pa.Schema) -> DataFrame:
    """Multi-file fragments, read by the core's scan in Spark tasks (one task per group of fragments)."""
    logical = spark_struct(wanted)
    target = to_arrow_schema(logical, timezone="UTC")
    reader = MvccReader(table.state, target, DEFAULT_ROWS_PER_PARTITION)
    groups = group_fragments(fragments, DEFAULT_ROWS_PER_PARTITION)
    seeds = spark.createDataFrame([(i,) for i in range(len(groups))], "group int").repartition(len(groups))

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                yield from reader.read(FragmentGroup(groups[index]))

    return seeds.mapInArrow(run, logical)


# ---- writes ------------------------------------------------------------------------------------------

#: Spark writes timestamps as INT96 unless told otherwise; the core (and every Arrow reader) wants the
#: Parquet TIMESTAMP(MICROS) logical type. The setting is a session conf that Spark's Parquet writer reads
#: from the session, not from write options, so it is set for the duration of the write.
_TIMESTAMP_CONF = "spark.sql.parquet.outputTimestampType"


def can_write_natively(df: Any, plan: WritePlan, *, connect_ok: bool = False) -> str | None:
    """Why `plan` cannot be written by Spark's own Parquet writer (None: it can). `connect_ok`: the caller
    says a Spark Connect client shares the server's disk.

    Args:
        df: the DataFrame to write
        plan: the write's plan (`plan_write`)
        connect_ok: a Spark Connect client shares the server's disk
    """
    if plan.where is not None:
        return "a partition-scoped overwrite checks every row against its predicate in the core's writer"
    if open_store(plan.uri, plan.storage_options).scheme != "file":
        return "the table is not on a local disk"
    if not connect_ok and is_connect(df.sparkSession):
        return "a Spark Connect client may not see the server's disk (pass native=True if it does)"
    incoming = {f.name: f for f in df.schema.fields}
    strict = [
        f.name for f in plan.table_schema if not f.nullable and (f.name not in incoming or incoming[f.name].nullable)
    ]
    if strict:
        return f"non-nullable column(s) {strict} are checked row by row in the core's writer"
    return None


def write_fragments_with_spark(df: Any, plan: WritePlan) -> list[bytes]:
    """Write `df` with Spark's Parquet writer into files of the table (named with the write id), and return
    their fragments (serialized) for `plan.commit`. Files land in `data/<write id>-staging/` first (Spark's
    committer owns that directory), then each is renamed to `data/<write id>-<uuid>.parquet` and synced;
    the staging directory shares the write id prefix, so `WritePlan.remove_files` removes it after a failure
    and retention finds it after a crash.

    Args:
        df: the DataFrame to write
        plan: the write's plan (`plan_write`)
    """
    fields = _fields_of(plan)
    physical = schema_mod.schema_from_fields(fields, physical=True)
    logical = spark_struct(plan.table_schema)
    targets = spark_struct(physical)
    columns = [
        (F.col(want.name) if want.name in df.columns else F.lit(None)).cast(target.dataType).alias(target.name)
        for want, target in zip(logical.fields, targets.fields, strict=True)
    ]
    store = open_store(plan.uri, plan.storage_options)
    staging_rel = data_file_path(f"{plan.write_id}-staging")
    staging = store.arrow_path(staging_rel)
    spark = df.sparkSession
    writer = (
        df.select(columns)
        .write.mode("errorifexists")
        .option("compression", PARQUET_COMPRESSION)
        .option("maxRecordsPerFile", plan.max_rows_per_file or DEFAULT_MAX_ROWS_PER_FILE)
    )
    try:
        with session_conf(spark, _TIMESTAMP_CONF, "TIMESTAMP_MICROS"):
            writer.parquet(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # the caller removes what a straggling task adds later
        raise
    ids = [f.id for f in fields]
    fragments = []
    for entry in sorted(os.scandir(staging), key=lambda e: e.name):
        if not entry.name.endswith(".parquet") or entry.name.startswith((".", "_")):
            continue
        rows = pq.read_metadata(entry.path).num_rows
        if not rows:
            continue
        name = new_data_file_name(plan.write_id)
        size = entry.stat().st_size
        os.replace(entry.path, store.arrow_path(data_file_path(name)))
        store.sync(data_file_path(name))
        fragments.append(
            pb.DataFragment(
                files=[data_file(name, ids, size)],
                physical_rows=rows,
            ).SerializeToString()
        )
    shutil.rmtree(staging, ignore_errors=True)
    return fragments


def _fields_of(plan: WritePlan) -> list[pb.Field]:
    """The field ids the files must carry: the pinned version's, or those a new table will get."""
    if plan.read_version is None:
        return schema_mod.fields_from_schema(plan.table_schema)[0]
    table = mvcc_core.open_table(plan.uri, version=plan.read_version, storage_options=plan.storage_options)
    return list(table.state.manifest.fields)


@contextmanager
def session_conf(spark: Any, key: str, value: str) -> Iterator[None]:
    """Set the session conf `key` to `value` for a block, restoring the old value (or unsetting it) after.

    Args:
        spark: the SparkSession
        key: the conf's name
        value: its value inside the block

    Yields:
        Nothing; the conf is set while the block runs.
    """
    old = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if old is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, old)
