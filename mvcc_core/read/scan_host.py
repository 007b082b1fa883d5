"""What the read paths mixed into `Scan` (`scan_row_addresses.RowAddressReads`, `scan_index.IndexedReads`) use of
the scan, as a Protocol: their methods take `self` as a `ScanHost`, so they name the attributes and helpers `Scan`
gives them without importing `scan.py`, which imports them."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.io import ObjectStore
from mvcc_core.read.bound_filter import BoundFilter
from mvcc_core.read.index_planner import IndexChoice
from mvcc_core.read.row_group_stats import StatisticsCheck

if TYPE_CHECKING:
    import pyarrow.dataset as ds  # only in annotations: importing it loads pandas (start-up time)

T = TypeVar("T")

# a run's matching live rows, their row addresses and (when asked) their `_rowid` values
Matches = tuple[pa.Table, np.ndarray, np.ndarray | None]


class SubScan(Protocol):
    """A scan of some of a scan's fragments (`Scan._sub_scan`)."""

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """The rows, in manifest order."""
        ...


class ScanHost(Protocol):
    """A `Scan` as its mixed-in read paths see it; each member is the `Scan` one (see there)."""

    store: ObjectStore
    manifest: pb.Manifest
    table_schema: pa.Schema
    physical_schema: pa.Schema
    columns: list[str]
    fragments: list[pb.DataFragment]
    batch_size: int
    with_row_id: bool
    with_row_address: bool
    bound: BoundFilter | None
    filter: pc.Expression | None
    _post_filter: pc.Expression | None
    _filter_columns: list[str]
    _filter_key: Hashable | None
    _schema_key: Any
    _stable_ids: bool
    _use_index: bool
    _index: IndexChoice | None | Literal[False]
    _addresses: np.ndarray | None

    @property
    def output_schema(self) -> pa.Schema:
        """The schema of the rows the scan returns."""
        ...

    def _read_names(self) -> list[str]: ...

    def _physical(self, names: Sequence[str]) -> list[str]: ...

    def _dataset(
        self, fragments: list[pb.DataFragment], files: list[ds.ParquetFileFragment] | None = None
    ) -> ds.FileSystemDataset: ...

    def _prune(
        self, fragments: list[pb.DataFragment]
    ) -> tuple[list[pb.DataFragment], list[ds.ParquetFileFragment]]: ...

    def _check_file(
        self,
        frag: pb.DataFragment,
        data_file: pb.DataFile,
        file_schema: pa.Schema,
        num_rows: int | None,
        names: list[str] | None = None,
    ) -> None: ...

    def _statistics_check(self) -> StatisticsCheck | None: ...

    def _finish(self, data: pa.Table | pa.RecordBatch, names: list[str]) -> Iterator[pa.RecordBatch]: ...

    def _keep(self, table: pa.Table, frag: pb.DataFragment, offsets: np.ndarray) -> pa.Table: ...

    def _flush(self, tables: list[pa.Table], names: list[str]) -> Iterator[pa.RecordBatch]: ...

    def _live_mask(self, frag: pb.DataFragment) -> np.ndarray | None: ...

    def _row_ids(self, frag: pb.DataFragment) -> np.ndarray: ...

    def _with_ids(self, table: pa.Table, frag: pb.DataFragment, offsets: np.ndarray) -> pa.Table: ...

    def _sub_scan(self, fragments: list[pb.DataFragment]) -> SubScan: ...

    # the row-address path (`RowAddressReads`)

    def _rows_mismatch(self, frag: pb.DataFragment, rows: str) -> None: ...

    def _addressed(
        self, fragments: list[pb.DataFragment], table: pa.Table, starts: np.ndarray, mask: np.ndarray | None
    ) -> Matches: ...

    def _read_local(
        self,
        fragments: list[pb.DataFragment],
        files: list[ds.ParquetFileFragment] | None,
        names: list[str],
        check: StatisticsCheck | None,
        per_run: Callable[[list[pb.DataFragment], list[pa.Table], list[bool]], T],
    ) -> list[T]: ...

    def _match_mask(
        self, table: pa.Table, starts: np.ndarray, whole: list[bool], use_threads: bool = True
    ) -> np.ndarray: ...

    # the index path (`IndexedReads`)

    def _index_addresses(self, choice: IndexChoice) -> np.ndarray: ...

    def _take(self, frag: pb.DataFragment, offsets: np.ndarray) -> Iterator[pa.RecordBatch]: ...
