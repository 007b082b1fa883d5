"""Compaction, schema evolution and view renames inside catalog transactions, and the rules' codes.

Each DuckLake rule these touch runs through two real transactions on one snapshot (`race` / `conflict` of
test_catalog_conflicts): `first` publishes, the second either publishes or fails with the named rule.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from test_catalog_conflicts import IDS, append, create_view, delete, drop_table, drop_view, race

from mvcc_core import IncompatibleConflictError, RetryableConflictError
from mvcc_core.catalog import Catalog, CatalogConflictError, CatalogError, CatalogTransaction
from mvcc_core.catalog.change_rules import RULES


@pytest.fixture
def cat(tmp_path: Any) -> Catalog:
    """Table s.a of 12 one-row-batch appends (12 small fragments), s.b with three rows, view s.v."""
    c = Catalog.create(str(tmp_path / "cat"))
    c.create_schema("s")
    c.create_table("s.a", IDS)
    c.create_table("s.b", IDS)
    for i in range(12):
        with c.transaction() as tx:
            tx.table("s.a").append(pa.table({"id": [i]}))
    with c.transaction() as tx:
        tx.table("s.b").append(pa.table({"id": [1, 2, 3]}))
    c.create_view("s.v", "SELECT id FROM s.a")
    return c


def ids(cat: Catalog, name: str) -> list[int]:
    return sorted(cat.table(name).to_table()["id"].to_pylist())


def fails(cat: Catalog, first: Any, second: Any, kind: type, code: str, name: str) -> CatalogConflictError:
    """`second` loses to `first` by the rule `code`; nothing of it is published."""
    read = cat.latest_version
    _, t2 = race(cat, first, second)
    with pytest.raises(CatalogConflictError) as info:
        t2.commit()
    err = info.value
    assert isinstance(err, kind), err
    assert (err.rule_code, err.object_name) == (code, name), err
    assert cat.latest_version == read + 1
    return err


def compact(name: str) -> Any:
    return lambda tx: tx.table(name).compact_files()


def add_column(name: str) -> Any:
    return lambda tx: tx.table(name).add_columns({"twice": "id * 2"})


# ---- rule codes -------------------------------------------------------------------------------------


def test_every_rule_has_its_own_stable_code() -> None:
    codes = [r.code for r in RULES]
    assert len(set(codes)) == len(codes) and all(c.isidentifier() and c.islower() for c in codes)


# ---- compaction --------------------------------------------------------------------------------------


def test_compaction_is_published_as_a_catalog_version(cat: Catalog) -> None:
    before = cat.latest_version
    table_version = cat.snapshot().table_version("s.a")
    version = cat.compact_files("s.a")
    assert version == before + 1 and cat.latest_version == version
    t = cat.table("s.a")
    assert len(t.get_fragments()) == 1 and ids(cat, "s.a") == list(range(12))
    assert t.version == table_version + 1 and t.versions()[-1].operation == "Rewrite"  # no ReserveFragments
    assert cat.versions()[-1].changes == [{"change": "compacted_table", "name": "s.a"}]
    assert cat.compact_files("s.a") is None and cat.latest_version == version  # nothing left to do
    # the table's earlier catalog versions still read as they were
    assert len(cat.snapshot(before).table("s.a").get_fragments()) == 12


def test_compaction_and_writes_in_one_transaction(cat: Catalog) -> None:
    with cat.transaction() as tx:
        tx.table("s.a").delete("id < 3")
        assert tx.table("s.a").compact_files() == 9  # the three one-row fragments emptied are gone already
        tx.table("s.a").append(pa.table({"id": [100]}))
        assert sorted(tx.table("s.a").to_table()["id"].to_pylist()) == [*range(3, 12), 100]
    assert ids(cat, "s.a") == [*range(3, 12), 100]
    assert len(cat.table("s.a").get_fragments()) == 2


def test_compact_a_table_another_deleted_from(cat: Catalog) -> None:
    fails(cat, delete("s.a", "id = 5"), compact("s.a"), RetryableConflictError, "compact_deleted", "s.a")
    assert 5 not in ids(cat, "s.a")


def test_delete_from_a_table_another_compacted(cat: Catalog) -> None:
    code = "delete_from_deleted_or_compacted"
    fails(cat, compact("s.a"), delete("s.a", "id = 5"), RetryableConflictError, code, "s.a")
    assert ids(cat, "s.a") == list(range(12))


def test_compact_a_table_another_dropped(cat: Catalog) -> None:
    fails(cat, drop_table("s.a"), compact("s.a"), IncompatibleConflictError, "compact_dropped", "s.a")


def test_compaction_after_a_concurrent_append_takes_new_fragment_ids(cat: Catalog) -> None:
    """No DuckLake rule, and the table's rules let a Rewrite pass an Append: the Rewrite lands on the newer
    table version, its new fragment renumbered past the ids the append took."""
    t1, t2 = race(cat, append("s.a", [50, 51]), compact("s.a"))
    t2.commit()
    assert ids(cat, "s.a") == [*range(12), 50, 51]
    frag_ids = [f.fragment_id for f in cat.table("s.a").get_fragments()]
    assert len(frag_ids) == len(set(frag_ids)) == 2


def test_both_compact_the_same_table(cat: Catalog) -> None:
    err = fails(cat, compact("s.a"), compact("s.a"), RetryableConflictError, "table_rules", "s.a")
    assert "Rewrite" in str(err)
    assert ids(cat, "s.a") == list(range(12))


# ---- schema evolution --------------------------------------------------------------------------------


def test_add_columns_then_write_in_one_transaction(cat: Catalog) -> None:
    with cat.transaction() as tx:
        tx.table("s.b").add_columns({"twice": "id * 2"})
        tx.table("s.b").append(pa.table({"id": [4], "twice": [8]}))
        tx.table("s.b").alter_columns({"path": "twice", "name": "double"})
    rows = cat.table("s.b").to_table().sort_by("id").to_pylist()
    assert rows == [{"id": i, "double": 2 * i} for i in (1, 2, 3, 4)]
    assert cat.versions()[-1].changes == [
        {"change": "altered_table", "name": "s.b"},
        {"change": "inserted_into_table", "name": "s.b"},
    ]


def test_drop_columns_in_a_transaction(cat: Catalog) -> None:
    with cat.transaction() as tx:
        tx.table("s.b").add_columns({"twice": "id * 2"})
    with cat.transaction() as tx:
        tx.table("s.b").drop_columns("twice")
    assert cat.table("s.b").schema.names == ["id"]


def test_insert_into_a_table_another_altered_its_columns(cat: Catalog) -> None:
    code = "insert_into_dropped_or_altered"
    fails(cat, add_column("s.b"), append("s.b", [9]), IncompatibleConflictError, code, "s.b")
    assert cat.table("s.b").schema.names == ["id", "twice"]


def test_alter_columns_of_a_table_another_altered(cat: Catalog) -> None:
    code = "alter_dropped_or_altered"
    fails(cat, add_column("s.b"), add_column("s.b"), IncompatibleConflictError, code, "s.b")


def test_add_columns_after_a_concurrent_insert_follows_the_table_rules(cat: Catalog) -> None:
    """No DuckLake rule (alter after insert), but the table's own rules: a Merge (add_columns) that missed an
    Append would leave the new rows without the computed column, so it is retryable."""
    err = fails(cat, append("s.b", [9]), add_column("s.b"), RetryableConflictError, "table_rules", "s.b")
    assert "Merge" in str(err)
    assert cat.table("s.b").schema.names == ["id"]


def test_rename_a_column_after_a_concurrent_insert_is_rebased(cat: Catalog) -> None:
    """A metadata-only alter (Project) passes an Append by the table's rules: both land."""
    _, t2 = race(cat, append("s.b", [9]), lambda tx: tx.table("s.b").alter_columns({"path": "id", "name": "key"}))
    t2.commit()
    assert sorted(cat.table("s.b").to_table()["key"].to_pylist()) == [1, 2, 3, 9]


# ---- view renames ------------------------------------------------------------------------------------


def rename_view(name: str, new: str) -> Any:
    return lambda tx: tx.rename_view(name, new)


def test_rename_a_view(cat: Catalog) -> None:
    cat.rename_view("s.v", "s.w")
    assert cat.views("s") == ["s.w"] and cat.view("s.w") == "SELECT id FROM s.a"
    changes = cat.versions()[-1].changes
    assert changes == [{"change": "altered_view", "name": "s.v"}, {"change": "created_view", "name": "s.w"}]
    with pytest.raises(CatalogError, match="exists already"):
        cat.rename_view("s.w", "s.b")  # tables and views share names
    with pytest.raises(CatalogError, match="no view 's.a'"):
        cat.rename_view("s.a", "s.x")  # a table is not renamed as a view
    with pytest.raises(ValueError):
        cat.rename_view("s.w", "s.a/b")
    assert cat.views("s") == ["s.w"]


def test_rename_a_view_another_dropped(cat: Catalog) -> None:
    code = "alter_dropped_or_altered"
    fails(cat, drop_view("s.v"), rename_view("s.v", "s.w"), IncompatibleConflictError, code, "s.v")


def test_rename_a_view_onto_a_name_another_created(cat: Catalog) -> None:
    fails(cat, create_view("s.w"), rename_view("s.v", "s.w"), IncompatibleConflictError, "both_create_name", "s.w")


def test_rename_a_view_in_a_transaction_with_its_replacement(cat: Catalog) -> None:
    tx: CatalogTransaction
    with cat.transaction() as tx:
        tx.rename_view("s.v", "s.v_old")
        tx.create_view("s.v", "SELECT id * 2 AS id FROM s.a")
    assert cat.views("s") == ["s.v", "s.v_old"] and "id * 2" in cat.view("s.v")
