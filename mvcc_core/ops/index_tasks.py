"""Index builds as tasks: the reading of the indexed column runs on an Executor, the driver writes the index.

Reading every fragment's column is the part that scales with the table, so it is split into picklable
tasks (groups of fragments of about `rows_per_task` live rows). Each task writes its values and row
addresses as an Arrow IPC part under the new index's directory and returns only the part's path; the
driver reads the parts back, sorts/groups them into the index file, and removes the parts. A part left
by a crashed driver is an unreferenced file under `_indices/`, which retention removes.
"""

from __future__ import annotations

import uuid as uuid_mod
from dataclasses import dataclass
from functools import partial
from typing import Any

import pyarrow as pa

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.executor import Executor
from mvcc_core.format.deletion import live_rows
from mvcc_core.format.field_paths import field_at
from mvcc_core.io import ObjectStore
from mvcc_core.progress import Progress
from mvcc_core.read.scan import Scan
from mvcc_core.txn.state import TableState
from mvcc_core.txn.task_state import task_state

DEFAULT_ROWS_PER_TASK = 1_048_576


@dataclass(frozen=True)
class IndexBuildTask:
    """Read `column` (live rows, with row addresses) of some fragments of `read_version`."""

    read_version: int
    column: str
    fragments: tuple[bytes, ...]  # serialized DataFragment
    part_path: str

    def execute(self, state: TableState | str, storage_options: dict[str, Any] | None = None) -> IndexPart:
        """Read the column of the task's fragments and write it as a part; `state`: the table (a picklable
        `TableState`), or its uri with `storage_options`.

        Args:
            state: the plan's `TableState` (picklable: sent with the task to any executor), or the table's uri
            storage_options: options to open the uri with (ignored with a state)
        """
        state = task_state(state, self.read_version, storage_options)
        fragments = [pb.DataFragment.FromString(f) for f in self.fragments]
        columns = scan_columns(state.manifest, self.column)
        data = Scan(state.store, state.manifest, columns=columns, with_row_address=True, fragments=fragments)
        return write_part(state.store, self.part_path, data.to_table())


@dataclass(frozen=True)
class IndexPart:
    path: str
    rows: int


def write_part(store: ObjectStore, path: str, data: pa.Table) -> IndexPart:
    """Write one task's part (column values and row addresses) as an Arrow IPC file.

    Args:
        store: the table's store
        path: the part's path relative to the table root
        data: the part's rows
    """
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, data.schema) as writer:
        writer.write_table(data)
    store.put(path, sink.getvalue().to_pybytes())
    return IndexPart(path, data.num_rows)


def scan_columns(manifest: pb.Manifest, column: str) -> list[str] | dict[str, str]:
    """The scan `columns` reading an indexed column: its name, or for a struct field (`meta.lang`) the SQL path
    computing it as a column of that name.

    Args:
        manifest: the version read
        column: a top-level column's name or a struct field's dotted path
    """
    found = field_at(list(manifest.fields), column)
    if found is None or len(found[1]) == 1:
        return [column]
    return {column: ".".join('"' + p.replace('"', '""') + '"' for p in found[1])}


def run_task(task: IndexBuildTask, state: TableState) -> IndexPart:
    """Module-level, so that `partial(run_task, state=...)` pickles for process pools and Spark.

    Args:
        task: the task to run
        state: the table state it reads
    """
    return task.execute(state)


def fragment_groups(fragments: list[pb.DataFragment], rows_per_group: int) -> list[list[pb.DataFragment]]:
    """Adjacent fragments, in order, grouped to about `rows_per_group` live rows per group.

    Args:
        fragments: the fragments, in order
        rows_per_group: live rows a group reaches before the next fragment starts a new one
    """
    groups: list[list[pb.DataFragment]] = []
    rows = 0
    for frag in fragments:
        if not groups or rows >= rows_per_group:
            groups.append([])
            rows = 0
        groups[-1].append(frag)
        rows += live_rows(frag)
    return groups


def plan(
    manifest: pb.Manifest,
    column: str,
    fragments: list[pb.DataFragment],
    index_dir: str,
    rows_per_task: int = DEFAULT_ROWS_PER_TASK,
) -> list[IndexBuildTask]:
    """Adjacent fragments grouped to about `rows_per_task` live rows per task.

    Args:
        manifest: the version the index is built on
        column: the indexed column
        fragments: the fragments to index
        index_dir: the index's directory, under which the parts are written
        rows_per_task: live rows per task, about
    """
    groups = fragment_groups(fragments, rows_per_task)
    return [
        IndexBuildTask(
            read_version=manifest.version,
            column=column,
            fragments=tuple(f.SerializeToString() for f in group),
            part_path=f"{index_dir}/parts/{uuid_mod.uuid4().hex}.arrow",
        )
        for group in groups
    ]


def read_distributed(
    state: TableState,
    column: str,
    fragments: list[pb.DataFragment],
    index_dir: str,
    executor: Executor,
    *,
    rows_per_task: int = DEFAULT_ROWS_PER_TASK,
    progress: Progress | None = None,
) -> pa.Table:
    """The column and row addresses of `fragments` (at least one), read by tasks on `executor` (each gets
    the picklable `state`), in order; `progress(done, total)` after each task.

    Args:
        state: the table state the tasks receive
        column: the indexed column
        fragments: the fragments to read
        index_dir: the index's directory, under which the parts are written
        executor: runs the tasks
        rows_per_task: live rows per task, about
        progress: called as `progress(done, total)` after each task
    """
    tasks = plan(state.manifest, column, fragments, index_dir, rows_per_task)
    written = [t.part_path for t in tasks]
    try:
        parts = []
        for part in executor.map(partial(run_task, state=state), tasks):
            parts.append(part)
            if progress is not None:
                progress(len(parts), len(tasks))
        tables = [pa.ipc.open_file(pa.py_buffer(state.store.get(p.path))).read_all() for p in parts]
    finally:
        state.store.delete_many(written)
    return pa.concat_tables(tables)


def read_in_process(
    store: ObjectStore,
    manifest: pb.Manifest,
    column: str,
    fragments: list[pb.DataFragment],
    *,
    rows_per_task: int = DEFAULT_ROWS_PER_TASK,
    progress: Progress | None = None,
) -> pa.Table:
    """The column and row addresses of `fragments`, read in this process, in order.

    Without `progress`, one scan. With it, one scan per group of about `rows_per_task` live rows (the groups
    an executor's tasks would read), `progress(done, total)` after each, so that a build without an executor
    reports as it goes too.

    Args:
        store: the table's store
        manifest: the version the index is built on
        column: the indexed column
        fragments: the fragments to read
        rows_per_task: live rows per group when reporting progress
        progress: called as `progress(done, total)` after each group
    """
    columns = scan_columns(manifest, column)
    if progress is None or not fragments:
        return Scan(store, manifest, columns=columns, with_row_address=True, fragments=fragments).to_table()
    groups = fragment_groups(fragments, rows_per_task)
    tables = []
    for group in groups:
        tables.append(Scan(store, manifest, columns=columns, with_row_address=True, fragments=group).to_table())
        progress(len(tables), len(groups))
    return pa.concat_tables(tables)
