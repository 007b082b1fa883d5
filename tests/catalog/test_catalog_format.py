"""The catalog's format stamp and migrations: forged older shapes, a newer stamp, a crash between
two migration steps (a real process killed at the failpoint), and reads of an old shape writing nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from mvcc_core import open_table
from mvcc_core.catalog import FORMAT_VERSION, Catalog, CatalogFormatError
from mvcc_core.catalog.entries import SHAPES, STAMP_KEY, read_rows, rows_table
from mvcc_core.format.naming import parse_manifest_name
from mvcc_core.io import open_store
from mvcc_core.txn.external_store import staged_manifest_path

REPO = Path(__file__).resolve().parents[2]
IDS = pa.schema([("id", pa.int64())])


def make(tmp_path: Path) -> Catalog:
    cat = Catalog.create(str(tmp_path / "cat"))
    cat.create_schema("s")
    cat.create_table("s.a", IDS)
    with cat.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": [1, 2]}))
    return cat


def forge(cat: Catalog, shape: int | pa.Schema) -> int:
    """Rewrite the newest `__manifest` version in an older (or unknown) shape, as older code would have."""
    manifest = cat.manifest_table()
    schema = SHAPES[shape] if isinstance(shape, int) else shape
    data = rows_table(read_rows(manifest), shape if isinstance(shape, int) else FORMAT_VERSION).cast(schema)
    manifest.overwrite(data, schema=schema, commit_message="forged", max_retries=0)
    return cat.latest_version


def files_under(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = Path(directory, name)
            stat = path.stat()
            out[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return out


def ids(table: object) -> list[int]:
    return sorted(table.to_table()["id"].to_pylist())  # type: ignore[attr-defined]


def test_a_new_catalog_is_stamped(tmp_path: Path) -> None:
    cat = make(tmp_path)
    assert cat.format_version == FORMAT_VERSION == 4
    metadata = cat.manifest_table().schema.metadata
    assert metadata[STAMP_KEY.encode()] == str(FORMAT_VERSION).encode()
    before = cat.latest_version
    assert cat.migrate() == FORMAT_VERSION and cat.latest_version == before  # steady state: no write


def test_every_publish_keeps_the_stamp(tmp_path: Path) -> None:
    cat = make(tmp_path)
    cat.create_view("s.v", "SELECT 1 AS x")
    for version in range(1, cat.latest_version + 1):
        assert cat.snapshot(version).format_version == FORMAT_VERSION


def test_format_1_migrates_step_by_step_on_the_first_write(tmp_path: Path) -> None:
    cat = make(tmp_path)
    forged = forge(cat, 1)
    assert cat.format_version == 1 and STAMP_KEY.encode() not in (cat.manifest_table().schema.metadata or {})
    assert "staged_manifest" in cat.manifest_table().schema.names
    assert ids(cat.table("s.a")) == [1, 2]  # read as it is
    with cat.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": [3]}))
    versions = cat.versions()
    assert [v.message for v in versions[forged:]] == [
        "migrate catalog format 1 -> 2",
        "migrate catalog format 2 -> 3",
        "migrate catalog format 3 -> 4",
        "",
    ]
    assert all(v.changes == [] for v in versions[forged : forged + 3])
    assert cat.format_version == FORMAT_VERSION and ids(cat.table("s.a")) == [1, 2, 3]
    assert cat.snapshot(forged + 1).format_version == 2  # each step is its own stamped version
    assert "definition" in cat.manifest_table(forged + 1).schema.names
    assert "staged_manifests" in cat.manifest_table().schema.names
    assert "manifests" in cat.manifest_table().schema.names
    assert cat.migrate() == FORMAT_VERSION and cat.latest_version == forged + 4  # idempotent


def test_format_2_takes_two_steps(tmp_path: Path) -> None:
    cat = make(tmp_path)
    forged = forge(cat, 2)
    cat.create_view("s.v", "SELECT id FROM s.a")
    assert [v.message for v in cat.versions()[forged:]] == [
        "migrate catalog format 2 -> 3",
        "migrate catalog format 3 -> 4",
        "",
    ]
    assert cat.view("s.v") == "SELECT id FROM s.a"


def test_a_read_of_an_old_shape_writes_nothing(tmp_path: Path) -> None:
    cat = make(tmp_path)
    forge(cat, 1)
    before = files_under(tmp_path)
    reopened = Catalog.open(cat.root)
    snap = reopened.snapshot()
    assert snap.tables() == ["s.a"] and snap.schemas() == ["main", "s"]
    assert ids(snap.table("s.a")) == [1, 2] and ids(reopened.table("s.a", version=3)) == []
    assert reopened.versions() and reopened.format_version == 1
    assert files_under(tmp_path) == before


def test_a_newer_stamp_refuses_to_write_and_reads(tmp_path: Path) -> None:
    cat = make(tmp_path)
    newer = SHAPES[FORMAT_VERSION].with_metadata({STAMP_KEY: str(FORMAT_VERSION + 1)})
    forged = forge(cat, newer)
    before = files_under(tmp_path)
    with pytest.raises(CatalogFormatError, match="upgrade mvcc first"):
        cat.transaction()
    with pytest.raises(CatalogFormatError, match="upgrade mvcc first"):
        cat.create_schema("x")
    with pytest.raises(CatalogFormatError, match="upgrade mvcc first"):
        cat.migrate()
    assert files_under(tmp_path) == before and cat.latest_version == forged
    assert ids(cat.table("s.a")) == [1, 2]


def test_a_newer_stamp_written_during_a_transaction_stops_its_publish(tmp_path: Path) -> None:
    cat = make(tmp_path)
    tx = cat.transaction()
    tx.table("s.a").append(pa.table({"id": [9]}))
    staged = tx.staged_files()
    forge(cat, SHAPES[FORMAT_VERSION].with_metadata({STAMP_KEY: str(FORMAT_VERSION + 1)}))
    with pytest.raises(CatalogFormatError, match="upgrade mvcc first"):
        tx.commit()
    assert staged and not any(Path(uri).exists() for uri in staged)  # refused before publishing: cleaned up


MIGRATE = """
import sys
from mvcc_core.catalog import Catalog
from mvcc_core.failpoints import arm
arm("catalog.migrate.after_step", "exit")
Catalog.open(sys.argv[1]).migrate()
"""


def test_a_crash_between_two_steps_is_continued_by_the_next_writer(tmp_path: Path) -> None:
    cat = make(tmp_path)
    forged = forge(cat, 1)
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    proc = subprocess.run([sys.executable, "-c", MIGRATE, cat.root], env=env, capture_output=True, text=True)
    assert proc.returncode == 77, proc.stderr
    assert cat.format_version == 2 and cat.latest_version == forged + 1  # killed after step 1 -> 2
    assert ids(Catalog.open(cat.root).table("s.a")) == [1, 2]
    with cat.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": [3]}))
    assert cat.format_version == FORMAT_VERSION
    assert [v.message for v in cat.versions()[forged:]] == [
        "migrate catalog format 1 -> 2",
        "migrate catalog format 2 -> 3",
        "migrate catalog format 3 -> 4",
        "",
    ]
    assert ids(cat.table("s.a")) == [1, 2, 3]
    assert open_table(cat.table("s.a").uri).version == 3


def published_unfinalized(cat: Catalog, rows: list[int]) -> None:
    """Publish an append to s.a and stop right after the commit point (before finalizing), as a writer that
    died there would."""
    from mvcc_core import failpoints
    from mvcc_core.errors import FailpointError

    tx = cat.transaction()
    tx.table("s.a").append(pa.table({"id": rows}))
    with failpoints.armed("catalog.after_publish", "raise"), pytest.raises(FailpointError):
        tx.commit()


def test_a_format_3_catalog_with_an_unfinalized_staged_manifest_is_read_and_migrated(tmp_path: Path) -> None:
    """Format 3 published a table version as a staged manifest file named by the catalog row; a catalog left
    so (its writer died after the commit point) is finalized from that file by this code, then migrated."""
    cat = make(tmp_path)
    published_unfinalized(cat, [3])
    manifest = cat.manifest_table()
    rows = read_rows(manifest)
    entry = next(r for r in rows if r.name == "s.a")
    (final,) = entry.staged_manifests
    staged = staged_manifest_path(entry.table_version, parse_manifest_name(final)[1], "ab" * 16)
    open_store(cat.table_uri(entry)).put_new(staged, entry.manifests[0])  # what format 3 wrote before the publish
    old = [replace(r, staged_manifests=(staged,), manifests=()) if r is entry else r for r in rows]
    manifest.overwrite(rows_table(old, 3), schema=SHAPES[3], commit_message="written by format 3", max_retries=0)
    assert not Path(cat.table_uri(entry), final).exists()
    reopened = Catalog.open(cat.root)
    assert reopened.format_version == 3 and ids(reopened.table("s.a")) == [1, 2, 3]
    assert Path(cat.table_uri(entry), final).exists()  # finalized from the staged file
    with reopened.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": [4]}))
    assert reopened.format_version == FORMAT_VERSION
    assert [v.message for v in reopened.versions()[-2:]] == ["migrate catalog format 3 -> 4", ""]
    assert ids(reopened.table("s.a")) == ids(open_table(reopened.table("s.a").uri)) == [1, 2, 3, 4]


def test_carried_manifests_are_found_in_the_catalog_version_that_wrote_them(tmp_path: Path) -> None:
    """A published, unfinalized table version whose row later versions carried forward (without its bytes)
    is finalized from the catalog version that published it."""
    cat = make(tmp_path)
    cat.create_table("s.b", IDS)
    published_unfinalized(cat, [3])
    published = cat.latest_version
    with cat.transaction() as tx:
        tx.table("s.b").append(pa.table({"id": [7]}))
    reopened = Catalog.open(cat.root)
    entry = reopened.snapshot().entry("s.a")
    assert entry.catalog_version == published and entry.manifests == ()  # carried without the bytes
    assert open_table(reopened.table_uri(entry)).version < entry.table_version
    assert ids(reopened.table("s.a")) == [1, 2, 3]
    assert open_table(reopened.table_uri(entry)).version == entry.table_version
    assert len(read_rows(reopened.manifest_table())[0].manifests) == 0


def test_a_catalog_written_by_format_4_is_read_and_written(tmp_path: Path) -> None:
    """tests/fixtures/catalog_format4: written by format 4's code (two tables, a delete, a view, and a last
    2-table transaction killed right after its commit point, so its manifests exist only in the catalog)."""
    root = tmp_path / "cat"
    shutil.copytree(REPO / "tests" / "fixtures" / "catalog_format4", root)
    cat = Catalog.open(str(root))
    assert cat.snapshot().format_version == 4 and cat.latest_version == 7
    assert ids(cat.table("s.a")) == [1, 3, 4, 5] and ids(cat.table("s.b")) == [10, 11, 12]
    assert ids(cat.table("s.a", version=5)) == [1, 3, 4] and cat.view("s.v") == "SELECT id FROM s.a"
    assert ids(open_table(cat.table("s.b").uri)) == [10, 11, 12]  # finalized by the catalog read
    with cat.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": [6]}))
        tx.table("s.b").delete("id = 10")
    reopened = Catalog.open(str(root))
    assert reopened.format_version == FORMAT_VERSION
    assert ids(reopened.table("s.a")) == [1, 3, 4, 5, 6] and ids(reopened.table("s.b")) == [11, 12]
    assert ids(reopened.table("s.a", version=7)) == [1, 3, 4, 5]
