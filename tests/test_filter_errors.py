"""A bad filter is an error in plain words, wherever it is given: every read and write of the Python API and
`mvcc scan --filter`. The message quotes the filter, shows its line with carets under the place and says what
is wrong; an unknown column comes with its close matches. Nothing of sqlglot or Arrow shows through, and a
write with a bad filter leaves no file behind.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

import mvcc_core as mvcc
from mvcc_core import cli

# (filter, the line with the filter, the caret line with the problem)
BAD_FILTERS: list[tuple[str, str, str]] = [
    ("id >", "  id >", "      ^ expected an expression after '>'"),
    ("kind = 'a' AND", "  kind = 'a' AND", "                ^ expected an expression after 'AND'"),
    ("(id > 3", "  (id > 3", "         ^ missing ')' to close the '(' at column 1"),
    ("idd > 3", "  idd > 3", "  ^^^ unknown column 'idd' (did you mean 'id'?); available columns: id, kind, score"),
    (
        "knd = 'a'",
        "  knd = 'a'",
        "  ^^^ unknown column 'knd' (did you mean 'kind'?); available columns: id, kind, score",
    ),
    ("Kind = 'a'", "  Kind = 'a'", "  ^^^^ unknown column 'Kind' (did you mean 'kind'? names are case-sensitive);"),
    ("id = 'x'", "  id = 'x'", "       ^^^ type mismatch in \"id = 'x'\": 'x' is not a valid int64 to compare with id"),
    ("kind + 1 > 2", "  kind + 1 > 2", "  ^^^^ type mismatch in 'kind + 1': kind is string, not a number"),
    ("score", "  score", "  ^^^^^ a filter must be a boolean condition, but 'score' is double"),
    ("kind LIKE 'a", "  kind LIKE 'a", "            ^^ unterminated string: the ' here is never closed"),
]
SQLGLOT_AND_ARROW_WORDS = ["sqlglot", "<class", "Required keyword", "kernel", "Traceback", "pyarrow"]


def rows() -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(12), pa.int64()),
            "kind": ["a", "b", "c"] * 4,
            "score": [i / 2 for i in range(12)],
        }
    )


@pytest.fixture
def table(tmp_path: Path) -> mvcc.Table:
    t = mvcc.write_table(rows(), tmp_path / "t", max_rows_per_file=4)
    t.delete("id = 5")
    t.create_scalar_index("id", "BTREE")
    return t


def files(root: Path) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), root) for d, _, names in os.walk(root) for f in names}


def assert_located(message: str, sql: str, line: str, carets: str) -> None:
    lines = message.split("\n")
    assert lines[0].startswith(f"invalid filter {sql!r}"), message
    assert lines[1] == line, message
    assert lines[2].startswith(carets), message
    for word in SQLGLOT_AND_ARROW_WORDS:
        assert word not in message


@pytest.mark.parametrize(("sql", "line", "carets"), BAD_FILTERS)
def test_every_api_call_says_what_is_wrong(table: mvcc.Table, sql: str, line: str, carets: str) -> None:
    root = Path(table.uri)
    before = files(root)
    calls = {
        "to_table": lambda: table.to_table(filter=sql),
        "count_rows": lambda: table.count_rows(filter=sql),
        "scanner": lambda: table.scanner(columns=["id"], filter=sql).to_table(),
        "to_batches": lambda: list(table.to_batches(filter=sql)),
        "projection": lambda: table.to_table(columns={"twice": "id * 2"}, filter=sql),
        "delete": lambda: table.delete(sql),
        "update": lambda: table.update({"kind": "'z'"}, where=sql),
        "delete_uncommitted": lambda: table.delete_uncommitted(sql),
    }
    for name, call in calls.items():
        with pytest.raises(mvcc.errors.PredicateError) as info:
            call()
        assert_located(str(info.value), sql, line, carets), name
    assert files(root) == before and table.version == table.latest_version == 3  # nothing written


@pytest.mark.parametrize(("sql", "line", "carets"), BAD_FILTERS)
def test_mvcc_scan_filter_says_what_is_wrong(table: mvcc.Table, sql: str, line: str, carets: str) -> None:
    result = CliRunner().invoke(cli.cli, ["scan", table.uri, "--filter", sql], catch_exceptions=False)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("mvcc: error: ")
    message = result.stderr.removeprefix("mvcc: error: ").rstrip("\n")
    assert message.endswith(" (PredicateError)")
    assert_located(message.removesuffix(" (PredicateError)"), sql, line, carets)


def test_mvcc_scan_unknown_column_names_the_close_ones(table: mvcc.Table) -> None:
    result = CliRunner().invoke(cli.cli, ["scan", table.uri, "--columns", "id,knd"], catch_exceptions=False)
    assert result.exit_code == 1
    assert "unknown column 'knd' (did you mean 'kind'?); available columns: id, kind, score" in result.stderr
