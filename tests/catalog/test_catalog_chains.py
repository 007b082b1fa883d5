"""Several data changes to one table in one catalog transaction (read-your-writes), merge_insert, and data
changes mixed with DDL of the same table; each published as one catalog version."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from mvcc_core import RetryableConflictError, open_table
from mvcc_core.catalog import Catalog, CatalogError
from mvcc_core.verify import verify

IDS = pa.schema([("id", pa.int64())])


def ids(table: Any) -> list[int]:
    return sorted(table.to_table()["id"].to_pylist())


def make(uri: str, options: dict[str, Any] | None = None) -> Catalog:
    c = Catalog.create(uri, storage_options=options)
    c.create_schema("s")
    c.create_table("s.a", IDS)
    c.create_table("s.b", IDS)
    with c.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": [1, 2, 3]}))
    return c


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    return make(str(tmp_path / "cat"))


@pytest.fixture
def any_cat(any_uri: tuple[str, dict[str, Any] | None]) -> Catalog:
    return make(*any_uri)


def test_several_changes_to_one_table_read_each_other(any_cat: Catalog) -> None:
    cat = any_cat
    before, table_before = cat.latest_version, cat.table("s.a").version
    with cat.transaction() as tx:
        t = tx.table("s.a")
        t.append(pa.table({"id": [4, 5]}))
        t.delete("id = 5")  # a row this transaction appended
        assert sorted(t.to_table()["id"].to_pylist()) == [1, 2, 3, 4]  # read-your-writes
        t.overwrite(pa.table({"id": [30]}), where="id >= 3")
        assert ids(cat.table("s.a")) == [1, 2, 3]  # nothing visible outside yet
    assert cat.latest_version == before + 1
    assert ids(cat.table("s.a")) == [1, 2, 30]
    table = cat.table("s.a")
    assert table.version == table_before + 3  # one table version per change, published together
    assert ids(table.checkout_version(table_before + 1)) == [1, 2, 3, 4, 5]
    assert cat.versions()[-1].changes == [
        {"change": "inserted_into_table", "name": "s.a"},
        {"change": "deleted_from_table", "name": "s.a"},
        {"change": "overwrote_table", "name": "s.a"},
    ]
    assert ids(open_table(table.uri, storage_options=cat.options or None)) == [1, 2, 30]


def test_merge_insert_in_a_transaction(cat: Catalog) -> None:
    with cat.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": [10]}))
        stats = (
            tx.table("s.a")
            .merge_insert("id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(pa.table({"id": [10, 11]}))
        )
        tx.table("s.b").append(pa.table({"id": [1]}))
    assert stats == {"num_inserted_rows": 1, "num_updated_rows": 1, "num_deleted_rows": 0}  # 10 was seen
    assert ids(cat.table("s.a")) == [1, 2, 3, 10, 11] and ids(cat.table("s.b")) == [1]
    kinds = {(c["change"], c["name"]) for c in cat.versions()[-1].changes}
    assert kinds == {
        ("inserted_into_table", "s.a"),
        ("deleted_from_table", "s.a"),
        ("inserted_into_table", "s.b"),
    }


def test_a_stale_merge_insert_builder_is_refused(cat: Catalog) -> None:
    tx = cat.transaction()
    builder = tx.table("s.a").merge_insert("id").when_not_matched_insert_all()
    tx.table("s.a").append(pa.table({"id": [7]}))
    with pytest.raises(ValueError, match="changed in this transaction"):
        builder.execute(pa.table({"id": [7]}))
    tx.abort()


def test_create_write_and_rename_in_one_transaction(any_cat: Catalog) -> None:
    cat = any_cat
    with cat.transaction() as tx:
        tx.create_table("s.new", IDS)
        tx.table("s.new").append(pa.table({"id": [1]}))
        tx.table("s.new").delete("id = 1")
        tx.table("s.new").append(pa.table({"id": [2]}))
        tx.table("s.a").append(pa.table({"id": [4]}))
        tx.rename_table("s.a", "s.z")
        tx.table("s.z").delete("id = 1")
        with pytest.raises(CatalogError):
            tx.table("s.a").append(pa.table({"id": [5]}))
    assert cat.tables("s") == ["s.b", "s.new", "s.z"]
    assert ids(cat.table("s.new")) == [2] and ids(cat.table("s.z")) == [2, 3, 4]


def test_write_then_drop_discards_the_write(cat: Catalog) -> None:
    tx = cat.transaction()
    tx.table("s.a").append(pa.table({"id": [9]}))
    staged = tx.staged_files()
    tx.drop_table("s.a")
    assert not tx.staged_files()
    tx.commit()
    assert cat.tables("s") == ["s.b"]
    assert [c["change"] for c in cat.versions()[-1].changes] == ["dropped_table"]
    if "://" not in staged[0]:
        assert not any(Path(u).exists() for u in staged)


def test_drop_and_create_again_in_one_transaction(cat: Catalog) -> None:
    old = cat.latest_version
    with cat.transaction() as tx:
        tx.drop_table("s.a")
        tx.create_table("s.a", IDS)
        tx.table("s.a").append(pa.table({"id": [100]}))
    assert ids(cat.table("s.a")) == [100]
    assert ids(cat.table("s.a", version=old)) == [1, 2, 3]  # the old table, its own directory
    assert cat.snapshot().entry("s.a").path != cat.snapshot(old).entry("s.a").path


def test_a_table_created_and_dropped_in_one_transaction_leaves_nothing(cat: Catalog) -> None:
    with cat.transaction() as tx:
        tx.create_table("s.tmp", IDS)
        tx.table("s.tmp").append(pa.table({"id": [1]}))
        tx.drop_table("s.tmp")
        tx.table("s.b").append(pa.table({"id": [1]}))
    assert cat.tables("s") == ["s.a", "s.b"]


def test_an_exception_removes_every_staged_file_of_a_chain(cat: Catalog, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), cat.transaction() as tx:
        tx.table("s.a").append(pa.table({"id": [4, 5]}))
        tx.table("s.a").delete("id = 4")  # a deletion vector on the appended fragment
        staged = tx.staged_files()
        raise RuntimeError("stop")
    assert len(staged) >= 2
    if "://" not in staged[0]:
        assert not any(Path(u).exists() for u in staged)
    assert ids(cat.table("s.a")) == [1, 2, 3]


def test_a_chain_of_appends_is_rebuilt_on_a_moved_table(cat: Catalog) -> None:
    t1, t2 = cat.transaction(), cat.transaction()
    t1.table("s.a").append(pa.table({"id": [10]}))
    t2.table("s.a").append(pa.table({"id": [20]}))
    t2.table("s.a").append(pa.table({"id": [21]}))
    t1.commit()
    t2.commit()
    assert ids(cat.table("s.a")) == [1, 2, 3, 10, 20, 21]


def test_a_chain_naming_its_own_fragments_on_a_moved_table_is_rebased(cat: Catalog) -> None:
    """An append then a delete of a row it appended, published after a concurrent append took the fragment
    ids the chain had counted on: the chain's fragment is renumbered and the delete follows it (before, a
    retryable "names fragments by their old ids")."""
    files = {f.path for frag in cat.table("s.a").get_fragments() for f in frag.data_files()}
    t1, t2 = cat.transaction(), cat.transaction()
    t1.table("s.a").append(pa.table({"id": [10]}))
    t2.table("s.a").append(pa.table({"id": [20, 21]}))
    t2.table("s.a").delete("id = 21")
    t1.commit()
    t2.commit()
    table = cat.table("s.a")
    assert ids(table) == [1, 2, 3, 10, 20]
    assert ids(open_table(table.uri)) == [1, 2, 3, 10, 20]
    assert files <= {f.path for frag in table.get_fragments() for f in frag.data_files()}  # no data file rewritten
    deletions = sorted(p.name for p in (Path(table.uri) / "_deletions").iterdir())
    assert len(deletions) == 1  # the vector under the chain's old fragment id is removed after the publish
    fragment_ids = [frag.id for frag in table.manifest.fragments]
    assert len(set(fragment_ids)) == len(fragment_ids)


def test_a_chain_deleting_other_rows_of_a_fragment_another_deleted_from_is_rebased(cat: Catalog) -> None:
    """Append, then delete a row of the chain and a row of the table, after a concurrent append and delete
    of another row of the same fragment: both deletion vectors are united."""
    t1, t2 = cat.transaction(), cat.transaction()
    t1.table("s.a").append(pa.table({"id": [10]}))
    t1.table("s.a").delete("id = 1")
    t2.table("s.a").append(pa.table({"id": [20, 21]}))
    t2.table("s.a").delete("id = 21 OR id = 2")
    t2.table("s.a").append(pa.table({"id": [22]}))
    t1.commit()
    t2.commit()
    assert ids(cat.table("s.a")) == [3, 10, 20, 22]


def test_a_chain_deleting_a_row_another_deleted_is_retryable(cat: Catalog) -> None:
    t1, t2 = cat.transaction(), cat.transaction()
    t1.table("s.a").delete("id = 2")
    t2.table("s.a").append(pa.table({"id": [20]}))
    t2.table("s.a").delete("id = 2")
    t1.commit()
    with pytest.raises(RetryableConflictError, match="same rows"):
        t2.commit()
    assert ids(cat.table("s.a")) == [1, 3]
    assert not [p for p in (Path(cat.table("s.a").uri) / "_deletions").iterdir() if "-" in p.name][1:]


def test_a_merge_insert_chain_on_a_moved_table_is_rebased(cat: Catalog) -> None:
    t1, t2 = cat.transaction(), cat.transaction()
    t1.table("s.a").append(pa.table({"id": [10]}))
    t2.table("s.a").append(pa.table({"id": [20]}))
    builder = t2.table("s.a").merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
    builder.execute(pa.table({"id": [20, 3, 30]}))
    t1.commit()
    t2.commit()
    assert ids(cat.table("s.a")) == [1, 2, 3, 10, 20, 30]


def test_a_delete_then_append_chain_is_rebased_on_a_concurrent_delete(cat: Catalog) -> None:
    """The first change of a chain may be rebased when the rest are appends (the 8-process test's shape)."""
    files = {f.path for frag in cat.table("s.a").get_fragments() for f in frag.data_files()}
    t1, t2 = cat.transaction(), cat.transaction()
    t1.table("s.a").delete("id = 1")
    t2.table("s.a").delete("id = 2")
    t2.table("s.a").append(pa.table({"id": [9]}))
    t1.commit()
    t2.commit()
    assert ids(cat.table("s.a")) == [3, 9]
    assert files <= {f.path for frag in cat.table("s.a").get_fragments() for f in frag.data_files()}


def test_a_delete_matching_nothing_publishes_nothing(cat: Catalog) -> None:
    version = cat.latest_version
    with cat.transaction() as tx:
        tx.table("s.a").delete("id = 999")
        assert tx.table("s.a").to_table().num_rows == 3
    assert cat.latest_version == version  # no change, no catalog version
    t1, t2 = cat.transaction(), cat.transaction()
    t1.drop_table("s.a")
    t2.table("s.a").delete("id = 999")
    t2.table("s.b").append(pa.table({"id": [1]}))
    t1.commit()
    t2.commit()  # its no-op on the dropped table is no conflict
    assert cat.tables("s") == ["s.b"] and ids(cat.table("s.b")) == [1]


Steps = list[tuple[str, list[int]]]


def _random_chain(rng: random.Random, seen: set[int], next_id: list[int]) -> Steps:
    """Random appends and deletes, each delete naming rows this transaction sees (`seen`, updated)."""
    steps: Steps = []
    for _ in range(rng.randint(2, 4)):
        if rng.random() < 0.5 or not seen:
            rows = list(range(next_id[0], next_id[0] + rng.randint(1, 3)))
            next_id[0] += len(rows)
            steps.append(("append", rows))
            seen |= set(rows)
        else:
            rows = rng.sample(sorted(seen), rng.randint(1, min(3, len(seen))))
            steps.append(("delete", rows))
            seen -= set(rows)
    return steps


def _rows(steps: Steps, kind: str) -> set[int]:
    return {r for k, rows in steps if k == kind for r in rows}


@pytest.mark.slow
def test_random_concurrent_chains_match_a_plain_model(cat: Catalog) -> None:
    """Two transactions stage random append/delete chains on one snapshot; the second publishes after the
    first (rebased) and the table's rows equal a plain evaluation, or, only when both deleted a row of the
    table as it was or the first removed a fragment the second deleted from, it is a retryable conflict and
    nothing of it is visible."""
    rng = random.Random(31)
    outcomes = {"published": 0, "conflict": 0}
    for round_ in range(24):
        name = f"s.r{round_}"
        cat.create_table(name, IDS)
        fragments = [{100 * round_ + i for i in range(3)}, {100 * round_ + 3 + i for i in range(3)}]
        with cat.transaction() as tx:
            for rows in fragments:
                tx.table(name).append(pa.table({"id": sorted(rows)}))
        base = fragments[0] | fragments[1]
        next_id = [10_000 * (round_ + 1)]
        chains = []
        for tx in (t1 := cat.transaction(), t2 := cat.transaction()):
            steps = _random_chain(rng, set(base), next_id)
            for kind, rows in steps:
                if kind == "append":
                    tx.table(name).append(pa.table({"id": rows}))
                else:
                    tx.table(name).delete(f"id IN ({', '.join(map(str, rows))})")
            chains.append(steps)
        t1.commit()
        after_t1 = (base | _rows(chains[0], "append")) - _rows(chains[0], "delete")
        assert ids(cat.table(name)) == sorted(after_t1)
        gone = _rows(chains[0], "delete")
        ours = _rows(chains[1], "delete")
        may_conflict = bool(gone & ours & base) or any(rows <= gone and rows & ours for rows in fragments)
        expected = (after_t1 | _rows(chains[1], "append")) - ours
        try:
            t2.commit()
            outcomes["published"] += 1
        except RetryableConflictError:
            assert may_conflict, (round_, chains)
            expected = after_t1
            outcomes["conflict"] += 1
        assert ids(cat.table(name)) == sorted(expected), (round_, chains)
        assert ids(open_table(cat.table(name).uri)) == sorted(expected)
    assert outcomes["published"] >= 12, outcomes  # most pairs are rebased, not refused


def test_a_chain_delete_packing_its_own_and_an_older_fragment_keeps_the_older_ones_vector(cat: Catalog) -> None:
    """A chain's delete over its own new fragment and an older one writes one packed deletion file for both;
    the rebase moves the new fragment's vector under its new id and must leave the packed file, which the
    older fragment still names (removing it would bring its deleted row back, or leave a dangling file)."""
    t1, t2 = cat.transaction(), cat.transaction()
    t1.table("s.a").append(pa.table({"id": [10]}))
    t2.table("s.a").append(pa.table({"id": [20, 21]}))
    t2.table("s.a").delete("id = 21 OR id = 2")
    t1.commit()
    t2.commit()
    table = cat.table("s.a")
    assert ids(table) == [1, 3, 10, 20]
    assert ids(open_table(table.uri)) == [1, 3, 10, 20]
    report = verify(table)  # reads every deletion file from the store (a reader may have it cached)
    assert not report.problems, report.problems
