"""The codec of a data file follows its rows: LZ4 below `SMALL_FILE_ROWS`, zstd from there on (docs/reference/format.md,
"Data files"); tables written before (zstd everywhere) read and write on, and scans of mixed tables match a plain
evaluation."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mvcc_core as mvcc
from mvcc_core.format.fragments import SMALL_FILE_ROWS, FragmentWriter


def _codecs(t: mvcc.Table) -> dict[int, set[str]]:
    """Fragment id -> the codecs of its data file's column chunks."""
    root = Path(t.uri.removeprefix("file://"))
    out = {}
    for fragment in t.get_fragments():
        metadata = pq.ParquetFile(root / "data" / fragment.data_files()[0].path).metadata
        out[fragment.fragment_id] = {
            metadata.row_group(g).column(c).compression
            for g in range(metadata.num_row_groups)
            for c in range(metadata.num_columns)
        }
    return out


def _rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table({"id": pa.array(ids, pa.int64()), "s": [f"s{i % 7}" for i in ids], "x": [i / 3 for i in ids]})


def test_small_writes_are_lz4_and_larger_files_and_compaction_zstd(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = mvcc.write_table(_rows(0, 10), uri)
    t.insert(_rows(10, SMALL_FILE_ROWS - 1))
    t.insert(_rows(10 + SMALL_FILE_ROWS - 1, SMALL_FILE_ROWS))
    assert list(_codecs(t).values()) == [{"LZ4"}, {"LZ4"}, {"ZSTD"}]
    t.delete("id % 5 = 0")
    t.update({"x": "x + 1"}, where="id < 4")  # rewrites a few rows: a small file
    assert {"LZ4"} in list(_codecs(t).values())[3:]
    t.optimize.compact_files()
    t = mvcc.open_table(uri)
    assert list(_codecs(t).values()) == [{"ZSTD"}]  # 13,106 live rows in one file
    want = [i for i in range(10 + 2 * SMALL_FILE_ROWS - 1) if i % 5]
    assert sorted(t.to_table(columns=["id"])["id"].to_pylist()) == want  # updated rows moved to the end


def test_one_write_of_several_files_chooses_each_files_codec(tmp_path: Path) -> None:
    t = mvcc.write_table(_rows(0, 1), str(tmp_path / "t"))
    state = t.state
    writer = FragmentWriter(state.store, state.fields, state.schema, max_rows_per_file=SMALL_FILE_ROWS + 100)
    writer.write(_rows(0, SMALL_FILE_ROWS + 100 + 50).to_batches()[0])  # a full file, then 50 rows
    fragments = writer.finish()
    codecs = []
    for fragment in fragments:
        metadata = pq.ParquetFile(tmp_path / "t" / "data" / fragment.files[0].path).metadata
        codecs.append(metadata.row_group(0).column(0).compression)
    assert [f.physical_rows for f in fragments] == [SMALL_FILE_ROWS + 100, 50]
    assert codecs == ["ZSTD", "LZ4"]


def test_a_table_written_by_the_previous_code_reads_and_writes_on(tmp_path: Path) -> None:
    # tests/fixtures/per_fragment_deletions: written before this change, every small file zstd
    uri = tmp_path / "t"
    shutil.copytree(Path(__file__).parent / "fixtures" / "per_fragment_deletions", uri)
    t = mvcc.open_table(str(uri))
    assert all(codecs == {"ZSTD"} for codecs in _codecs(t).values())
    before = t.to_table()["id"].to_pylist()
    t.insert(pa.Table.from_pylist([{"id": 100}, {"id": 101}], schema=t.schema))
    assert list(_codecs(t).values())[-1] == {"LZ4"}
    assert mvcc.open_table(str(uri)).to_table()["id"].to_pylist() == [*before, 100, 101]
    assert mvcc.open_table(str(uri)).count_rows("id > 50") == 2


@pytest.mark.parametrize("seed", range(2))
def test_scans_of_tables_of_both_codecs_match_a_plain_evaluation(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    uri = str(tmp_path / "t")
    live: list[int] = []
    next_id = 0
    for step in range(6):
        count = rng.choice([1, 300, SMALL_FILE_ROWS - 1, SMALL_FILE_ROWS + 1])
        data = _rows(next_id, count)
        t = mvcc.write_table(data, uri) if step == 0 else mvcc.open_table(uri).insert(data)
        live += range(next_id, next_id + count)
        next_id += count
        if rng.random() < 0.5:
            modulus = rng.choice([3, 50])
            t.delete(f"id % {modulus} = 1")
            live = [i for i in live if i % modulus != 1]
        if rng.random() < 0.2:
            t.optimize.compact_files()
        t = mvcc.open_table(uri)
        assert t.to_table(columns=["id"])["id"].to_pylist() == live
        bound = rng.randint(0, next_id)
        got = t.to_table(filter=f"id >= {bound}")
        assert got["id"].to_pylist() == [i for i in live if i >= bound]
        assert got["s"].to_pylist() == [f"s{i % 7}" for i in live if i >= bound]
    assert {"LZ4", "ZSTD"} <= set().union(*_codecs(t).values()) or len(t.get_fragments()) == 1
