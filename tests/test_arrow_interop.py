"""Other engines read a version in place: DuckDB and Polars through the Arrow PyCapsule stream
(`Table.__arrow_c_stream__`) and through `Table.to_pyarrow_dataset()`, which takes their projection and filter.

Differential: random tables built by random appends and deletes, random queries with the engines' own
predicates, each answered by the engine over mvcc and by the same engine over a plain Arrow table of the rows a
model of the table holds.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core.errors import InvalidOperationError

duckdb = pytest.importorskip("duckdb")
pl = pytest.importorskip("polars")

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("x", pa.float64())])


def _rows(rng: random.Random, start: int, n: int) -> list[dict[str, object]]:
    return [
        {
            "id": i,
            "v": None if rng.random() < 0.1 else f"s{rng.randrange(6)}",
            "x": None if rng.random() < 0.1 else round(rng.uniform(-50, 50), 1),
        }
        for i in range(start, start + n)
    ]


def _random_table(rng: random.Random, path: Path) -> tuple[mvcc.Table, list[dict[str, object]]]:
    """A table of several fragments with deletions, and the rows a model says it holds."""
    model = _rows(rng, 0, rng.randrange(20, 80))
    table = mvcc.write_table(pa.Table.from_pylist(model, SCHEMA), str(path))
    next_id = len(model)
    for _ in range(rng.randrange(2, 6)):
        if rng.random() < 0.6:
            more = _rows(rng, next_id, rng.randrange(1, 40))
            next_id += len(more)
            table.append(pa.Table.from_pylist(more, SCHEMA))
            model += more
        else:
            modulus, remainder = rng.randrange(2, 7), rng.randrange(2)
            table.delete(f"id % {modulus} = {remainder}")
            model = [r for r in model if r["id"] % modulus != remainder]
    return table, model


def _predicate(rng: random.Random) -> str:
    atoms = [
        lambda: f"id {rng.choice(['<', '<=', '>', '>=', '=', '<>'])} {rng.randrange(0, 200)}",
        lambda: f"x {rng.choice(['<', '>', '>='])} {rng.uniform(-50, 50):.1f}",
        lambda: f"v = 's{rng.randrange(6)}'",
        lambda: f"v IN ('s{rng.randrange(6)}', 's{rng.randrange(6)}')",
        lambda: rng.choice(["v IS NULL", "x IS NULL", "v IS NOT NULL", "x IS NOT NULL"]),
        lambda: f"id BETWEEN {rng.randrange(0, 100)} AND {rng.randrange(100, 200)}",
    ]
    out = rng.choice(atoms)()
    for _ in range(rng.randrange(0, 3)):
        out = f"({out}) {rng.choice(['AND', 'OR'])} {'NOT ' if rng.random() < 0.2 else ''}({rng.choice(atoms)()})"
    return out


@pytest.mark.parametrize("seed", range(6))
def test_duckdb_reads_the_live_rows_with_pushdown_as_over_the_model(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    table, model = _random_table(rng, tmp_path / "t")
    expected = pa.Table.from_pylist(model, SCHEMA)  # noqa: F841 - DuckDB finds these three by name
    dataset = table.to_pyarrow_dataset()  # noqa: F841
    for _ in range(12):
        where = _predicate(rng)
        columns = rng.choice(["id, v, x", "id", "v, x", "count(*) AS n, sum(id) AS s"])
        order = "" if columns.startswith("count") else " ORDER BY id"
        query = f"SELECT {columns} FROM {{}} WHERE {where}{order}"
        got_dataset = duckdb.sql(query.format("dataset")).fetchall()
        handle = table  # noqa: F841 - DuckDB finds it by name (`table` is a keyword)
        got_stream = duckdb.sql(query.format("handle")).fetchall()
        want = duckdb.sql(query.format("expected")).fetchall()
        assert got_dataset == want, query
        assert got_stream == want, query


@pytest.mark.parametrize("seed", range(4))
def test_polars_scans_the_dataset_lazily_as_over_the_model(tmp_path: Path, seed: int) -> None:
    rng = random.Random(100 + seed)
    table, model = _random_table(rng, tmp_path / "t")
    expected = pl.DataFrame(pa.Table.from_pylist(model, SCHEMA))
    lazy = pl.scan_pyarrow_dataset(table.to_pyarrow_dataset())
    for _ in range(8):
        bound = rng.randrange(0, 200)
        name = f"s{rng.randrange(6)}"
        condition = (pl.col("id") > bound) | (pl.col("v") == name)
        got = lazy.filter(condition).select("id", "x").sort("id").collect()
        want = expected.filter(condition).select("id", "x").sort("id")
        assert got.equals(want), (bound, name)
    assert pl.DataFrame(table).sort("id").equals(expected.sort("id"))


def test_the_dataset_keeps_its_version_and_the_stream_follows_the_handle(tmp_path: Path) -> None:
    table = mvcc.write_table(pa.table({"id": [1, 2, 3]}), str(tmp_path / "t"))
    dataset = table.to_pyarrow_dataset()
    table.append(pa.table({"id": [4]}))
    assert duckdb.sql("SELECT count(*) FROM dataset").fetchall() == [(3,)]
    handle = table  # noqa: F841 - DuckDB finds it by name
    assert duckdb.sql("SELECT count(*) FROM handle").fetchall() == [(4,)]
    assert dataset.count_rows() == 3
    assert dataset.head(2).num_rows == 2
    assert pa.table(table.scanner(columns=["id"], filter="id > 2")).column("id").to_pylist() == [3, 4]


def test_the_dataset_refuses_what_would_read_its_files_without_the_version(tmp_path: Path) -> None:
    table = mvcc.write_table(pa.table({"id": [1, 2, 3]}), str(tmp_path / "t"))
    table.delete("id = 2")
    dataset = table.to_pyarrow_dataset()
    with pytest.raises(InvalidOperationError, match="through its scanner"):
        dataset.get_fragments()
    with pytest.raises(InvalidOperationError, match="does not take"):
        dataset.scanner(columns=["id"], unknown_option=True)
    assert dataset.to_table(filter=pa.compute.field("id") > 0).column("id").to_pylist() == [1, 3]
