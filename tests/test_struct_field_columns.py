"""`columns=` lists naming struct fields by path beside system columns (`["st.x", "_rowid"]`): the same
columns, order and values as pylance on the same table, over random lists, filters and deletes."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import mvcc_core as mvcc

NAMES = ["id", "st.x", "st.s", "st", "_rowid", "_rowaddr", "_rowoffset"]


def _data(rng: random.Random, start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    structs = [{"x": rng.randrange(5), "s": rng.choice(["a", "b", None])} for _ in ids]
    return pa.table({"id": ids, "st": pa.array(structs, pa.struct([("x", pa.int64()), ("s", pa.string())]))})


@pytest.mark.parametrize("seed", range(3))
def test_struct_paths_beside_system_columns_as_pylance(tmp_path, seed: int) -> None:
    lance = pytest.importorskip("lance")
    rng = random.Random(seed)
    first = _data(rng, 0, 20)
    ours = mvcc.write_table(first, str(tmp_path / "mvcc"))
    theirs = lance.write_dataset(first, str(tmp_path / "lance"))
    for start in (20, 35):  # more fragments, then deletes in several of them
        more = _data(rng, start, 15)
        ours.append(more)
        theirs = lance.write_dataset(more, str(tmp_path / "lance"), mode="append")
    for sql in (f"id % 7 = {rng.randrange(7)}", f"id < {rng.randrange(5, 15)}"):
        ours.delete(sql)
        theirs.delete(sql)
    for _ in range(25):
        columns = rng.sample(NAMES, rng.randint(1, 4))
        if not any(c in ("id", "st.x", "st.s", "st") for c in columns):
            columns.append("st.x")
        where = rng.choice([None, "id > 12", "st.x = 2", "id % 2 = 0 AND st.x < 3"])
        with_row_id = rng.random() < 0.3
        mine = ours.to_table(columns=columns, filter=where, with_row_id=with_row_id)
        want = theirs.to_table(columns=columns, filter=where, with_row_id=with_row_id)
        assert mine.schema.names == want.schema.names, (columns, where, with_row_id)
        assert mine.to_pylist() == want.to_pylist(), (columns, where, with_row_id)
