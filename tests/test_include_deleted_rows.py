"""`include_deleted_rows=True` (pylance's scan option): the rows deletion vectors remove come back too, with their
stored values and `_rowid` / `_rowaddr` / `_rowoffset` null.

Randomized histories (appends of fragments of random sizes, random deletes, a BTREE index on a column some
filters read) are read with random columns, filters, limits and offsets, and compared with a plain evaluation: a
Python model of every stored row, its fragment, offset and whether it is live. The same operations are compared
with pylance, when it is installed.
"""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest

import mvcc_core as mvcc

SCHEMA = pa.schema([("id", pa.int64()), ("a", pa.int32()), ("s", pa.string())])
Row = dict[str, Any]


class Model:
    """Every stored row of the table, by fragment (in table order), with its live flag."""

    def __init__(self) -> None:
        self.fragments: list[tuple[int, list[Row], list[bool]]] = []  # (fragment id, rows, live)

    def append(self, frag_id: int, rows: list[Row]) -> None:
        self.fragments.append((frag_id, rows, [True] * len(rows)))

    def delete(self, keep: Any) -> None:
        for _, rows, live in self.fragments:
            for i, row in enumerate(rows):
                if live[i] and not keep(row):
                    live[i] = False
        self.fragments = [f for f in self.fragments if any(f[2])]  # a fragment without live rows is removed

    def rows(self) -> list[Row]:
        """Every stored row with `_rowid`, `_rowaddr` and `_rowoffset` (null on deleted rows), in table order."""
        out, position = [], 0
        for frag_id, rows, live in self.fragments:
            for offset, (row, alive) in enumerate(zip(rows, live, strict=True)):
                address = (frag_id << 32) | offset
                system = {"_rowid": address, "_rowaddr": address, "_rowoffset": position}
                out.append({**row, **(system if alive else dict.fromkeys(system))})
                position += alive
        return out


def _rows(start: int, count: int, rng: random.Random) -> list[Row]:
    return [
        {"id": i, "a": None if rng.random() < 0.1 else rng.randint(-5, 5), "s": rng.choice(["x", "yy", None])}
        for i in range(start, start + count)
    ]


def _filter(rng: random.Random) -> tuple[str | None, Any]:
    """A filter and its Python evaluation over a model row (SQL's NULL: the row is not kept)."""
    value = rng.randint(-5, 5)
    return rng.choice(
        [
            (None, lambda r: True),
            (f"a >= {value}", lambda r: r["a"] is not None and r["a"] >= value),
            (f"a = {value}", lambda r: r["a"] == value),
            ("s = 'x' OR a < 0", lambda r: r["s"] == "x" or (r["a"] is not None and r["a"] < 0)),
            ("_rowid IS NULL", lambda r: r["_rowid"] is None),
            (f"_rowaddr >= {1 << 32}", lambda r: r["_rowaddr"] is not None and r["_rowaddr"] >= 1 << 32),
            (f"_rowoffset < {value + 6}", lambda r: r["_rowoffset"] is not None and r["_rowoffset"] < value + 6),
        ]
    )


def _check(t: mvcc.Table, model: Model, rng: random.Random) -> None:
    every = model.rows()
    plain = ["id", "a", "s"]
    assert t.to_table(include_deleted_rows=True, with_row_id=True).to_pylist() == [
        {**{c: r[c] for c in plain}, "_rowid": r["_rowid"]} for r in every
    ]
    for _ in range(6):
        columns = rng.sample(plain, rng.randint(0, 3)) + rng.sample(["_rowid", "_rowaddr", "_rowoffset"], 1)
        rng.shuffle(columns)
        with_row_id = "_rowid" not in columns
        names = columns + (["_rowid"] if with_row_id else [])
        sql, keep = _filter(rng)
        want = [{c: r[c] for c in names} for r in every if keep(r)]
        got = t.to_table(columns=columns, filter=sql, with_row_id=with_row_id, include_deleted_rows=True)
        assert got.to_pylist() == want, (columns, sql)
        assert t.scanner(columns, sql, with_row_id=True, include_deleted_rows=True).count_rows() == len(want)
        limit, offset = rng.randint(0, len(want) + 2), rng.randint(0, len(want) + 2)
        sliced = t.to_table(
            columns=columns, filter=sql, with_row_id=with_row_id, limit=limit, offset=offset, include_deleted_rows=True
        )
        assert sliced.to_pylist() == want[offset : offset + limit]
        batches = list(t.to_batches(columns, sql, batch_size=3, with_row_id=with_row_id, include_deleted_rows=True))
        assert all(b.num_rows <= 3 for b in batches)
        assert [r for b in batches for r in b.to_pylist()] == want
    doubled = t.to_table(columns={"twice": "id * 2"}, with_row_id=True, include_deleted_rows=True)
    assert doubled.to_pylist() == [{"twice": r["id"] * 2, "_rowid": r["_rowid"]} for r in every]
    live = [{c: r[c] for c in plain} for r in every if r["_rowid"] is not None]
    assert t.to_table(include_deleted_rows=False).to_pylist() == live


@pytest.mark.parametrize("seed", range(3))
def test_include_deleted_rows_matches_a_plain_evaluation(seed: int, tmp_path) -> None:
    rng = random.Random(seed)
    model = Model()
    first = _rows(0, rng.randint(1, 30), rng)
    t = mvcc.write_table(pa.Table.from_pylist(first, schema=SCHEMA), str(tmp_path / "t"))
    model.append(t.manifest.fragments[-1].id, first)
    next_id = len(first)
    for step in range(6):
        if rng.random() < 0.5:
            rows = _rows(next_id, rng.randint(1, 30), rng)
            next_id += len(rows)
            t.append(pa.Table.from_pylist(rows, schema=SCHEMA))
            model.append(t.manifest.fragments[-1].id, rows)
        k, r = rng.randint(2, 5), rng.randint(0, 4)
        t.delete(f"id % {k} = {r}")
        model.delete(lambda row, k=k, r=r: row["id"] % k != r)
        if step == 2:
            t.create_scalar_index("a", "BTREE")  # an index holds only live rows: it must not be asked
        assert [f.id for f in t.manifest.fragments] == [f[0] for f in model.fragments]
        _check(t, model, rng)


def test_include_deleted_rows_needs_the_row_id_column(tmp_path) -> None:
    t = mvcc.write_table(pa.table({"id": [1, 2, 3]}), str(tmp_path / "t"))
    t.delete("id = 2")
    with pytest.raises(ValueError, match="needs the _rowid column and with_row_id is false"):
        t.to_table(include_deleted_rows=True)
    with pytest.raises(ValueError, match="needs the _rowid column and with_row_id is false"):
        t.to_table(include_deleted_rows=True, with_row_address=True)
    with pytest.raises(TypeError, match="include_deleted_rows must be True or False"):
        t.to_table(include_deleted_rows="yes", with_row_id=True)
    assert t.to_table(columns=["id", "_rowid"], include_deleted_rows=True)["_rowid"].to_pylist() == [0, None, 2]


def test_include_deleted_rows_keeps_stable_row_ids_of_live_rows(tmp_path) -> None:
    t = mvcc.write_table(pa.table({"id": list(range(6))}), str(tmp_path / "t"), enable_stable_row_ids=True)
    t.delete("id IN (1, 4)")
    t.update({"id": "id + 100"}, where="id = 2")  # moves the row: its old copy is a deleted row
    got = t.to_table(include_deleted_rows=True, with_row_id=True).to_pydict()
    live = t.to_table(with_row_id=True).to_pydict()
    assert sorted(i for i in got["_rowid"] if i is not None) == sorted(live["_rowid"])
    deleted = [v for v, i in zip(got["id"], got["_rowid"], strict=True) if i is None]
    assert sorted(deleted) == [1, 2, 4]


def test_include_deleted_rows_as_pylance(tmp_path) -> None:
    lance = pytest.importorskip("lance")
    rng = random.Random(7)
    rows = _rows(0, 40, rng)
    first, second = pa.Table.from_pylist(rows[:25], schema=SCHEMA), pa.Table.from_pylist(rows[25:], schema=SCHEMA)
    theirs = lance.write_dataset(first, str(tmp_path / "lance"))
    theirs.insert(second)
    ours = mvcc.write_table(first, str(tmp_path / "mvcc"))
    ours.append(second)
    for t in (theirs, ours):
        t.create_scalar_index("a", "BTREE")  # before the deletes: pylance's index scan then holds the deleted rows
    for predicate in ("id % 3 = 0", "a < -2"):
        theirs.delete(predicate)
        ours.delete(predicate)
    cases: list[dict[str, Any]] = [
        {"with_row_id": True},
        {"with_row_id": True, "with_row_address": True},
        {"columns": ["a", "_rowaddr", "_rowid"]},
        {"columns": ["s", "_rowid"], "filter": "a >= 0"},
        {"columns": ["id", "_rowid"], "filter": "a = 3 OR a = -3"},
        {"columns": ["id", "_rowid"], "filter": "_rowid IS NULL"},
        {"columns": {"x": "id + 1"}, "with_row_id": True},
        {"with_row_id": True, "limit": 7, "offset": 20},
    ]
    for case in cases:
        # (pylance refuses deleted rows under late materialization: "not supported when taking rows from an input
        # plan"; mvcc has no late materialization, the option is accepted and changes nothing)
        case = {**case, "include_deleted_rows": True, "late_materialization": False}
        assert ours.to_table(**case) == theirs.to_table(**case), case
    with pytest.raises(ValueError):
        theirs.to_table(include_deleted_rows=True)


def test_include_deleted_rows_of_fragments_of_several_files(tmp_path) -> None:
    t = mvcc.write_table(pa.table({"id": list(range(6))}), str(tmp_path / "t"), max_rows_per_file=3)
    t.delete("id IN (1, 4)")
    t.add_columns({"z": "id * 2"})  # a second data file per fragment, computed for every stored row
    assert all(len(f.files) == 2 for f in t.manifest.fragments)
    got = t.to_table(columns=["z", "_rowid"], filter="id > 0", include_deleted_rows=True).to_pydict()
    assert got == {"z": [2, 4, 6, 8, 10], "_rowid": [None, 2, 1 << 32, None, (1 << 32) + 2]}
