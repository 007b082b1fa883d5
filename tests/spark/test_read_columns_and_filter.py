"""`mvcc_core.spark.read(columns=..., filter=...)` with a filter on columns the projection leaves out, by Spark's
Parquet reader and by the data source, compared with a plain evaluation of the rows in Python (an index on a
struct field prunes fragments on the driver)."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest

import mvcc_core
from mvcc_core.spark import read


def _rows(start: int, count: int, rng: random.Random) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "a": None if rng.random() < 0.1 else rng.randint(0, 9),
            "b": rng.randint(0, 9),
            "st": {"x": rng.randint(0, 9)},
        }
        for i in range(start, start + count)
    ]


# (Spark SQL, Python evaluation): pruned by the core's analysis, and three it cannot analyse (Spark's `<=>`, a
# column named in another case, a function only Spark has), for which every column is read
FILTERS = [
    ("b > 4", lambda r: r["b"] > 4),
    ("a = 3 OR b < 2", lambda r: r["a"] == 3 or r["b"] < 2),
    ("st.x >= 5", lambda r: r["st"]["x"] >= 5),
    ("a <=> 2", lambda r: r["a"] == 2),
    ("B > 6", lambda r: r["b"] > 6),
    ("pmod(b, 3) = 1", lambda r: r["b"] % 3 == 1),
]


@pytest.mark.parametrize("native", [None, False])
def test_a_filter_on_columns_left_out_of_the_projection(spark: Any, tmp_path: Any, native: bool | None) -> None:
    rng = random.Random(11)
    rows = _rows(0, 60, rng)
    t = mvcc_core.write_table(pa.Table.from_pylist(rows), str(tmp_path / "t"), max_rows_per_file=20)
    more = _rows(60, 20, rng)
    t.append(pa.Table.from_pylist(more))
    t.delete("id % 7 = 0")
    t.create_scalar_index("st.x", "BTREE")  # the driver's pruning asks it for `st.x >= 5`
    live = [r for r in rows + more if r["id"] % 7 != 0]
    for sql, keep in FILTERS:
        columns = rng.choice([["id"], ["id", "st"], ["st", "id"]])
        got = read(spark, t.uri, columns=columns, filter=sql, native=native)
        assert got.columns == columns, sql
        want = sorted(([r[c] for c in columns] for r in live if keep(r)), key=lambda v: v[columns.index("id")])
        rows_got = [[row[c].asDict() if c == "st" else row[c] for c in columns] for row in got.collect()]
        assert sorted(rows_got, key=lambda v: v[columns.index("id")]) == want, sql


def test_the_projection_still_refuses_an_unknown_column(spark: Any, tmp_path: Any) -> None:
    t = mvcc_core.write_table(pa.table({"id": [1, 2], "b": [3, 4]}), str(tmp_path / "t"))
    with pytest.raises(mvcc_core.SchemaError, match=r"no column\(s\) \['nope'\]"):
        read(spark, t.uri, columns=["nope"], filter="b > 3")
    assert [r["id"] for r in read(spark, t.uri, columns=["id"], filter="b > 3").collect()] == [2]
