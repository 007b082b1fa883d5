"""The row-address path of a scan: one-file fragments read whole, each row's offset its position (a mixin of
`Scan`; delete, update and merge_insert read rows this way)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import CorruptManifestError, DataFileMismatchError
from mvcc_core.format.bases import data_file_location
from mvcc_core.format.row_ids import ROW_ID
from mvcc_core.io.parquet import ROW_ADDRESS, known_metadata, read_errors, remember_metadata
from mvcc_core.io.read_ahead import pool as read_pool
from mvcc_core.io.read_ahead import runs
from mvcc_core.read.deleted_rows import selection
from mvcc_core.read.integer_in_list import IntegerInList
from mvcc_core.read.integer_remainder import IntegerRemainder
from mvcc_core.read.row_group_stats import StatisticsCheck, Verdict, column_positions
from mvcc_core.read.scan_host import Matches, ScanHost, T

if TYPE_CHECKING:
    import pyarrow.dataset as ds

# Rows of the files one reader task of a row-address scan reads (`Scan._read_local`; 200 files of 5,000 rows
# make 8 tasks on 2 cores).
_LOCAL_PART_ROWS = 131_072

_MATCH = "__mvcc_match"  # the filter's result as a column of a row-address scan (see `Scan._offsets_table`)


class RowAddressReads:
    """Scan's row-address reads: `Scan` mixes this in; the methods use its attributes."""

    def _offsets(self: ScanHost, fragments: list[pb.DataFragment]) -> Iterator[pa.RecordBatch]:
        """One-file fragments whose row offsets matter (deletion vectors, `_rowaddr`, `_rowid`).

        One multi-threaded dataset scan; `scan_batches` yields each fragment's batches in order and
        names their file, so a running count gives every row's offset. The filter cannot be pushed
        into the scan (it would drop rows before they are counted): it runs on buffered batches.
        """
        names = self._read_names()
        fragments, files = self._prune(fragments)
        if not fragments:
            return
        by_path = {}
        for frag in fragments:
            store, rel = data_file_location(self.store, self.manifest.base_paths, frag.files[0])
            by_path[store.arrow_path(rel)] = frag
        seen: dict[int, int] = {}
        buffer: list[pa.Table] = []
        buffered = 0
        scanner = self._dataset(fragments, files).scanner(
            columns=self._physical(names), batch_size=self.batch_size, use_threads=True
        )
        for tagged in scanner.scan_batches():
            batch = tagged.record_batch
            frag = by_path[tagged.fragment.path]
            start = seen.get(frag.id, 0)
            seen[frag.id] = start + batch.num_rows
            if seen[frag.id] > frag.physical_rows:
                self._rows_mismatch(frag, f"more than {frag.physical_rows}")
            if not batch.num_rows:
                continue
            offsets = np.arange(start, start + batch.num_rows, dtype=np.uint64)
            table = self._with_ids(pa.Table.from_batches([batch]), frag, offsets)
            mask = self._live_mask(frag)
            if mask is not None:
                table = table.filter(selection(mask[start : start + batch.num_rows]))
            buffer.append(table)
            buffered += table.num_rows
            if buffered >= self.batch_size:
                yield from self._flush(buffer, names)
                buffer, buffered = [], 0
        short = [frag for frag in fragments if seen.get(frag.id, 0) != frag.physical_rows]
        if short:
            self._rows_mismatch(short[0], str(seen.get(short[0].id, 0)))
        if buffer:
            yield from self._flush(buffer, names)

    def _rows_mismatch(self: ScanHost, frag: pb.DataFragment, rows: str) -> None:
        """Raise CorruptManifestError: `frag`'s data file holds `rows` rows, not its `physical_rows`.

        Args:
            frag: the fragment read
            rows: how many rows its file held, in words ("5", "more than 3")
        """
        raise DataFileMismatchError(
            f"fragment {frag.id} of {self.store.uri}: data file {frag.files[0].path} has {rows} rows, "
            f"the manifest's field physical_rows says {frag.physical_rows}",
            path=frag.files[0].path,
        )

    def _offsets_table(self: ScanHost, fragments: list[pb.DataFragment]) -> pa.Table:
        """`_offsets` for a whole result at once, vectorized: the row-address scan of delete, update and
        merge_insert.

        One multi-threaded dataset `to_table` whose projection is the output columns and the filter as a
        boolean column (evaluated by the scan's threads, reading only the columns it needs). The dataset
        returns rows in fragment order and each fragment's rows in file order (Arrow's `ToTable` places
        every batch by fragment and batch index), so a row's position among the run's physical rows gives
        its fragment and offset: nothing per row is read besides the data. Only the matching live rows are
        then taken out. On a local disk the reader threads read runs of whole files and each evaluates the
        filter over its own run and takes out the run's matching rows (`_read_local`): both cores evaluate,
        and only the matching rows reach the calling thread.
        """
        names = self._read_names()
        check = self._statistics_check() if self.store.scheme == "file" else None
        files: list[ds.ParquetFileFragment] | None = None
        prunable = self.filter is not None and self.bound is not None and self.bound.prunable
        if check is None and (prunable or self.store.scheme != "file"):  # local reads need no dataset fragments
            fragments, files = self._prune(fragments)
        if not fragments:
            return self.output_schema.empty_table()
        wanted = set(self.columns)
        # a caller's filter over table names needs every column it reads, after relabelling
        keep = [n for n in names if n in wanted or self._post_filter is not None]
        if not keep and self.filter is None:
            keep = names[:1]  # something to count the rows by
        if self.store.scheme == "file":  # see `_read_local`
            needed = [n for n in names if n in keep or n in self._filter_columns] or names[:1]
            pruned = files is not None and prunable
            # a constant filter (`true`, `1 = 2`) reads no column: evaluate it over the column read to count rows
            evaluated = self._physical(self._filter_columns or needed[:1])
            integers = {f.name for f in self.physical_schema if pa.types.is_signed_integer(f.type)}
            lookup = None
            if self.filter is not None:  # a filter numpy evaluates faster than Acero (`id IN (...)`, `id % 10 = 3`)
                lookup = IntegerInList.of(check, integers) or IntegerRemainder.of(self.filter, integers)

            def matches(run: list[pb.DataFragment], parts: list[pa.Table], whole: list[bool]) -> Matches:
                """The matching live rows of a run of files, on the reader thread that read it."""
                table = pa.concat_tables(parts)
                starts = np.cumsum([0] + [f.physical_rows for f in run], dtype=np.int64)
                mask = None
                if self.filter is not None and not all(whole):
                    mask = lookup.mask(table.column(lookup.column)) if lookup is not None else None
                    if mask is None:  # (a file whose statistics show it matches whole is looked up all the same)
                        mask = self._match_mask(table.select(evaluated), starts, whole, use_threads=False)
                kept, addresses, ids = self._addressed(run, table.select(self._physical(keep)), starts, mask)
                return kept.combine_chunks(), addresses, ids  # one chunk per run: the result is a few rows

            found = self._read_local(fragments, files if pruned else None, self._physical(needed), check, matches)
            if not found:
                return self.output_schema.empty_table()
            addresses = np.concatenate([f[1] for f in found])
            table = pa.concat_tables([f[0] for f in found]) if keep else _no_columns(len(addresses))
            ids = np.concatenate([f[2] for f in found]) if self.with_row_id else None
        else:
            projection = {p: pc.field(p) for p in self._physical(keep)}
            if self.filter is not None:
                projection[_MATCH] = self.filter
            table = self._dataset(fragments, files).to_table(columns=projection, use_threads=True)
            starts = np.cumsum([0] + [f.physical_rows for f in fragments], dtype=np.int64)
            mask = None
            if self.filter is not None:
                mask = pc.fill_null(table.column(_MATCH), False).to_numpy()
                table = table.drop_columns([_MATCH])
            table, addresses, ids = self._addressed(fragments, table, starts, mask)
        if self.with_row_id:
            table = table.append_column(ROW_ID, pa.array(ids, pa.uint64()))
        if self.with_row_address:
            table = table.append_column(ROW_ADDRESS, pa.array(addresses, pa.uint64()))
        return pa.Table.from_batches(list(self._finish(table, keep)), schema=self.output_schema)

    def _addressed(
        self: ScanHost, fragments: list[pb.DataFragment], table: pa.Table, starts: np.ndarray, mask: np.ndarray | None
    ) -> Matches:
        """The live rows of `table` (the fragments' physical rows, fragment i's at `starts[i]`) that `mask`
        keeps (None: all), their row addresses, and their `_rowid` values when the scan asks for them."""
        if table.num_rows != starts[-1]:
            raise CorruptManifestError(
                f"fragments {[f.id for f in fragments][:20]} of {self.store.uri} read {table.num_rows} rows, "
                f"the manifest says {int(starts[-1])}"
            )
        for i, frag in enumerate(fragments):
            live = self._live_mask(frag)
            if live is not None:
                if mask is None:
                    mask = np.ones(int(starts[-1]), dtype=bool)
                mask[starts[i] : starts[i + 1]] &= live
        # positions of the rows kept among the run's physical rows: their fragment, offset and address
        if mask is None or mask.all():
            positions = np.arange(starts[-1], dtype=np.int64)
        else:
            positions = np.flatnonzero(mask)
            table = table.filter(selection(mask))
        # rows kept per fragment, then each row's fragment as runs (cheaper than a search per row)
        counts = np.diff(np.searchsorted(positions, starts))
        frag_ids = np.array([f.id for f in fragments], dtype=np.uint64)
        # address = id << 32 | (position - start) = position + (id << 32) - start (wrapping in uint64)
        base = (frag_ids << np.uint64(32)) - starts[:-1].astype(np.uint64)
        addresses = positions.astype(np.uint64) + np.repeat(base, counts)
        ids = None
        if self.with_row_id:
            stable = np.concatenate([self._row_ids(f) for f in fragments]) if self._stable_ids else None
            ids = stable[positions] if stable is not None else addresses
        return table, addresses, ids

    def _read_local(
        self: ScanHost,
        fragments: list[pb.DataFragment],
        files: list[ds.ParquetFileFragment] | None,
        names: list[str],
        check: StatisticsCheck | None,
        per_run: Callable[[list[pb.DataFragment], list[pa.Table], list[bool]], T],
    ) -> list[T]:
        """Physical columns `names` of one-file fragments on local disk, whole files in fragment order, in
        runs of files (a task of the reader pool each): `per_run` of each run's fragments read (those `check`
        does not rule out by their footers' statistics), their rows, and per fragment read whether `check`
        found that every row of it matches, on the thread that read the run; runs with no file read are left
        out. `per_run` runs on both cores, so the caller evaluates its filter there.

        Each file is read synchronously by a `pyarrow.parquet.ParquetReader`, on one thread per core: for many
        small files the dataset scanner's asynchronous machinery (futures and thread hand-offs per file and
        batch) costs about a third of the CPU of such a scan, and `ParquetFile`'s Python bookkeeping (nested
        column paths, an Arrow schema converted twice, the manifest check) more than decoding a small file's
        key column: a file whose footer's schema is one already checked in this scan is read without them
        (`_Layouts`), and a footer parsed before in this process is reused (`known_metadata`). `files`: dataset
        fragments whose footers `_prune` has loaded, reused instead of read again. A column a file lacks reads
        as nulls, a column of another type is cast, as in the dataset scanner.
        """
        schema = pa.schema([self.physical_schema.field(n) for n in names])
        layouts = _Layouts(schema)
        own_fs = self.store.arrow_filesystem()

        def read(index: int) -> tuple[pa.Table | None, bool]:
            frag = fragments[index]
            data_file = frag.files[0]
            store, rel = data_file_location(self.store, self.manifest.base_paths, data_file)
            path = store.arrow_path(rel)
            fs = own_fs if store is self.store else store.arrow_filesystem()
            key = (store.scheme, path, data_file.file_size_bytes)
            metadata = files[index].metadata if files is not None else known_metadata(key)
            with read_errors(data_file.path), fs.open_input_file(path) as source:
                reader = pq.ParquetReader()
                reader.open(source, metadata=metadata, pre_buffer=False, arrow_extensions_enabled=True)
                footer = reader.metadata
                layout = layouts.find(footer)
                if layout is None:  # a footer unlike those checked: check it before its statistics are used
                    self._check_file(frag, data_file, reader.schema_arrow, None)
                    layout = layouts.learn(footer, reader, self._physical(self._read_names()))
                leaves, positions = layout
                verdict = Verdict.SOME if check is None else check.verdict(footer, positions)
                part = None
                if verdict is not Verdict.NONE:
                    part = reader.read_all(column_indices=leaves, use_threads=False)
            if metadata is None:
                remember_metadata(key, footer)
            if part is None:
                return None, False
            if part.num_rows != frag.physical_rows:
                self._rows_mismatch(frag, str(part.num_rows))
            if part.schema.equals(schema):
                return part, verdict is Verdict.ALL
            present = set(part.schema.names)
            columns = [
                part.column(f.name).cast(f.type) if f.name in present else pa.nulls(part.num_rows, f.type)
                for f in schema
            ]
            return pa.Table.from_arrays(columns, schema=schema), verdict is Verdict.ALL

        def run_task(indices: Sequence[int]) -> T | None:
            parts = [(fragments[i], *read(i)) for i in indices]
            kept = [part for part in parts if part[1] is not None]
            if not kept:
                return None
            return per_run([k[0] for k in kept], [k[1] for k in kept], [k[2] for k in kept])

        if len(fragments) < 2:
            results = [run_task([0])]
        else:  # a run of files per task: a future per file costs as much as reading a small file's column
            tasks = runs(range(len(fragments)), lambda i: fragments[i].physical_rows, _LOCAL_PART_ROWS)
            results = list(read_pool().map(lambda task: run_task(task[1]), tasks))
        return [r for r in results if r is not None]

    def _match_mask(
        self: ScanHost, table: pa.Table, starts: np.ndarray, whole: list[bool], use_threads: bool = True
    ) -> np.ndarray:
        """The filter over `table` (the files' rows, file i at `starts[i]`), as booleans; a file whose
        statistics show that all its rows match (`whole[i]`) is not evaluated. `use_threads=False` keeps the
        evaluation on the calling thread (a reader thread, which has its own share of the work)."""
        if not any(whole):
            return pc.fill_null(_evaluate(table, self.filter, use_threads), False).to_numpy()
        mask = np.ones(int(starts[-1]), dtype=bool)
        i = 0
        while i < len(whole):  # evaluate each run of files not known to match whole, in one pass
            if whole[i]:
                i += 1
                continue
            end = i
            while end < len(whole) and not whole[end]:
                end += 1
            part = table.slice(int(starts[i]), int(starts[end] - starts[i]))
            mask[starts[i] : starts[end]] = pc.fill_null(_evaluate(part, self.filter, use_threads), False).to_numpy()
            i = end
        return mask


# a file's leaf columns to read, and every leaf's index by its path in the schema
_Layout = tuple[list[int], dict[str, int]]


class _Layouts:
    """The Parquet schemas (and stored Arrow schemas) of the files a row-address scan has checked against the
    manifest, with the leaf columns to read from a file of each: a file like one already checked is neither
    converted to an Arrow schema nor checked again (most of a small file's cost besides decoding).

    Only a footer holding every column the scan reads is remembered: whether a missing column is an error
    depends on the file's manifest entry (`check_data_file`), not on the footer alone.
    """

    def __init__(self, schema: pa.Schema) -> None:
        self._schema = schema  # the physical columns read, in order
        self._known: list[tuple[pq.ParquetSchema, bytes | None, _Layout]] = []

    def find(self, footer: pq.FileMetaData) -> _Layout | None:
        """The leaf column indices to read from a file with this footer and every leaf's index by its path (for
        `StatisticsCheck.verdict`), or None when no file like it was checked.

        Args:
            footer: the file's Parquet footer

        Returns:
            The layout of a file like one checked before in this scan, else None.
        """
        parquet_schema = footer.schema
        stored = (footer.metadata or {}).get(_ARROW_SCHEMA)
        for known, known_stored, layout in self._known:
            if known_stored == stored and known.equals(parquet_schema):
                return layout
        return None

    def learn(self, footer: pq.FileMetaData, reader: pq.ParquetReader, checked: list[str]) -> _Layout:
        """The leaf column indices of the scan's columns in a file the caller has just checked (columns it lacks
        left out) and every leaf's index by its path, remembering them when the file holds every column of
        `checked`.

        Args:
            footer: the file's Parquet footer
            reader: the open reader of the file
            checked: the physical columns the caller checked the file for

        Returns:
            The file's layout, as `find` gives it.
        """
        paths = reader.column_paths
        by_column: dict[str, list[int]] = {}
        for index, path in enumerate(paths):
            by_column.setdefault(path[0], []).append(index)
        layout = ([i for name in self._schema.names for i in by_column.get(name, [])], column_positions(paths))
        if all(name in by_column for name in [*checked, *self._schema.names]):
            self._known.append((footer.schema, (footer.metadata or {}).get(_ARROW_SCHEMA), layout))
        return layout


_ARROW_SCHEMA = b"ARROW:schema"  # the footer entry in which Arrow's writer stores the Arrow schema


def _no_columns(rows: int) -> pa.Table:
    """A table of `rows` rows and no column (concatenating such tables loses their row counts)."""
    return pa.table({"rows": pa.nulls(rows)}).select([])


def _evaluate(table: pa.Table, expr: pc.Expression, use_threads: bool = True) -> pa.ChunkedArray:
    """`expr` over every row of `table`, as one column: one pass over the table's columns made contiguous
    (a pass per small chunk costs Acero's per-batch overhead for each). Acero splits the work into batches
    of 32k rows; below a couple of those its thread pool adds only a hand-off, so a small table (a pruned
    merge_insert scan) is evaluated on the calling thread."""
    import pyarrow.acero as acero

    source = acero.Declaration("table_source", acero.TableSourceNodeOptions(table.combine_chunks()))
    project = acero.Declaration("project", acero.ProjectNodeOptions([expr], [_MATCH]))
    plan = acero.Declaration.from_sequence([source, project])
    return plan.to_table(use_threads=use_threads and table.num_rows >= _THREADED_EVALUATION_ROWS).column(0)


_THREADED_EVALUATION_ROWS = 65_536
