"""Hostile manifests: valid framing and checksum, crafted with the project's own protobuf classes, that break an
invariant of the format (docs/reference/format.md, "Invariants of a manifest").

Each case writes the crafted manifest over a real version's file (what a bug in another writer, a bad restore
from backup or someone with write access to one prefix of a bucket leaves behind) and drives the entry points:
open, to_table, delete, compaction, cleanup, clone, restore, verify, the catalog. Nothing outside the table's
root is read, written or deleted, and every refusal is a typed error naming the manifest field and value.
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

import mvcc_core as mvcc
from mvcc_core import cli
from mvcc_core._proto import table_pb2 as pb
from mvcc_core.catalog import Catalog
from mvcc_core.format import operations as ops
from mvcc_core.format.deletion import write_deletion_vector
from mvcc_core.format.invariants import check_manifest, path_problem, violations
from mvcc_core.format.manifest import decode_manifest, encode_manifest, list_manifests
from mvcc_core.ops.clone import deep_copy
from mvcc_core.table import DatasetBasePath, manifest_violations

Edit = Callable[[pb.Manifest], None]


def rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def ids(t: mvcc.Table) -> list[int]:
    return sorted(t.to_table().column("id").to_pylist())


def two_fragments(uri: str, opts: dict[str, Any] | None = None) -> mvcc.Table:
    """Version 1: ids 0..2 (fragment 0); version 2: + ids 3..4 (fragment 1)."""
    t = mvcc.write_table(rows(0, 3), uri, storage_options=opts)
    return t.append(rows(3, 2))


def tamper(t: mvcc.Table, edit: Edit, version: int | None = None) -> None:
    """Rewrite `version`'s manifest (default the handle's) with `edit` applied: valid bytes, valid checksum."""
    version = t.version if version is None else version
    store = t.state.store
    loc = {loc.version: loc for loc in list_manifests(store)}[version]
    manifest = decode_manifest(store.get(loc.path), loc.path)
    edit(manifest)
    store.put(loc.path, encode_manifest(manifest))


def victim_file(root: Path) -> Path:
    """A Parquet file outside every table: rows nobody may read through a table."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / "file.parquet"
    pq.write_table(pa.table({"id": pa.array([666, 667], pa.int64())}), path)
    return path


def set_path(path: str) -> Edit:
    def edit(m: pb.Manifest) -> None:
        m.fragments[0].files[0].path = path

    return edit


TRAVERSALS = [
    "../../victim/file.parquet",
    "/abs/victim/file.parquet",
    "s3://victimbucket/secret.parquet",
    "%2e%2e/%2e%2e/victim/file.parquet",
    "%252e%252e/%252e%252e/victim/file.parquet",
    "..%2f..%2fvictim%2ffile.parquet",
    "..\\..\\victim\\file.parquet",
    "./x.parquet",
    "a//b.parquet",
    "C:/victim/file.parquet",
    "",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_a_data_path_leaving_the_root_is_refused_on_open(tmp_path: Path, path: str) -> None:
    victim = victim_file(tmp_path / "victim")
    uri = str(tmp_path / "table")
    t = two_fragments(uri)
    tamper(t, set_path(path))
    with pytest.raises(mvcc.errors.ManifestInvariantError) as err:
        mvcc.open_table(uri)
    assert "fragments[0].files[0].path" in str(err.value) and repr(path) in str(err.value)
    assert err.value.field == "fragments[0].files[0].path" and err.value.intact_version == 1
    with pytest.raises(mvcc.errors.ManifestInvariantError) as exact:
        mvcc.open_table(uri, version=2)
    assert exact.value.field == "fragments[0].files[0].path" and exact.value.value == path
    assert pq.read_table(victim).column("id").to_pylist() == [666, 667]


def test_plain_paths_pass() -> None:
    for ok in ("0a1b.parquet", "w-1_2.parquet", "sub/dir/f.parquet", "name..with..dots.parquet"):
        assert path_problem(ok) is None, ok


def test_index_and_transaction_paths_are_checked(tmp_path: Path) -> None:
    uri = str(tmp_path / "table")
    t = two_fragments(uri)

    def bad_txn(m: pb.Manifest) -> None:
        m.transaction_file = "../../../victim/x.txn"

    tamper(t, bad_txn)
    with pytest.raises(mvcc.errors.ManifestInvariantError, match="transaction_file"):
        mvcc.open_table(uri, version=2)
    index = pb.IndexMetadata(name="i", uuid=pb.UUID(uuid=b"\x01" * 16), files=[pb.IndexFile(path="../../x.idx")])

    def bad_index(m: pb.Manifest) -> None:
        m.transaction_file = ""
        m.indices.append(index)

    tamper(t, bad_index)
    with pytest.raises(mvcc.errors.ManifestInvariantError, match=r"indices\[0\].files\[0\].path"):
        mvcc.open_table(uri, version=2)


def test_a_deep_clone_of_a_hostile_version_touches_nothing_outside(tmp_path: Path) -> None:
    victim = victim_file(tmp_path / "victim")
    uri, target = str(tmp_path / "table"), str(tmp_path / "clone")
    t = two_fragments(uri)
    tamper(t, set_path("../../victim/file.parquet"))
    source = mvcc.open_table(uri, version=1)
    with pytest.raises(mvcc.errors.CorruptManifestError):
        source.clone(target, version=2, shallow=False)
    assert victim.exists() and pq.read_table(victim).num_rows == 2
    assert not os.path.exists(target) or not any(Path(target).rglob("*.parquet"))


def test_deep_copy_refuses_paths_outside_the_target_and_the_source_file_itself(tmp_path: Path) -> None:
    """The double check of the copy itself, on a manifest that never went through the read check."""
    victim = victim_file(tmp_path / "victim")
    uri = str(tmp_path / "table")
    t = two_fragments(uri)
    crafted = pb.Manifest()
    crafted.CopyFrom(t.manifest)
    crafted.fragments[0].files[0].path = "../../victim/file.parquet"
    target = mvcc.open_table(uri).state.store.sibling(str(tmp_path / "clone"))
    with pytest.raises(mvcc.errors.UnsafePathError):
        deep_copy(t.state.store, crafted, target)
    assert victim.exists()
    store = t.state.store
    files_before = sorted(m.path for m in store.list("data"))
    with pytest.raises(mvcc.errors.UnsafePathError, match="onto itself"):
        deep_copy(store, t.manifest, store.sibling(uri))
    assert sorted(m.path for m in store.list("data")) == files_before
    assert ids(mvcc.open_table(uri)) == [0, 1, 2, 3, 4]


def test_the_store_refuses_dot_dot_segments(tmp_path: Path) -> None:
    victim = victim_file(tmp_path / "victim")
    store = two_fragments(str(tmp_path / "table")).state.store
    for op in (
        lambda: store.get("../victim/file.parquet"),
        lambda: store.delete_many(["data/../../victim/file.parquet"]),
        lambda: store.put("../victim/new", b"x"),
        lambda: store.copy("data/../../victim/file.parquet", "data/stolen.parquet"),
    ):
        with pytest.raises(mvcc.errors.UnsafePathError):
            op()
    assert victim.exists() and not (tmp_path / "victim" / "new").exists()


def test_a_missing_max_fragment_id_is_derived_and_no_rows_are_lost(tmp_path: Path) -> None:
    uri = str(tmp_path / "table")
    t = two_fragments(uri)
    tamper(t, lambda m: m.ClearField("max_fragment_id"))
    t = mvcc.open_table(uri)
    assert t.manifest.max_fragment_id == 1
    t.append(pa.table({"id": pa.array([100], pa.int64())}))
    assert sorted(f.id for f in t.manifest.fragments) == [0, 1, 2]
    t.delete("id = 100")
    assert ids(t) == [0, 1, 2, 3, 4]


def test_a_max_fragment_id_below_the_fragments_is_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "table")
    t = two_fragments(uri)

    def low(m: pb.Manifest) -> None:
        m.max_fragment_id = 0

    tamper(t, low)
    with pytest.raises(mvcc.errors.ManifestInvariantError, match="max_fragment_id") as err:
        mvcc.open_table(uri, version=2)
    assert err.value.value == 0 and "fragment 1" in str(err.value)


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda m: setattr(m.fragments[1], "id", 2**32), "fragments[1].id"),
        (lambda m: setattr(m.fragments[1], "id", 0), "fragments[1].id"),
        (lambda m: m.fragments[0].deletion_file.MergeFrom(pb.DeletionFile(num_deleted_rows=2**40)), "num_deleted_rows"),
        (lambda m: setattr(m.fragments[0], "physical_rows", 2**63), "fragments[0].physical_rows"),
        (lambda m: setattr(m.fragments[0].files[0], "file_size_bytes", 2**64 - 1), "file_size_bytes"),
        (lambda m: setattr(m.fragments[0].files[0], "base_id", 7), "fragments[0].files[0].base_id"),
        (lambda m: m.base_paths.append(pb.BasePath(id=1, path="s3://bucket/a/../b")), "base_paths[0].path"),
    ],
)
def test_ids_and_counts_are_checked(tmp_path: Path, edit: Edit, field: str) -> None:
    uri = str(tmp_path / "table")
    t = two_fragments(uri)
    tamper(t, edit)
    with pytest.raises(mvcc.errors.ManifestInvariantError) as err:
        mvcc.open_table(uri, version=2)
    assert field in err.value.field and str(err.value.value) in str(err.value)


def test_a_wrapping_fragment_id_deletes_nothing_else(tmp_path: Path) -> None:
    """Fragment 2**32 + 0 would share row addresses with fragment 0: refused, and a restore gets out."""
    uri = str(tmp_path / "table")
    t = two_fragments(uri)
    tamper(t, lambda m: setattr(m.fragments[1], "id", 2**32))
    with pytest.raises(mvcc.errors.CorruptManifestError):
        mvcc.open_table(uri).delete("id = 3")
    restored = mvcc.open_table(uri, version=1)
    restored.restore()
    t = mvcc.open_table(uri)
    assert t.version == 3 and ids(t) == [0, 1, 2]
    t.delete("id = 0")
    assert ids(t) == [1, 2]


def test_a_deletion_vector_past_the_fragment_is_a_typed_error(tmp_path: Path) -> None:
    uri = str(tmp_path / "table")
    t = two_fragments(uri)
    deletion = write_deletion_vector(t.state.store, 0, t.version, BitMap([5000]))
    tamper(t, lambda m: m.fragments[0].deletion_file.CopyFrom(deletion))
    t = mvcc.open_table(uri)
    with pytest.raises(mvcc.errors.CorruptManifestError, match="row offset 5000 of fragment 0"):
        t.to_table()


def test_physical_rows_larger_than_the_file_is_a_typed_error(tmp_path: Path) -> None:
    uri = str(tmp_path / "table")
    t = two_fragments(uri)
    tamper(t, lambda m: setattr(m.fragments[0], "physical_rows", 5))
    with pytest.raises(mvcc.errors.CorruptManifestError, match="rows"):
        mvcc.open_table(uri).to_table()


def test_compaction_cleanup_and_restore_around_a_hostile_latest(tmp_path: Path) -> None:
    victim = victim_file(tmp_path / "victim")
    uri = str(tmp_path / "table")
    t = two_fragments(uri)
    t.append(rows(5, 1))
    tamper(t, set_path("../../victim/file.parquet"))
    with pytest.raises(mvcc.errors.CorruptManifestError):
        mvcc.open_table(uri).optimize.compact_files()
    # retention reports the hostile version, removes nothing outside, and keeps it (it is the latest)
    stats = mvcc.open_table(uri, version=2).cleanup_old_versions(older_than=timedelta(0), retain_versions=2)
    assert stats.removed_versions == (1,) and 3 in stats.corrupt_versions and victim.exists()
    with pytest.raises(
        mvcc.errors.CorruptManifestError, match="fragments"
    ):  # the hostile version never becomes current
        mvcc.open_table(uri, version=2).restore(3)
    mvcc.open_table(uri, version=2).restore()
    t = mvcc.open_table(uri)
    assert ids(t) == [0, 1, 2, 3, 4]
    t.optimize.compact_files()
    assert 666 not in ids(mvcc.open_table(uri)) and victim.exists()


def test_the_commit_loop_never_writes_a_manifest_that_fails_the_check(tmp_path: Path) -> None:
    victim_file(tmp_path / "victim")
    uri = str(tmp_path / "table")
    t = two_fragments(uri)
    bad = pb.DataFragment(id=0, physical_rows=2, files=[pb.DataFile(path="../../victim/file.parquet")])
    with pytest.raises(mvcc.errors.ManifestInvariantError, match="about to be committed"):
        t.commit(ops.Append(fragments=[bad]))
    assert [v.version for v in mvcc.open_table(uri).versions()] == [1, 2]


def test_a_commit_rechecks_fragments_changed_in_memory_since_their_manifest_passed(tmp_path: Path) -> None:
    """A commit re-checks only the fragments that differ from a previous version whose bytes passed the check
    : a handle's manifest edited in memory after it passed is no longer one that passed, so a bad
    fragment in it is still refused, and nothing is written."""
    victim_file(tmp_path / "victim")
    uri = str(tmp_path / "table")
    t = two_fragments(uri)
    t.manifest.fragments[0].files[0].path = "../../victim/file.parquet"
    with pytest.raises(mvcc.errors.ManifestInvariantError, match="about to be committed"):
        t.commit(ops.Append(fragments=[]))
    assert [v.version for v in mvcc.open_table(uri).versions()] == [1, 2]


def test_violations_skip_only_fragments_shared_with_a_checked_manifest(tmp_path: Path) -> None:
    """The contract the commit's check relies on: a fragment equal to the checked manifest's at its position,
    under the same base paths, is not checked again; a changed one, or any under other base paths, is; the
    checks across fragments (a repeated id, `max_fragment_id`) always run."""
    t = two_fragments(str(tmp_path / "table"))
    bad = pb.Manifest()
    bad.CopyFrom(t.manifest)
    bad.fragments[0].files[0].path = "../x.parquet"
    assert [v[0] for v in violations(bad)] == ["fragments[0].files[0].path"]
    assert violations(bad, checked=bad) == []  # what the caller vouches for is not looked at again
    changed = pb.Manifest()
    changed.CopyFrom(bad)
    changed.fragments[0].physical_rows += 1
    assert [v[0] for v in violations(changed, checked=bad)] == ["fragments[0].files[0].path"]
    based = pb.Manifest()
    based.CopyFrom(bad)
    based.base_paths.add(id=7, path="/elsewhere")
    assert [v[0] for v in violations(based, checked=bad)] == ["fragments[0].files[0].path"]
    repeated = pb.Manifest()
    repeated.CopyFrom(t.manifest)
    repeated.fragments.add().CopyFrom(repeated.fragments[0])
    repeated.max_fragment_id = 0
    found = [v[0] for v in violations(repeated, checked=t.manifest)]
    assert found == ["fragments[2].id", "max_fragment_id"] or found == ["fragments[2].id"]
    # check_manifest vouches only for a manifest whose bytes passed it
    with pytest.raises(mvcc.errors.ManifestInvariantError, match="fragments"):
        check_manifest(changed, "x", built_from=bad)


def test_check_manifest_passes_what_writers_produce(tmp_path: Path) -> None:
    t = two_fragments(str(tmp_path / "table"))
    t.delete("id = 1")
    t.create_scalar_index("id", "BTREE")
    assert check_manifest(t.manifest, "x") is t.manifest


def verify(*args: Any) -> Any:
    return CliRunner().invoke(cli.cli, ["verify", *map(str, args)], catch_exceptions=False)


def test_verify_reports_each_violation(tmp_path: Path) -> None:
    victim_file(tmp_path / "victim")
    uri = str(tmp_path / "table")
    t = two_fragments(uri)
    t.append(rows(5, 1))

    def two_problems(m: pb.Manifest) -> None:
        m.fragments[0].files[0].path = "../../victim/file.parquet"
        m.fragments[1].id = 2**32

    tamper(t, two_problems, version=2)
    result = verify(uri, "--all", "--deep")
    assert result.exit_code == 1
    assert "fragments[0].files[0].path" in result.output and "fragments[1].id" in result.output
    tamper(t, set_path("../../victim/file.parquet"), version=3)
    result = verify(uri)
    assert result.exit_code == 1 and "fragments[0].files[0].path" in result.output
    assert "restore" in result.output
    assert manifest_violations(uri, 1) == []


def hostile_catalog(tmp_path: Path) -> tuple[Catalog, Path]:
    """A catalog whose table row points at a table outside its root (one with two versions)."""
    outside = tmp_path / "victim"
    mvcc.write_table(rows(0, 3), str(outside)).append(rows(3, 1))
    cat = Catalog.create(str(tmp_path / "cat"))
    cat.create_table("t", pa.schema([("id", pa.int64())]))
    manifest = mvcc.open_table(f"{cat.root}/__manifest")
    data = manifest.to_table()
    paths = [
        "../victim" if kind == "table" else p
        for kind, p in zip(data["object_type"].to_pylist(), data["path"].to_pylist(), strict=True)
    ]
    data = data.set_column(data.schema.get_field_index("path"), data.schema.field("path"), pa.array(paths, pa.string()))
    manifest.overwrite(data, schema=manifest.schema)
    return cat, outside


def test_a_catalog_row_outside_the_root_is_refused(tmp_path: Path) -> None:
    cat, outside = hostile_catalog(tmp_path)
    versions = [v.version for v in mvcc.open_table(str(outside)).versions()]
    with pytest.raises(mvcc.errors.CorruptManifestError, match="'../victim'"):
        Catalog.open(cat.root).table("t")
    with pytest.raises(mvcc.errors.CorruptManifestError), Catalog.open(cat.root).transaction() as tx:
        tx.table("t").append(rows(9, 1))
    # the row fails closed on its own (docs/guide/catalog.md): the catalog's cleanup runs and never reaches through it
    stats = Catalog.open(cat.root).cleanup(older_than=timedelta(0), delete_unverified=True, retain_versions=1)
    assert "../victim" not in stats.tables
    assert [v.version for v in mvcc.open_table(str(outside)).versions()] == versions
    assert ids(mvcc.open_table(str(outside))) == [0, 1, 2, 3]


def test_catalog_roots_with_dot_dot(tmp_path: Path) -> None:
    cat = Catalog.create(f"{tmp_path}/q/../cat")
    assert ".." not in cat.root and cat.root == f"{tmp_path}/cat"
    assert Catalog.open(f"{tmp_path}/cat").latest_version == cat.latest_version
    with pytest.raises(ValueError, match="'..'"):
        Catalog.create("s3://bucket/q/../cat")


@pytest.mark.s3
def test_s3_a_key_leaving_the_bucket_is_never_read(s3_client: Any, s3_uri: str, s3_options: dict[str, Any]) -> None:
    s3_client.create_bucket(Bucket="victimbucket")
    buf = pa.BufferOutputStream()
    pq.write_table(pa.table({"id": pa.array([666], pa.int64())}), buf)
    s3_client.put_object(Bucket="victimbucket", Key="secret.parquet", Body=buf.getvalue().to_pybytes())
    t = two_fragments(s3_uri, s3_options)
    tamper(t, set_path("../../../victimbucket/secret.parquet"))
    with pytest.raises(mvcc.errors.CorruptManifestError, match="victimbucket"):
        mvcc.open_table(s3_uri, storage_options=s3_options)
    with pytest.raises(mvcc.errors.UnsafePathError):
        t.state.store.get("data/../../../victimbucket/secret.parquet")
    assert s3_client.get_object(Bucket="victimbucket", Key="secret.parquet")["ContentLength"] > 0


# ---- properties --------------------------------------------------------------------------------------------

SEGMENTS = ["..", ".", "", "a", "b.parquet", "%2e%2e", "%2E.", "%2f", "%5c", "\\", "..\\", "C:", "s3:", "%00", "~"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=5), st.booleans())
def test_an_accepted_path_stays_under_its_root(segments: list[str], leading_slash: bool) -> None:
    """Whatever `path_problem` accepts joins under a root and stays there, also once percent-decoded."""
    path = ("/" if leading_slash else "") + "/".join(segments)
    if path_problem(path) is not None:
        return
    for form in (path, unquote(path), unquote(unquote(path))):
        joined = posixpath.normpath(posixpath.join("/root/data", form.replace("\\", "/")))
        assert joined.startswith("/root/data/"), (path, form)


#: (field, the values a corruption sets it to) for one field of the latest manifest
CORRUPTIONS: list[tuple[str, Callable[[pb.Manifest, int], None]]] = [
    ("fragment id", lambda m, v: setattr(m.fragments[v % 2], "id", [1, 0, 2**32, 2**32 + 1, 2**64 - 1][v % 5])),
    ("physical_rows", lambda m, v: setattr(m.fragments[v % 2], "physical_rows", [0, 1, 5, 2**40, 2**64 - 1][v % 5])),
    (
        "num_deleted_rows",
        lambda m, v: m.fragments[v % 2].deletion_file.MergeFrom(pb.DeletionFile(num_deleted_rows=[3, 4, 2**40][v % 3])),
    ),
    ("max_fragment_id", lambda m, v: setattr(m, "max_fragment_id", [0, 1, 2**32 - 1][v % 3])),
    ("data path", lambda m, v: setattr(m.fragments[v % 2].files[0], "path", TRAVERSALS[v % len(TRAVERSALS)])),
    ("base_id", lambda m, v: setattr(m.fragments[v % 2].files[0], "base_id", v % 3)),
    ("transaction_file", lambda m, v: setattr(m, "transaction_file", ["../x.txn", "a/b.txn", "/x.txn"][v % 3])),
]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(CORRUPTIONS), st.integers(0, 1000))
def test_a_single_field_corruption_is_refused_or_harmless(
    tmp_path_factory: pytest.TempPathFactory, corruption: tuple[str, Callable[[pb.Manifest, int], None]], value: int
) -> None:
    """One field of the latest manifest set to a random hostile value: opening refuses it with a typed error
    naming the field, or the manifest still holds every invariant and reading it raises nothing untyped; the
    file outside the table is never read."""
    base = tmp_path_factory.mktemp("prop")
    victim = victim_file(base / "victim")
    uri = str(base / "table")
    t = two_fragments(uri)
    tamper(t, lambda m: corruption[1](m, value))
    try:
        opened = mvcc.open_table(uri)
    except mvcc.errors.CorruptManifestError as exc:
        assert manifest_violations(uri, 2), str(exc)
        return
    assert manifest_violations(uri) == []
    try:
        got = ids(opened)
    except mvcc.MvccError:
        return
    assert 666 not in got and pq.read_table(victim).num_rows == 2


def test_a_deletion_count_that_disagrees_with_its_vector_is_a_typed_error(tmp_path: Path) -> None:
    uri = str(tmp_path / "table")
    t = two_fragments(uri)
    t.delete("id = 1")
    tamper(t, lambda m: setattr(m.fragments[0].deletion_file, "num_deleted_rows", 2))
    with pytest.raises(mvcc.errors.CorruptManifestError, match="deletes 1 rows of fragment 0") as err:
        mvcc.open_table(uri).to_table()
    assert "num_deleted_rows is 2" in str(err.value)


def test_a_failed_deep_clone_removes_only_the_files_it_created(tmp_path: Path) -> None:
    uri, target = str(tmp_path / "table"), tmp_path / "clone"
    t = two_fragments(uri)
    missing = t.manifest.fragments[1].files[0].path
    os.remove(tmp_path / "table" / "data" / missing)
    (target / "data").mkdir(parents=True)
    (target / "data" / missing).write_bytes(b"someone else's file")
    with pytest.raises(mvcc.errors.ObjectNotFoundError):
        t.clone(str(target), shallow=False)
    assert (target / "data" / missing).read_bytes() == b"someone else's file"
    assert sorted(p.name for p in (target / "data").iterdir()) == [missing]


def test_an_index_bitmap_that_does_not_decode_is_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "table")
    t = two_fragments(uri)
    t.create_scalar_index("id", "BTREE")
    tamper(mvcc.open_table(uri), lambda m: setattr(m.indices[0], "fragment_bitmap", b"garbage"))
    with pytest.raises(mvcc.errors.ManifestInvariantError, match=r"indices\[0\].fragment_bitmap") as err:
        mvcc.open_table(uri).to_table(filter="id = 3")
    assert err.value.value == b"garbage".hex()


def test_a_field_type_that_does_not_decode_is_a_typed_error(tmp_path: Path) -> None:
    uri = str(tmp_path / "table")
    t = two_fragments(uri)
    tamper(t, lambda m: setattr(m.fields[0], "arrow_type", b"garbage"))
    with pytest.raises(
        mvcc.errors.CorruptManifestError, match="field 'id' .id 0, logical_type 'int64'. has no readable type"
    ):
        mvcc.open_table(uri).to_table()


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda m: setattr(m.fields[0], "id", m.fields[1].id), "fields[1].id"),
        (lambda m: setattr(m.fields[0], "id", -3), "fields[0].id"),
        (lambda m: setattr(m.fields[0], "parent_id", 77), "fields[0].parent_id"),
    ],
)
def test_schema_field_ids_are_checked(tmp_path: Path, edit: Edit, field: str) -> None:
    uri = str(tmp_path / "table")
    mvcc.write_table(pa.table({"id": [1, 2], "s": ["a", "b"]}), uri)
    tamper(mvcc.open_table(uri), edit)
    with pytest.raises(mvcc.errors.ManifestInvariantError) as err:
        mvcc.open_table(uri).to_table()
    assert err.value.field == field


@pytest.mark.parametrize("physical_rows", [2, 5])
def test_physical_rows_of_a_fragment_with_deletions_is_checked_against_its_file(
    tmp_path: Path, physical_rows: int
) -> None:
    uri = str(tmp_path / "table")
    t = two_fragments(uri)
    t.delete("id = 0")
    tamper(t, lambda m: setattr(m.fragments[0], "physical_rows", physical_rows))
    with pytest.raises(mvcc.errors.CorruptManifestError, match=f"physical_rows says {physical_rows}"):
        mvcc.open_table(uri).to_table()


# ---- base paths outside the root (docs/reference/format.md, "Base paths outside the table's root")


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under `root` and its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def with_foreign_base(tmp_path: Path) -> tuple[str, Path, mvcc.Table]:
    """A table whose fragment 0 is crafted to live in another table (`victim`) through a declared base path,
    as a shallow clone's fragments do: (uri, the victim's root, the table)."""
    victim_root = tmp_path / "victim"
    victim = mvcc.write_table(rows(100, 3), str(victim_root))
    victim.tags.create("keep", 1)
    uri = str(tmp_path / "table")
    t = two_fragments(uri)
    foreign = victim.manifest.fragments[0]

    def edit(m: pb.Manifest) -> None:
        m.base_paths.append(pb.BasePath(id=1, is_dataset_root=True, path=str(victim_root)))
        m.fragments[0].CopyFrom(foreign)
        m.fragments[0].id = 0
        m.fragments[0].files[0].base_id = 1

    tamper(t, edit)
    return uri, victim_root, mvcc.open_table(uri)


def test_a_foreign_base_is_read_and_nothing_there_is_written_or_deleted(tmp_path: Path) -> None:
    uri, victim_root, t = with_foreign_base(tmp_path)
    before = snapshot(victim_root)
    assert ids(t) == [3, 4, 100, 101, 102]  # reads through a declared base: what a shallow clone means
    t.delete("id = 101")
    assert ids(t) == [3, 4, 100, 102]
    t.optimize.compact_files()
    assert ids(mvcc.open_table(uri)) == [3, 4, 100, 102]
    t = mvcc.open_table(uri)
    t.restore(2)
    mvcc.open_table(uri).cleanup_old_versions(older_than=timedelta(0), retain_versions=1, delete_unverified=True)
    assert ids(mvcc.open_table(uri)) == [3, 4, 100, 101, 102]
    mvcc.open_table(uri).optimize.compact_files()
    mvcc.open_table(uri).cleanup_old_versions(older_than=timedelta(0), retain_versions=1, delete_unverified=True)
    clone = mvcc.open_table(uri).clone(str(tmp_path / "deep"), shallow=False)
    assert ids(clone) == [3, 4, 100, 101, 102]
    assert snapshot(victim_root) == before  # not a byte written, moved or deleted under the other table
    assert ids(mvcc.open_table(str(victim_root))) == [100, 101, 102]


def test_a_catalog_cleanup_never_touches_a_foreign_base(tmp_path: Path) -> None:
    victim_root = tmp_path / "victim"
    victim = mvcc.write_table(rows(100, 3), str(victim_root))
    before = snapshot(victim_root)
    cat = Catalog.create(str(tmp_path / "cat"))
    cat.create_table("t", rows(0, 0).schema)
    with cat.transaction() as tx:
        tx.table("t").append(rows(0, 3))
    t = cat.table("t")
    foreign = victim.manifest.fragments[0]

    def edit(m: pb.Manifest) -> None:
        m.base_paths.append(pb.BasePath(id=1, is_dataset_root=True, path=str(victim_root)))
        m.fragments[0].CopyFrom(foreign)
        m.fragments[0].files[0].base_id = 1

    tamper(t, edit)
    assert ids(Catalog.open(cat.root).table("t")) == [100, 101, 102]
    with Catalog.open(cat.root).transaction() as tx:
        tx.table("t").delete("id = 101")
    Catalog.open(cat.root).cleanup(older_than=timedelta(0), retain_versions=1, delete_unverified=True)
    assert ids(Catalog.open(cat.root).table("t")) == [100, 102]
    assert snapshot(victim_root) == before


def test_verify_notes_a_foreign_base_and_refuses_a_relative_one(tmp_path: Path) -> None:
    uri, victim_root, _ = with_foreign_base(tmp_path)
    result = CliRunner().invoke(cli.cli, ["verify", uri, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (base,) = json.loads(result.stdout)["foreign_bases"]
    assert base["path"] == str(victim_root) and base["files"] == 1 and base["versions"] == [2]
    text = CliRunner().invoke(cli.cli, ["verify", uri], catch_exceptions=False).output
    assert f"base path {victim_root} (id 1) lies outside the table's root" in text
    t = mvcc.open_table(uri)
    tamper(t, lambda m: setattr(m.base_paths[0], "path", "victim"))
    with pytest.raises(mvcc.errors.ManifestInvariantError, match="relative local path") as err:
        mvcc.open_table(uri, version=2)
    assert err.value.field == "base_paths[0].path"


def test_add_bases_records_a_local_base_as_an_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    t = mvcc.write_table(rows(0, 2), str(tmp_path / "table"))
    t.add_bases([DatasetBasePath("extra", name="extra")])
    assert t.manifest.base_paths[0].path == str(tmp_path / "extra")
