"""Randomized upserts with keys spread over the table, with and without a BTREE on the key, against a plain
evaluation in Python: deletion vectors, duplicate target keys, NULL keys, fragments the index does not cover
(appended or written by earlier upserts) and a compaction all come before or between the upserts."""

from __future__ import annotations

import random
import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core.ops.merge_insert_target import key_rows_from_index


def _key(k: int | None, key_type: pa.DataType) -> int | str | None:
    """The model's integer key as the table holds it (strings `k{n}`: not ordered as the integers are)."""
    return f"k{k}" if k is not None and pa.types.is_string(key_type) else k


def _table(rows: list[tuple], key_type: pa.DataType) -> pa.Table:
    keys = [_key(r[0], key_type) for r in rows]
    return pa.table({"id": pa.array(keys, key_type), "v": pa.array([r[1] for r in rows], pa.int64())})


def _rows(t: mvcc.Table) -> Counter:
    """The table's rows as the model's (integer key, value) pairs."""
    got = t.to_table()
    ids = [k if not isinstance(k, str) else int(k[1:]) for k in got.column("id").to_pylist()]
    return Counter(zip(ids, got.column("v").to_pylist(), strict=True))


def _upsert(model: list[tuple], source: list[tuple]) -> list[tuple]:
    """Every target row whose key a source row has becomes that source row; the other source rows are added."""
    by_key = {k: v for k, v in source if k is not None}
    matched = {k for k, _ in model if k in by_key}
    kept = [(k, by_key[k]) if k in by_key else (k, v) for k, v in model]
    return kept + [(k, v) for k, v in source if k is None or k not in matched]


@pytest.mark.parametrize(
    ("seed", "indexed", "key_type"),
    [
        (1, True, pa.int64()),
        (3, True, pa.int32()),
        (4, True, pa.string()),
        (1, False, pa.int64()),
    ],
)
def test_spread_upserts_match_a_plain_evaluation(tmp_path, seed: int, indexed: bool, key_type: pa.DataType) -> None:
    rng = random.Random(seed)
    model = [(i, i) for i in range(400)] + [(i, -i) for i in rng.sample(range(400), 20)]  # 20 keys held twice
    rng.shuffle(model)
    t = mvcc.write_table(_table(model, key_type), str(tmp_path / "t"), max_rows_per_file=20)
    if indexed:
        t.create_scalar_index("id", "BTREE")
    gone = set(rng.sample(range(400), 40))  # deletion vectors in covered fragments
    t.delete("id IN (" + ", ".join(repr(_key(k, key_type)) for k in sorted(gone)) + ")")
    model = [r for r in model if r[0] not in gone]
    appended = [(i, i) for i in range(400, 440)] + [(5, 55)]  # fragments the index does not cover
    t.append(_table(appended, key_type))
    model += appended
    if indexed:  # the upserts below read their target rows from the index
        keys = pa.chunked_array([pa.array([_key(k, key_type) for k in (1, 2, 500)], key_type)])
        assert key_rows_from_index(t.state.store, t.manifest, "id", keys) is not None
    for step in range(4):
        if step == 2:
            # moves rows: the index stops covering them, or (deferred) its addresses are translated on read
            t.optimize.compact_files(target_rows_per_fragment=100, defer_index_remap=seed % 2 == 1)
        keys = rng.sample(range(500), 60) + [None] * rng.randint(0, 2)  # spread, some new, maybe NULL
        source = [(k, 1_000 * (step + 1) + n) for n, k in enumerate(keys)]
        t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(_table(source, key_type))
        model = _upsert(model, source)
        assert _rows(mvcc.open_table(t.uri)) == Counter(model)


def test_an_index_written_by_the_previous_format_answers_the_same(tmp_path) -> None:
    """`fixtures/btree_dictionary_index`: 200 rows in 10 files, a BTREE written before its integer columns were
    delta-packed (dictionary pages), then `id % 7 = 3` deleted."""
    uri = str(tmp_path / "t")
    shutil.copytree(Path(__file__).parent / "fixtures" / "btree_dictionary_index", uri)
    t = mvcc.open_table(uri)
    keys = pa.chunked_array([pa.array([3, 4, 150, 151, 999], pa.int64())])
    assert key_rows_from_index(t.state.store, t.manifest, "id", keys).to_pylist() == [
        {"id": 4, "_rowaddr": 4},
        {"id": 151, "_rowaddr": (7 << 32) | 11},
    ]
    model = [(i, i * 10) for i in range(200) if i % 7 != 3]
    source = [(k, -k) for k in random.Random(4).sample(range(260), 60)]
    t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(_table(source, pa.int64()))
    got = mvcc.open_table(uri).to_table()
    expected = Counter(_upsert(model, source))
    assert Counter(zip(got.column("id").to_pylist(), got.column("v").to_pylist(), strict=True)) == expected
