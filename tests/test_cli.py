"""The `mvcc` command: every command through click's runner, compared with the API's answers, on a
local disk, in memory and on the local S3 server; the installed script in real subprocesses (its exit codes
for both conflict types come from genuine races: a failpoint holds the command between writing its
transaction and publishing its manifest while this process commits a conflicting version).

The subprocess tests run the `mvcc` script installed next to this interpreter, or the one named by the
MVCC_SCRIPT variable (e.g. a fresh `pip install -e .` venv); otherwise `python -m mvcc_core.cli` (the same
`main`, which `test_console_script_is_declared` ties to pyproject's [project.scripts]). PYTHONPATH points
them at this checkout's package.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
import tomllib
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

import mvcc_core as mvcc
from mvcc_core import cli
from mvcc_core.format.manifest import list_manifests
from mvcc_core.format.referenced_files import ReferencedFile, version_files
from mvcc_core.times import parse_time

ROOT = Path(__file__).resolve().parents[1]


def rows(start: int, n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "kind": pa.array([["a", "b", "c"][i % 3] for i in range(start, start + n)]),
        }
    )


def opt_args(opts: dict[str, Any] | None) -> list[str]:
    return [a for k, v in (opts or {}).items() for a in ("-o", f"{k}={v}")]


def run(*args: Any, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli.cli, [str(a) for a in args], env=env, catch_exceptions=False)


def run_json(*args: Any) -> Any:
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def history(uri: str, opts: dict[str, Any] | None) -> mvcc.Table:
    """Versions 1..5: create, an append with transaction properties, a delete, an index, an append; tag "two"."""
    t = mvcc.write_table(rows(0, 6), uri, storage_options=opts, commit_message="create")
    t.append(rows(6, 3), commit_message="more", transaction_properties={"dagster_run": "r-1"})
    t.delete("id = 1", commit_message="drop one")
    t.tags.create("two", 2)
    t.create_index("id")
    t.append(rows(9, 2))
    return t


def listing(t: mvcc.Table) -> set[tuple[str, int]]:
    return {(m.path, m.size) for m in t.state.store.list("")}


# ---- read commands ------------------------------------------------------------------------------------


def test_show_matches_the_api(any_uri) -> None:
    uri, opts = any_uri
    t = history(uri, opts)
    info = run_json("show", uri, *opt_args(opts))
    fragments = t.get_fragments()
    assert info["version"] == t.version == info["latest_version"] == 5
    assert info["rows"] == t.count_rows() == 10 and info["deleted_rows"] == 1
    assert info["fragments"] == len(fragments) == 3 and info["small_fragments"] == 3
    assert info["bytes"] == sum(df.file_size_bytes for f in fragments for df in f.data_files()) > 0
    assert [f["name"] for f in info["schema"]] == t.schema.names
    assert info["tags"] == {"two": 2} and info["manifest_naming"] == t.manifest_naming.value
    assert info["indices"] == json.loads(json.dumps(t.list_indices()))
    assert info["feature_flags"] == t.feature_flags and "deletion_files" in t.feature_flags["reader"]
    old = run_json("show", uri, *opt_args(opts), "--tag", "two")
    assert (old["version"], old["rows"], old["indices"]) == (2, 9, [])
    text = run("show", uri, *opt_args(opts), "--small-rows", "4")
    assert text.exit_code == 0 and "10 (1 deleted)" in text.stdout and "id_idx" in text.stdout
    assert "3 (2 under 4 rows)" in text.stdout  # live rows 5, 3, 2


def test_versions_match_the_api_newest_first(any_uri) -> None:
    uri, opts = any_uri
    t = history(uri, opts)
    listed = run_json("versions", uri, *opt_args(opts))
    api = t.versions()
    assert [v["version"] for v in listed] == [v.version for v in reversed(api)] == [5, 4, 3, 2, 1]
    assert [(v["operation"], v["read_version"], v["message"]) for v in listed][2:] == [
        ("Delete", 2, "drop one"),
        ("Append", 1, "more"),
        ("Overwrite", 0, "create"),
    ]
    assert listed[3]["transaction_properties"] == {"dagster_run": "r-1"}
    assert listed[0]["timestamp"] == api[-1].timestamp.isoformat()
    assert [v["version"] for v in run_json("versions", uri, *opt_args(opts), "--limit", "2")] == [5, 4]
    assert t.versions(limit=2) == api[-2:] and t.versions(limit=0) == []
    text = run("versions", uri, *opt_args(opts), "--limit", "3")
    assert text.exit_code == 0 and "dagster_run=r-1" not in text.stdout and "CreateIndex" in text.stdout


def test_scan_to_terminal_and_files(any_uri, tmp_path: Path) -> None:
    uri, opts = any_uri
    t = history(uri, opts)
    want = t.to_table(["id", "kind"], "id > 3 AND kind = 'a'")
    args = ["scan", uri, *opt_args(opts), "--columns", "id,kind", "--filter", "id > 3 AND kind = 'a'"]
    jsonl = run(*args, "--json")
    assert jsonl.exit_code == 0
    assert [json.loads(line) for line in jsonl.stdout.splitlines()] == want.to_pylist() != []
    for suffix in ("parquet", "csv", "jsonl"):
        out = tmp_path / f"rows.{suffix}"
        result = run(*args, "--output", out)
        assert result.exit_code == 0 and f"wrote {want.num_rows} rows" in result.stderr
        if suffix == "parquet":
            assert pq.read_table(out).equals(want)
        elif suffix == "csv":
            import pyarrow.csv as pacsv

            assert pacsv.read_csv(out).cast(want.schema).equals(want)
        else:
            assert [json.loads(line) for line in out.read_text().splitlines()] == want.to_pylist()
    limited = run("scan", uri, *opt_args(opts), "--version", "1", "--limit", "2", "--format", "csv")
    assert limited.stdout.splitlines()[1:] == ['0,"a"', '1,"b"']  # version 1 still has id 1
    table = run("scan", uri, *opt_args(opts), "--filter", "id = 7")
    assert table.exit_code == 0 and " 7 " in table.stdout and " 8 " not in table.stdout
    empty = run("scan", uri, *opt_args(opts), "--filter", "id > 1000", "--format", "csv")
    assert empty.exit_code == 0 and empty.stdout.strip() == '"id","kind"'
    bad = run("scan", uri, *opt_args(opts), "--output", tmp_path / "rows.txt")
    assert bad.exit_code == 2 and "--format" in bad.stderr


def test_scan_terminal_table_is_bounded(tmp_uri) -> None:
    mvcc.write_table(rows(0, 120), tmp_uri)
    result = run("scan", tmp_uri, "--columns", "id")
    assert result.exit_code == 0 and " 49 " in result.stdout and " 50 " not in result.stdout
    assert "first 50 rows" in result.stderr


# ---- maintenance commands -------------------------------------------------------------------------------


def test_compact_summary_matches_the_table(any_uri) -> None:
    uri, opts = any_uri
    t = history(uri, opts)
    before = t.to_table().sort_by("id")
    summary = run_json("compact", uri, *opt_args(opts), "--workers", "2")
    after = mvcc.open_table(uri, storage_options=opts)
    assert summary["version"] == after.version == 7 and after.transaction().operation.name == "Rewrite"
    # fragments 0 and 1 (5 + 3 live rows) are covered by id_idx and merged; fragment 2 is not covered, so it
    # is never mixed with them, and alone it has nothing to merge with
    assert (summary["fragments_before"], summary["fragments_after"]) == (3, len(after.get_fragments())) == (3, 2)
    assert (summary["fragments_removed"], summary["fragments_added"], summary["rows_rewritten"]) == (2, 1, 8)
    assert summary["bytes_written"] > 0
    assert after.to_table().sort_by("id").equals(before)
    # the rewritten fragment left id_idx's coverage (until optimize_indices): now the two merge
    again = run("compact", uri, *opt_args(opts))
    assert again.exit_code == 0 and "fragments 2 -> 1, 10 rows rewritten" in again.stdout
    done = run("compact", uri, *opt_args(opts))
    assert done.exit_code == 0 and "nothing to compact: 1 fragments, version 9" in done.stdout
    assert mvcc.open_table(uri, storage_options=opts).version == 9


def test_index_commands(any_uri) -> None:
    uri, opts = any_uri
    t = history(uri, opts)
    created = run("index", "create", uri, *opt_args(opts), "kind", "--type", "bitmap", "--name", "k")
    assert created.exit_code == 0 and "created index k" in created.stdout
    listed = run_json("index", "list", uri, *opt_args(opts))
    assert listed == json.loads(json.dumps(t.checkout_latest().list_indices()))
    assert {(i["name"], i["type"], i["num_unindexed_fragments"]) for i in listed} == {
        ("id_idx", "BTree", 1),
        ("k", "Bitmap", 0),
    }
    optimized = run("index", "optimize", uri, *opt_args(opts))
    assert optimized.exit_code == 0 and "updated 1 indices" in optimized.stdout
    assert all(i["num_unindexed_fragments"] == 0 for i in run_json("index", "list", uri, *opt_args(opts)))
    assert run("index", "drop", uri, *opt_args(opts), "k").exit_code == 0
    assert [i["name"] for i in mvcc.open_table(uri, storage_options=opts).list_indices()] == ["id_idx"]
    missing = run("index", "drop", uri, *opt_args(opts), "k")
    assert missing.exit_code == 1 and "IndexNotFoundError" in missing.stderr


def test_index_on_a_struct_field(tmp_uri) -> None:
    mvcc.write_table(pa.table({"id": [1, 2, 3], "st": [{"x": 5}, {"x": 6}, {"x": 5}]}), tmp_uri)
    created = run("index", "create", tmp_uri, "st.x", "--type", "BTREE")
    assert created.exit_code == 0 and "created index st.x_idx on st.x" in created.stdout
    assert [i["fields"] for i in run_json("index", "list", tmp_uri)] == [["st.x"]]
    scanned = run("scan", tmp_uri, "--columns", "id", "--filter", "st.x = 5", "--format", "csv")
    assert scanned.exit_code == 0 and scanned.stdout.split()[1:] == ["1", "3"]
    missing = run("index", "create", tmp_uri, "st.y")
    assert missing.exit_code == 1 and "no such column or struct field" in missing.stderr


def test_cleanup_is_a_dry_run_unless_apply(any_uri) -> None:
    uri, opts = any_uri
    t = history(uri, opts)
    t.tags.delete("two")
    before = listing(t)
    expected = t.cleanup_old_versions(timedelta(0), dry_run=True)
    dry = run_json("cleanup", uri, *opt_args(opts), "--older-than", "0s")
    assert listing(t) == before  # nothing deleted
    assert dry["dry_run"] and dry["removed_versions"] == list(expected.removed_versions) == [1, 2, 3, 4]
    assert dry["bytes"] == expected.bytes_removed > 0 and dry["files"]["data"] == expected.data_files_removed
    text = run("cleanup", uri, *opt_args(opts), "--older-than", "0s")
    assert "would remove 4 versions (1-4)" in text.stdout and "--apply" in text.stderr and listing(t) == before
    young = run_json("cleanup", uri, *opt_args(opts), "--older-than", "7d")
    assert young["removed_versions"] == [] and listing(t) == before
    applied = run_json("cleanup", uri, *opt_args(opts), "--older-than", "0s", "--apply")
    assert not applied["dry_run"] and applied["removed_versions"] == [1, 2, 3, 4]
    assert [v.version for v in t.versions()] == [5] and len(listing(t)) < len(before)
    assert t.checkout_latest().count_rows() == 10


def test_cleanup_refuses_tagged_old_versions_unless_kept(tmp_uri) -> None:
    t = history(tmp_uri, None)
    refused = run("cleanup", tmp_uri, "--older-than", "0s", "--apply")
    assert refused.exit_code == 1 and "TagError" in refused.stderr
    kept = run_json("cleanup", tmp_uri, "--older-than", "0s", "--apply", "--keep-tagged", "--retain-versions", "2")
    assert kept["removed_versions"] == [1, 3] and [v.version for v in t.versions()] == [2, 4, 5]


def test_restore_and_tags(any_uri) -> None:
    uri, opts = any_uri
    t = history(uri, opts)
    assert run("tags", "create", uri, *opt_args(opts), "nightly", "3").exit_code == 0
    assert run("tags", "create", uri, *opt_args(opts), "head").exit_code == 0  # the latest
    assert run_json("tags", "list", uri, *opt_args(opts)) == {"head": 5, "nightly": 3, "two": 2}
    assert run("tags", "update", uri, *opt_args(opts), "nightly", "4").exit_code == 0
    assert run("tags", "delete", uri, *opt_args(opts), "head").exit_code == 0
    assert {k: v["version"] for k, v in t.tags.list().items()} == {"nightly": 4, "two": 2}
    dup = run("tags", "create", uri, *opt_args(opts), "two", "1")
    assert dup.exit_code == 1 and "already exists" in dup.stderr

    by_tag = run("restore", uri, *opt_args(opts), "two")
    assert by_tag.exit_code == 0 and "restored tag two (version 2) as version 6" in by_tag.stdout
    assert mvcc.open_table(uri, storage_options=opts).to_table().equals(t.checkout(2).to_table())
    assert run("restore", uri, *opt_args(opts), "5", "--message", "undo").exit_code == 0
    latest = mvcc.open_table(uri, storage_options=opts)
    assert latest.version == 7 and latest.transaction().message == "undo"
    assert latest.to_table().equals(t.checkout(5).to_table())
    when = t.checkout(3).timestamp.isoformat()
    assert f"restored version 3 (current at {when}) as version 8" in run("restore", uri, *opt_args(opts), when).stdout
    unknown = run("restore", uri, *opt_args(opts), "42")
    assert unknown.exit_code == 1 and "VersionNotFoundError" in unknown.stderr


def test_a_tag_wins_over_a_time_and_a_number(any_uri) -> None:
    """A bare REF is a tag when the table has one of that name (also one spelled like a date or a number),
    else a number is a version, else a time; --tag / --version / --at say which, and the output names it."""
    uri, opts = any_uri
    t = history(uri, opts)
    t.tags.create("2099-01-01", 4)
    t.tags.create("3", 2)
    out = run("restore", uri, *opt_args(opts), "2099-01-01")
    assert out.exit_code == 0 and out.stdout == "restored tag 2099-01-01 (version 4) as version 6\n", out.output
    out = run("restore", uri, *opt_args(opts), "3")
    assert out.stdout == "restored tag 3 (version 2) as version 7\n", out.output
    assert run("restore", uri, *opt_args(opts), "--version", "3").stdout == "restored version 3 as version 8\n"
    assert run("restore", uri, *opt_args(opts), "4").stdout == "restored version 4 as version 9\n"  # no tag "4"
    assert run("restore", uri, *opt_args(opts), "--tag", "3").stdout == "restored tag 3 (version 2) as version 10\n"
    at = run("restore", uri, *opt_args(opts), "--at", "2099-01-01")  # the time, not the tag: the latest then
    assert at.stdout == "restored version 10 (current at 2099-01-01T00:00:00+00:00) as version 11\n", at.output
    when = t.checkout(5).timestamp.astimezone(timezone(timedelta(hours=-5)))
    assert run_json("show", uri, *opt_args(opts), "--at", when.isoformat())["version"] == 5
    assert run_json("show", uri, *opt_args(opts), "--tag", "2099-01-01")["resolved"] == "tag 2099-01-01 (version 4)"
    scanned = run("scan", uri, *opt_args(opts), "--tag", "3", "--json").stdout.splitlines()
    assert [json.loads(line)["id"] for line in scanned] == list(range(9))  # version 2's rows
    assert mvcc.open_table(uri, storage_options=opts).version == 11  # nothing else was written


# ---- verify --------------------------------------------------------------------------------------------


def ref_of(t: mvcc.Table, kind: str) -> ReferencedFile:
    return next(f for f in version_files(t.state.store, t.manifest) if f.kind == kind)


def test_verify_passes_on_a_healthy_table(any_uri) -> None:
    uri, opts = any_uri
    t = history(uri, opts)
    t.optimize.compact_files()
    for args in ([], ["--all"], ["--all", "--deep"], ["--tag", "two", "--deep"]):
        result = run("verify", uri, *opt_args(opts), *args)
        assert result.exit_code == 0, result.output
        assert result.stdout.startswith("ok: ")
    report = run_json("verify", uri, *opt_args(opts), "--all")
    assert report["ok"] and report["versions"] == [1, 2, 3, 4, 5, 6, 7] and report["problems"] == []
    # every referenced file of every version, each once
    every = {f.uri for v in t.versions() for f in version_files(t.state.store, t.checkout(v.version).manifest)}
    assert report["files_checked"] == len(every)


def test_verify_finds_a_deleted_data_file(any_uri) -> None:
    uri, opts = any_uri
    t = history(uri, opts)
    data = ref_of(t.checkout(1), "data")  # the first fragment: referenced by every version
    data.store.delete_many([data.path])
    result = run("verify", uri, *opt_args(opts))
    assert result.exit_code == 1
    assert f"version 5: data {data.uri}: missing" in result.stdout and "1 problem(s)" in result.stderr
    report = json.loads(run("verify", uri, *opt_args(opts), "--all", "--json").stdout)
    assert {p["version"] for p in report["problems"]} == {1, 2, 3, 4, 5}


def test_verify_finds_a_truncated_manifest_and_a_resized_file(any_uri) -> None:
    uri, opts = any_uri
    t = history(uri, opts)
    loc = next(loc for loc in list_manifests(t.state.store) if loc.version == 3)
    manifest = t.state.store.get(loc.path)
    t.state.store.put(loc.path, manifest[: len(manifest) // 2])
    assert run("verify", uri, *opt_args(opts)).exit_code == 0  # the latest version is intact
    report = json.loads(run("verify", uri, *opt_args(opts), "--all", "--json").stdout)
    assert not report["ok"] and [(p["version"], p["kind"]) for p in report["problems"]] == [(3, "manifest")]
    index = ref_of(t, "index")
    index.store.put(index.path, index.store.get(index.path)[:-10])
    text = run("verify", uri, *opt_args(opts))
    assert text.exit_code == 1 and f"index {index.uri}: size {index.size - 10} bytes" in text.stdout
    # a truncated latest manifest: reported, with the way out
    latest = next(loc for loc in list_manifests(t.state.store) if loc.version == 5)
    t.state.store.put(latest.path, b"")
    broken = run("verify", uri, *opt_args(opts))
    assert broken.exit_code == 1 and f"mvcc restore {t.uri} --version 4" in broken.stdout
    shown = run("show", uri, *opt_args(opts))
    assert shown.exit_code == 1 and "the newest intact version is 4" in shown.stderr
    assert f"mvcc restore {t.uri} --version 4" in shown.stderr and shown.stderr.count("\n") == 1


def test_verify_finds_a_corrupt_deletion_file(any_uri) -> None:
    uri, opts = any_uri
    t = history(uri, opts)
    deletion = ref_of(t, "deletion")
    deletion.store.put(deletion.path, b"\x00garbage, not a roaring bitmap")
    result = run("verify", uri, *opt_args(opts))
    assert result.exit_code == 1 and f"deletion {deletion.uri}" in result.stdout and "corrupt" in result.stdout
    assert run("verify", uri, *opt_args(opts), "--version", "2").exit_code == 0  # before the delete


def test_verify_deep_reads_data_files(tmp_uri) -> None:
    t = history(tmp_uri, None)
    data = ref_of(t, "data")
    path = Path(data.uri)
    size = path.stat().st_size
    path.write_bytes(b"\x00" * size)  # same size, not Parquet any more
    assert run("verify", tmp_uri).exit_code == 0  # sizes match: only --deep can tell
    deep = run("verify", tmp_uri, "--deep")
    assert deep.exit_code == 1 and f"data {data.uri}: unreadable" in deep.stdout


# ---- behaviour: errors, exit codes, help, options -------------------------------------------------------


def test_errors_are_one_line_with_traceback_only_on_debug(tmp_path: Path) -> None:
    missing = str(tmp_path / "nothing")
    result = run("show", missing)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "TableNotFoundError" in result.stderr
    debug = run("--debug", "show", missing)
    assert debug.exit_code == 1 and "Traceback" in debug.stderr and "TableNotFoundError" in debug.stderr
    usage = run("versions", missing, "--limit", "-1")
    assert usage.exit_code == 2
    assert run("cleanup", missing, "--older-than", "seven days").exit_code == 2
    assert run("show", missing, "-o", "no-equals-sign").exit_code == 2


def bad_input_cases(table: str, missing: str) -> list[tuple[list[str], int, str]]:
    """(arguments, exit code, what the error must say) for bad input to every command: usage errors name the
    flag or argument (exit 2), failures say what is wrong in the CLI's terms (exit 1)."""
    no_table = "no table at"
    return [
        *[
            (args, 1, no_table)
            for args in (
                ["show", missing],
                ["versions", missing],
                ["scan", missing],
                ["compact", missing],
                ["compact", missing, "--dry-run"],
                ["index", "create", missing, "id"],
                ["index", "list", missing],
                ["index", "drop", missing, "id_idx"],
                ["index", "optimize", missing],
                ["cleanup", missing],
                ["restore", missing, "1"],
                ["tags", "list", missing],
                ["tags", "create", missing, "t"],
                ["tags", "update", missing, "t", "1"],
                ["tags", "delete", missing, "t"],
                ["verify", missing],
            )
        ],
        (["show", table, "--version", "-1"], 2, "--version"),
        (["show", table, "--version", ""], 2, "--version"),
        (["scan", table, "--at", "2024-13-01"], 2, "'--at': '2024-13-01' is not a time"),
        (["scan", table, "--version", "two"], 2, "'two' is not a version number; for a tag give --tag two"),
        (["show", table, "--tag", ""], 2, "'--tag': is empty"),
        (["show", table, "--tag", "two", "--version", "2"], 2, "give one of --tag, --version and --at"),
        (["scan", table, "--version", "2", "--at", "2024-01-01"], 2, "not --version and --at"),
        (["restore", table, "2", "--version", "2"], 2, "give REF or --version, not both"),
        (["restore", table], 2, "name the version to restore"),
        (["restore", table, "--tag", "nope"], 1, "has no tag 'nope'"),
        (["index", "list", table, "--version", "-3"], 2, "--version"),
        (["verify", table, "--version", "-3"], 2, "--version"),
        (["restore", table, "-2"], 2, "REF"),
        (["show", table, "--version", "99"], 1, "has no version 99"),
        (["restore", table, "no-such-tag"], 2, "'no-such-tag' is no tag of"),
        (["restore", table, "2024-13-01"], 2, "no version number and no time"),
        (["versions", table, "--limit", "-1"], 2, "--limit"),
        (["scan", table, "--limit", "x"], 2, "--limit"),
        (["scan", table, "--columns", " , "], 2, "--columns"),
        (["scan", table, "--columns", "nope"], 1, "unknown column 'nope'"),
        (["scan", table, "--json", "--format", "csv"], 2, "--json"),
        (["scan", table, "--format", "parquet"], 2, "--output"),
        (["scan", table, "--output", "rows.txt"], 2, "--format"),
        (["compact", table, "--workers", "0"], 2, "--workers"),
        (["compact", table, "--target-rows-per-fragment", "0"], 2, "--target-rows-per-fragment"),
        (["compact", table, "--materialize-deletions-threshold", "2"], 2, "--materialize-deletions-threshold"),
        (["compact", table, "--dry-run", "--message", "m"], 2, "--dry-run"),
        (["index", "create", table, "id", "--name", ""], 2, "--name"),
        (["index", "create", table, "id", "--type", "HASH"], 2, "--type"),
        (["index", "create", table, "nope"], 1, "cannot index 'nope'"),
        (["index", "drop", table, "nope"], 1, "no index named 'nope'"),
        (["cleanup", table, "--older-than", "seven days"], 2, "--older-than"),
        (["cleanup", table, "--older-than", "99999999999w"], 2, "--older-than"),
        (["cleanup", table, "--older-than", "1000000d"], 2, "--older-than 1000000d: reaches back before the year 1"),
        (["cleanup", table, "--retain-versions", "0"], 2, "--retain-versions"),
        (["cleanup", table, "--older-than", "0s"], 1, "--keep-tagged"),
        (["tags", "create", table, "two"], 1, "mvcc tags update"),
        (["tags", "create", table, "t", "0"], 2, "VERSION"),
        (["tags", "create", table, "t", "99"], 1, "no version 99"),
        (["tags", "update", table, "nope", "1"], 1, "no tag 'nope'"),
        (["tags", "delete", table, "nope"], 1, "no tag 'nope'"),
        (["verify", table, "--all", "--version", "1"], 2, "--all"),
        (["show", table, "-o", "no-equals-sign"], 2, "--storage-option"),
        (["show", table, "--no-such-flag"], 2, "--no-such-flag"),
        (["no-such-command"], 2, "no-such-command"),
    ]


def test_bad_input_names_the_flag_and_exits_by_kind(tmp_path: Path) -> None:
    table, missing = str(tmp_path / "table"), str(tmp_path / "missing")
    t = history(table, None)
    before = listing(t)
    for args, code, says in bad_input_cases(table, missing):
        result = CliRunner().invoke(cli.cli, args, catch_exceptions=False)
        assert (result.exit_code, result.stdout) == (code, ""), (args, result.output)
        assert says in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr and "error_if_tagged_old_versions" not in result.stderr, args
        if code == 1:
            assert result.stderr.startswith("mvcc: error: ") and result.stderr.count("\n") == 1, (args, result.stderr)
    assert listing(t) == before and not Path(missing).exists()  # nothing written, nothing left behind


def test_cleanup_refusal_names_the_cli_flags(tmp_uri) -> None:
    t = history(tmp_uri, None)
    t.tags.create("nightly", 3)
    refused = run("cleanup", tmp_uri, "--older-than", "0s", "--retain-versions", "1")
    assert refused.exit_code == 1
    assert "two (version 2), nightly (version 3)" in refused.stderr and "--older-than 0s" in refused.stderr
    assert "--keep-tagged" in refused.stderr and f"mvcc tags delete {tmp_uri} NAME" in refused.stderr
    assert "error_if_tagged_old_versions" not in refused.stderr
    with pytest.raises(mvcc.errors.TagError) as api:  # the API keeps its own words, and says which tags
        t.cleanup_old_versions(timedelta(0), 1)
    assert api.value.tags == {"two": 2, "nightly": 3} and "error_if_tagged_old_versions" in str(api.value)


def test_tables_keep_their_width_in_a_pipe(tmp_uri) -> None:
    long_text = "x" * 150 + "-end"
    mvcc.write_table(pa.table({"id": [1], "note": [long_text]}), tmp_uri, commit_message="m" * 120)
    scanned = run("scan", tmp_uri)  # CliRunner's stdout is not a terminal, as a pipe
    assert scanned.exit_code == 0 and long_text in scanned.stdout
    assert len(scanned.stdout.splitlines()) == 5  # top rule, header, rule, the row, bottom rule: nothing folded
    listed = run("versions", tmp_uri)
    assert "m" * 120 in listed.stdout


@pytest.mark.parametrize("seed", range(8))
def test_compact_dry_run_is_the_plan_compact_runs(tmp_path: Path, seed: int) -> None:
    """Random histories (appends of random sizes, random deletes): the dry run writes nothing, and what it
    announces is what `mvcc compact` with the same options then does."""
    rng = random.Random(seed)
    uri = str(tmp_path / "table")
    t = mvcc.write_table(rows(0, rng.randint(1, 40)), uri)
    next_id = 40
    for _ in range(rng.randint(2, 12)):
        if rng.random() < 0.3:
            t.delete(f"id % {rng.randint(2, 7)} = {rng.randint(0, 1)}")
        else:
            n = rng.randint(1, 60)
            t.append(rows(next_id, n))
            next_id += n
    target = str(rng.choice([5, 20, 50, 1000]))
    threshold = str(rng.choice([0.0, 0.1, 0.5, 1.0]))
    options = ["--target-rows-per-fragment", target, "--materialize-deletions-threshold", threshold]
    before_files, before_rows = listing(t), t.to_table().sort_by("id")
    planned = run_json("compact", uri, *options, "--dry-run")
    text = run("compact", uri, *options, "--dry-run")
    assert text.exit_code == 0 and "dry run: nothing was written" in text.stderr
    assert listing(t) == before_files and mvcc.open_table(uri).version == t.version == planned["version"]
    fragments = {f.fragment_id: f for f in t.get_fragments()}
    for task in planned["tasks"]:  # each task's totals, from the fragments it names
        named = [fragments[i] for i in task["fragments"]]
        assert task["bytes"] == sum(df.file_size_bytes for f in named for df in f.data_files())
    done = run_json("compact", uri, *options)
    after = mvcc.open_table(uri)
    if not planned["tasks"]:
        assert "would compact" not in text.stdout and done["version"] is None and after.version == t.version
        return
    n = len(planned["tasks"])
    assert f"would compact version {t.version} in {n} {'task' if n == 1 else 'tasks'}:" in text.stdout
    keys = ("fragments_before", "fragments_after", "fragments_removed", "fragments_added", "rows_rewritten")
    assert {k: planned[k] for k in keys} == {k: done[k] for k in keys}
    assert planned["bytes_read"] == done["bytes_read"]
    assert after.to_table().sort_by("id").equals(before_rows)


def test_exit_codes_are_decided_by_type() -> None:
    def conflict(cls: type[Exception]) -> Exception:
        return cls("message says nothing about retrying", uri="x")

    assert cli.exit_code_for(conflict(mvcc.RetryableConflictError)) == cli.EXIT_RETRYABLE_CONFLICT == 75
    assert cli.exit_code_for(conflict(mvcc.IncompatibleConflictError)) == cli.EXIT_INCOMPATIBLE_CONFLICT == 3
    assert cli.exit_code_for(mvcc.CommitConflictError("retryable")) == cli.EXIT_ERROR
    assert cli.exit_code_for(ValueError("x")) == cli.EXIT_ERROR


def test_every_command_has_help_with_an_example_and_version() -> None:
    def walk(group: Any, path: list[str]) -> list[list[str]]:
        out = [path]
        for name, command in group.commands.items():
            out += walk(command, [*path, name]) if hasattr(command, "commands") else [[*path, name]]
        return out

    commands = walk(cli.cli, [])
    # mvcc, its commands, those of `index`, `tags`, `branches`, `catalog`, `catalog branches` and `policy`
    assert len(commands) == 1 + 13 + 4 + 4 + 4 + 2 + 4 + 3
    for path in commands:
        result = run(*path, "--help")
        assert result.exit_code == 0 and "Example:" in result.stdout and "mvcc " in result.stdout, path
    assert run("--version").stdout == f"mvcc {mvcc.__version__}\n"


def test_durations_refs_and_storage_options() -> None:
    assert cli.parse_duration("7d") == timedelta(days=7)
    assert cli.parse_duration("1w2d12h") == timedelta(days=9, hours=12)
    assert cli.parse_duration("90m") == cli.parse_duration("1.5h") == timedelta(minutes=90)
    for bad in ("", "7", "d", "7 days", "7d-", "-7d"):
        with pytest.raises(ValueError):
            cli.parse_duration(bad)
    utc = datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert parse_time("2024-05-01T12:00:00") == parse_time("2024-05-01 12:00Z") == utc
    assert parse_time("2024-05-01T14:00:00+02:00") == utc and parse_time("2024-05-01T14:00:00+02:00").tzinfo
    assert parse_time("2024-05-01") == datetime(2024, 5, 1, tzinfo=UTC)
    for bad in ("", " ", "12", "nightly", "2024", "2024-13-01", "2026-01-01T25:00", "2024-05-01-rc1"):
        with pytest.raises(ValueError, match="ISO 8601"):
            parse_time(bad)
    for delta in (timedelta(0), timedelta(days=7), timedelta(days=1, hours=12), timedelta(minutes=90, seconds=5)):
        assert cli.parse_duration(cli.format_duration(delta)) == delta
    env = {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_ENDPOINT_URL": "http://e", "AWS_REGION": "r"}
    assert cli.storage_options_for("s3://b/t", ["aws_region=x"], env) == {
        "aws_access_key_id": "k",
        "aws_secret_access_key": "s",
        "aws_endpoint": "http://e",
        "aws_region": "x",
    }
    assert cli.storage_options_for("/local/t", [], env) is None  # AWS_* only for s3://


@pytest.mark.s3
def test_s3_credentials_from_the_aws_environment(s3_uri, s3_options) -> None:
    t = history(s3_uri, s3_options)
    env = {
        "AWS_ACCESS_KEY_ID": s3_options["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": s3_options["aws_secret_access_key"],
        "AWS_ENDPOINT_URL": s3_options["aws_endpoint"],
        "AWS_REGION": s3_options["aws_region"],
    }
    result = run("show", s3_uri, "--json", env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rows"] == t.count_rows()


def test_progress_bar_only_on_a_terminal(monkeypatch) -> None:
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    with cli.progress_bar("x") as progress:
        assert progress is None  # pytest captures stderr: not a terminal
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich's switch for "treat the stream as a terminal"
    with cli.progress_bar("x") as progress:
        assert progress is not None
        progress(1, 2)
    with cli.progress_bar("x", enabled=False) as progress:
        assert progress is None


# ---- the installed script, in real processes ----------------------------------------------------------------


def script() -> list[str]:
    if os.environ.get("MVCC_SCRIPT"):
        return [os.environ["MVCC_SCRIPT"]]
    installed = Path(sys.executable).with_name("mvcc")
    if installed.exists():
        return [str(installed)]
    return [sys.executable, "-m", "mvcc_core.cli"]


def script_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MVCC_"))}
    # this checkout's package, even when the script found belongs to an editable install of another one
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return {**env, **extra}


def test_console_script_is_declared() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert declared == {"mvcc": "mvcc_core.cli:main"}
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.startswith("click") for d in deps) and any(d.startswith("rich") for d in deps)


@pytest.mark.s3
@pytest.mark.slow
def test_script_on_s3_through_aws_variables(s3_uri, s3_options) -> None:
    t = history(s3_uri, s3_options)
    env = script_env(
        AWS_ACCESS_KEY_ID=s3_options["aws_access_key_id"],
        AWS_SECRET_ACCESS_KEY=s3_options["aws_secret_access_key"],
        AWS_ENDPOINT_URL=s3_options["aws_endpoint"],
        AWS_REGION=s3_options["aws_region"],
    )
    done = subprocess.run([*script(), "versions", s3_uri, "--json"], env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [v["version"] for v in json.loads(done.stdout)] == [v.version for v in reversed(t.versions())]
    assert done.stderr == b""  # piped: no progress bar, no colour codes
    version = subprocess.run([*script(), "--version"], env=env, capture_output=True, timeout=60)
    assert version.stdout.decode() == f"mvcc {mvcc.__version__}\n"
    missing = subprocess.run([*script(), "show", f"{s3_uri}-none"], env=env, capture_output=True, timeout=120)
    assert missing.returncode == 1 and missing.stderr.decode().count("\n") == 1


def race(uri: str, args: list[str], commits_before_hold: int, conflicting: Any) -> subprocess.CompletedProcess[str]:
    """Run `mvcc ARGS` with every manifest publish held for a while; once the command has written its
    `commits_before_hold`-th transaction file (and is held before publishing it), run `conflicting()` here."""
    transactions = Path(uri) / "_transactions"
    start = len(list(transactions.iterdir()))
    env = script_env(MVCC_FAILPOINTS="commit.before_manifest_put=sleep(3)")
    proc = subprocess.Popen([*script(), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(list(transactions.iterdir())) < start + commits_before_hold:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the command never wrote its transaction"
            time.sleep(0.02)
        conflicting()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.slow
def test_script_exit_code_of_an_incompatible_conflict(tmp_uri) -> None:
    t = history(tmp_uri, None)
    done = race(tmp_uri, ["index", "create", tmp_uri, "kind"], 1, lambda: t.restore(2))
    assert done.returncode == cli.EXIT_INCOMPATIBLE_CONFLICT == 3, done.stderr
    assert "IncompatibleConflictError" in done.stderr and done.stderr.count("\n") == 1
    assert [i["name"] for i in mvcc.open_table(tmp_uri).list_indices()] == []  # version 2 had none


@pytest.mark.slow
def test_script_exit_code_of_a_retryable_conflict(tmp_uri) -> None:
    t = history(tmp_uri, None)
    # compaction commits ReserveFragments, then its Rewrite: a column rewrite lands while the Rewrite is held (a
    # delete would be carried onto the new fragments, docs/reference/conflicts.md; a REWRITE_COLUMNS update cannot be)
    done = race(
        tmp_uri, ["compact", tmp_uri], 2, lambda: t.update({"kind": "'z'"}, where="id = 2", mode="rewrite_columns")
    )
    assert done.returncode == cli.EXIT_RETRYABLE_CONFLICT == 75, done.stderr
    assert "RetryableConflictError" in done.stderr
    rerun = subprocess.run([*script(), "compact", tmp_uri], env=script_env(), capture_output=True, timeout=120)
    assert rerun.returncode == 0 and b"compacted into version" in rerun.stdout
    assert sorted(mvcc.open_table(tmp_uri).to_table().column("id").to_pylist()) == [0, *range(2, 11)]


@pytest.mark.slow
def test_a_closed_pipe_ends_the_command_quietly(tmp_uri) -> None:
    """`mvcc scan URI | head -1`, `mvcc show URI | head -0`: the reader leaves early; no traceback, no error
    line, exit 141 (128 + SIGPIPE, as git's)."""
    t = mvcc.write_table(rows(0, 200_000), tmp_uri)
    t.append(rows(200_000, 1))
    proc = subprocess.Popen(
        [*script(), "scan", tmp_uri, "--format", "csv"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=script_env(),
    )
    assert proc.stdout is not None and proc.stdout.readline()
    proc.stdout.close()  # what `head -1` does once it has its line
    _, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (cli.EXIT_BROKEN_PIPE, b"")
    for args in (["show", tmp_uri], ["versions", tmp_uri], ["scan", tmp_uri, "--limit", "3"], ["verify", tmp_uri]):
        read_end, write_end = os.pipe()
        os.close(read_end)  # the reader is gone before the first line: every write fails
        done = subprocess.run(
            [*script(), *args], stdout=write_end, stderr=subprocess.PIPE, env=script_env(), timeout=120
        )
        os.close(write_end)
        assert (done.returncode, done.stderr) == (cli.EXIT_BROKEN_PIPE, b""), (args, done.stderr)


def test_scan_reads_a_branch(any_uri) -> None:
    uri, opts = any_uri
    t = history(uri, opts)
    t.create_branch("audit").append(rows(100, 2))
    lines = run("scan", uri, *opt_args(opts), "--branch", "audit", "--json").stdout.splitlines()
    assert sorted(json.loads(line)["id"] for line in lines) == sorted(
        t.to_table().column("id").to_pylist() + [100, 101]
    )
    main = run("scan", uri, *opt_args(opts), "--json").stdout.splitlines()
    assert len(main) == t.count_rows()
    fork = run("scan", uri, *opt_args(opts), "--branch", "audit", "--version", "5", "--json").stdout.splitlines()
    assert len(fork) == t.count_rows()  # the branch's first version is main's 5
    missing = run("scan", uri, *opt_args(opts), "--branch", "nope")
    assert missing.exit_code == 1 and "nope" in missing.stderr
