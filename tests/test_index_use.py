"""When a scan reads through an index and when it does not, and merge_insert's use of a key index: results
never depend on it."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mvcc_core as mvcc
from mvcc_core.read.bound_filter import BoundFilter, filter_cache_key
from mvcc_core.read.index_lookup import lookup
from mvcc_core.read.index_planner import choose_index
from mvcc_core.read.scan import Scan


def data(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "k": ids % 17, "v": ids * 0.5})


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> mvcc.Table:
    """40 indexed files of 25 rows (`k` repeats in every file), a deletion, an uncovered append."""
    t = mvcc.write_table(data(0, 1_000), str(tmp_path_factory.mktemp("use") / "t"), max_rows_per_file=25)
    t.create_scalar_index("id", "BTREE")
    t.create_scalar_index("k", "BTREE")
    t.delete("id % 9 = 4")
    t.append(data(1_000, 60))
    return t


def rows(t: mvcc.Table, predicate: str | pc.Expression, use_index: bool) -> list[tuple]:
    scan = Scan(t.state.store, t.manifest, filter=predicate, use_index=use_index, with_row_address=True)
    return sorted(tuple(r.values()) for r in scan.to_table().to_pylist())


spread_ids = sorted(random.Random(3).sample(range(1_100), 120))


@pytest.mark.parametrize(
    "predicate",
    [
        "k = 3",  # named rows in every file: the scan reads the files whole instead of a take per file
        "id < 30",  # two files: read through the index
        "id IN (" + ", ".join(map(str, spread_ids)) + ")",  # many values, many files
        "id IN (" + ", ".join(map(str, range(500, 520))) + ")",  # many values, one file
        pc.field("id").isin(pa.array(spread_ids[:40], pa.int64())),
        "k >= 0 AND id > 990",
    ],
)
def test_index_or_not_the_rows_are_the_same(table: mvcc.Table, predicate) -> None:
    assert rows(table, predicate, True) == rows(table, predicate, False)


def test_many_value_lookups_prune_the_index_like_one_value_at_a_time(table: mvcc.Table) -> None:
    """An IN list of many values is checked against the index's row groups in one vectorized pass; the
    row groups it keeps must hold every answer (compared with a lookup that reads the whole index)."""
    physical = pa.schema([("c0", pa.int64()), ("c1", pa.int64()), ("c2", pa.float64())])
    values = spread_ids + [5_000, -1]
    bound = BoundFilter.bind(pc.field("id").isin(pa.array(values, pa.int64())), table.schema, physical)
    choice = choose_index(bound, table.manifest)
    assert choice is not None and len(choice.bounds[0]) == len(values)
    pruned = lookup(table.state.store, choice.index, choice.expr, choice.bounds)
    whole = lookup(table.state.store, choice.index, choice.expr, None)
    assert np.array_equal(pruned, whole) and len(pruned) == len([v for v in spread_ids if v < 1_000])


@pytest.mark.parametrize("keys", ["spread", "clustered", "with nulls", "more than an IN list takes"])
def test_merge_insert_on_an_indexed_key_equals_the_unindexed_table(tmp_path, keys: str) -> None:
    base = data(0, 2_000)
    plain = mvcc.write_table(base, str(tmp_path / "plain"), max_rows_per_file=50)
    indexed = mvcc.write_table(base, str(tmp_path / "indexed"), max_rows_per_file=50)
    indexed.create_scalar_index("id", "BTREE")
    existing = {
        "spread": sorted(random.Random(5).sample(range(2_000), 300)),
        "clustered": list(range(1_900, 2_000)),
        "with nulls": sorted(random.Random(6).sample(range(2_000), 50)),
        "more than an IN list takes": list(range(2_000)),  # with 2,200 new keys: over 4,096, the keys' range
    }[keys]
    new = list(range(5_000, 7_200 if keys.startswith("more") else 5_040))
    ids = pa.array(existing + new + ([None, None] if keys == "with nulls" else []), pa.int64())
    source = pa.table({"id": ids, "k": pa.array([-1] * len(ids), pa.int64()), "v": pa.array([-2.0] * len(ids))})
    for t in (plain, indexed):
        t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(source)
    assert indexed.to_table().sort_by([("id", "ascending"), ("v", "ascending")]) == plain.to_table().sort_by(
        [("id", "ascending"), ("v", "ascending")]
    )
    assert indexed.count_rows("k = -1") == len(ids)


def test_a_filter_too_large_to_cache_still_uses_the_index(table: mvcc.Table) -> None:
    """merge_insert's key lists can be long: such a filter is bound per scan, not kept in the process's
    caches, and is still answered through the index."""
    many = pc.field("id").isin(pa.array(range(0, 20_000, 2), pa.int64()))
    assert filter_cache_key(many) is None and filter_cache_key(pc.field("id").isin(pa.array([1, 2]))) is not None
    assert Scan(table.state.store, table.manifest, filter=many).explain().index is not None
    assert rows(table, many, True) == rows(table, many, False)
