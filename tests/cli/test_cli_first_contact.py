"""What a newcomer reads first: `mvcc show`'s version line, counts in the singular and plural, and the settings
`mvcc compact --dry-run` and `mvcc show` take from the table's policy, said as such."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from click.testing import CliRunner, Result

import mvcc_core as mvcc
from mvcc_core import cli


def run(*args: Any) -> Result:
    return CliRunner().invoke(cli.cli, [str(a) for a in args], catch_exceptions=False)


def small(uri: str, appends: int = 3) -> mvcc.Table:
    t = mvcc.write_table(pa.table({"id": [0, 1]}), uri)
    for i in range(appends):
        t.append(pa.table({"id": [10 + i]}))
    return t


def line(text: str, key: str) -> str:
    return next(x for x in text.splitlines() if x.startswith(key + " "))


def test_show_says_the_version_once(tmp_uri: str) -> None:
    t = small(tmp_uri)
    t.tags.create("first", 1)
    latest = run("show", tmp_uri)
    assert latest.exit_code == 0 and "version version" not in latest.stdout
    assert line(latest.stdout, "version").split(None, 1)[1] == f"{t.version} (the latest)"
    old = run("show", tmp_uri, "--version", "2").stdout
    assert line(old, "version").split(None, 1)[1] == f"2 (the latest is {t.version})"
    tagged = run("show", tmp_uri, "--tag", "first").stdout
    assert line(tagged, "version").split(None, 1)[1] == f"1 (tag first; the latest is {t.version})"
    assert "version version" not in old + tagged
    assert json.loads(run("show", tmp_uri, "--tag", "first", "--json").stdout)["resolved"] == "tag first (version 1)"


def test_compact_dry_run_counts_tasks_in_the_singular_and_plural(tmp_uri: str) -> None:
    small(tmp_uri)
    one = run("compact", tmp_uri, "--dry-run")
    assert one.exit_code == 0 and " in 1 task: " in one.stdout and "1 tasks" not in one.stdout
    # two runs of small fragments on either side of a large one: two tasks
    t = mvcc.open_table(tmp_uri)
    t.append(pa.table({"id": list(range(100, 400))}))
    t.append(pa.table({"id": [500]}))
    t.append(pa.table({"id": [501]}))
    two = run("compact", tmp_uri, "--dry-run", "--target-rows-per-fragment", "100")
    assert two.exit_code == 0 and " in 2 tasks: " in two.stdout, two.stdout


def test_cleanup_counts_versions_in_the_singular(tmp_uri: str) -> None:
    small(tmp_uri, appends=1)
    text = run("cleanup", tmp_uri, "--older-than", "0s")
    assert "would remove 1 version (1)," in text.stdout and "1 versions" not in text.stdout


def test_compact_dry_run_says_where_each_setting_came_from(tmp_uri: str) -> None:
    t = small(tmp_uri)
    t.update_config({"mvcc.compaction.target_rows_per_fragment": "2", "mvcc.compaction.max_bytes": "1MiB"})
    text = run("compact", tmp_uri, "--dry-run", "--materialize-deletions-threshold", "0.5")
    assert text.exit_code == 0, text.output
    settings = line(text.stdout, "settings:")
    assert "target rows 2 (the table's mvcc.compaction.target_rows_per_fragment)" in settings
    assert "budget 1.0 MiB (the table's mvcc.compaction.max_bytes)" in settings
    assert "deletions threshold 0.5 (--materialize-deletions-threshold)" in settings
    assert "target bytes none (default)" in settings
    assert " in 1 task: fragments 4 -> 3 (2 rewritten into 1)" in text.stdout  # up to 2 rows a fragment
    plan = json.loads(run("compact", tmp_uri, "--dry-run", "--target-rows-per-fragment", "100", "--json").stdout)
    assert plan["settings"]["target_rows_per_fragment"] == {"value": 100, "from": "flag"}
    assert plan["settings"]["max_bytes"] == {"value": 2**20, "from": "table"}
    assert plan["fragments_after"] == 1


def test_show_counts_small_fragments_against_the_tables_target(tmp_uri: str) -> None:
    t = small(tmp_uri)
    assert "4 (4 under 1,048,576 rows)" in line(run("show", tmp_uri).stdout, "fragments")
    t.update_config({"mvcc.compaction.target_rows_per_fragment": "2"})
    assert "4 (3 under 2 rows)" in line(run("show", tmp_uri).stdout, "fragments")
    assert "4 (0 under 1 rows)" in line(run("show", tmp_uri, "--small-rows", "1").stdout, "fragments")
    assert json.loads(run("show", tmp_uri, "--json").stdout)["small_fragment_rows"] == 2
