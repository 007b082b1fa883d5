"""Data files as the fragment writer lays them out: full row groups, dictionaries only where they pay."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import mvcc_core as mvcc
from mvcc_core.format.fragments import ROW_GROUP_ROWS, dictionary_columns


def _data_file(t: mvcc.Table, fragment: int = 0) -> pq.ParquetFile:
    return pq.ParquetFile(f"{t.uri}/data/{t.get_fragments()[fragment].data_files()[0].path}")


def test_small_batches_make_full_row_groups(tmp_path):
    rows = ROW_GROUP_ROWS * 2 + 10
    batches = [
        pa.record_batch({"id": np.arange(start, min(start + 1000, rows), dtype=np.int64)})
        for start in range(0, rows, 1000)
    ]
    reader = pa.RecordBatchReader.from_batches(batches[0].schema, batches)
    t = mvcc.write_table(reader, str(tmp_path / "t"))
    meta = _data_file(t).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [ROW_GROUP_ROWS, ROW_GROUP_ROWS, 10]
    assert t.to_table().column("id").to_pylist() == list(range(rows))


def test_small_batches_split_across_files(tmp_path):
    batches = [pa.record_batch({"id": np.arange(s, s + 7, dtype=np.int64)}) for s in range(0, 70, 7)]
    t = mvcc.write_table(batches, str(tmp_path / "t"), max_rows_per_file=25)
    assert [f.physical_rows for f in t.get_fragments()] == [25, 25, 20]
    assert t.to_table().column("id").to_pylist() == list(range(70))


def test_dictionary_only_for_repetitive_columns(tmp_path):
    n = 50_000
    rng = np.random.default_rng(1)
    data = pa.table(
        {
            "id": np.arange(n, dtype=np.int64),
            "noise": rng.random(n),
            "status": pa.array([f"s{i % 7}" for i in range(n)]),
            "code": rng.integers(0, 20, n),
            "tags": pa.array([[f"t{i % 3}"] for i in range(n)]),
            "uuid": pa.array([f"{i:032x}" for i in rng.permutation(n)]),
        }
    )
    t = mvcc.write_table(data, str(tmp_path / "t"))
    meta = _data_file(t).metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: meta.column(i).encodings for i in range(meta.num_columns)}
    by_name = {f.name: f"c{f.id}" for f in t.manifest.fields if f.parent_id == -1}

    def dictionary_encoded(name: str) -> bool:
        paths = [p for p in encodings if p.split(".")[0] == by_name[name]]
        return all(any("DICT" in e for e in encodings[p]) for p in paths)

    assert {name: dictionary_encoded(name) for name in data.column_names} == {
        "id": False,
        "noise": False,
        "status": True,
        "code": True,
        "tags": True,
        "uuid": False,
    }
    assert t.to_table().equals(data)


def test_dictionary_choice_edge_cases():
    empty = pa.table({"a": pa.array([], pa.int64())})
    nulls = pa.table({"a": pa.array([None, None], pa.int64())})
    flags = pa.table({"a": [True, False, True]})
    encoded = pa.table({"a": pa.array(["x", "y"]).dictionary_encode()})
    assert dictionary_columns(empty) == ["a"]
    assert dictionary_columns(nulls) == ["a"]
    assert dictionary_columns(flags) == ["a"]
    assert dictionary_columns(encoded) == ["a"]
    assert dictionary_columns(pa.table({"a": pa.array([1, 2, 3, 4])})) == []


def test_small_fragment_is_the_file_the_streaming_writer_writes(tmp_path):
    """`write_small_fragment` (in memory, one put_new) and the streaming writer make the same fragment: same
    rows, field ids, physical schema and encodings, so a table cannot tell which wrote it."""
    from mvcc_core.format.fragments import write_fragments_from_reader, write_small_fragment

    schema = pa.schema(
        [("name", pa.string()), ("tags", pa.list_(pa.string())), ("n", pa.int64())], metadata={b"k": b"v"}
    )
    data = pa.table({"name": ["a", "b", "a"], "tags": [["x"], [], ["y", "z"]], "n": [1, 2, 3]}, schema=schema)
    t = mvcc.write_table(data, str(tmp_path / "t"))
    store, fields = t.state.store, list(t.manifest.fields)
    [streamed] = write_fragments_from_reader(store, data.to_reader(), fields, schema)
    [small] = write_small_fragment(store, data, fields, schema)
    assert small.physical_rows == streamed.physical_rows == 3
    assert list(small.files[0].fields) == list(streamed.files[0].fields)
    assert small.files[0].path != streamed.files[0].path
    files = [pq.ParquetFile(f"{t.uri}/data/{f.files[0].path}") for f in (small, streamed)]
    assert files[0].schema_arrow.equals(files[1].schema_arrow, check_metadata=True)
    assert files[0].read().equals(files[1].read())
    meta = [f.metadata.row_group(0) for f in files]
    for i in range(meta[0].num_columns):
        assert meta[0].column(i).encodings == meta[1].column(i).encodings
        assert meta[0].column(i).compression == meta[1].column(i).compression
    assert small.files[0].file_size_bytes == (tmp_path / "t" / "data" / small.files[0].path).stat().st_size
    assert write_small_fragment(store, data.slice(0, 0), fields, schema) == []


def test_numeric_columns_not_dictionary_encoded_are_delta_or_byte_stream_split(tmp_path):
    rng = np.random.default_rng(7)
    n = 3000
    data = pa.table(
        {
            "i8": pa.array(rng.integers(-128, 128, n), pa.int8()),
            "i64": pa.array(np.r_[-(2**63), 2**63 - 1, rng.integers(-(2**62), 2**62, n - 2)]),
            "u64": pa.array(np.r_[np.iinfo(np.uint64).max, rng.integers(0, 2**63, n - 1, dtype=np.uint64)]),
            "f32": pa.array(rng.standard_normal(n).astype(np.float32)),
            "f64": pa.array([None if i % 7 == 0 else float(v) for i, v in enumerate(rng.standard_normal(n))]),
            "few": pa.array(np.arange(n) % 3),  # repetitive: dictionary-encoded
        }
    )
    t = mvcc.write_table(data, str(tmp_path / "t"))
    assert t.to_table().equals(data)
    meta = _data_file(t).metadata
    encodings = {meta.schema.column(i).name: meta.row_group(0).column(i).encodings for i in range(meta.num_columns)}
    names = {f"c{i}": name for i, name in enumerate(data.schema.names)}
    by_name = {names[k]: v for k, v in encodings.items()}
    assert "DELTA_BINARY_PACKED" in by_name["i64"] and "DELTA_BINARY_PACKED" in by_name["u64"]
    assert "BYTE_STREAM_SPLIT" in by_name["f32"] and "BYTE_STREAM_SPLIT" in by_name["f64"]
    assert "RLE_DICTIONARY" in by_name["few"] and "RLE_DICTIONARY" in by_name["i8"]  # 256 values: dictionary
    expected = data.filter((pc.field("i64") > 0) & (pc.field("f64") < 0.5))
    assert t.to_table(filter="i64 > 0 AND f64 < 0.5").equals(expected)
