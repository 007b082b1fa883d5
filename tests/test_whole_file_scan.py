"""Unfiltered scans read one-file fragments file by file (`Scan._whole_files`); these check they give what a
dataset scan gives: files written under older schemas, projections, streaming, missing files."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from older_schemas import older_schema_rows as _batch

import mvcc_core as mvcc


def _evolved(uri: str) -> tuple[mvcc.Table, pa.Table]:
    """Files under three schemas (a dropped column and struct field, a rename, a nullability change), and the
    rows a reader must see."""
    t = mvcc.write_table(_batch(0, 30), uri, max_rows_per_file=10)
    t.drop_columns(["gone", "p.y"])  # metadata only: the older files still hold them
    t.alter_columns({"path": "k", "name": "kk"}, {"path": "id", "nullable": True})
    t.append(
        pa.table({"id": [30, 31], "p": [{"x": 30}, {"x": 31}], "kk": pa.array([30, 31], pa.int32())}).cast(t.schema)
    )
    ids = list(range(32))
    expected = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "p": pa.array([{"x": i} for i in ids], pa.struct([("x", pa.int64())])),
            "kk": pa.array(ids, pa.int32()),
        },
        schema=t.schema,
    )
    return t, expected


@pytest.mark.parametrize("where", ["local", "memory"])
def test_unfiltered_scan_reads_files_written_under_older_schemas(where, tmp_uri, memory_uri) -> None:
    t, expected = _evolved(tmp_uri if where == "local" else memory_uri)
    assert t.to_table().equals(expected)
    streamed = pa.Table.from_batches(list(t.to_batches()), schema=t.schema)
    assert streamed.equals(expected)
    assert t.to_table(columns=["kk", "id"]).equals(expected.select(["kk", "id"]))
    assert t.to_table(columns=["p"]).equals(expected.select(["p"]))


@pytest.mark.parametrize("batch_size", [3, 10, 64])
def test_files_larger_than_a_batch_stream_what_a_whole_read_gives(batch_size, tmp_uri) -> None:
    """A file of more rows than `batch_size` is streamed batch by batch (Scan._streamed_file); files written
    under older schemas fall back to the whole read; small and large files interleave in manifest order."""
    t, expected = _evolved(tmp_uri)
    t.append(pa.table({"id": list(range(32, 100)), "p": [{"x": i} for i in range(32, 100)],
                       "kk": pa.array(range(32, 100), pa.int32())}).cast(t.schema))  # fmt: skip
    expected = pa.concat_tables([expected, t.to_table().slice(32)])
    assert t.to_table()["id"].to_pylist() == list(range(100))
    batches = list(t.to_batches(batch_size=batch_size))
    assert all(b.num_rows <= batch_size for b in batches)
    assert pa.Table.from_batches(batches, schema=t.schema).equals(expected)
    projected = pa.Table.from_batches(list(t.to_batches(columns=["kk"], batch_size=batch_size)))
    assert projected.equals(expected.select(["kk"]))


def test_unfiltered_scan_keeps_manifest_order_over_many_files(tmp_uri) -> None:
    t = mvcc.write_table(pa.table({"id": pa.array(range(0, 7), pa.int64())}), tmp_uri)
    for start in range(7, 700, 7):  # 100 files, read several at a time
        t.append(pa.table({"id": pa.array(range(start, start + 7), pa.int64())}))
    assert t.to_table().column("id").to_pylist() == list(range(700))
    assert [v for b in t.to_batches() for v in b.column("id").to_pylist()] == list(range(700))


@pytest.mark.slow
def test_unfiltered_scan_of_a_missing_file_names_it(tmp_uri) -> None:
    t = mvcc.write_table(pa.table({"id": pa.array(range(20), pa.int64())}), tmp_uri, max_rows_per_file=5)
    missing = t.get_fragments()[2].data_files()[0].path
    (Path(tmp_uri) / "data" / missing).unlink()
    with pytest.raises(mvcc.errors.ObjectNotFoundError, match="missing"):
        t.to_table()
    with pytest.raises(mvcc.errors.ObjectNotFoundError, match="missing"):
        list(t.to_batches())
