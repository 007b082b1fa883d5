"""Catalog names and rows a reader does not recognise: one rule (`mvcc_core.names`) where a name is created and
where a `__manifest` row is read back; a row on disk that breaks it fails closed on its own while the rest of
the catalog opens, reads, writes and cleans; temporary and unrecognised files in the catalog's ref folders and
under its root are skipped, never read as entries, and (temporary ones, when stale) removed by cleanup."""

from __future__ import annotations

import os
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from catalog_helpers import IDS, make

from mvcc_core import open_table
from mvcc_core.catalog import Catalog
from mvcc_core.catalog.errors import CatalogEntryError, CatalogError
from mvcc_core.errors import BranchError, InvalidNameError
from mvcc_core.format.branches import BRANCHES_DIR

HOSTILE = [
    "a/b",
    "..",
    ".",
    "a..b",
    "a\nb",
    "a\n",  # a trailing newline ('$' would let it through)
    "a\x7fb",  # DEL
    "a\x00b",
    "a\tb",
    "a\\b",
    "a b",
    "\u0430",  # Cyrillic a, a look-alike of 'a'
    "\uff41",  # fullwidth a
    "caf\u00e9",
    "x" * 129,  # one past the limit
    "__manifest",  # the catalog's own folder
    "_versions",  # a table's own folders
    "_refs",
    "_tmp-1234-x",  # a temporary file's name
    ".hidden",
    "-x",
    "",
]


def ids(table: Any) -> list[int]:
    return sorted(table.to_table()["id"].to_pylist())


def files(root: str) -> set[str]:
    return {str(p.relative_to(root)) for p in Path(root).rglob("*")}


@pytest.mark.parametrize("bad", HOSTILE, ids=repr)
def test_a_hostile_name_is_refused_everywhere_a_name_is_created_and_leaves_nothing(tmp_path: Path, bad: str) -> None:
    cat = make(str(tmp_path / "cat"), tables=("s.a",))
    cat.create_view("s.v", "SELECT 1")
    before, version = files(cat.root), cat.latest_version
    attempts = [
        lambda: cat.create_schema(bad),
        lambda: cat.create_table(f"s.{bad}", IDS),
        lambda: cat.create_table(f"{bad}.t", IDS),
        lambda: cat.create_view(f"s.{bad}", "SELECT 1"),
        lambda: cat.rename_table("s.a", f"s.{bad}"),
        lambda: cat.rename_view("s.v", f"s.{bad}"),
    ]
    if "." not in bad:
        attempts.append(lambda: cat.create_table(bad, IDS))  # in the default schema
    for attempt in attempts:
        with pytest.raises(InvalidNameError):  # a ValueError, in the rule's words
            attempt()
    with pytest.raises(BranchError):
        cat.create_branch(bad if len(bad) < 129 else "b" * 201)  # a branch name may be 200 characters
    assert cat.latest_version == version
    assert files(cat.root) == before  # no directory, no staged file
    fresh = Catalog.open(cat.root)
    assert fresh.tables() == ["s.a"] and fresh.views() == ["s.v"] and fresh.branches() == {}


def test_names_at_the_length_limit_work_end_to_end(tmp_path: Path) -> None:
    schema, table = "s" * 128, "t" * 128
    cat = Catalog.create(str(tmp_path / "cat"))
    cat.create_schema(schema)
    with cat.transaction() as tx:
        tx.create_table(f"{schema}.{table}", IDS)
        tx.table(f"{schema}.{table}").append(pa.table({"id": [1, 2]}))
    cat.create_view(f"{schema}.{'v' * 128}", "SELECT 1")
    cat.create_branch("b" * 200)
    fresh = Catalog.open(cat.root)
    assert fresh.tables() == [f"{schema}.{table}"]
    assert ids(fresh.table(f"{schema}.{table}")) == [1, 2]
    assert list(fresh.branches()) == ["b" * 200]
    with pytest.raises(InvalidNameError, match="longer than 128"):
        cat.create_schema("s" * 129)
    with pytest.raises(BranchError, match="longer than 200"):
        cat.create_branch("b" * 201)


def test_the_names_the_product_uses_stay_legal(tmp_path: Path) -> None:
    cat = Catalog.create(str(tmp_path / "cat"))
    for schema in ("sales", "s", "x-1", "Sales_2026"):
        cat.create_schema(schema)
    for name in ("sales.orders", "s.w9_4", "orders", "main.t", "x-1.T-2", "Sales_2026.a_b-c"):
        cat.create_table(name, IDS)
    for branch in ("dev", "dagster-wap-0f1e2d3c-aaaa-bbbb-cccc-123456789abc", "v1.2", "feat_x"):
        cat.create_branch(branch)
    assert len(Catalog.open(cat.root).tables()) == 6


def rewrite_rows(cat: Catalog, change: Any, branch: str | None = None) -> None:
    """Commit a `__manifest` version whose rows are `change(row)` of the newest ones (a writer that did not
    follow the rules, or an older one that had none)."""
    manifest = open_table(f"{cat.root}/__manifest", branch=branch)
    rows = [change(row) for row in manifest.to_table().to_pylist()]
    manifest.overwrite(pa.Table.from_pylist(rows, schema=manifest.schema), schema=manifest.schema)


@pytest.mark.parametrize("bad", ["s.a\nb", "s.a\\b", "s.a\x7f", "s.\u0430", "s.a\n"], ids=repr)
def test_a_row_on_disk_that_breaks_the_rule_fails_closed_for_that_entry_only(tmp_path: Path, bad: str) -> None:
    cat = make(str(tmp_path / "cat"), tables=("s.good", "s.bad"))
    bad_path = cat.snapshot().entry("s.bad").path
    rewrite_rows(cat, lambda r: {**r, "name": bad} if r["name"] == "s.bad" else r)

    fresh = Catalog.open(cat.root)  # opens, lists, reads
    assert fresh.tables() == ["s.good"]
    assert [(key, entry.path) for key, (entry, _) in fresh.snapshot().invalid.items()] == [(("table", bad), bad_path)]
    assert ids(fresh.table("s.good")) == [1, 2, 3]
    with pytest.raises(CatalogEntryError, match="drop_invalid_entry") as refused:
        fresh.table(bad)  # named: never taken for a missing table, never opened
    assert repr(bad) in str(refused.value)
    with pytest.raises(CatalogEntryError), fresh.transaction() as tx:
        tx.table(bad).append(pa.table({"id": [9]}))

    with fresh.transaction() as tx:  # writes go on, and carry the row unchanged
        tx.table("s.good").append(pa.table({"id": [4]}))
    fresh.create_table("s.other", IDS)
    after = Catalog.open(cat.root)
    assert ids(after.table("s.good")) == [1, 2, 3, 4]
    assert list(after.snapshot().invalid) == [("table", bad)]

    stats = after.cleanup(older_than=timedelta(0), delete_unverified=True)  # cleans, and leaves its files
    assert bad_path not in stats.directories_removed and bad_path not in stats.tables
    assert ids(open_table(f"{cat.root}/{bad_path}")) == [1, 2, 3]

    version = after.drop_invalid_entry(bad)  # the repair: a tombstone, nothing read through the row
    assert after.snapshot().invalid == {} and after.latest_version == version
    with pytest.raises(CatalogError, match="no invalid row"):
        after.drop_invalid_entry(bad)
    stats = after.cleanup(older_than=timedelta(0), retain_versions=1)
    assert bad_path in stats.directories_removed  # reclaimed as a dropped table's directory
    assert Catalog.open(cat.root).tables() == ["s.good", "s.other"]


def test_a_schema_row_that_breaks_the_rule_is_left_out_and_the_catalog_works(tmp_path: Path) -> None:
    cat = make(str(tmp_path / "cat"), tables=("s.a",))
    cat.create_schema("x")
    rewrite_rows(cat, lambda r: {**r, "name": "x\\y"} if r["name"] == "x" else r)
    fresh = Catalog.open(cat.root)
    assert fresh.schemas() == ["main", "s"]
    with fresh.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": [4]}))
    fresh.cleanup(older_than=timedelta(0), retain_versions=1)
    fresh.drop_invalid_entry("x\\y")
    assert Catalog.open(cat.root).snapshot().invalid == {}


def branch_catalog(root: str) -> tuple[Catalog, dict[str, str]]:
    """s.a and s.b, both written on branch `dev` (each forked); their directories."""
    cat = make(root, tables=("s.a", "s.b"))
    cat.create_branch("dev")
    with cat.transaction(branch="dev") as tx:
        tx.table("s.a").append(pa.table({"id": [10]}))
        tx.table("s.b").append(pa.table({"id": [20]}))
    return cat, {name: cat.snapshot().entry(name).path for name in ("s.a", "s.b")}


def test_a_branch_row_whose_fork_names_another_tables_directory_fails_closed(tmp_path: Path) -> None:
    cat, paths = branch_catalog(str(tmp_path / "cat"))
    b_row = Catalog.open(cat.root).snapshot(branch="dev").entry("s.b")

    def point_a_at_b(row: dict[str, Any]) -> dict[str, Any]:
        if row["name"] != "s.a":
            return row
        return {**row, "path": b_row.path, "staged_manifests": list(b_row.staged_manifests)}

    rewrite_rows(cat, point_a_at_b, branch="dev")
    fresh = Catalog.open(cat.root)
    main_before = {t: ids(fresh.table(t)) for t in ("s.a", "s.b")}
    with pytest.raises(CatalogEntryError, match="table 's.b'"):
        fresh.table("s.a", branch="dev")  # never s.b's rows under s.a's name
    assert ids(fresh.table("s.b", branch="dev")) == [1, 2, 3, 20]
    with pytest.raises(CatalogEntryError, match="not published"):
        fresh.publish_branch("dev")  # all of a branch's tables or none
    assert {t: ids(fresh.table(t)) for t in ("s.a", "s.b")} == main_before

    stats = fresh.cleanup(delete_unverified=True)
    assert stats.forks_removed == ()  # s.a's write is no orphan
    assert ids(open_table(f"{cat.root}/{paths['s.a']}", branch="dev")) == [1, 2, 3, 10]
    with fresh.transaction() as tx:  # main goes on
        tx.table("s.a").append(pa.table({"id": [4]}))
    fresh.delete_branch("dev")  # the repair the refusal names
    assert fresh.cleanup(delete_unverified=True).forks_removed == ()
    assert ids(Catalog.open(cat.root).table("s.a")) == [1, 2, 3, 4]


def test_a_branch_row_naming_another_branchs_fork_fails_closed(tmp_path: Path) -> None:
    cat, _ = branch_catalog(str(tmp_path / "cat"))
    cat.create_branch("other")
    with cat.transaction(branch="other") as tx:
        tx.table("s.a").append(pa.table({"id": [30]}))
    other = Catalog.open(cat.root).snapshot(branch="other").entry("s.a")
    rewrite_rows(
        cat,
        lambda r: {**r, "staged_manifests": list(other.staged_manifests)} if r["name"] == "s.a" else r,
        branch="dev",
    )
    fresh = Catalog.open(cat.root)
    with pytest.raises(CatalogEntryError, match="fork 'other'"):
        fresh.table("s.a", branch="dev")
    assert fresh.cleanup(delete_unverified=True).forks_removed == ()
    assert ids(fresh.table("s.a", branch="other")) == [1, 2, 3, 30]


def torn_temporary(directory: Path, name: str, *, age: timedelta | None = None) -> Path:
    """What a process killed inside a local ref write leaves: `_tmp-<uuid>-<name>.json`, torn."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"_tmp-{uuid.uuid4().hex}-{name}.json"
    path.write_bytes(b'{"parentBranch": null, "parentVer')
    if age is not None:
        stamp = time.time() - age.total_seconds()
        os.utime(path, (stamp, stamp))
    return path


def test_torn_temporary_ref_files_never_wedge_the_catalogs_listings_or_cleanup(tmp_path: Path) -> None:
    cat, paths = branch_catalog(str(tmp_path / "cat"))
    manifest_refs = Path(cat.root) / "__manifest" / BRANCHES_DIR
    table_refs = Path(cat.root) / paths["s.a"] / BRANCHES_DIR
    stale = [torn_temporary(d, "dev", age=timedelta(days=30)) for d in (manifest_refs, table_refs)]
    stranger = table_refs / "notes.txt"
    stranger.write_text("not a ref")

    fresh = Catalog.open(cat.root)
    assert list(fresh.branches()) == ["dev"]  # never read as a branch
    assert ids(fresh.table("s.a", branch="dev")) == [1, 2, 3, 10]
    stats = fresh.cleanup()
    assert stats.forks_removed == ()
    assert not any(p.exists() for p in stale)  # stale: removed
    assert stranger.exists()  # not ours to judge: skipped and left alone

    young = [torn_temporary(d, "late") for d in (manifest_refs, table_refs)]
    assert fresh.reconcile_forks() == []  # the catalog's own listings skip them
    fresh.create_branch("late")
    assert list(fresh.branches()) == ["dev", "late"]
    assert all(p.exists() for p in young)  # young: a writer may be between its write and its link
    assert fresh.cleanup().forks_removed == ()  # a plain cleanup reads none of them and keeps them
    assert all(p.exists() for p in young)
    fresh.cleanup(delete_unverified=True)  # no writer runs: removed at once
    assert not any(p.exists() for p in young) and stranger.exists()
    fresh.publish_branch("dev")
    fresh.delete_branch("dev")
    assert ids(Catalog.open(cat.root).table("s.a")) == [1, 2, 3, 10]


def test_cleanup_leaves_what_is_no_table_directory_alone(tmp_path: Path) -> None:
    cat = make(str(tmp_path / "cat"), tables=("s.a",))
    foreign = [Path(cat.root) / "notes" / "readme" / "x.txt", Path(cat.root) / "s" / "a-not-hex" / "y.bin"]
    for path in foreign:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("someone else's")
    dead_writer = Path(cat.root) / "s" / f"gone-{uuid.uuid4().hex[:12]}" / "_versions" / "1.manifest"
    dead_writer.parent.mkdir(parents=True)
    dead_writer.write_bytes(b"x")
    stats = cat.cleanup(delete_unverified=True)
    assert all(path.exists() for path in foreign)
    assert stats.directories_removed == (str(dead_writer.parent.parent.relative_to(cat.root)),)
    assert ids(Catalog.open(cat.root).table("s.a")) == [1, 2, 3]
