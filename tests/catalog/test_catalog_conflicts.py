"""DuckLake's logical conflicts, each through two real transactions on one catalog snapshot.

`first` commits, then `second` (which read the same catalog version) tries to: the test says whether the
second publishes (the retry without rewriting data files) or fails with which kind of CatalogConflictError.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from mvcc_core import CommitConflictError, IncompatibleConflictError, RetryableConflictError
from mvcc_core.catalog import Catalog, CatalogConflictError, CatalogTransaction
from mvcc_core.io import open_store

IDS = pa.schema([("id", pa.int64())])
Step = Callable[[CatalogTransaction], None]


@pytest.fixture
def cat(tmp_path: Any) -> Catalog:
    c = Catalog.create(str(tmp_path / "cat"))
    c.create_schema("s")
    c.create_schema("empty")
    c.create_table("s.a", IDS)
    c.create_table("s.b", IDS)
    with c.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": [1, 2, 3]}))
        tx.table("s.b").append(pa.table({"id": [1, 2, 3]}))
    return c


def ids(cat: Catalog, name: str) -> list[int]:
    return sorted(cat.table(name).to_table()["id"].to_pylist())


def race(cat: Catalog, first: Step, second: Step) -> tuple[CatalogTransaction, CatalogTransaction]:
    """Both transactions stage on the same snapshot; `first` publishes, then `second` is left to commit."""
    t1, t2 = cat.transaction(), cat.transaction()
    first(t1)
    second(t2)
    t1.commit()
    return t1, t2


def conflict(cat: Catalog, first: Step, second: Step, kind: type[CommitConflictError], name: str) -> None:
    read = cat.latest_version
    _, t2 = race(cat, first, second)
    staged = t2.staged_files()
    with pytest.raises(CatalogConflictError) as info:
        t2.commit()
    err = info.value
    assert isinstance(err, kind) and isinstance(err, CommitConflictError)
    assert err.object_name == name
    assert err.expected_version == read and err.actual_version == read + 1
    if err.rule_code != "table_rules":  # a catalog rule; the table's own rules name table versions
        assert (err.uri, err.read_version, err.conflicting_versions) == (cat.root, read, [read + 1])
    assert name in str(err)
    assert cat.latest_version == read + 1
    for uri in staged:  # a definite failure removes what the loser staged
        root, _, rel = uri.partition("/data/")
        assert not open_store(root).exists(f"data/{rel}")


def create_schema(name: str) -> Step:
    return lambda tx: tx.create_schema(name)


def drop_schema(name: str) -> Step:
    return lambda tx: tx.drop_schema(name)


def create_table(name: str) -> Step:
    return lambda tx: tx.create_table(name, IDS)


def drop_table(name: str) -> Step:
    return lambda tx: tx.drop_table(name)


def rename(name: str, new: str) -> Step:
    return lambda tx: tx.rename_table(name, new)


def append(name: str, values: list[int]) -> Step:
    return lambda tx: tx.table(name).append(pa.table({"id": values}))


def delete(name: str, predicate: str) -> Step:
    return lambda tx: tx.table(name).delete(predicate)


def overwrite(name: str, values: list[int], where: str | None = None) -> Step:
    return lambda tx: tx.table(name).overwrite(pa.table({"id": values}), where=where)


# ---- Schemas ---------------------------------------------------------------------------------------


def test_both_create_the_same_schema(cat: Catalog) -> None:
    conflict(cat, create_schema("x"), create_schema("x"), IncompatibleConflictError, "x")


def test_both_drop_the_same_schema(cat: Catalog) -> None:
    conflict(cat, drop_schema("empty"), drop_schema("empty"), IncompatibleConflictError, "empty")


def test_drop_schema_in_which_another_created_a_table(cat: Catalog) -> None:
    conflict(cat, create_table("empty.t"), drop_schema("empty"), IncompatibleConflictError, "empty")


def test_create_table_in_a_schema_another_dropped(cat: Catalog) -> None:
    """The same pair in the other order (rule "create in a dropped schema")."""
    conflict(cat, drop_schema("empty"), create_table("empty.t"), IncompatibleConflictError, "empty.t")
    assert cat.schemas() == ["main", "s"]


def test_different_schemas_do_not_conflict(cat: Catalog) -> None:
    _, t2 = race(cat, create_schema("x"), create_schema("y"))
    t2.commit()
    assert {"x", "y"} <= set(cat.schemas())


# ---- Tables / views --------------------------------------------------------------------------------


def test_both_create_the_same_table(cat: Catalog) -> None:
    conflict(cat, create_table("s.t"), create_table("s.t"), IncompatibleConflictError, "s.t")


def test_rename_onto_a_name_another_created(cat: Catalog) -> None:
    conflict(cat, create_table("s.t"), rename("s.b", "s.t"), IncompatibleConflictError, "s.t")


def test_both_drop_the_same_table(cat: Catalog) -> None:
    conflict(cat, drop_table("s.a"), drop_table("s.a"), IncompatibleConflictError, "s.a")


def test_alter_a_table_another_dropped(cat: Catalog) -> None:
    conflict(cat, drop_table("s.a"), rename("s.a", "s.z"), IncompatibleConflictError, "s.a")


def test_alter_a_table_another_altered(cat: Catalog) -> None:
    conflict(cat, rename("s.a", "s.y"), rename("s.a", "s.z"), IncompatibleConflictError, "s.a")
    assert cat.tables("s") == ["s.b", "s.y"]


def test_ddl_on_different_tables_does_not_conflict(cat: Catalog) -> None:
    _, t2 = race(cat, create_table("s.t"), drop_table("s.a"))
    t2.commit()
    assert cat.tables("s") == ["s.b", "s.t"]


# ---- Views (DuckLake says "table or view" in every name rule) -----------------------------------


def create_view(name: str, sql: str = "SELECT id FROM s.a", or_replace: bool = False) -> Step:
    return lambda tx: tx.create_view(name, sql, or_replace=or_replace)


def drop_view(name: str) -> Step:
    return lambda tx: tx.drop_view(name)


@pytest.fixture
def with_view(cat: Catalog) -> Catalog:
    cat.create_view("s.v", "SELECT id FROM s.a WHERE id > 1")
    return cat


def test_both_create_the_same_view(cat: Catalog) -> None:
    conflict(cat, create_view("s.v"), create_view("s.v"), IncompatibleConflictError, "s.v")


def test_create_a_view_named_like_a_table_another_created(cat: Catalog) -> None:
    conflict(cat, create_table("s.t"), create_view("s.t"), IncompatibleConflictError, "s.t")
    conflict(cat, create_view("s.u"), create_table("s.u"), IncompatibleConflictError, "s.u")


def test_create_a_view_in_a_schema_another_dropped(cat: Catalog) -> None:
    conflict(cat, drop_schema("empty"), create_view("empty.v"), IncompatibleConflictError, "empty.v")


def test_drop_schema_in_which_another_created_a_view(cat: Catalog) -> None:
    conflict(cat, create_view("empty.v"), drop_schema("empty"), IncompatibleConflictError, "empty")


def test_both_drop_the_same_view(with_view: Catalog) -> None:
    conflict(with_view, drop_view("s.v"), drop_view("s.v"), IncompatibleConflictError, "s.v")


def test_replace_a_view_another_dropped_or_replaced(with_view: Catalog) -> None:
    conflict(with_view, drop_view("s.v"), create_view("s.v", or_replace=True), IncompatibleConflictError, "s.v")
    with_view.create_view("s.v", "SELECT 1 AS one")
    replace_first = create_view("s.v", "SELECT 2 AS two", or_replace=True)
    conflict(with_view, replace_first, create_view("s.v", or_replace=True), IncompatibleConflictError, "s.v")
    assert with_view.view("s.v") == "SELECT 2 AS two"


def test_views_on_different_names_do_not_conflict(with_view: Catalog) -> None:
    _, t2 = race(with_view, create_view("s.w"), drop_view("s.v"))
    t2.commit()
    assert with_view.views() == ["s.w"]


# ---- Data ------------------------------------------------------------------------------------------


def test_insert_into_a_table_another_dropped(cat: Catalog) -> None:
    conflict(cat, drop_table("s.a"), append("s.a", [9]), IncompatibleConflictError, "s.a")


def test_insert_into_a_table_another_altered(cat: Catalog) -> None:
    conflict(cat, rename("s.a", "s.z"), append("s.a", [9]), IncompatibleConflictError, "s.a")


def test_drop_a_table_another_inserted_into_is_no_conflict(cat: Catalog) -> None:
    """Asymmetric: DuckLake lists insert-after-drop, not drop-after-insert."""
    _, t2 = race(cat, append("s.a", [9]), drop_table("s.a"))
    t2.commit()
    assert cat.tables("s") == ["s.b"]


def test_delete_from_a_table_another_dropped(cat: Catalog) -> None:
    conflict(cat, drop_table("s.a"), delete("s.a", "id = 1"), IncompatibleConflictError, "s.a")


def test_delete_from_a_table_another_altered(cat: Catalog) -> None:
    conflict(cat, rename("s.a", "s.z"), delete("s.a", "id = 1"), IncompatibleConflictError, "s.a")


def test_delete_from_a_table_another_deleted_from(cat: Catalog) -> None:
    """DuckLake's rule, refined by rows: deletes of the same rows stay a retryable conflict."""
    conflict(cat, delete("s.a", "id <= 2"), delete("s.a", "id >= 2"), RetryableConflictError, "s.a")
    assert ids(cat, "s.a") == [3]


def data_files(cat: Catalog, name: str) -> set[str]:
    return {f.path for frag in cat.table(name).get_fragments() for f in frag.data_files()}


def test_deletes_of_different_rows_are_rebased(cat: Catalog) -> None:
    """Different rows of one fragment: the core's resolver rebases the second delete (a merged deletion
    vector), so it publishes after the retry and no data file is rewritten."""
    files = data_files(cat, "s.a")
    _, t2 = race(cat, delete("s.a", "id = 1"), delete("s.a", "id = 2"))
    t2.commit()
    assert ids(cat, "s.a") == [3] and data_files(cat, "s.a") == files
    assert [c["change"] for c in cat.versions()[-1].changes] == ["deleted_from_table"]


def test_merge_insert_after_a_delete_of_other_rows_is_rebased(cat: Catalog) -> None:
    def upsert(tx: CatalogTransaction) -> None:
        tx.table("s.a").merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
            pa.table({"id": [3, 4]})
        )

    _, t2 = race(cat, delete("s.a", "id = 1"), upsert)
    t2.commit()
    assert ids(cat, "s.a") == [2, 3, 4]


def test_merge_insert_after_a_delete_of_the_same_row_is_retryable(cat: Catalog) -> None:
    def upsert(tx: CatalogTransaction) -> None:
        tx.table("s.a").merge_insert("id").when_matched_update_all().execute(pa.table({"id": [1]}))

    conflict(cat, delete("s.a", "id = 1"), upsert, RetryableConflictError, "s.a")


def test_overwrite_after_a_delete_is_a_delete_conflict(cat: Catalog) -> None:
    conflict(cat, delete("s.a", "id = 1"), overwrite("s.a", [5]), RetryableConflictError, "s.a")


def test_both_insert_into_the_same_table_retry_without_rewriting(cat: Catalog) -> None:
    t1, t2 = race(cat, append("s.a", [10]), append("s.a", [20]))
    staged = t2.staged_files()
    version = t2.commit()
    assert version == t1.published_version + 1
    assert ids(cat, "s.a") == [1, 2, 3, 10, 20]
    # the second publish kept the data files it staged on the older table version
    data_files = {f.path for frag in cat.table("s.a").get_fragments() for f in frag.data_files()}
    assert {u.rsplit("/data/", 1)[1] for u in staged} <= {p.rsplit("/", 1)[-1] for p in data_files}


def test_delete_after_a_concurrent_insert_retries(cat: Catalog) -> None:
    _, t2 = race(cat, append("s.a", [10]), delete("s.a", "id = 1"))
    t2.commit()
    assert ids(cat, "s.a") == [2, 3, 10]


def test_insert_after_a_concurrent_delete_retries(cat: Catalog) -> None:
    _, t2 = race(cat, delete("s.a", "id = 1"), append("s.a", [10]))
    t2.commit()
    assert ids(cat, "s.a") == [2, 3, 10]


def test_multi_table_transaction_and_a_delete_on_one_of_its_tables(cat: Catalog) -> None:
    def both(tx: CatalogTransaction) -> None:
        tx.table("s.a").append(pa.table({"id": [7]}))
        tx.table("s.b").delete("id = 3")

    _, t2 = race(cat, both, delete("s.a", "id = 1"))
    t2.commit()  # s.a: an insert then a delete (no rule); s.b: only the first touched it
    assert ids(cat, "s.a") == [2, 3, 7] and ids(cat, "s.b") == [1, 2]


def test_overwrite_where_after_matching_insert_is_retryable_by_the_core_rules(cat: Catalog) -> None:
    """DuckLake sees a delete+insert after an insert (no conflict); the table's own rule still refuses to
    replace a partition into which rows were inserted meanwhile, so the publish does not lose them."""
    conflict(cat, append("s.a", [5]), overwrite("s.a", [4], where="id >= 3"), RetryableConflictError, "s.a")
    assert ids(cat, "s.a") == [1, 2, 3, 5]


def test_a_failed_transaction_cannot_be_committed_again(cat: Catalog) -> None:
    _, t2 = race(cat, drop_table("s.a"), append("s.a", [1]))
    with pytest.raises(CatalogConflictError):
        t2.commit()
    with pytest.raises(ValueError):
        t2.commit()
