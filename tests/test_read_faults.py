"""Reads of a table's files under storage faults raise mvcc's errors: a missing file `ObjectNotFoundError`, any
other failure of the store (a directory where the file should be, an S3 endpoint that cannot be reached)
`StorageError`, from the read entry points and from the table's operations above them."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

import mvcc_core as mvcc
from mvcc_core.io import parquet as parquet_io
from mvcc_core.io import read_ahead as file_reads

SCHEMA = pa.schema([("a", pa.int64())])

#: Each read entry point, given a filesystem and a file key.
ENTRY_POINTS: dict[str, Callable[[pafs.FileSystem, parquet_io.FileKey], Any]] = {
    "parquet_footer": parquet_io.parquet_footer,
    "parquet_fragment": parquet_io.parquet_fragment,
    "read_row_groups": lambda fs, key: parquet_io.read_row_groups(fs, key, [0], ["a"], []),
    "read_file": lambda fs, key: parquet_io.read_file(fs, key, SCHEMA),
    "read_whole_file": lambda fs, key: file_reads.read_whole_file(fs, key, SCHEMA),
}


def faulty_table(tmp_path: Path, fault: str) -> tuple[mvcc.Table, str]:
    """One fragment of 3 rows whose data file is removed ("missing") or replaced by a directory ("directory")."""
    t = mvcc.write_table(pa.table({"a": [1, 2, 3]}), str(tmp_path / "t"))
    (path,) = (Path(t.uri) / "data").iterdir()
    os.remove(path)
    if fault == "directory":
        path.mkdir()
    return mvcc.open_table(t.uri), str(path)


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("fault", ["missing", "directory"])
def test_local_entry_points(tmp_path: Path, entry: str, fault: str) -> None:
    _, path = faulty_table(tmp_path, fault)
    expected = mvcc.errors.ObjectNotFoundError if fault == "missing" else mvcc.errors.StorageError
    with pytest.raises(expected, match="cannot read") as caught:
        ENTRY_POINTS[entry](pafs.LocalFileSystem(), ("file", path, 100))
    assert path in str(caught.value)


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_s3_read_error_is_a_storage_error(entry: str) -> None:
    """An S3 endpoint nobody listens on: the GET fails at once (one attempt, no retry)."""
    fs = pafs.S3FileSystem(
        endpoint_override="http://127.0.0.1:9",
        access_key="key",
        secret_key="secret",
        region="us-east-1",
        connect_timeout=1,
        request_timeout=1,
        retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1),
    )
    key = ("s3", f"bucket/data/{entry}.parquet", 100)
    with pytest.raises(mvcc.errors.StorageError, match=f"cannot read bucket/data/{entry}.parquet"):
        ENTRY_POINTS[entry](fs, key)


def compact_after_append(t: mvcc.Table) -> None:
    """A second fragment, then compaction of both (it reads the faulty one)."""
    t.append(pa.table({"a": [4]}))
    t.optimize.compact_files()


#: The table's operations that read its data files.
OPERATIONS: dict[str, Callable[[mvcc.Table], Any]] = {
    "to_table": lambda t: t.to_table(),
    "filtered": lambda t: t.to_table(filter="a > 1", columns=["a"]),
    "batches": lambda t: list(t.to_batches()),
    "take": lambda t: t.take([0]),
    "delete": lambda t: t.delete("a = 2"),
    "update": lambda t: t.update({"a": "a + 1"}),
    "compact": lambda t: compact_after_append(t),
}


@pytest.mark.parametrize("operation", OPERATIONS.values(), ids=list(OPERATIONS))
def test_a_directory_in_place_of_a_data_file_is_a_storage_error(tmp_path: Path, operation: Callable) -> None:
    t, path = faulty_table(tmp_path, "directory")
    with pytest.raises(mvcc.errors.StorageError) as caught:
        operation(t)
    assert not isinstance(caught.value, mvcc.errors.ObjectNotFoundError) and path in str(caught.value)


@pytest.mark.parametrize("operation", OPERATIONS.values(), ids=list(OPERATIONS))
def test_a_missing_data_file_on_every_backend(any_uri: tuple[str, dict[str, Any] | None], operation: Callable) -> None:
    """In memory and on the S3 server as on a local disk: a data file that is gone is `ObjectNotFoundError`
    naming it, from every operation that reads it."""
    uri, opts = any_uri
    t = mvcc.write_table(pa.table({"a": [1, 2, 3]}), uri, storage_options=opts)
    path = t.manifest.fragments[0].files[0].path
    t.state.store.delete_many([f"data/{path}"])
    with pytest.raises(mvcc.errors.ObjectNotFoundError, match=path):
        operation(mvcc.open_table(uri, storage_options=opts))
