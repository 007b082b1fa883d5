"""Views: named SQL text in the catalog (validated with sqlglot, never executed), each change a catalog version."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from mvcc_core.catalog import Catalog, CatalogError

IDS = pa.schema([("id", pa.int64())])


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    c = Catalog.create(str(tmp_path / "cat"))
    c.create_schema("s")
    c.create_table("s.a", IDS)
    return c


def test_create_replace_drop_and_time_travel(cat: Catalog) -> None:
    first = cat.create_view("s.big", "SELECT id FROM s.a WHERE id > 10")
    assert cat.views() == ["s.big"] and cat.view("s.big") == "SELECT id FROM s.a WHERE id > 10"
    assert cat.tables() == ["s.a"]  # a view is not a table
    second = cat.create_view("s.big", "SELECT id FROM s.a WHERE id > 100", or_replace=True)
    dropped = cat.drop_view("s.big")
    assert cat.views() == [] and dropped == second + 1 == first + 2
    assert cat.snapshot(first).view("s.big") == "SELECT id FROM s.a WHERE id > 10"
    assert cat.snapshot(second).view("s.big").endswith("> 100")
    assert [v.changes for v in cat.versions()[-3:]] == [
        [{"change": "created_view", "name": "s.big"}],
        [{"change": "altered_view", "name": "s.big"}],
        [{"change": "dropped_view", "name": "s.big"}],
    ]
    with pytest.raises(CatalogError):
        cat.view("s.big")


def test_bad_definitions_are_refused_and_publish_nothing(cat: Catalog) -> None:
    version = cat.latest_version
    for sql in ["SELEC id FRM", "", "INSERT INTO s.a VALUES (1)", "SELECT 1; SELECT 2", "DROP TABLE s.a"]:
        with pytest.raises(ValueError, match="s.v"):
            cat.create_view("s.v", sql)
    assert cat.latest_version == version and cat.views() == []
    cat.create_view("s.v", "SELECT id FROM s.a UNION ALL SELECT 1", dialect="duckdb")
    assert cat.views() == ["s.v"]


def test_tables_and_views_share_names(cat: Catalog) -> None:
    with pytest.raises(CatalogError):
        cat.create_view("s.a", "SELECT 1 AS x")
    with pytest.raises(CatalogError):
        cat.create_view("s.a", "SELECT 1 AS x", or_replace=True)  # never replaces a table
    cat.create_view("s.v", "SELECT 1 AS x")
    with pytest.raises(CatalogError):
        cat.create_table("s.v", IDS)
    with pytest.raises(CatalogError):
        cat.create_view("s.v", "SELECT 2 AS x")  # exists; or_replace not given
    with pytest.raises(CatalogError):
        cat.drop_table("s.v")
    with pytest.raises(CatalogError):
        cat.drop_view("s.a")
    with pytest.raises(CatalogError), cat.transaction() as tx:
        tx.table("s.v").append(pa.table({"id": [1]}))
    with pytest.raises(CatalogError):
        cat.create_view("nope.v", "SELECT 1 AS x")


def test_a_schema_with_a_view_is_not_empty(cat: Catalog) -> None:
    cat.drop_table("s.a")
    cat.create_view("s.v", "SELECT 1 AS x")
    with pytest.raises(CatalogError, match="not empty"):
        cat.drop_schema("s")
    cat.drop_view("s.v")
    cat.drop_schema("s")
    assert cat.schemas() == ["main"]


def test_a_view_replaced_by_a_table_in_one_transaction(cat: Catalog) -> None:
    cat.create_view("s.v", "SELECT 1 AS x")
    with_view = cat.latest_version
    with cat.transaction() as tx:
        tx.drop_view("s.v")
        tx.create_table("s.v", IDS)
        tx.table("s.v").append(pa.table({"id": [1]}))
    assert cat.views() == [] and cat.tables() == ["s.a", "s.v"]
    assert cat.table("s.v").to_table()["id"].to_pylist() == [1]
    assert cat.snapshot(with_view).views() == ["s.v"]
