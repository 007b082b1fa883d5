"""A pylance user's script runs unchanged against mvcc_core.

The same script body runs against pylance (`import lance`, when installed) and against mvcc_core, and the
results are compared where the semantics are the same. Where pylance differs, a test below asserts both
sides of the difference documented in docs/reference/pylance_compat.md, so that a change on either side is noticed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import mvcc_core as mvcc

try:
    import lance
except ImportError:  # pragma: no cover - pylance is in the dev environment
    lance = None

needs_lance = pytest.mark.skipif(lance is None, reason="pylance is not installed")

# (write_dataset, dataset): the only two names that differ between the libraries
MVCC = (mvcc.write_table, mvcc.open_table)
LANCE = (lance.write_dataset, lance.dataset) if lance is not None else None


def data(n: int = 20) -> pa.Table:
    return pa.table({"id": pa.array(range(n), pa.int64()), "v": [f"v{i}" for i in range(n)]})


def script(write: Callable[..., Any], dataset: Callable[..., Any], path: Path) -> dict[str, Any]:
    """What a pylance user writes, with pylance's names only. Four fragments of five rows."""
    out: dict[str, Any] = {}
    ds = write(data(), path, mode="create", max_rows_per_file=5)
    out["fresh"] = (ds.version, ds.latest_version, ds.version == ds.latest_version)
    out["deleted"] = dict(ds.delete("id IN (1, 6, 7, 13)"))
    out["num_deleted_rows"] = ds.delete("id = 2")["num_deleted_rows"]
    ds.insert(pa.table({"id": pa.array([100, 101], pa.int64()), "v": ["a", "b"]}))
    out["after_insert"] = (ds.version, ds.latest_version, ds.version == ds.latest_version, ds.count_rows())
    # reads by position, across fragments with deletions
    out["head"] = ds.head(3).to_pylist()
    out["head_past_end"] = ds.head(1000).num_rows
    out["take"] = ds.take([7, 0, 3, 16, 3]).to_pylist()
    out["take_columns"] = ds.take([4, 1], columns=["v"]).to_pylist()
    out["limit_offset"] = ds.to_table(filter="id > 2", limit=6, offset=3).to_pylist()
    out["limit"] = ds.to_table(limit=4).to_pylist()
    out["offset"] = ds.to_table(offset=14).to_pylist()
    out["offset_past_end"] = ds.to_table(filter="id > 2", offset=1000).num_rows
    out["columns_limit"] = ds.to_table(columns=["id"], filter="v = 'v9' OR id >= 100", limit=2).to_pylist()
    # time travel
    old = ds.checkout_version(1)
    out["old"] = (old.version, old.count_rows(), old.version == old.latest_version, ds.version)
    # a scalar index, then a filter it answers
    ds.create_scalar_index("id", "BTREE")
    out["indices"] = [(i["name"], i["fields"]) for i in ds.list_indices()]
    out["indexed"] = ds.to_table(filter="id = 8").to_pylist()
    # update: the result object; rows may move, so compare as a set
    out["updated"] = dict(ds.update({"v": "'upd'"}, where="id >= 17"))
    out["rows_after_update"] = sorted(ds.to_table().to_pylist(), key=lambda r: r["id"])
    # history
    versions = ds.versions()
    out["versions"] = [v["version"] for v in versions]
    out["timestamps_ordered"] = all(
        a["timestamp"] <= b["timestamp"] for a, b in zip(versions, versions[1:], strict=False)
    )
    out["metadata_is_dict"] = all(isinstance(v["metadata"], dict) for v in versions)
    txns = ds.get_transactions(3)
    out["transactions"] = [(t.read_version, type(t.operation).__name__, isinstance(t.uuid, str)) for t in txns]
    out["all_transactions"] = len(ds.get_transactions(100))
    reopened = dataset(path)
    out["reopened"] = (reopened.version, reopened.latest_version, reopened.count_rows())
    out["reopened_old"] = dataset(path, version=2).count_rows()
    return out


EXPECTED_MVCC = {
    "fresh": (1, 1, True),
    "deleted": {"num_deleted_rows": 4},
    "num_deleted_rows": 1,
    "after_insert": (4, 4, True, 17),
    "old": (1, 20, False, 4),
    "indices": [("id_idx", ["id"])],
    "updated": {"num_rows_updated": 5},
    "versions": [1, 2, 3, 4, 5, 6],
    "transactions": [(5, "Update", True), (4, "CreateIndex", True), (3, "Append", True)],
    "all_transactions": 6,
    "reopened": (6, 6, 17),
    "reopened_old": 16,
}


def test_script_runs_against_mvcc(tmp_path: Path) -> None:
    out = script(*MVCC, tmp_path / "t")
    for key, value in EXPECTED_MVCC.items():
        assert out[key] == value, key
    live = [i for i in range(20) if i not in (1, 2, 6, 7, 13)] + [100, 101]
    row = {i: {"id": i, "v": f"v{i}" if i < 100 else "ab"[i - 100]} for i in live}
    assert out["head"] == [row[0], row[3], row[4]]
    assert out["take"] == [row[live[p]] for p in (7, 0, 3, 16, 3)]
    assert out["take_columns"] == [{"v": row[live[4]]["v"]}, {"v": row[live[1]]["v"]}]
    assert out["limit_offset"] == [row[i] for i in [i for i in live if i > 2][3:9]]
    assert out["limit"] == [row[i] for i in live[:4]] and out["offset"] == [row[i] for i in live[14:]]
    assert out["offset_past_end"] == 0 and out["head_past_end"] == 17
    assert out["columns_limit"] == [{"id": 9}, {"id": 100}]
    assert out["indexed"] == [row[8]]
    assert out["rows_after_update"] == [{**row[i], "v": "upd"} if i >= 17 else row[i] for i in live]


@needs_lance
def test_same_script_same_results_in_pylance(tmp_path: Path) -> None:
    """The strongest proof: pylance itself gives the same answers to the same script."""
    ours = script(*MVCC, tmp_path / "mvcc")
    theirs = script(*LANCE, tmp_path / "lance")
    differ = {"indices"}  # pylance adds an index's type and fragments; only name and fields are compared below
    for key in sorted(set(ours) - differ):
        assert ours[key] == theirs[key], key
    assert [(i["name"], i["fields"]) for i in lance.dataset(tmp_path / "lance").list_indices()] == ours["indices"]


def test_take_out_of_range_raises_index_error(tmp_path: Path) -> None:
    t = mvcc.write_table(data(5), tmp_path / "t")
    t.delete("id = 0")
    with pytest.raises(IndexError, match="4"):
        t.take([0, 4])
    with pytest.raises(IndexError):
        t.take([-1])
    assert t.take([]).num_rows == 0 and t.take([]).schema == t.schema


# ---- documented differences (docs/reference/pylance_compat.md), both sides asserted -------------------------


@needs_lance
def test_difference_take_out_of_range_error_type(tmp_path: Path) -> None:
    ds = lance.write_dataset(data(5), tmp_path / "lance")
    with pytest.raises(OSError):  # noqa: PT011 - pylance raises a plain OSError from Rust
        ds.take([5])
    with pytest.raises(IndexError):
        mvcc.write_table(data(5), tmp_path / "mvcc").take([5])


@needs_lance
def test_difference_delete_matching_nothing(tmp_path: Path) -> None:
    ds = lance.write_dataset(data(5), tmp_path / "lance")
    assert ds.delete("id > 100") == {"num_deleted_rows": 0} and ds.version == 2  # pylance commits an empty Delete
    t = mvcc.write_table(data(5), tmp_path / "mvcc")
    assert t.delete("id > 100") == {"num_deleted_rows": 0} and t.version == 1  # mvcc commits nothing
    assert t.update({"v": "'x'"}, where="id > 100") == {"num_rows_updated": 0} and t.version == 1


@needs_lance
def test_difference_version_metadata_and_timestamps(tmp_path: Path) -> None:
    props = {"run": "42"}
    ds = lance.write_dataset(data(5), tmp_path / "lance", commit_message="load", transaction_properties=props)
    v = ds.versions()[0]
    assert v["metadata"]["total_rows"] == "5"  # pylance: the manifest's summary
    assert v["timestamp"].tzinfo is None  # pylance: naive local time
    txn = ds.get_transactions(1)[0]
    assert txn.transaction_properties == {**props, "__lance_commit_message": "load"}

    t = mvcc.write_table(data(5), tmp_path / "mvcc", commit_message="load", transaction_properties=props)
    v = t.versions()[0]
    assert v["metadata"] == props == v.transaction_properties  # mvcc: the transaction's properties
    assert v["timestamp"].tzinfo is not None and v["timestamp"].utcoffset().total_seconds() == 0
    assert isinstance(v["timestamp"], datetime) and v["message"] == v.message == "load"
    txn = t.get_transactions(1)[0]
    assert txn.transaction_properties == props and txn.message == "load"


@needs_lance
def test_difference_insert_returns(tmp_path: Path) -> None:
    ds = lance.write_dataset(data(5), tmp_path / "lance")
    assert ds.insert(data(2)) is None and ds.version == 2
    t = mvcc.write_table(data(5), tmp_path / "mvcc")
    assert t.insert(data(2)) is t and t.version == 2  # mvcc returns the handle (chainable)
    assert t.insert(data(1), mode="overwrite").count_rows() == 1
    with pytest.raises(ValueError, match="insert mode"):
        t.insert(data(1), mode="create")


@needs_lance
def test_difference_positional_limit(tmp_path: Path) -> None:
    ds = lance.write_dataset(data(5), tmp_path / "lance")
    assert ds.to_table(None, None, 2).num_rows == 2  # pylance: limit is the third positional
    t = mvcc.write_table(data(5), tmp_path / "mvcc")
    with pytest.raises(TypeError):
        t.to_table(None, None, 2)  # mvcc: limit and offset are keyword-only


def test_mvcc_extras_kept(tmp_path: Path) -> None:
    """What mvcc keeps beyond pylance: datetime checkout, dry_run cleanup, properties on every write."""
    t = mvcc.write_table(data(5), tmp_path / "t")
    first = t.timestamp
    t.append(data(1), transaction_properties={"k": "v"})
    assert t.checkout_version(first).version == 1  # a datetime: the version current then
    stats = t.cleanup_old_versions(older_than=timedelta(0), dry_run=True)
    assert stats.old_versions == 1 and stats.removed_versions == (1,)
    assert [v.version for v in t.versions()] == [1, 2]  # dry run: nothing removed
    assert t.versions()[-1]["metadata"] == {"k": "v"}
    t.tags.create("v1", 1)
    assert t.checkout_version("v1").count_rows() == 5


# ---- constant filters: pylance is the authority ----------------------------------------------------

CONSTANT_FILTERS = [
    "true",
    "false",
    "NOT true",
    "1 = 1",
    "1 = 2",
    "true AND id > 3",
    "NOT NULL",
    "NULL OR id > 12",
    "CAST(NULL AS BOOLEAN)",
    "id > 3 OR true",
]


def constant_filter_answers(write: Callable[..., Any], path: Path, with_deletion: bool) -> dict[str, Any]:
    """Every constant filter through to_table, count_rows, a scanner, an index-backed scan, update and
    delete; four fragments, one with a deletion vector when asked."""
    out: dict[str, Any] = {}
    for number, sql in enumerate(CONSTANT_FILTERS):
        ds = write(data(), path / str(number), mode="create", max_rows_per_file=5)
        if with_deletion:
            ds.delete("id = 6")
        out[f"to_table {sql}"] = sorted(ds.to_table(filter=sql)["id"].to_pylist())
        out[f"count_rows {sql}"] = ds.count_rows(filter=sql)
        out[f"scanner {sql}"] = sorted(ds.scanner(columns=["id"], filter=sql).to_table()["id"].to_pylist())
        ds.create_scalar_index("id", "BTREE")
        out[f"indexed {sql}"] = sorted(ds.to_table(columns=["v"], filter=sql)["v"].to_pylist())
        out[f"update {sql}"] = ds.update({"v": "'u'"}, where=sql)["num_rows_updated"]
        out[f"delete {sql}"] = ds.delete(sql)["num_deleted_rows"]
        out[f"left {sql}"] = sorted(ds.to_table()["id"].to_pylist())
    return out


@needs_lance
@pytest.mark.parametrize("with_deletion", [False, True], ids=["plain", "with-deletion"])
def test_constant_filters_answer_as_pylance(tmp_path: Path, with_deletion: bool) -> None:
    ours = constant_filter_answers(mvcc.write_table, tmp_path / "mvcc", with_deletion)
    theirs = constant_filter_answers(lance.write_dataset, tmp_path / "lance", with_deletion)
    assert ours == theirs
    assert ours["delete true"] == (19 if with_deletion else 20) and ours["left true"] == []


@needs_lance
def test_difference_bare_null_filter_and_constant_columns(tmp_path: Path) -> None:
    """A bare `NULL` filter: pylance refuses it (not a boolean), mvcc reads it as SQL's unknown (no row
    matches, as `CAST(NULL AS BOOLEAN)` in both). A column of constants: pylance refuses a scan that reads
    no column, mvcc gives the constant on every row."""
    ds = lance.write_dataset(data(5), tmp_path / "lance")
    with pytest.raises(ValueError, match="does not return a boolean"):
        ds.to_table(filter="NULL")
    with pytest.raises(ValueError, match="at least one column"):
        ds.to_table(columns={"one": "1"})
    t = mvcc.write_table(data(5), tmp_path / "mvcc")
    assert t.to_table(filter="NULL").num_rows == 0 and t.delete("NULL") == {"num_deleted_rows": 0}
    assert t.to_table(columns={"one": "1"}).to_pydict() == {"one": [1] * 5}


# ---- memory:// --------------------------------------------------------------------------------------

# the directories a table at the root of the memory store writes (removed after the tests that make one)
ROOT_TABLE_DIRECTORIES = ["_versions", "_transactions", "data", "_deletions", "_indices", "_refs"]


@pytest.fixture
def memory_root() -> Any:
    """`memory://`, the root of the process-wide memory store; the table made there is removed afterwards."""
    from fsspec.implementations.memory import MemoryFileSystem

    yield "memory://"
    for directory in ROOT_TABLE_DIRECTORIES:
        if MemoryFileSystem().exists(f"/{directory}"):
            MemoryFileSystem().rm(f"/{directory}", recursive=True)


@pytest.mark.parametrize("rows", [0, 5], ids=["empty", "rows"])
def test_memory_root_takes_commits(memory_root: str, rows: int) -> None:
    """A table at `memory://` (no path) lists its own versions: writes after the first one commit."""
    t = mvcc.write_table(data(5).slice(0, rows), memory_root)
    t.append(data(3))
    assert t.delete("id = 1")["num_deleted_rows"] == 1 + (rows > 1)
    t.delete("true")
    assert (t.version, t.count_rows()) == (4, 0)
    assert [v["version"] for v in t.versions()] == [1, 2, 3, 4]


@needs_lance
def test_difference_memory_store_is_shared_per_process(memory_root: str, memory_uri: str) -> None:
    """pylance: each `memory://` handle is a store of its own. mvcc: one store per process, so a table
    written to `memory://x` is there for `open_table("memory://x")` (Dagster assets, the CLI in-process)."""
    ds = lance.write_dataset(data(5), "memory://")
    ds.delete("true")
    with pytest.raises(ValueError, match="not found"):
        lance.dataset("memory://")
    assert lance.write_dataset(data(5), "memory://").version == 1  # a new, separate store

    t = mvcc.write_table(data(5), memory_root)
    assert mvcc.open_table("memory://").count_rows() == 5
    with pytest.raises(mvcc.TableExistsError):
        mvcc.write_table(data(5), "memory://")
    mvcc.write_table(data(2), memory_uri)
    assert mvcc.open_table(memory_uri).count_rows() == 2 and t.count_rows() == 5


# ---- columns={name: SQL expression} -----------------------------------------------------------------


def expression_data(n: int = 40) -> pa.Table:
    rng = random.Random(5)
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "a": pa.array([None if rng.random() < 0.2 else rng.randint(-5, 5) for _ in range(n)], pa.int64()),
            "f": pa.array([None if rng.random() < 0.2 else round(rng.uniform(-3, 3), 2) for _ in range(n)]),
            "s": pa.array([None if rng.random() < 0.2 else rng.choice("xyz") + rng.choice("aB") for _ in range(n)]),
        }
    )


def random_value_expression(rng: random.Random, depth: int = 0) -> str:
    """A SQL value over expression_data()'s columns that pylance and mvcc both evaluate."""
    if depth >= 2 or rng.random() < 0.3:
        return rng.choice(["id", "a", "a", f"{rng.randint(-4, 4)}", f"coalesce(a, {rng.randint(0, 3)})", "abs(a)"])
    kind = rng.randrange(4)
    left, right = random_value_expression(rng, depth + 1), random_value_expression(rng, depth + 1)
    if kind == 0:
        return f"({left}) {rng.choice(['+', '-', '*'])} ({right})"
    if kind == 1:
        return f"({left}) % {rng.choice([2, 3, -4])}"
    if kind == 2:
        return f"({left}) / {rng.choice([2, 3, -5])}"
    return f"-({left})"


def random_condition(rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        return f"a {rng.choice(['=', '<>', '<', '>='])} {rng.randint(-3, 3)}"
    if kind == 1:
        return f"a {rng.choice(['IN', 'NOT IN'])} ({rng.randint(-3, 3)}, {rng.randint(-3, 3)})"
    if kind == 2:
        return f"s LIKE '{rng.choice(['x%', '%a', '_B'])}'"
    if kind == 3:
        return f"f {rng.choice(['<', '>'])} {round(rng.uniform(-2, 2), 1)} OR a IS NULL"
    if kind == 4:
        return f"NOT (a BETWEEN {rng.randint(-4, 0)} AND {rng.randint(0, 4)})"
    return f"CAST(f AS BIGINT) = {rng.randint(-2, 2)}"


def projections(seed: int, count: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        columns = {"x": random_value_expression(rng), "c": random_condition(rng)}
        columns[rng.choice(["id", "s_lower"])] = rng.choice(["id", "lower(s)", "upper(s)", "f * 2"])
        out.append(columns)
    return out


def projected(write: Callable[..., Any], path: Path, seed: int) -> list[Any]:
    ds = write(expression_data(), path, mode="create", max_rows_per_file=15)
    ds.delete("id % 6 = 1")
    out = []
    for columns in projections(seed, 25):
        out.append(ds.to_table(columns=columns).to_pydict())
        out.append(ds.to_table(columns=columns, filter="id > 7", limit=9, offset=2).to_pydict())
        out.append(ds.take([0, 5, 3], columns=columns).to_pydict())
    ds.create_scalar_index("a", "BTREE")
    out.append(ds.to_table(columns={"twice": "a * 2", "id": "id"}, filter="a = 2").to_pydict())
    out.append(ds.head(3, columns={"n": "id + 1"}).to_pydict())
    batches = list(ds.to_batches(columns={"n": "id + a"}, filter="a IS NOT NULL"))
    out.append(pa.Table.from_batches(batches).to_pydict())
    out.append(ds.to_table(columns={"n": "id * 2"}, with_row_address=True).to_pydict())
    return out


def close(ours: Any, theirs: Any) -> bool:
    if isinstance(ours, dict):
        return ours.keys() == theirs.keys() and all(close(ours[k], theirs[k]) for k in ours)
    if isinstance(ours, list):
        return len(ours) == len(theirs) and all(close(a, b) for a, b in zip(ours, theirs, strict=True))
    if isinstance(ours, float) and isinstance(theirs, float):
        return math.isclose(ours, theirs, rel_tol=1e-12, abs_tol=1e-12)
    return ours == theirs and type(ours) is type(theirs)


@needs_lance
@pytest.mark.parametrize("seed", range(2))
def test_column_expressions_evaluate_as_pylance(tmp_path: Path, seed: int) -> None:
    """`columns={name: SQL}` (to_table, take, head, to_batches, with a filter, an index, limit and offset,
    row addresses, deletion vectors): the values pylance computes, NULLs and SQL's `%` and `/` included."""
    ours = projected(mvcc.write_table, tmp_path / "mvcc", seed)
    theirs = projected(lance.write_dataset, tmp_path / "lance", seed)
    for index, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        assert close(a, b), (index, a, b)


def test_column_expressions_are_never_ignored(tmp_path: Path) -> None:
    """An alias that is also a column name computes the expression; the filter reads the table's column."""
    t = mvcc.write_table(data(6), tmp_path / "t")
    assert t.to_table(columns={"id": "id * 2"}, filter="id > 3").to_pydict() == {"id": [8, 10]}
    assert t.scanner(columns={"v": "upper(v)", "id": "id"}).output_schema.names == ["v", "id"]
    assert t.to_table(columns={"one": "1"}, filter="id < 2").to_pydict() == {"one": [1, 1]}


@pytest.mark.parametrize(
    ("columns", "error", "words"),
    [
        (
            {"x": "idd + 1"},
            mvcc.errors.PredicateError,
            ["invalid expression 'idd + 1' for column 'x'", "did you mean 'id'"],
        ),
        ({"x": "id +"}, mvcc.errors.PredicateError, ["for column 'x'", "      ^ expected an expression after '+'"]),
        ({"x": 3}, TypeError, ["the expression for column 'x' must be a SQL string, got int 3"]),
        ({"": "id"}, TypeError, ["output column name must be a non-empty string"]),
        ({"_rowaddr": "id"}, ValueError, ["'_rowaddr' is the name of the row id / row address column"]),
        ("id", TypeError, ["not the str 'id'"]),
        (["idd"], mvcc.SchemaError, ["unknown column 'idd' (did you mean 'id'?)"]),
    ],
)
def test_bad_columns_say_what_is_wrong(tmp_path: Path, columns: Any, error: type, words: list[str]) -> None:
    t = mvcc.write_table(data(3), tmp_path / "t")
    with pytest.raises(error) as info:
        t.to_table(columns=columns, with_row_address=True)
    for word in words:
        assert word in str(info.value)


# ---- What pylance's own tests showed, each compared with pylance on the same input ---------


def _both(tmp_path: Path, body: Callable[[Callable[..., Any], Callable[..., Any], Path], Any]) -> tuple[Any, Any]:
    """`body(write, dataset, path)` run with mvcc's names and with pylance's; both results."""
    return body(*MVCC, tmp_path / "mvcc"), body(*LANCE, tmp_path / "lance")


@needs_lance
def test_write_inputs_as_pylance(tmp_path: Path) -> None:
    import pyarrow.dataset as pa_ds

    schema = pa.schema([pa.field("a", pa.float64()), pa.field("b", pa.int64())])
    int32 = pa.table({"a": [1.0, 2.0], "b": pa.array([20, 30], pa.int32())})

    def body(write: Callable[..., Any], dataset: Callable[..., Any], path: Path) -> Any:
        out = [write(iter(int32.to_batches()), path / "cast", schema=schema).to_table()]
        out.append(write(pa_ds.dataset(int32), path / "ds").to_table())
        t = write(pa.table({"a": [1.0], "b": [1]}), path / "t", data_storage_version="stable", max_rows_per_group=8)
        write(pa.table({"a": [2.0], "b": [2]}), t, mode="append")  # a handle as the target
        t = dataset(path / "t")
        t.insert(pa.table({"a": [3.0]}))  # a missing nullable column is filled with nulls
        t.delete("a = 1.0")
        out.append(t.to_table())
        return out

    ours, theirs = _both(tmp_path, body)
    assert ours == theirs
    assert ours[2].column("b").to_pylist() == [2, None]


@needs_lance
def test_system_columns_as_pylance(tmp_path: Path) -> None:
    def body(write: Callable[..., Any], dataset: Callable[..., Any], path: Path) -> Any:
        t = write(pa.table({"a": range(40)}), path, max_rows_per_file=10)
        t.delete("a IN (3, 11, 12, 25)")
        return [
            t.scanner(columns=["_rowoffset", "a", "_rowid", "_rowaddr"]).to_table(),
            t.to_table(columns=["_rowaddr", "_rowoffset"], filter="a > 20"),
            t.scanner(columns=["a", "_rowid"], with_row_address=True).to_table(),
            t.scanner(with_row_id=True).to_table(),
            t.scanner(columns=[], with_row_id=True).to_table().schema,
            t.take([0, 20, 5], columns=["_rowoffset", "a"]).to_pydict(),  # pylance's take: a non-null offset
        ]

    ours, theirs = _both(tmp_path, body)
    for mine, pylance_result in zip(ours, theirs, strict=True):
        assert mine == pylance_result


@needs_lance
def test_filter_functions_and_nested_paths_as_pylance(tmp_path: Path) -> None:
    rows = pa.table(
        {
            "s": ["aaa", "cab", "bca", None, "xcz"],
            "bin": pa.array([b"abc", None, b"x", b"abc", b""], pa.binary()),
            "genres": [["action", "comedy"], ["anime", "drama"], ["adventure"], None, []],
            "st": [{"x": i, "y": i % 2 == 0} for i in range(5)],
            "ls": [[{"x": i}, {"x": 10 * i}] for i in range(5)],
            "d": pa.array([datetime(2020, 1, 1).date()] * 4 + [datetime(2999, 1, 1).date()], pa.date32()),
        }
    )
    filters = [
        "bin = X'616263'",
        "regexp_match(s, 'c.+')",
        "array_has_any(genres, ['anime', 'adventure'])",
        "array_has_all(genres, ['anime', 'drama'])",
        "array_contains(genres, 'comedy')",
        "NOT array_has(genres, 'drama')",
        "d <= current_date()",
        "st.x >= 2 AND st.y",
    ]

    def body(write: Callable[..., Any], dataset: Callable[..., Any], path: Path) -> Any:
        t = write(rows, path)
        out = [t.to_table(columns=["s"], filter=f).column("s").to_pylist() for f in filters]
        out.append(t.to_table(columns=["st.x", "s"]).to_pylist())
        out.append(t.to_table(columns={"second": "ls[2]['x']", "y": "st['y']"}).to_pylist())
        return out

    ours, theirs = _both(tmp_path, body)
    assert ours == theirs


@needs_lance
def test_update_and_merge_insert_shapes_as_pylance(tmp_path: Path) -> None:
    from datetime import timedelta

    table = pa.table(
        {
            "id": [1, 2, 3],
            "ts": pa.array([datetime(2021, 1, 1)] * 3, pa.timestamp("ns")),
            "vec": pa.array([[1.0, 2.0]] * 3, pa.list_(pa.float32(), 2)),
            "b": pa.array([b"x"] * 3),
        }
    )
    new = pa.table({"id": [3, 4], "ts": table.column("ts").slice(0, 2), "vec": table["vec"][:2], "b": [b"n", b"m"]})

    def body(write: Callable[..., Any], dataset: Callable[..., Any], path: Path) -> Any:
        t = write(table, path)
        values = {"ts": 'TIMESTAMP "2021-01-02 00:00:00"', "vec": "[3.0, 4.0]", "b": "X'616263'"}
        updated = dict(t.update(updates=values, where="id = 2", conflict_retries=2, retry_timeout=timedelta(1)))
        builder = t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
        builder = builder.conflict_retries(3).retry_timeout(timedelta(seconds=5)).use_index(True)
        stats = builder.execute(iter(new.to_batches()), schema=new.schema)
        with pytest.raises(mvcc.errors.InvalidOperationError if write is mvcc.write_table else Exception):
            t.merge_insert("id").when_matched_fail().execute(table.slice(0, 1))
        fresh = new.slice(1).set_column(0, "id", pa.array([9]))
        fine = t.merge_insert("id").when_matched_fail().when_not_matched_insert_all().execute(fresh)
        with pytest.raises(ValueError):  # no clause: a merge that can do nothing is refused
            t.merge_insert("id").execute(fresh)
        return updated, stats, fine["num_inserted_rows"], t.to_table().sort_by("id")

    ours, theirs = _both(tmp_path, body)
    assert ours == theirs


@needs_lance
def test_names_and_errors_as_pylance(tmp_path: Path) -> None:
    def body(write: Callable[..., Any], dataset: Callable[..., Any], path: Path) -> Any:
        t = write(pa.table({"a": [1, 2]}), path / "t")
        t.update_config({"k1": "v1", "k2": "v2"})
        t.delete_config_keys(["k1"])
        config = dict(t.config())
        t.update_config({"only": "x"}, replace=True)
        t.update_metadata({"m": "1", "n": "2"})
        t.update_schema_metadata({"s": "1", "t": "2"})
        t.update_schema_metadata({"t": None})
        t.update_field_metadata({"a": {"f": "1"}}, replace=True)
        for version, name in ((1, "one"), (2, "two"), (2, "also-two")):
            t.tags.create(name, version)
        scanner = t.scanner(columns=["a"])
        errors = []
        for bad in (
            lambda: dataset(path / "missing"),
            lambda: t.to_table(filter="a >"),
            lambda: t.tags.create("x", 99),
            lambda: t.to_table(limit=-1),
            lambda: write(pa.table({"a": [1]}).replace_schema_metadata({"p": b"\x80\x81"}), path / "bin"),
        ):
            with pytest.raises(ValueError) as info:
                bad()
            errors.append(type(info.value).__name__ if write is mvcc.write_table else "ValueError")
        type(t).drop(path / "t")
        return (
            config,
            dict(t.config()),
            t.metadata,
            t.schema_metadata,
            t.schema.field("a").metadata,
            [name for name, _ in t.tags.list_ordered()],
            [name for name, _ in t.tags.list_ordered(order="asc")],
            (scanner.dataset_schema == t.schema, scanner.projected_schema == pa.schema([("a", pa.int64())])),
            len(errors),
            (path / "t").exists(),
        )

    ours, theirs = _both(tmp_path, body)
    assert ours == theirs


@needs_lance
def test_alter_column_type_as_pylance(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.string()), ("c", pa.int32())])
    table = pa.table({"a": [1, 2, 1024], "b": ["a", "b", "c"], "c": [1, 2, 3]}, schema=schema)

    def body(write: Callable[..., Any], dataset: Callable[..., Any], path: Path) -> Any:
        t = write(table, path, max_rows_per_file=2)
        t.delete("c = 2")
        t.alter_columns({"path": "a", "name": "x", "nullable": True})
        t.alter_columns({"path": "x", "data_type": pa.int32()}, {"path": "b", "data_type": pa.large_string()})
        version = t.version
        with pytest.raises(Exception, match="Can't cast value 1024 to type Int8"):
            t.alter_columns({"path": "x", "data_type": pa.int8()})
        with pytest.raises(Exception, match='Cannot cast column "x" from Int32 to Utf8'):  # another kind of type
            t.alter_columns({"path": "x", "data_type": pa.string()})
        with pytest.raises(Exception, match='Column "q" does not exist'):
            t.alter_columns({"path": "q", "name": "z"})
        with pytest.raises(ValueError, match="Unknown key: type"):
            t.alter_columns({"path": "x", "type": "string"})
        with pytest.raises(ValueError, match="At least one of name, nullable, or data_type must be specified"):
            t.alter_columns({"path": "x"})
        t.update({"x": "x + 1"}, where="c = 3")
        return t.schema, t.to_table(), t.to_table(filter="x > 1"), dataset(path).version - version

    ours, theirs = _both(tmp_path, body)
    assert ours == theirs


@needs_lance
def test_add_columns_from_rows_as_pylance(tmp_path: Path) -> None:
    reader_schema = pa.schema([("c", pa.int64()), ("d", pa.int64())])

    def rows(sizes: list[int]) -> Any:
        return (pa.record_batch([pa.array(range(n)), pa.array(range(n))], names=["c", "d"]) for n in sizes)

    def body(write: Callable[..., Any], dataset: Callable[..., Any], path: Path) -> Any:
        t = write(pa.table({"a": range(20)}), path, max_rows_per_file=6)
        t.add_columns(rows([7, 7, 6]), reader_schema=reader_schema)  # batches across fragment boundaries
        t.add_columns(pa.table({"e": [f"e{i}" for i in range(20)]}))
        with pytest.raises(Exception):  # noqa: B017 - mvcc: SchemaError, pylance: OSError
            t.add_columns(pa.table({"f": range(19)}))
        return t.to_table(), t.version

    ours, theirs = _both(tmp_path, body)
    assert ours == theirs


@needs_lance
@pytest.mark.parametrize("stable", [False, True])
def test_merge_insert_partial_source_as_pylance(tmp_path: Path, stable: bool) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("a", pa.string()), pa.field("b", pa.float64())])
    table = pa.table({"id": [1, 2, 3, 4], "a": ["w", "x", "y", "z"], "b": [1.0, 2.0, 3.0, 4.0]}, schema=schema)

    def body(write: Callable[..., Any], dataset: Callable[..., Any], path: Path) -> Any:
        t = write(table, path, max_rows_per_file=2, enable_stable_row_ids=stable)
        only_b = pa.table({"b": [20.0, 50.0], "id": [2, 5]})  # another column order, one new key
        out = [dict(t.merge_insert("id").when_matched_update_all().execute(only_b))]
        out.append(
            dict(
                t.merge_insert("id")
                .when_matched_update_all("source.b > 1")
                .execute(pa.table({"id": [1, 3], "a": ["W", "Y"], "b": [0.5, 3.5]}))
            )
        )
        out.append(
            dict(
                t.merge_insert("id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(pa.table({"id": [4, 6], "a": ["Z", "new"]}))
            )
        )  # b of the new row is null
        out.append(t.to_table().sort_by("id"))
        with pytest.raises((ValueError, OSError)):  # no key column (mvcc: SchemaError, a ValueError)
            t.merge_insert("id").when_matched_update_all().execute(pa.table({"b": [1.0]}))
        with pytest.raises((ValueError, OSError)):  # a column the table does not have
            t.merge_insert("id").when_matched_update_all().execute(pa.table({"id": [1], "zz": [1.0]}))
        out.append(t.version)
        return out

    ours, theirs = _both(tmp_path, body)
    assert ours == theirs
    assert ours[3].to_pylist()[1] == {"id": 2, "a": "x", "b": 20.0}


@needs_lance
def test_merge_insert_partial_source_refuses_missing_required_column(tmp_path: Path) -> None:
    schema = pa.schema(
        [pa.field("id", pa.int64(), False), pa.field("a", pa.string(), False), pa.field("b", pa.int64())]
    )
    table = pa.table({"id": [1, 2], "a": ["x", "y"], "b": [1, 2]}, schema=schema)
    source = pa.table({"id": [2, 3], "b": [20, 30]})
    ours = mvcc.write_table(table, tmp_path / "mvcc")
    theirs = lance.write_dataset(table, tmp_path / "lance")
    files = sorted(p.name for p in (tmp_path / "mvcc").rglob("*"))
    with pytest.raises(mvcc.SchemaError, match=r"non-nullable column\(s\) \['a'\]"):
        ours.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(source)
    with pytest.raises(OSError, match="non-nullable"):
        theirs.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(source)
    assert ours.version == 1 and sorted(p.name for p in (tmp_path / "mvcc").rglob("*")) == files
    # updates alone need no such column, in both
    for t in (ours, theirs):
        t.merge_insert("id").when_matched_update_all().execute(source)
    assert ours.to_table().sort_by("id") == theirs.to_table().sort_by("id")


@needs_lance
@pytest.mark.parametrize("stable", [False, True])
def test_system_columns_in_filters_as_pylance(tmp_path: Path, stable: bool) -> None:
    filters = [
        "_rowid = 37",
        "_rowid = 7",
        "_rowaddr = 4294967301",
        "_rowid > 30 AND a < 35",
        "_rowoffset = 5",
        "_rowid IN (1, 2, 39) OR a = 20",
        "_rowaddr >= 8589934592 AND a < 30",
        "_rowoffset IN (1, 2, 30)",
        "NOT (_rowid < 36)",
    ]

    def body(write: Callable[..., Any], dataset: Callable[..., Any], path: Path) -> Any:
        t = write(pa.table({"a": range(40)}), path, max_rows_per_file=10, enable_stable_row_ids=stable)
        t.delete("a IN (3, 11, 12, 25)")
        t.update({"a": "a + 100"}, where="a IN (7, 37)")  # rows moved: a new address, the same stable id
        out = []
        for f in filters:
            out.append(t.to_table(filter=f).sort_by("a"))
            out.append(t.count_rows(f))
            out.append(t.scanner(columns=["_rowoffset", "a"], filter=f, with_row_id=True).to_table().sort_by("a"))
        out.append(t.to_table(columns={"twice": "a * 2"}, filter="_rowid < 4", limit=2, offset=1))
        return out

    ours, theirs = _both(tmp_path, body)
    assert ours == theirs
    assert ours[0].num_rows == (1 if stable else 0)  # `_rowid = 37`: only a stable id survives the move


@needs_lance
def test_difference_rowoffset_comparisons(tmp_path: Path) -> None:
    t = mvcc.write_table(pa.table({"a": range(10)}), tmp_path / "mvcc")
    assert t.to_table(filter="_rowoffset >= 8 OR _rowaddr < 1").column("a").to_pylist() == [0, 8, 9]
    ds = lance.write_dataset(pa.table({"a": range(10)}), tmp_path / "lance")
    with pytest.raises(ValueError, match="_rowoffset does not exist"):  # pylance: only `=` and `IN`
        ds.to_table(filter="_rowoffset >= 8 OR _rowaddr < 1")


@needs_lance
def test_index_descriptions_and_compaction_threads_as_pylance(tmp_path: Path) -> None:
    def body(write: Callable[..., Any], dataset: Callable[..., Any], path: Path) -> Any:
        t = write(pa.table({"a": range(40), "s": ["x", "y"] * 20}), path, max_rows_per_file=10)
        t.delete("a < 3")
        t.create_scalar_index("a", "BTREE")
        t.create_scalar_index("s", "BITMAP")
        t.delete("a IN (13, 14, 15)")  # rows of indexed fragments go (a removed fragment: see below)
        t.insert(pa.table({"a": [100], "s": ["z"]}))  # not indexed
        listed = [(i["name"], i["type"], i["fields"], sorted(i["fragment_ids"])) for i in t.list_indices()]
        described = [
            (d.name, d.index_type, d.type_url, d.num_rows_indexed, d.fields, d.field_names, len(d.segments))
            + tuple((sorted(s.fragment_ids), s.dataset_version_at_last_update) for s in d.segments)
            for d in t.describe_indices()
        ]
        sizes = [d.total_size_bytes > 0 and all(s.created_at.tzinfo for s in d.segments) for d in t.describe_indices()]
        metrics = t.optimize.compact_files(num_threads=2)
        return listed, described, sizes, metrics.fragments_removed, t.to_table().sort_by("a")

    ours, theirs = _both(tmp_path, body)
    assert ours == theirs
    assert [entry[1] for entry in ours[0]] == ["BTree", "Bitmap"]
    t = mvcc.write_table(pa.table({"a": range(40)}), tmp_path / "gone", max_rows_per_file=10)
    t.create_scalar_index("a", "BTREE").delete("a < 10")  # fragment 0 goes
    assert t.list_indices()[0]["fragment_ids"] == [1, 2, 3]  # pylance's bitmap still names 0 (until optimized)
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="num_threads"):
            t.optimize.compact_files(num_threads=bad)


def random_nan_filter(rng: random.Random, depth: int = 0) -> str:
    """A random condition over the float column `f` (NaNs, infinities, NULLs) and the int column `id`."""
    literals = ["0", "1.5", "-2", "3", "CAST('NaN' AS DOUBLE)", "CAST('inf' AS DOUBLE)", "-CAST('inf' AS DOUBLE)"]
    kind = rng.random()
    if depth < 2 and kind < 0.25:
        word = rng.choice(["AND", "OR"])
        return f"({random_nan_filter(rng, depth + 1)} {word} {random_nan_filter(rng, depth + 1)})"
    if depth < 2 and kind < 0.35:
        return f"NOT ({random_nan_filter(rng, depth + 1)})"
    if kind < 0.45:
        low, high = sorted(rng.sample([-2, 0, 1, 3], 2))
        return f"f BETWEEN {low} AND {high}"
    if kind < 0.5:
        return f"id {rng.choice(['<', '>='])} {rng.randrange(40)}"
    if kind < 0.55:
        return f"isnan({rng.choice(['f', 'g', 'f - g'])})"
    left, right = rng.sample(["f", "f", "g", rng.choice(literals)], 2)
    return f"{left} {rng.choice(['=', '!=', '<', '<=', '>', '>='])} {right}"


def nan_table(rng: random.Random, n: int = 40) -> pa.Table:
    pool = [float("nan"), None, float("inf"), -float("inf"), 0.0, 1.5, -2.0, 3.0, 7.25]
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "f": pa.array([rng.choice(pool) for _ in range(n)], pa.float64()),
            "g": pa.array([rng.choice(pool) for _ in range(n)], pa.float64()),
        }
    )


@needs_lance
@pytest.mark.parametrize("indexed", [False, True])
def test_nan_order_in_filters_as_pylance(tmp_path: Path, indexed: bool) -> None:
    rng = random.Random(30 + indexed)
    table = nan_table(rng)
    filters = [random_nan_filter(rng) for _ in range(20)]

    def body(write: Callable[..., Any], dataset: Callable[..., Any], path: Path) -> Any:
        t = write(table, path, max_rows_per_file=10)
        t.delete("id IN (4, 17, 33)")
        if indexed:
            t.create_scalar_index("f", "BTREE")
        return [(f, sorted(t.to_table(columns=["id"], filter=f).column("id").to_pylist())) for f in filters]

    ours, theirs = _both(tmp_path, body)
    for mine, pylance_result in zip(ours, theirs, strict=True):
        assert mine == pylance_result
    assert any(ids for _, ids in ours) and any(not ids for _, ids in ours)


@needs_lance
def test_uuid_extension_type_writes_as_pylance(tmp_path: Path) -> None:
    import uuid

    values = [uuid.UUID(int=i * 7919).bytes for i in range(6)]
    table = pa.table({"id": range(6), "u": pa.array(values, pa.uuid())})

    def body(write: Callable[..., Any], dataset: Callable[..., Any], path: Path) -> Any:
        t = write(table, path, max_rows_per_file=4)
        t.insert(table.slice(2, 2))
        t.delete("id = 1")
        t = dataset(path)
        return t.schema, t.to_table(), t.take([0, 5]), t.to_table(filter="u IS NOT NULL AND id > 3")

    ours, theirs = _both(tmp_path, body)
    assert ours == theirs
    assert ours[0].field("u").type == pa.uuid()


@needs_lance
def test_arrow_cast_then_partial_merge_as_pylance(tmp_path: Path) -> None:
    vectors = pa.FixedSizeListArray.from_arrays(pa.array([float(i) for i in range(14 * 4)], pa.float32()), 4)
    source = pa.table({"id": range(0, 40, 3), "vector": vectors})

    def body(write: Callable[..., Any], dataset: Callable[..., Any], path: Path) -> Any:
        t = write(pa.table({"id": range(30), "num": [str(i) for i in range(30)]}), path, max_rows_per_file=10)
        t.add_columns({"vector": "arrow_cast(NULL, 'FixedSizeList(4, Float32)')", "small": "arrow_cast(id, 'Int16')"})
        stats = t.merge_insert(on="id").when_matched_update_all().when_not_matched_insert_all().execute(source)
        at = "arrow_cast(id, 'Timestamp(Second, None)') > arrow_cast(20, 'Timestamp(Second, None)')"
        return dict(stats), t.to_table().sort_by("id"), t.count_rows(at)

    ours, theirs = _both(tmp_path, body)
    assert ours == theirs
    with pytest.raises(mvcc.errors.PredicateError, match="cannot read the type name 'Int33'"):
        mvcc.open_table(tmp_path / "mvcc").to_table(filter="arrow_cast(id, 'Int33') > 1")


@needs_lance
@pytest.mark.parametrize("stable", [False, True])
def test_system_columns_in_delete_and_update_as_pylance(tmp_path: Path, stable: bool) -> None:
    def body(write: Callable[..., Any], dataset: Callable[..., Any], path: Path) -> Any:
        t = write(pa.table({"a": range(30)}), path, max_rows_per_file=10, enable_stable_row_ids=stable)
        out = [dict(t.delete("_rowid = 3"))]
        out.append(dict(t.update({"a": "a + 100"}, where="_rowaddr = 4 OR _rowid = 12")))
        out.append(dict(t.delete("_rowoffset IN (0, 20)")))
        out.append(sorted(t.to_table().column("a").to_pylist()))
        return out

    ours, theirs = _both(tmp_path, body)
    assert ours == theirs
