"""The `mvcc` Python data source: `spark.read.format("mvcc")` and `df.write.format("mvcc")`.

Design notes: docs/guide/spark.md, "The data source, as implemented".
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

import mvcc_core
from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import SchemaError, TableNotFoundError
from mvcc_core.format.deletion import live_rows
from mvcc_core.read.scan import Scan
from mvcc_core.spark.options import MAX_FRAGMENTS_PER_PARTITION, SourceOptions, parse_options, partition_rows
from mvcc_core.spark.writes import ABORT_SETTLE_SECONDS, WritePlan, plan_write, spark_arrow_schema, spark_struct
from mvcc_core.txn.state import TableState

NAME = "mvcc"


def open_version(options: SourceOptions, pinned: int | None = None) -> mvcc_core.Table:
    """The table version a read asks for (latest, a version number, a tag or a timestamp); `pinned`, the
    version number resolved when the DataFrame was loaded, wins over the options.

    Args:
        options: the read's parsed options
        pinned: the version resolved when the DataFrame was loaded (None: as the options say)
    """
    try:
        table = mvcc_core.open_table(options.path, storage_options=options.storage_options)
    except TableNotFoundError as exc:
        raise TableNotFoundError(f"no mvcc table at {options.path!r} (Spark read): {exc}") from None
    wanted = pinned if pinned is not None else options.version
    if wanted is None or wanted == table.version:
        return table
    return table.checkout(wanted)


def group_fragments(fragments: Sequence[pb.DataFragment], rows_per_partition: int | None) -> list[tuple[int, ...]]:
    """Adjacent fragments grouped into input partitions of about `rows_per_partition` live rows and at
    most MAX_FRAGMENTS_PER_PARTITION fragments; table order is kept (partition i precedes i+1). A fragment
    joins the partition before it while that brings the partition nearer the target than it was (its rows
    plus half the fragment's at most the target), so a file's small remainder does not get a task alone.

    Args:
        fragments: the fragments read, in table order
        rows_per_partition: live rows per input partition, about (None: `partition_rows` of the fragments)

    Returns:
        The fragment ids of each partition (one empty partition for no fragments).
    """
    live = [live_rows(frag) for frag in fragments]
    target = partition_rows(sum(live)) if rows_per_partition is None else rows_per_partition
    groups: list[list[int]] = []
    rows = 0
    for frag, frag_rows in zip(fragments, live, strict=True):
        if not groups or rows + frag_rows / 2 > target or len(groups[-1]) >= MAX_FRAGMENTS_PER_PARTITION:
            groups.append([])
            rows = 0
        groups[-1].append(frag.id)
        rows += frag_rows
    return [tuple(g) for g in groups] or [()]


class FragmentGroup(InputPartition):
    """One input partition: the ids of the fragments one task reads (ids, not fragments: the reader
    already carries the manifest, so a partition pickles to a few bytes).

    Args:
        fragment_ids: the ids of the fragments the task reads
    """

    def __init__(self, fragment_ids: tuple[int, ...]) -> None:
        """The partition reading `fragment_ids`."""
        super().__init__(fragment_ids)

    @property
    def fragment_ids(self) -> tuple[int, ...]:
        return self.value


class MvccReader(DataSourceReader):
    """Reads one pinned version: one task per fragment group, deletion vectors applied by the core's Scan,
    batches cast to exactly the Arrow schema Spark expects.

    It does not override `pushFilters`: Spark evaluates every filter itself. PySpark 4.3 reuses one planned
    read for every query on a DataFrame, so whatever a reader drops for one query's filter would be missing
    from the next query's answer (see the module docstring).

    Args:
        state: the pinned version
        target: Spark's Arrow schema of the read
        rows_per_partition: live rows per input partition (None: sized by the table, `partition_rows`)
    """

    def __init__(self, state: TableState, target: pa.Schema, rows_per_partition: int | None) -> None:
        """`state`: the pinned version; `target`: Spark's Arrow schema of the read; `rows_per_partition`:
        live rows per input partition.
        """
        self.state = state
        self.target = target
        self.rows_per_partition = rows_per_partition

    def partitions(self) -> list[FragmentGroup]:
        """Groups of adjacent fragments of the version (every fragment: no query's filter prunes them)."""
        fragments = list(self.state.manifest.fragments)
        return [FragmentGroup(g) for g in group_fragments(fragments, self.rows_per_partition)]

    def scan(self, partition: FragmentGroup) -> Scan:
        """The core's scan of one partition (public so that a caller can `explain()` it).

        Args:
            partition: one input partition
        """
        wanted = set(partition.fragment_ids)
        fragments = [f for f in self.state.manifest.fragments if f.id in wanted]
        return Scan(self.state.store, self.state.manifest, self.target.names, None, fragments=fragments)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The rows of one partition, in Spark's types.

        Args:
            partition: one input partition (a `FragmentGroup` of `partitions`)
        """
        if not isinstance(partition, FragmentGroup):
            raise TypeError(f"mvcc read: not a partition of this reader: {partition!r}")
        if not partition.fragment_ids:
            return
        for batch in self.scan(partition).to_batches():
            yield _cast(batch, self.target)


def _cast(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """`batch` in exactly Spark's schema (types, names, nullability; zones spelled `UTC`)."""
    if batch.schema.equals(target):
        return batch
    try:
        return batch.select(target.names).cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaError(f"rows do not convert to Spark's types {target}: {exc}") from None


class MvccDataSource(DataSource):
    """`spark.read.format("mvcc").load(uri)` / `df.write.format("mvcc").mode(m).save(uri)` (docs/guide/spark.md).

    Args:
        options: Spark's options of the read or write (checked by `parse_options`)
    """

    def __init__(self, options: dict[str, str]) -> None:
        """`options`: Spark's options of the read or write (checked by `parse_options`)."""
        super().__init__(options)
        #: The version number `schema()` resolved when the DataFrame was loaded. PySpark pickles this object
        #: after `schema()` and hands the same bytes to the planning of every query on the DataFrame, so
        #: they all read that version (the one whose schema the DataFrame has), not whatever is latest when
        #: each query is planned. None with a schema given by the user (`schema()` is not called then).
        self.pinned_version: int | None = None

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        options = parse_options(self.options, for_write=False)
        table = open_version(options)
        self.pinned_version = table.version
        return spark_struct(projected_schema(table.schema, options.columns, f"mvcc option 'columns' of {table.uri}"))

    def reader(self, schema: StructType) -> MvccReader:
        """The reader of one load, on the version pinned when the DataFrame was loaded.

        Args:
            schema: the read's Spark schema (every column must be in the table)
        """
        options = parse_options(self.options, for_write=False)
        table = open_version(options, self.pinned_version)
        target = to_arrow_schema(schema, timezone="UTC")
        available = projected_schema(table.schema, None, table.uri)
        missing = [n for n in target.names if n not in available.names]
        if missing:
            raise SchemaError(
                f"table {table.uri} version {table.version} has no column(s) {missing}; columns are {available.names}"
            )
        spark_arrow_schema(pa.schema([table.schema.field(n) for n in target.names]))  # names a column Spark lacks
        return MvccReader(table.state, target, options.rows_per_partition)

    def writer(self, schema: StructType, overwrite: bool) -> MvccWriter:
        """The writer of one save, its plan made on the driver before any task runs.

        Args:
            schema: the DataFrame's Spark schema
            overwrite: the save's mode is overwrite (else append)
        """
        options = parse_options(self.options, for_write=True)
        mode = "overwrite" if overwrite else "append"
        if options.replace_where is not None and not overwrite:
            raise ValueError("the mvcc option replaceWhere needs .mode('overwrite')")
        plan = plan_write(
            schema,
            options.path,
            mode=mode,
            where=options.replace_where,
            storage_options=options.storage_options,
            max_rows_per_file=options.max_rows_per_file,
        )
        return MvccWriter(plan, options.commit_message, options.transaction_properties)


def projected_schema(schema: pa.Schema, columns: list[str] | None, where: str) -> pa.Schema:
    """`schema`'s fields named by `columns`, in that order (its metadata kept).

    Args:
        schema: the table's schema
        columns: the columns asked for (None: every column)
        where: what asked, for the error (`mvcc read of {uri}`, `mvcc option 'columns' of {uri}`)

    Raises:
        SchemaError: a column the table does not have
    """
    if columns is None:
        return schema
    unknown = [c for c in columns if c not in schema.names]
    if unknown:
        raise SchemaError(f"{where}: the table has no column(s) {unknown}; columns are {schema.names}")
    return pa.schema([schema.field(c) for c in columns], metadata=schema.metadata)


@dataclass
class FragmentsMessage(WriterCommitMessage):
    """One task's written fragments (serialized protobuf `DataFragment`s)."""

    fragments: list[bytes]


class MvccWriter(DataSourceArrowWriter):
    """Executors write fragments with the write id as file prefix; the driver commits one transaction.

    Args:
        plan: the write's plan (`plan_write`)
        commit_message: the message stored with the transaction
        properties: properties stored with the transaction (a dict of str to str)
    """

    def __init__(self, plan: WritePlan, commit_message: str | None, properties: dict[str, str]) -> None:
        """The writer of one save."""
        self.plan = plan
        self.commit_message = commit_message
        self.properties = properties

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FragmentsMessage:
        """Executor side: write one task's rows as fragments.

        Args:
            iterator: the task's Arrow batches
        """
        return FragmentsMessage(self.plan.write_batches(iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Driver side: commit every task's fragments as one transaction.

        Args:
            messages: the tasks' commit messages
        """
        fragments = [f for m in messages if isinstance(m, FragmentsMessage) for f in m.fragments]
        self.plan.commit(
            fragments,
            commit_message=self.commit_message,
            transaction_properties=self.properties,
            path="datasource",
        )
        self.plan.remove_orphans(fragments)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # A task failed (its message is None): another task of the job may still be writing, and this runs
        # in a Python worker that cannot see Spark's tasks, so it keeps removing for a settle window. If
        # every task sent a message, the commit failed (a conflict): no task is running.
        """Driver side: remove the files of a failed write.

        Args:
            messages: the tasks' messages (None for a task that failed)
        """
        failed_task = not messages or any(m is None for m in messages)
        self.plan.remove_files(settle=ABORT_SETTLE_SECONDS if failed_task else 0.0)
