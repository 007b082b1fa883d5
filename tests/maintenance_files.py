"""What a table's data files themselves hold, read with pyarrow from the bytes in the store (not through the
table's scan): the maintenance tests judge a compaction by these, not only by its metrics.
Imported by the maintenance tests (tests/ is not a package)."""

from __future__ import annotations

import hashlib
import io

import pyarrow as pa
import pyarrow.parquet as pq

import mvcc_core as mvcc
from mvcc_core.format.bases import data_file_location
from mvcc_core.format.deletion import read_deletion_vector


def fragment_files(t: mvcc.Table) -> dict[int, tuple[tuple[str, str], ...]]:
    """Fragment id -> (path, sha256 of the bytes) of each of its data files."""
    state = t.state
    out = {}
    for frag in state.manifest.fragments:
        files = []
        for data_file in frag.files:
            store, rel = data_file_location(state.store, state.manifest.base_paths, data_file)
            files.append((data_file.path, hashlib.sha256(store.get(rel)).hexdigest()))
        out[frag.id] = tuple(files)
    return out


def fragment_rows(t: mvcc.Table) -> dict[int, list[tuple]]:
    """Fragment id -> its live rows, from one-file fragments' Parquet bytes minus their deletion vectors, with
    the file's columns named in the table's column order."""
    state = t.state
    names = t.schema.names
    out = {}
    for frag in state.manifest.fragments:
        assert len(frag.files) == 1, "the helper reads one-file fragments"
        store, rel = data_file_location(state.store, state.manifest.base_paths, frag.files[0])
        table = pq.read_table(io.BytesIO(store.get(rel)))
        assert table.num_columns == len(names) and table.num_rows == frag.physical_rows
        table = table.rename_columns(names)
        deleted = read_deletion_vector(state.store, frag, state.manifest.base_paths)
        keep = pa.array([i not in deleted for i in range(table.num_rows)], pa.bool_())
        out[frag.id] = [tuple(r.values()) for r in table.filter(keep).to_pylist()]
    return out


def file_rows(t: mvcc.Table) -> list[tuple]:
    """Every live row in the table's files, sorted."""
    return sorted(r for rows in fragment_rows(t).values() for r in rows)
