"""`mvcc advise URI [--json]` and `mvcc compact --where --max-bytes --partial-progress --dry-run`, through click's
runner, compared with the API's answers and with the data files' own rows."""

from __future__ import annotations

import json

import pyarrow as pa
from click.testing import CliRunner
from maintenance_files import file_rows, fragment_files

import mvcc_core as mvcc
from mvcc_core import cli


def daily(uri: str) -> mvcc.Table:
    t = mvcc.write_table(pa.table({"day": ["a"], "x": [0]}), uri)
    for day in "abc":
        for i in range(4):
            t.append(pa.table({"day": [day], "x": [i]}))
    return t


def run(*args: str):
    return CliRunner().invoke(cli.cli, list(args), catch_exceptions=False)


def test_advise_json_is_the_api_advice(tmp_uri) -> None:
    t = daily(tmp_uri)
    result = run("advise", tmp_uri, "--json")
    assert result.exit_code == 0
    out = json.loads(result.output)
    assert out["version"] == t.version
    assert out["advice"] == [
        {
            f: getattr(a, f)
            for f in (
                "kind",
                "reason",
                "score",
                "bytes_to_rewrite",
                "fragments_before",
                "fragments_after",
                "effect",
                "call",
            )
        }
        for a in t.optimize.recommend()
    ]
    text = run("advise", tmp_uri)
    assert text.exit_code == 0 and "compact" in text.output and "13 -> 1" in text.output


def test_advise_on_a_healthy_table(tmp_uri) -> None:
    mvcc.write_table(pa.table({"x": list(range(10))}), tmp_uri)
    result = run("advise", tmp_uri)
    assert result.exit_code == 0 and result.output.startswith("nothing to do")


def test_compact_where_dry_run_then_for_real(tmp_uri) -> None:
    t = daily(tmp_uri)
    before_rows, before_files = file_rows(t), fragment_files(t)
    dry = json.loads(run("compact", tmp_uri, "--where", "day = 'b'", "--dry-run", "--json").output)
    assert [task["fragments"] for task in dry["tasks"]] == [[5, 6, 7, 8]]
    assert mvcc.open_table(tmp_uri).version == t.version  # the dry run wrote nothing
    done = run("compact", tmp_uri, "--where", "day = 'b'", "--partial-progress", "--max-commits", "2", "--json")
    assert done.exit_code == 0
    summary = json.loads(done.output)
    assert summary["fragments_removed"] == 4 and summary["commits"] == 1
    latest = mvcc.open_table(tmp_uri)
    after = fragment_files(latest)
    assert {k: v for k, v in after.items() if k in before_files} == {
        k: v for k, v in before_files.items() if k not in (5, 6, 7, 8)
    }
    assert file_rows(latest) == before_rows


def test_compact_budget_reports_what_is_left(tmp_uri) -> None:
    daily(tmp_uri)
    mvcc.open_table(tmp_uri).update_config({"mvcc.compaction.target_rows_per_fragment": "2"})
    result = run("compact", tmp_uri, "--max-bytes", "1KiB")
    assert result.exit_code == 0 and "left for the next run by the budget" in result.output


def test_compact_refuses_bad_arguments_in_words(tmp_uri) -> None:
    daily(tmp_uri)
    bad = CliRunner().invoke(cli.cli, ["compact", tmp_uri, "--max-bytes", "lots"])
    assert bad.exit_code == 2 and "--max-bytes" in bad.output and "number of bytes" in bad.output
    alone = CliRunner().invoke(cli.cli, ["compact", tmp_uri, "--max-commits", "2"])
    assert alone.exit_code == 2 and "--partial-progress" in alone.output
    where = CliRunner().invoke(cli.cli, ["compact", tmp_uri, "--where", "nope = 1"])
    assert where.exit_code != 0 and "nope" in where.output
    assert mvcc.open_table(tmp_uri).version == 13  # nothing was committed
