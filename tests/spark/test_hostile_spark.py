"""Spark reads of hostile tables: a data path leaving the root or a relative base path fails at
planning with the typed error, through the data source and the native read; a data file that disagrees with
the manifest fails the query with `DataFileMismatchError` naming the file and column (at execution through the
data source, on the driver before Spark reads for the native path); a declared foreign base (a shallow clone's
source) is read, and nothing outside the table's root is written or deleted."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_hostile_manifests import set_path, snapshot, tamper, two_fragments, victim_file, with_foreign_base

import mvcc_core as mvcc
from mvcc_core.spark import read

pytestmark = pytest.mark.slow


def sorted_ids(df: Any) -> list[int]:
    return sorted(r["id"] for r in df.collect())


@pytest.mark.parametrize("native", [False, True])
def test_a_path_leaving_the_root_fails_at_planning(spark: Any, tmp_path: Path, native: bool) -> None:
    victim = victim_file(tmp_path / "victim")
    before = snapshot(victim.parent)
    uri = str(tmp_path / "table")
    tamper(two_fragments(uri), set_path("../../victim/file.parquet"))
    if native:
        with pytest.raises(mvcc.errors.ManifestInvariantError, match=r"fragments\[0\].files\[0\].path"):
            read(spark, uri, native=True)
    else:
        with pytest.raises(Exception, match=r"fragments\[0\].files\[0\].path") as err:
            spark.read.format("mvcc").load(uri).collect()
        assert "ManifestInvariantError" in str(err.value) or "'../../victim/file.parquet'" in str(err.value)
    assert snapshot(victim.parent) == before


def test_a_relative_base_fails_at_planning(spark: Any, tmp_path: Path) -> None:
    uri, _, t = with_foreign_base(tmp_path)
    tamper(t, lambda m: setattr(m.base_paths[0], "path", "victim"))
    with pytest.raises(Exception, match="relative local path"):
        spark.read.format("mvcc").load(uri).collect()
    with pytest.raises(mvcc.errors.ManifestInvariantError, match="relative local path"):
        read(spark, uri, native=True)


@pytest.mark.parametrize("native", [False, True])
def test_a_declared_foreign_base_is_read_and_left_alone(spark: Any, tmp_path: Path, native: bool) -> None:
    uri, victim_root, _ = with_foreign_base(tmp_path)
    before = snapshot(victim_root)
    df = read(spark, uri, native=native) if native else spark.read.format("mvcc").load(uri)
    assert sorted_ids(df) == [3, 4, 100, 101, 102]
    assert snapshot(victim_root) == before


@pytest.mark.parametrize("native", [False, True])
def test_a_data_file_of_another_type_fails_the_query_with_the_typed_error(
    spark: Any, tmp_path: Path, native: bool
) -> None:
    uri = str(tmp_path / "table")
    t = two_fragments(uri)
    path = t.manifest.fragments[0].files[0].path
    column = f"c{t.manifest.fields[0].id}"
    sink = io.BytesIO()
    pq.write_table(pa.table({column: ["x", "y", "z"]}), sink)
    t.state.store.put(f"data/{path}", sink.getvalue())
    tamper(t, lambda m: setattr(m.fragments[0].files[0], "file_size_bytes", len(sink.getvalue())))
    if native:
        with pytest.raises(mvcc.errors.DataFileMismatchError, match=path):
            read(spark, uri, native=True).collect()
    else:
        df = spark.read.format("mvcc").load(uri)  # planning reads only the manifest: it passes
        with pytest.raises(Exception, match="DataFileMismatchError") as err:
            df.collect()
        assert path in str(err.value) and "column 'id'" in str(err.value)
