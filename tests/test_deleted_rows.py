"""Dropping deleted rows from runs of decoded files, and the live masks cached per deletion file."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mvcc_core as mvcc
from mvcc_core.format.manifest import decode_manifest, encode_manifest, list_manifests
from mvcc_core.read.deleted_rows import drop_deleted, drop_deleted_runs, live_mask, selection


@pytest.mark.parametrize("seed", range(20))
def test_runs_of_files_lose_exactly_their_deleted_rows_in_order(seed: int) -> None:
    rng = random.Random(seed)
    files, want = [], []
    next_id = 0
    for _ in range(rng.randint(0, 12)):
        rows = rng.choice([0, 1, 3, 64, 65, 500])
        ids = list(range(next_id, next_id + rows))
        next_id += rows
        table = pa.table(
            {"id": pa.array(ids, pa.int64()), "s": pa.array([str(i) if i % 3 else None for i in ids], pa.string())}
        )
        live = None
        if rows and rng.random() < 0.6:  # a share below and above TAKE_DELETED_SHARE, or every row deleted
            share = rng.choice([0.01, 0.3, 1.0])
            live = np.array([rng.random() >= share for _ in ids], dtype=bool)
            live.flags.writeable = False  # as the cached masks are
        files.append((table, live))
        want += [i for k, i in enumerate(ids) if live is None or live[k]]
    out = drop_deleted_runs(files)
    got = [i for table in out for i in table.column("id").to_pylist()]
    assert got == want
    assert all(t.schema.equals(files[0][0].schema) for t in out)
    # a file without deletions is passed on uncopied
    for table, live in files:
        if live is None and table.num_rows:
            assert any(t is table for t in out)


@pytest.mark.parametrize("seed", range(6))
def test_dropping_deleted_rows_keeps_every_column_type_whole_or_chunked(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = int(rng.choice([1, 64, 700]))
    ids = np.arange(rows)
    table = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "s": pa.array([None if i % 7 == 0 else f"v{i}" for i in ids], pa.string()),
            "d": pa.array([f"k{i % 3}" for i in ids]).dictionary_encode(),
            "l": pa.array([[int(i)] * int(i % 3) for i in ids], pa.list_(pa.int64())),
            "b": pa.array(ids % 2 == 0),
        }
    )
    live = rng.random(rows) >= rng.choice([0.01, 0.3, 1.0])
    want = {
        name: [v for v, keep in zip(table.column(name).to_pylist(), live, strict=True) if keep]
        for name in table.column_names
    }
    cut = int(rng.integers(0, rows + 1))
    for shape in (table, pa.concat_tables([table.slice(0, cut), table.slice(cut)])):  # one chunk, two chunks
        out = drop_deleted(shape, live)
        assert out.schema.equals(table.schema)
        assert {name: out.column(name).to_pylist() for name in out.column_names} == want


def test_a_selection_packs_every_length() -> None:
    rng = np.random.default_rng(0)
    for length in (0, 1, 7, 8, 9, 63, 64, 65, 1000):
        live = rng.random(length) < 0.5
        assert selection(live).equals(pa.array(live, pa.bool_()))
        assert selection(live[1:]).equals(pa.array(live[1:], pa.bool_()))  # a view at an offset


def _tamper(uri: str, version: int, edit) -> None:
    store = mvcc.open_table(uri).state.store
    loc = {loc.version: loc for loc in list_manifests(store)}[version]
    manifest = decode_manifest(store.get(loc.path), loc.path)
    edit(manifest)
    store.put(loc.path, encode_manifest(manifest))


def test_a_cached_mask_is_read_only_and_never_hides_a_manifest_that_disagrees(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = mvcc.write_table(pa.table({"id": pa.array(range(10), pa.int64())}), uri)
    t.insert(pa.table({"id": pa.array(range(10, 20), pa.int64())}))
    t.delete("id % 4 = 1")
    assert mvcc.open_table(uri).to_table()["id"].to_pylist() == [i for i in range(20) if i % 4 != 1]  # cached now
    opened = mvcc.open_table(uri)
    fragment = opened.state.manifest.fragments[0]
    mask = live_mask(opened.state.store, fragment, opened.state.manifest.base_paths)
    assert mask is live_mask(opened.state.store, fragment, opened.state.manifest.base_paths)
    assert mask.tolist() == [i % 4 != 1 for i in range(10)]
    with pytest.raises(ValueError):
        mask[0] = False
    # the same deletion file, named by an entry that disagrees with it: refused as before the cache
    _tamper(uri, opened.version, lambda m: setattr(m.fragments[0].deletion_file, "num_deleted_rows", 2))
    with pytest.raises(mvcc.errors.CorruptManifestError, match="deletes 3 rows of fragment 0"):
        mvcc.open_table(uri).to_table()
    # the same vector for a fragment the manifest now says is shorter: refused
    _tamper(
        uri,
        opened.version,
        lambda m: (
            setattr(m.fragments[0].deletion_file, "num_deleted_rows", 3),
            setattr(m.fragments[0], "physical_rows", 8),
        ),
    )
    with pytest.raises(mvcc.MvccError):
        mvcc.open_table(uri).to_table()


@pytest.mark.parametrize("case", ["type", "rows"])
def test_a_wrong_data_file_among_small_files_with_deletions_is_still_refused(tmp_path: Path, case: str) -> None:
    uri = str(tmp_path / "t")
    t = mvcc.write_table(pa.table({"id": pa.array(range(4), pa.int64())}), uri)
    for start in (4, 8, 12):
        t.insert(pa.table({"id": pa.array(range(start, start + 4), pa.int64())}))
    t.delete("id % 4 = 2")  # a vector in every fragment: the files are dropped from as one run
    assert mvcc.open_table(uri).to_table()["id"].to_pylist() == [i for i in range(16) if i % 4 != 2]
    opened = mvcc.open_table(uri)
    data_file = opened.manifest.fragments[2].files[0]
    name = opened.manifest.fields[0]
    physical = f"c{name.id}"
    bad = pa.table({physical: ["a", "b", "c", "d"]}) if case == "type" else pa.table({physical: pa.array([8, 9, 10])})
    sink = pa.BufferOutputStream()
    pq.write_table(bad, sink)
    data = sink.getvalue().to_pybytes()
    opened.state.store.put(f"data/{data_file.path}", data)
    _tamper(uri, opened.version, lambda m: setattr(m.fragments[2].files[0], "file_size_bytes", len(data)))
    with pytest.raises(mvcc.errors.DataFileMismatchError) as err:
        mvcc.open_table(uri).to_table()
    assert data_file.path in str(err.value)
