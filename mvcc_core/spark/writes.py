"""What both Spark write paths share: schema checks, the executors' fragment writes, the driver's commit.

The protocol (docs/guide/spark.md): the driver pins the read version and picks a write id; every executor task
writes its rows with `mvcc_core.write_fragments(..., file_prefix=write_id, where=replaceWhere)` and hands
back the serialized fragments; the driver commits ONE transaction (Append, Overwrite or the
partition-scoped overwrite) on top of the pinned version, recording the write id in the transaction's
properties. A failed write removes every data file whose name starts with the write id: a task that
failed (or a speculative attempt Spark dropped) sends no fragments back, but its files carry the prefix.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.types as pat
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

import mvcc_core
from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import SchemaError, TableNotFoundError
from mvcc_core.format.schema import column_set_problems
from mvcc_core.io import open_store
from mvcc_core.read.bound_filter import BoundFilter

log = logging.getLogger("mvcc.spark")

#: Transaction property naming the Spark write that made a version (its files start with it too).
WRITE_ID_PROPERTY = "mvcc.spark.write_id"
#: Transaction property saying which Spark path committed ("datasource" or "write").
WRITE_PATH_PROPERTY = "mvcc.spark.path"
MODES = ("append", "overwrite")
#: How long a failed write keeps removing files of its tasks where it cannot wait for them (the data source's
#: `abort`, `write()` on Spark Connect): Spark kills a cancelled task's Python worker after
#: `spark.python.task.killTimeout` (2 s by default), so its last file appears within about that time.
ABORT_SETTLE_SECONDS = 5.0
SETTLE_POLL_SECONDS = 0.5


def new_write_id() -> str:
    """A write id: the prefix of every data file of one Spark write (`data/{write_id}-{uuid}.parquet`)."""
    return f"spark-{uuid.uuid4().hex}"


def spark_arrow_schema(schema: pa.Schema) -> pa.Schema:
    """The Arrow schema Spark uses for `schema`'s Spark image: what a reader must yield, exactly.

    Timestamps with a zone become `timestamp[us, tz=UTC]` (Spark keeps instants, not zones), large and
    dictionary strings become `string`, and so on. A column Spark has no type for (unsigned integers,
    half floats, date64) is refused by name.

    Args:
        schema: a table's Arrow schema

    Raises:
        SchemaError: a column has no Spark type
    """
    out = []
    for field in schema:
        try:
            spark_type = from_arrow_schema(pa.schema([field]))
        except Exception as exc:  # noqa: BLE001 - pyspark raises its own PySparkTypeError
            raise SchemaError(
                f"column {field.name!r} of type {field.type} has no Spark type ({exc}); "
                "cast it (e.g. unsigned integers to signed) before reading it through Spark"
            ) from None
        out.append(to_arrow_schema(spark_type, timezone="UTC").field(0))
    return pa.schema(out)


def spark_struct(schema: pa.Schema) -> StructType:
    """The Spark schema of an Arrow schema (after `spark_arrow_schema`'s checks).

    Args:
        schema: a table's Arrow schema
    """
    return from_arrow_schema(spark_arrow_schema(schema))


def _same_ignoring_nullability(a: pa.DataType, b: pa.DataType) -> bool:
    """Equal types, nested nullability and timestamp zone spelling (Etc/UTC vs UTC) aside."""
    if pat.is_timestamp(a) and pat.is_timestamp(b):
        return a.unit == b.unit and (a.tz is None) == (b.tz is None)
    if a.num_fields != b.num_fields or a.num_fields == 0:
        return a.equals(b)
    if type(a) is not type(b):
        return False
    if pat.is_struct(a) and [f.name for f in a] != [f.name for f in b]:
        return False
    return all(_same_ignoring_nullability(a.field(i).type, b.field(i).type) for i in range(a.num_fields))


def check_write_schema(incoming: StructType | pa.Schema, table_schema: pa.Schema, uri: str) -> None:
    """Refuse, on the driver and before any task runs, a DataFrame whose columns do not fit the table.

    Columns are matched by name (order free, as the core's writes); each must have the Spark type the
    table's column reads as. Nullability is checked on the data itself (a null in a non-nullable column).

    Args:
        incoming: the DataFrame's schema (Spark's or its Arrow image)
        table_schema: the table's Arrow schema
        uri: the table's uri, for the message

    Raises:
        SchemaError: a column is missing, extra or of another type
    """
    incoming_arrow = incoming if isinstance(incoming, pa.Schema) else to_arrow_schema(incoming, timezone="UTC")
    expected = spark_arrow_schema(table_schema)
    names = incoming_arrow.names
    problems = column_set_problems(names, expected.names)
    for field in expected:
        if field.name in names:
            got = incoming_arrow.field(field.name).type
            if not _same_ignoring_nullability(got, field.type):
                problems.append(f"column {field.name!r}: table has {field.type}, DataFrame has {got}")
    if problems:
        raise SchemaError(f"the DataFrame does not fit the schema of table {uri}: " + "; ".join(problems))


def table_schema_for_new(incoming: StructType | pa.Schema) -> pa.Schema:
    """The schema of a table a Spark write creates: Spark's Arrow types, zones spelled `UTC`.

    Args:
        incoming: the DataFrame's schema (Spark's or its Arrow image)
    """
    arrow = incoming if isinstance(incoming, pa.Schema) else to_arrow_schema(incoming, timezone="UTC")
    return spark_arrow_schema(arrow)


def adapt(batch: pa.RecordBatch, table_schema: pa.Schema) -> pa.RecordBatch:
    """A Spark batch in the table's types: each column cast from its Spark image to the table's type.

    Only casts that keep every value: zone changes of an instant, `string` to `large_string` or a
    dictionary, `list` to `large_list`. The core's writer checks the result strictly again.

    Args:
        batch: one batch of Spark's rows
        table_schema: the table's Arrow schema
    """
    columns, fields = [], []
    for field in table_schema:
        if field.name not in batch.schema.names:
            continue  # the core's writer names the missing column
        column = batch.column(field.name)
        if not column.type.equals(field.type):
            column = column.cast(field.type)
        columns.append(column)
        fields.append(field)
    extra = [n for n in batch.schema.names if n not in table_schema.names]
    for name in extra:  # kept so the core's error names them
        columns.append(batch.column(name))
        fields.append(batch.schema.field(name))
    return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields, metadata=table_schema.metadata))


@dataclass(frozen=True)
class WritePlan:
    """What the driver fixed when a write started; pickled to every task."""

    uri: str
    storage_options: dict[str, Any] | None
    mode: str
    where: str | None
    read_version: int | None  # None: no table yet, the write creates it
    table_schema: pa.Schema
    write_id: str
    max_rows_per_file: int | None = None

    def write_batches(self, batches: Iterable[pa.RecordBatch]) -> list[bytes]:
        """Executor side: write one task's rows as fragments (serialized); nothing written for no rows.

        Args:
            batches: one task's Arrow batches
        """
        adapted = (adapt(b, self.table_schema) for b in batches if b.num_rows)
        first = next(adapted, None)
        if first is None:
            return []

        def rows() -> Iterator[pa.RecordBatch]:
            yield first
            yield from adapted

        reader = pa.RecordBatchReader.from_batches(first.schema, rows())
        kwargs: dict[str, Any] = {}
        if self.max_rows_per_file is not None:
            kwargs["max_rows_per_file"] = self.max_rows_per_file
        fragments = mvcc_core.write_fragments(
            reader,
            self.uri,
            schema=self.table_schema,
            storage_options=self.storage_options,
            where=self.where,
            file_prefix=self.write_id,
            version=self.read_version,  # the pinned version's fields, even if the table moved since
            **kwargs,
        )
        return [f.SerializeToString() for f in fragments]

    def commit(
        self,
        fragments: Sequence[bytes],
        *,
        commit_message: str | None,
        transaction_properties: dict[str, str] | None,
        path: str,
    ) -> mvcc_core.Table:
        """Driver side: commit one transaction with every task's fragments on top of the pinned version.

        Args:
            fragments: every task's fragments (serialized)
            commit_message: the message stored with the transaction
            transaction_properties: properties stored with the transaction (a dict of str to str)
            path: which Spark path wrote (recorded with the write id)
        """
        frags = [pb.DataFragment.FromString(f) for f in fragments]
        properties = {
            **(transaction_properties or {}),
            WRITE_ID_PROPERTY: self.write_id,
            WRITE_PATH_PROPERTY: path,
        }
        if self.read_version is None:
            # The first write creates the table; if another writer creates it first, this one is applied to
            # the winner's table as what `mode` / `where` mean there (an Append, the partition overwrite, a
            # later Overwrite) under the usual conflict rules.
            return mvcc_core.create_table_from_fragments(
                frags,
                self.uri,
                schema=self.table_schema,
                mode=self.mode,
                where=self.where,
                storage_options=self.storage_options,
                commit_message=commit_message,
                transaction_properties=properties,
            )
        table = mvcc_core.open_table(self.uri, version=self.read_version, storage_options=self.storage_options)
        if self.mode == "append" and self.where is None:
            txn = table.append_fragments_uncommitted(
                frags, commit_message=commit_message, transaction_properties=properties
            )
        else:
            txn = table.overwrite_fragments_uncommitted(
                frags, where=self.where, commit_message=commit_message, transaction_properties=properties
            )
        return table.commit(txn)

    def committed_version(self) -> int | None:
        """The version this write committed, if any (after an ambiguous failure: was it committed?)."""
        try:
            table = mvcc_core.open_table(self.uri, storage_options=self.storage_options)
        except TableNotFoundError:
            return None
        first = (self.read_version or 0) + 1
        for info in table.versions():
            if info.version >= first and info.transaction_properties.get(WRITE_ID_PROPERTY) == self.write_id:
                return info.version
        return None

    def remove_files(self, *, settle: float = 0.0) -> list[str]:
        """Remove the data files of this write (found by the write id prefix), unless a version of the table
        committed them (an ambiguous commit failure may have succeeded). The paths removed.

        `settle` (seconds): keep listing for that long after the first pass and remove files that appear
        meanwhile: a task of the failed job that was still running (Spark cancels it and kills its Python
        worker after `spark.python.task.killTimeout`, 2 s by default) may finish or leave a partial file
        after the first pass. Used where the caller cannot see Spark's tasks (the data source's `abort`,
        `write()` on Spark Connect); a straggler outliving the window still leaves its file to retention.

        Args:
            settle: seconds to keep listing and removing after the first pass
        """
        if self.committed_version() is not None:
            log.warning("write %s was committed; its files are kept", self.write_id)
            return []
        store = open_store(self.uri, self.storage_options)
        removed = self._remove_prefixed(store)
        deadline = time.monotonic() + settle
        while time.monotonic() < deadline:
            time.sleep(min(SETTLE_POLL_SECONDS, max(0.0, deadline - time.monotonic())))
            removed += self._remove_prefixed(store)
        log.info("write %s of %s failed: removed %d data files", self.write_id, self.uri, len(removed))
        return removed

    def _remove_prefixed(self, store: Any) -> list[str]:
        prefix = f"data/{self.write_id}"
        paths = [m.path for m in store.list("data") if m.path.startswith(prefix)]
        if paths:
            store.delete_many(paths)
        return paths

    def remove_orphans(self, committed: Sequence[bytes]) -> list[str]:
        """After a commit: remove files with this write's prefix that the commit does not reference (a task
        attempt Spark discarded, e.g. a speculative duplicate).

        Args:
            committed: the fragments the commit references (serialized)
        """
        kept = {f"data/{file.path}" for blob in committed for file in pb.DataFragment.FromString(blob).files}
        store = open_store(self.uri, self.storage_options)
        prefix = f"data/{self.write_id}"
        paths = [m.path for m in store.list("data") if m.path.startswith(prefix) and m.path not in kept]
        if paths:
            store.delete_many(paths)
            log.info("write %s: removed %d files of discarded task attempts", self.write_id, len(paths))
        return paths


def plan_write(
    incoming: StructType | pa.Schema,
    uri: str,
    *,
    mode: str,
    where: str | None,
    storage_options: dict[str, Any] | None,
    max_rows_per_file: int | None = None,
) -> WritePlan:
    """Driver side, before any task: pin the read version, check the schema, choose the write id.

    Args:
        incoming: the DataFrame's schema
        uri: the table's root
        mode: "append" or "overwrite"
        where: with mode "overwrite": the SQL predicate of the rows replaced
        storage_options: the table store's options
        max_rows_per_file: rows at most in one data file (None: the core's default)

    Raises:
        ValueError: an unknown mode, or `where` without mode "overwrite" or empty
        SchemaError: the DataFrame does not fit the table
    """
    if mode not in MODES:
        raise ValueError(f"mvcc Spark writes support mode 'append' or 'overwrite', got {mode!r}")
    if where is not None:
        if mode != "overwrite":
            raise ValueError("replaceWhere (where=) needs mode 'overwrite'")
        if not isinstance(where, str) or not where.strip():
            raise ValueError(f"replaceWhere must be a non-empty SQL predicate, got {where!r}")
    try:
        table = mvcc_core.open_table(uri, storage_options=storage_options)
    except TableNotFoundError:
        table = None
    if table is None:
        schema = table_schema_for_new(incoming)
        read_version = None
    else:
        schema = table.schema
        check_write_schema(incoming, schema, table.uri)
        read_version = table.version
        uri = table.uri
    if where is not None:
        _check_predicate(where, schema, uri)
    return WritePlan(
        uri=uri,
        storage_options=storage_options,
        mode=mode,
        where=where,
        read_version=read_version,
        table_schema=schema,
        write_id=new_write_id(),
        max_rows_per_file=max_rows_per_file,
    )


def _check_predicate(where: str, schema: pa.Schema, uri: str) -> None:
    """A replaceWhere that does not parse or names unknown columns fails on the driver, naming it."""
    try:
        BoundFilter.bind(where, schema)
    except mvcc_core.MvccError as exc:
        raise mvcc_core.errors.PredicateError(f"replaceWhere {where!r} on table {uri}: {exc}") from None
