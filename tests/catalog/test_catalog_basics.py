"""The catalog's state, snapshots, time travel, DDL and atomic multi-table publish, on real storage."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest

from mvcc_core import TableExistsError, TableNotFoundError, open_table, write_table
from mvcc_core.catalog import Catalog, CatalogError
from mvcc_core.io import open_store

IDS = pa.schema([("id", pa.int64())])


def ids(table: Any) -> list[int]:
    return sorted(table.to_table()["id"].to_pylist())


@pytest.fixture
def cat(any_uri: tuple[str, dict[str, Any] | None]) -> Catalog:
    uri, options = any_uri
    c = Catalog.create(uri, storage_options=options)
    c.create_schema("s")
    c.create_table("s.a", IDS)
    c.create_table("s.b", IDS)
    return c


def test_create_open_and_ddl_versions(cat: Catalog, any_uri: tuple[str, dict[str, Any] | None]) -> None:
    uri, options = any_uri
    reopened = Catalog.open(uri, storage_options=options)
    assert reopened.schemas() == ["main", "s"]
    assert reopened.tables() == ["s.a", "s.b"]
    assert [v.changes for v in reopened.versions()] == [
        [{"change": "created_schema", "name": "main"}],
        [{"change": "created_schema", "name": "s"}],
        [{"change": "created_table", "name": "s.a"}],
        [{"change": "created_table", "name": "s.b"}],
    ]
    with pytest.raises(TableExistsError):
        Catalog.create(uri, storage_options=options)


def test_open_missing_catalog(tmp_path: Any) -> None:
    with pytest.raises(TableNotFoundError):
        Catalog.open(str(tmp_path / "nothing"))


def test_multi_table_transaction_is_one_catalog_version(cat: Catalog) -> None:
    before = cat.latest_version
    with cat.transaction(commit_message="load") as tx:
        tx.table("s.a").append(pa.table({"id": [1, 2]}))
        tx.table("s.b").append(pa.table({"id": [10]}))
    assert cat.latest_version == before + 1
    assert ids(cat.table("s.a")) == [1, 2] and ids(cat.table("s.b")) == [10]
    old = cat.snapshot(before)
    assert ids(old.table("s.a")) == [] and ids(old.table("s.b")) == []
    assert cat.versions()[-1].message == "load"
    assert cat.versions()[-1].changes == [
        {"change": "inserted_into_table", "name": "s.a"},
        {"change": "inserted_into_table", "name": "s.b"},
    ]
    # every table stays a normal mvcc table
    assert ids(open_table(cat.table("s.a").uri, storage_options=cat.options or None)) == [1, 2]


def test_catalog_version_properties(cat: Catalog) -> None:
    """The writer's properties are stored on the catalog version it publishes; `catalog.` keys are refused
    (they are the catalog's own), and so is a non-string value, before anything is staged."""
    with cat.transaction(transaction_properties={"dagster/run_id": "r1", "who": "me"}) as tx:
        tx.table("s.a").append(pa.table({"id": [1]}))
    assert cat.versions()[-1].properties == {"dagster/run_id": "r1", "who": "me"}
    assert cat.versions()[0].properties == {}
    before = cat.latest_version
    with pytest.raises(ValueError, match="'catalog.' are the catalog's own"):
        cat.transaction(transaction_properties={"catalog.changes": "[]"})
    with pytest.raises(TypeError, match="str to str"):
        cat.transaction(transaction_properties={"n": 1})  # type: ignore[dict-item]
    assert cat.latest_version == before


def test_nothing_is_visible_before_the_publish(cat: Catalog) -> None:
    tx = cat.transaction()
    tx.table("s.a").append(pa.table({"id": [1]}))
    tx.table("s.b").append(pa.table({"id": [2]}))
    assert ids(cat.table("s.a")) == [] and cat.table("s.a").latest_version == 1
    tx.commit()
    assert ids(cat.table("s.a")) == [1] and ids(cat.table("s.b")) == [2]


def test_exception_in_block_aborts_and_removes_files(cat: Catalog, tmp_path: Any) -> None:
    version = cat.latest_version
    with pytest.raises(RuntimeError), cat.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": [1]}))
        staged = tx.staged_files()
        raise RuntimeError("stop")
    assert cat.latest_version == version and ids(cat.table("s.a")) == []
    store_uri = cat.table("s.a").uri
    store = open_store(store_uri, cat.options or None)
    assert staged and not any(store.exists(f[len(store_uri) + 1 :]) for f in staged)


def test_delete_and_overwrite_where(cat: Catalog) -> None:
    with cat.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": [1, 2, 3, 4]}))
    with cat.transaction() as tx:
        tx.table("s.a").delete("id = 1")
        tx.table("s.b").overwrite(pa.table({"id": [7]}))
    with cat.transaction() as tx:
        tx.table("s.a").overwrite(pa.table({"id": [30]}), where="id >= 3")
    assert ids(cat.table("s.a")) == [2, 30] and ids(cat.table("s.b")) == [7]


def test_drop_rename_and_tombstones(cat: Catalog) -> None:
    with cat.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": [1]}))
    with_a = cat.latest_version
    cat.drop_table("s.a")
    assert cat.tables() == ["s.b"]
    with pytest.raises(CatalogError):
        cat.table("s.a")
    assert ids(cat.table("s.a", version=with_a)) == [1]  # time travel past the tombstone
    cat.create_table("s.a", IDS)  # a new table under the old name, a new directory
    assert ids(cat.table("s.a")) == []
    cat.rename_table("s.b", "s.c")
    assert cat.tables() == ["s.a", "s.c"]
    with pytest.raises(CatalogError):
        cat.drop_schema("s")  # not empty
    cat.drop_table("s.a")
    cat.drop_table("s.c")
    cat.drop_schema("s")
    assert cat.schemas() == ["main"]
    cat.create_schema("s")  # re-created after its tombstone
    assert cat.schemas() == ["main", "s"] and cat.tables("s") == []


def test_time_travel_by_timestamp(cat: Catalog) -> None:
    with cat.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": [1]}))
    time.sleep(0.01)
    between = datetime.now(UTC)
    time.sleep(0.01)
    with cat.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": [2]}))
    assert ids(cat.snapshot(between).table("s.a")) == [1]
    assert ids(cat.snapshot().table("s.a")) == [1, 2]


def test_ddl_refusals(cat: Catalog) -> None:
    with pytest.raises(CatalogError):
        cat.create_schema("s")
    with pytest.raises(CatalogError):
        cat.create_table("s.a", IDS)
    with pytest.raises(CatalogError):
        cat.create_table("nope.t", IDS)
    with pytest.raises(CatalogError):
        cat.drop_table("s.zzz")
    with pytest.raises(ValueError):
        cat.create_table("a.b.c", IDS)


def test_schema_and_table_created_in_one_transaction(cat: Catalog) -> None:
    before = cat.latest_version
    with cat.transaction() as tx:
        tx.create_schema("x")
        tx.create_table("x.t", IDS)
    assert cat.latest_version == before + 1 and cat.tables("x") == ["x.t"]
    assert [c["change"] for c in cat.versions()[-1].changes] == ["created_schema", "created_table"]


def test_a_catalog_object_sees_other_writers_publishes(
    cat: Catalog, any_uri: tuple[str, dict[str, Any] | None]
) -> None:
    """Each catalog object keeps the newest `__manifest` state it knows and only checks for a newer one: what
    another catalog object (another process) published is still what the next read and publish start from."""
    uri, options = any_uri
    other = Catalog.open(uri, storage_options=options)
    start = cat.latest_version
    with other.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": [1]}))
    assert cat.latest_version == start + 1
    assert ids(cat.table("s.a")) == [1]
    with cat.transaction() as tx:  # on the version the other object published, so no conflict and no retry
        tx.table("s.a").append(pa.table({"id": [2]}))
    assert tx.published_version == start + 2
    assert ids(other.table("s.a")) == [1, 2] and other.latest_version == start + 2
    assert [v.version for v in other.versions()][-2:] == [start + 1, start + 2]


def test_a_long_lived_catalog_object_keeps_a_bounded_cache(tmp_path: Any) -> None:
    """One committer serves every publish of a catalog object; what it caches of `__manifest` stays bounded."""
    from mvcc_core.catalog import catalog as catalog_mod

    cat = Catalog.create(str(tmp_path / "cat"))
    cat.create_table("t", IDS)
    for i in range(catalog_mod.MANIFESTS_CACHED + 10):
        with cat.transaction() as tx:
            tx.table("t").append(pa.table({"id": [i]}))
    committer = cat.latest_manifest().state.committer
    assert 0 < len(committer.cache.manifests) <= catalog_mod.MANIFESTS_CACHED
    assert len(committer.cache.transactions) <= catalog_mod.MANIFESTS_CACHED
    assert max(committer.cache.manifests) == cat.latest_version
    assert len(ids(Catalog.open(str(tmp_path / "cat")).table("t"))) == catalog_mod.MANIFESTS_CACHED + 10


def test_files_a_commit_adds_locally(tmp_path: Any) -> None:
    """The cost model of docs/guide/catalog.md "Benchmark": a single-table append adds 3 files (data, transaction,
    manifest); a catalog transaction adds those 3 per table plus 3 for `__manifest` (state, transaction,
    manifest), nothing staged left behind. A commit path that starts writing more shows here."""

    def files() -> int:
        return sum(len(names) for _, _, names in os.walk(tmp_path))

    rows = pa.table({"id": [1, 2]})
    table = write_table(rows, str(tmp_path / "single"))
    cat = Catalog.create(str(tmp_path / "cat"))
    with cat.transaction() as tx:
        for i in range(5):
            tx.create_table(f"t{i}", IDS)
    added = {}
    for name, commit in {
        "single": lambda: table.append(rows),
        "1 table": lambda: transaction_on(cat, 1, rows),
        "5 tables": lambda: transaction_on(cat, 5, rows),
    }.items():
        commit()  # warm: the first commit of a table may add its latest-version hint
        before = files()
        commit()
        added[name] = files() - before
    assert added == {"single": 3, "1 table": 6, "5 tables": 18}


def transaction_on(cat: Catalog, tables: int, rows: pa.Table) -> None:
    with cat.transaction() as tx:
        for i in range(tables):
            tx.table(f"t{i}").append(rows)
