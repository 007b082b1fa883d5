"""Which version of a table is new since a baseline (the version sensor's and trigger's look at the history)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

import mvcc_core as mvcc


def test_newer_version_passes_over_maintenance_when_asked(tmp_path: Path) -> None:
    from mvcc_airflow.utils.versions import newer_version

    uri = str(tmp_path / "t")
    t = mvcc.write_table(pa.table({"x": [1]}), uri)
    for i in range(3):
        t = t.append(pa.table({"x": [i]}))
    seen = t.version
    assert newer_version(t, seen) == (None, seen)
    t.optimize.compact_files()  # ReserveFragments, Rewrite: no data change
    t.create_index("x")  # CreateIndex
    assert newer_version(t, seen) == (seen + 3, seen + 3)
    assert newer_version(t, seen, skip_maintenance=True) == (None, seen + 3)
    t.checkout_latest().append(pa.table({"x": [9]}))
    assert newer_version(t, seen + 3, skip_maintenance=True) == (seen + 4, seen + 4)
