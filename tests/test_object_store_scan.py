"""Unfiltered scans of an object store read each small data file in one GET, several at a time: the rows are
the rows written less the rows deleted, in manifest order, for to_table and to_batches; a file
whose columns differ from the version's is filled as elsewhere; a missing file is a typed error naming
it; a filtered scan keeps the dataset scanner's pushed-down reads."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core.errors import ObjectNotFoundError
from mvcc_core.format.bases import data_file_location
from mvcc_core.io.read_ahead import small_object

pytestmark = pytest.mark.s3


def rows(start: int, n: int) -> pa.Table:
    ids = pa.array(range(start, start + n), pa.int64())
    return pa.table({"id": ids, "name": pa.array([f"r{i}" for i in range(start, start + n)])})


def test_unfiltered_scans_equal_a_plain_read(s3_uri: str, s3_options: dict[str, Any]) -> None:
    t = mvcc.write_table(rows(0, 300), s3_uri, storage_options=s3_options)
    for i in range(1, 25):
        t.append(rows(i * 300, 300))
    t.delete("id % 7 = 3 OR (id >= 900 AND id < 1200)")  # deletion files, and one fragment wholly deleted
    opened = mvcc.open_table(s3_uri, storage_options=s3_options)
    assert all(small_object(f.files[0]) for f in opened.manifest.fragments)
    expected = [i for i in range(25 * 300) if not (i % 7 == 3 or 900 <= i < 1200)]
    assert opened.to_table().column("id").to_pylist() == expected
    batches = list(opened.to_batches())
    assert [v for b in batches for v in b.column("id").to_pylist()] == expected
    assert opened.to_table(columns=["name"]).column("name").to_pylist() == [f"r{i}" for i in expected]
    assert opened.count_rows() == len(expected) == opened.count_rows("id >= 0")
    filtered = opened.to_table(filter="id < 20").column("id").to_pylist()
    assert filtered == [i for i in expected if i < 20]


def test_a_file_without_a_later_column_is_filled(s3_uri: str, s3_options: dict[str, Any]) -> None:
    t = mvcc.write_table(rows(0, 5), s3_uri, storage_options=s3_options)
    t.add_columns(pa.field("extra", pa.int32()))
    t.append(pa.table({"id": pa.array([5], pa.int64()), "name": ["r5"], "extra": pa.array([7], pa.int32())}))
    got = mvcc.open_table(s3_uri, storage_options=s3_options).to_table()
    assert got.column("extra").to_pylist() == [None] * 5 + [7]
    assert got.column("id").to_pylist() == list(range(6))


def test_a_missing_file_is_a_typed_error_naming_it(s3_uri: str, s3_options: dict[str, Any], s3_client: Any) -> None:
    t = mvcc.write_table(rows(0, 5), s3_uri, storage_options=s3_options).append(rows(5, 5))
    data_file = t.manifest.fragments[1].files[0]
    store, rel = data_file_location(t.state.store, t.manifest.base_paths, data_file)
    bucket, _, prefix = s3_uri.removeprefix("s3://").partition("/")
    s3_client.delete_object(Bucket=bucket, Key=f"{prefix}/{rel}")
    with pytest.raises(ObjectNotFoundError, match=data_file.path.split("/")[-1]):
        mvcc.open_table(s3_uri, storage_options=s3_options).to_table()
