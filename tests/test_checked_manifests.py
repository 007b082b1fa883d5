"""A manifest's invariants are checked on the first read of its bytes in a process, not on every open; the same
file with other bytes (rewritten in place) is checked again; and count_rows without a filter comes from the
manifest's row totals, equal to what a scan returns, for read, committed and checked-out versions."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core.errors import ManifestInvariantError
from mvcc_core.format import checked_manifests
from mvcc_core.format import manifest as manifest_mod
from mvcc_core.format.manifest import decode_manifest, encode_manifest, list_manifests


def rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The locations `check_manifest` is run for by manifest reads (the real check, counted)."""
    seen: list[str] = []
    real = manifest_mod.check_manifest

    def counted(manifest: Any, where: str, *args: Any) -> Any:
        seen.append(where)
        return real(manifest, where, *args)

    monkeypatch.setattr(manifest_mod, "check_manifest", counted)
    checked_manifests.forget()
    return seen


def test_a_version_opened_again_is_not_checked_again(tmp_path, checks: list[str]) -> None:
    uri = str(tmp_path / "t")
    mvcc.write_table(rows(0, 3), uri).append(rows(3, 2))
    for _ in range(3):
        assert mvcc.open_table(uri).count_rows() == 5
        assert mvcc.open_table(uri, version=1).count_rows() == 3
    assert len(checks) == 2, checks  # each version's file once


def test_a_file_rewritten_in_place_is_checked_again(tmp_path, checks: list[str]) -> None:
    uri = str(tmp_path / "t")
    t = mvcc.write_table(rows(0, 3), uri).append(rows(3, 2))
    assert mvcc.open_table(uri).count_rows() == 5
    store = t.state.store
    loc = {loc.version: loc for loc in list_manifests(store)}[2]
    manifest = decode_manifest(store.get(loc.path), loc.path)
    manifest.fragments[1].id = manifest.fragments[0].id  # two fragments with one id
    store.put(loc.path, encode_manifest(manifest))
    with pytest.raises(ManifestInvariantError, match="fragments"):
        mvcc.open_table(uri)
    with pytest.raises(ManifestInvariantError):  # refused again: a file that failed is never remembered
        mvcc.open_table(uri)
    assert sum(where.endswith(loc.path) for where in checks) == 3, checks  # the good bytes, the hostile twice


def test_forgotten_files_are_checked_again(tmp_path, checks: list[str]) -> None:
    uri = str(tmp_path / "t")
    mvcc.write_table(rows(0, 3), uri)
    mvcc.open_table(uri)
    checked_manifests.forget()
    mvcc.open_table(uri)
    assert len(checks) == 2, checks


@pytest.mark.parametrize("scheme", ["file", "memory"])
def test_count_rows_without_a_filter_is_the_scans_count(tmp_path, scheme: str) -> None:
    uri = str(tmp_path / "t") if scheme == "file" else f"memory://{tmp_path.name}-counts"
    t = mvcc.write_table(rows(0, 10), uri)
    t.append(rows(10, 5))
    t.delete("id < 3")  # a deletion file: 3 deleted rows
    t.append(rows(15, 1))
    t.delete("id = 12 OR id = 15")  # a second deletion file over another, and a whole fragment's row
    for handle in (t, mvcc.open_table(uri), *(mvcc.open_table(uri, version=v) for v in range(1, t.version + 1))):
        scanned = handle.to_table().num_rows
        assert handle.count_rows() == scanned, handle.version
        assert handle.state.row_totals.live_rows == scanned
        assert handle.count_rows("id >= 0") == scanned
    totals = mvcc.open_table(uri).state.row_totals
    assert (totals.rows - totals.deleted_rows, totals.live_rows) == (11, 11)
    assert totals.deleted_rows >= 4
