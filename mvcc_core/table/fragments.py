"""`Fragment`: one fragment of one version, as pylance's `LanceFragment` (`Table.get_fragments()` returns them).

A fragment is one manifest entry: its data files (`data_files()`, pylance's `DataFile`), its deletion file, its
row counts. Reads of the fragment alone (`count_rows`, `to_table`, `head`) are scans of the version restricted
to it. `metadata` is the manifest entry itself: what `write_fragments` returns and the operations take.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.format.deletion import deletion_path, live_rows
from mvcc_core.io import ObjectStore
from mvcc_core.read.scan import DEFAULT_BATCH_SIZE, Scan


@dataclass(frozen=True)
class DataFile:
    """One data file of a fragment, with pylance's `DataFile` fields.

    `path` is relative to the table's `data/` directory (or to the base `base_id` names), `fields` the field
    ids it holds and `column_indices` where each is in the file, `file_size_bytes` its size (0: not recorded).
    """

    path: str
    fields: list[int]
    column_indices: list[int]
    file_major_version: int
    file_minor_version: int
    file_size_bytes: int
    base_id: int | None

    @classmethod
    def from_manifest(cls, entry: pb.DataFile) -> DataFile:
        """The data file a manifest's `DataFile` entry describes.

        Args:
            entry: the entry
        """
        return cls(
            path=entry.path,
            fields=list(entry.fields),
            column_indices=list(entry.column_indices),
            file_major_version=entry.file_major_version,
            file_minor_version=entry.file_minor_version,
            file_size_bytes=entry.file_size_bytes,
            base_id=entry.base_id if entry.HasField("base_id") else None,
        )


class Fragment:
    """One fragment of one version of a table (pylance's `LanceFragment`).

    Args:
        store: the table's store
        manifest: the version's manifest
        entry: the fragment's entry in it
    """

    def __init__(self, store: ObjectStore, manifest: pb.Manifest, entry: pb.DataFragment) -> None:
        self._store = store
        self._manifest = manifest
        self._entry = entry

    @property
    def fragment_id(self) -> int:
        """The fragment's id, unique within the table."""
        return int(self._entry.id)

    @property
    def metadata(self) -> pb.DataFragment:
        """The fragment's manifest entry (`id`, `files`, `deletion_file`, `physical_rows`, ...): the message
        `write_fragments` returns and the operations (`mvcc_core.operations`) take."""
        return self._entry

    @property
    def physical_rows(self) -> int:
        """The rows its data files hold, deleted rows included."""
        return int(self._entry.physical_rows)

    @property
    def num_deletions(self) -> int:
        """The rows its deletion file marks deleted (0 without one)."""
        if not self._entry.HasField("deletion_file"):
            return 0
        return int(self._entry.deletion_file.num_deleted_rows)

    @property
    def schema(self) -> pa.Schema:
        """The table's schema in this version (every fragment reads as the whole schema)."""
        return self._scan(columns=None).output_schema

    def data_files(self) -> list[DataFile]:
        """Its data files, in the order the manifest lists them."""
        return [DataFile.from_manifest(f) for f in self._entry.files]

    def deletion_file(self) -> str | None:
        """The path of its deletion file relative to the table's root (`_deletions/...`), or None without one."""
        if not self._entry.HasField("deletion_file"):
            return None
        return deletion_path(self._entry.id, self._entry.deletion_file)

    def count_rows(self, filter: str | pc.Expression | None = None) -> int:  # noqa: A002 - pylance's name
        """Its live rows (deleted rows left out), or those `filter` keeps.

        Without a filter the count comes from the manifest alone; no data file is opened.

        Args:
            filter: a SQL predicate or a pyarrow Expression over the table's columns (None: every live row)
        """
        if filter is None:
            return live_rows(self._entry)
        return self._scan(columns=[], filter=filter).count_rows()

    def to_table(
        self,
        columns: Sequence[str] | Mapping[str, str] | None = None,
        filter: str | pc.Expression | None = None,  # noqa: A002 - pylance's name
        limit: int | None = None,
        offset: int | None = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
    ) -> pa.Table:
        """Its live rows as one Arrow table.

        Args:
            columns: column names, or a dict of output name -> SQL expression (None: every column)
            filter: rows to keep, as SQL or an Arrow Expression
            limit: at most this many rows (after `offset`)
            offset: rows to skip first
            with_row_id: add `_rowid`
            with_row_address: add `_rowaddr`
        """
        if limit is not None and limit < 0 or offset is not None and offset < 0:
            raise ValueError(f"limit and offset must not be negative, got limit={limit}, offset={offset}")
        rows = self._scan(columns, filter, with_row_id=with_row_id, with_row_address=with_row_address).to_table()
        start = offset or 0
        return rows.slice(start, limit) if limit is not None else rows.slice(start)

    def to_batches(
        self,
        columns: Sequence[str] | Mapping[str, str] | None = None,
        filter: str | pc.Expression | None = None,  # noqa: A002 - pylance's name
        batch_size: int | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Its live rows, batch by batch.

        Args:
            columns: column names, or a dict of output name -> SQL expression (None: every column)
            filter: rows to keep, as SQL or an Arrow Expression
            batch_size: rows at most per batch
        """
        return self._scan(columns, filter, batch_size=batch_size).to_batches()

    def head(self, num_rows: int, columns: Sequence[str] | Mapping[str, str] | None = None) -> pa.Table:
        """Its first `num_rows` live rows.

        Args:
            num_rows: how many
            columns: column names (None: every column)
        """
        return self.to_table(columns, limit=num_rows)

    def _scan(
        self,
        columns: Sequence[str] | Mapping[str, str] | None,
        filter: str | pc.Expression | None = None,  # noqa: A002
        *,
        batch_size: int | None = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
    ) -> Scan:
        return Scan(
            self._store,
            self._manifest,
            columns,
            filter,
            with_row_address=with_row_address,
            batch_size=batch_size or DEFAULT_BATCH_SIZE,
            fragments=[self._entry],
            with_row_id=with_row_id,
        )

    def __repr__(self) -> str:
        files = [f.path for f in self._entry.files]
        return f"Fragment(id={self.fragment_id}, data_files={files!r}, deletion_file={self.deletion_file()!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Fragment):
            return NotImplemented
        return self._store.uri == other._store.uri and self._entry == other._entry

    def __hash__(self) -> int:
        return hash((self._store.uri, self._entry.id))
