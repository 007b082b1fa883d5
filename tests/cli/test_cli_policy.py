"""`mvcc policy show|set|unset` on real tables (local, memory://, the local S3 server): what each key is and where
its value comes from, one commit per `set`/`unset`, and a bad key or value refused in the command's words with
nothing committed."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner, Result

import mvcc_core as mvcc
from mvcc_core import cli
from mvcc_core.maintenance import policy

PYTHON_WORDS = ("invalid literal", "could not convert", "Traceback", "ValueError")


def run(*args: Any) -> Result:
    return CliRunner().invoke(cli.cli, [str(a) for a in args], catch_exceptions=False)


def table(uri: str, opts: dict[str, Any] | None = None) -> mvcc.Table:
    t = mvcc.write_table(pa.table({"id": list(range(10)), "day": ["a"] * 10}), uri, storage_options=opts)
    t.append(pa.table({"id": [10], "day": ["b"]}))
    return t


def opt_args(opts: dict[str, Any] | None) -> list[str]:
    return [a for k, v in (opts or {}).items() for a in ("-o", f"{k}={v}")]


def shown(uri: str, *extra: str) -> dict[str, Any]:
    result = run("policy", "show", uri, *extra, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("where", ["local", "memory"])
def test_show_set_unset(where: str, tmp_uri: str, memory_uri: str) -> None:
    uri = tmp_uri if where == "local" else memory_uri
    t = table(uri)
    before = shown(uri)
    assert list(before["policy"]) == list(policy.POLICY_KEYS)
    assert all(e["source"] == "default" for e in before["policy"].values())
    assert before["policy"][policy.RETENTION_OLDER_THAN]["value"] == "14d"
    assert before["policy"][policy.TARGET_ROWS_PER_FRAGMENT]["value"] == "1048576"
    assert before["policy"][policy.MAX_BYTES]["value"] is None
    assert before["policy"][policy.MAX_BYTES]["unset"] == "no budget"

    done = run("policy", "set", uri, "mvcc.retention.older_than=7d", "mvcc.compaction.max_bytes=512MiB", "-m", "p")
    assert done.exit_code == 0, done.output
    after = mvcc.open_table(uri)
    assert after.version == t.version + 1  # one commit for both keys
    assert after.versions()[-1].operation == "UpdateConfig" and after.versions()[-1].message == "p"
    assert after.config[policy.RETENTION_OLDER_THAN] == "7d" and after.config[policy.MAX_BYTES] == "512MiB"
    assert f"in version {after.version}" in done.stdout
    now = shown(uri)["policy"]
    assert (now[policy.RETENTION_OLDER_THAN]["value"], now[policy.RETENTION_OLDER_THAN]["source"]) == ("7d", "table")
    assert now[policy.MAX_BYTES]["source"] == "table" and now[policy.TARGET_ROWS_PER_FRAGMENT]["source"] == "default"
    text = run("policy", "show", uri)
    line = next(x for x in text.stdout.splitlines() if policy.RETENTION_OLDER_THAN in x)
    assert "7d" in line and "table" in line
    line = next(x for x in text.stdout.splitlines() if policy.RETAIN_VERSIONS in x)
    assert "default: no floor" in line

    same = run("policy", "set", uri, " mvcc.retention.older_than = 7d ")  # spaces around the key and value
    assert same.exit_code == 0 and "unchanged" in same.stdout and mvcc.open_table(uri).version == after.version

    removed = run("policy", "unset", uri, policy.MAX_BYTES, policy.RETAIN_VERSIONS)
    assert removed.exit_code == 0, removed.output
    assert "not set on the table: mvcc.retention.retain_versions" in removed.stderr
    last = mvcc.open_table(uri)
    assert last.version == after.version + 1 and policy.MAX_BYTES not in last.config
    assert last.config[policy.RETENTION_OLDER_THAN] == "7d"
    assert shown(uri)["policy"][policy.MAX_BYTES]["source"] == "default"
    nothing = run("policy", "unset", uri, policy.MAX_BYTES)
    assert nothing.exit_code == 0 and "nothing to remove" in nothing.stdout
    assert mvcc.open_table(uri).version == last.version


@pytest.mark.parametrize(
    ("pairs", "words"),
    [
        (["mvcc.retention.older_than=7 days"], ["mvcc.retention.older_than", "a duration, e.g. 14d"]),
        (["mvcc.retention.retain_versions=many"], ["mvcc.retention.retain_versions", "a positive whole number"]),
        (["mvcc.retention.retain_versions=0"], ["mvcc.retention.retain_versions=0", "it must be positive"]),
        (["mvcc.compaction.target_rows_per_fragment=1.5"], ["target_rows_per_fragment", "positive whole number"]),
        (["mvcc.compaction.materialize_deletions_threshold=lots"], ["materialize_deletions_threshold", "[0, 1]"]),
        (["mvcc.compaction.max_bytes=12 parsecs"], ["mvcc.compaction.max_bytes", "128MiB"]),
        (["mvcc.compaction.zorder_by=id"], ["mvcc.compaction.zorder_by", "2 to 4"]),
        (["mvcc.compaction.sort_by=nope"], ["mvcc.compaction.sort_by", "'nope'", "does not have"]),
        (["mvcc.compaction.sort_by=id", "mvcc.compaction.zorder_by=id,day"], ["cannot both be set"]),
        (["mvcc.retention.retain=3"], ["mvcc.retention.retain is not a policy key", "mvcc.retention.retain_versions?"]),
        (["mvcc.compaction.tagret_rows_per_fragment=5"], ["did you mean mvcc.compaction.target_rows_per_fragment?"]),
        (["owner=me"], ["owner is not a policy key", "mvcc.retention.older_than"]),
        (["mvcc.retention.older_than"], ["is not KEY=VALUE"]),
        (["mvcc.retention.older_than="], ["give a value", "mvcc policy unset"]),
        (["mvcc.retention.older_than=7d", "mvcc.retention.older_than=8d"], ["given twice"]),
        # a good pair beside a bad one: nothing is committed, not even the good one
        (["mvcc.retention.older_than=7d", "mvcc.retention.retain_versions=-1"], ["retain_versions=-1"]),
    ],
)
def test_a_bad_key_or_value_is_refused_and_nothing_is_committed(tmp_uri: str, pairs: list[str], words: list[str]):
    t = table(tmp_uri)
    result = run("policy", "set", tmp_uri, *pairs)
    assert result.exit_code == 2, result.output
    for word in words:
        assert word in result.stderr, (word, result.stderr)
    assert not any(w in result.output for w in PYTHON_WORDS), result.output
    latest = mvcc.open_table(tmp_uri)
    assert latest.version == t.version and latest.config == t.config


def test_unset_refuses_an_unknown_key_but_removes_a_bad_one_written_around_the_check(tmp_uri: str) -> None:
    t = table(tmp_uri)
    typo = run("policy", "unset", tmp_uri, "mvcc.retention.retain_version")
    assert typo.exit_code == 2 and "did you mean mvcc.retention.retain_versions?" in typo.stderr
    assert mvcc.open_table(tmp_uri).version == t.version
    # a raw UpdateConfig skips update_config's check: show says the value cannot be used, unset removes it
    t.commit(mvcc.operations.UpdateConfig.of({policy.RETAIN_VERSIONS: "lots", "mvcc.compaction.old_key": "1"}, []))
    entries = shown(tmp_uri)["policy"]
    assert entries[policy.RETAIN_VERSIONS]["source"] == "table"
    assert "use a positive whole number" in entries[policy.RETAIN_VERSIONS]["problem"]
    assert "not a policy key" in entries["mvcc.compaction.old_key"]["problem"]
    assert "NOT USABLE" in run("policy", "show", tmp_uri).stdout
    t.commit(
        mvcc.operations.UpdateConfig.of({"mvcc.compaction.sort_by": "id", "mvcc.compaction.zorder_by": "id,day"}, [])
    )
    entries = shown(tmp_uri)["policy"]
    assert "both clustering keys are set" in entries["mvcc.compaction.sort_by"]["problem"]
    assert "both clustering keys are set" in entries["mvcc.compaction.zorder_by"]["problem"]
    removed = run("policy", "unset", tmp_uri, policy.RETAIN_VERSIONS, "mvcc.compaction.old_key")
    assert removed.exit_code == 0, removed.output
    config = mvcc.open_table(tmp_uri).config
    assert policy.RETAIN_VERSIONS not in config and "mvcc.compaction.old_key" not in config


@pytest.mark.s3
def test_policy_on_s3(s3_uri: str, s3_options: dict[str, Any]) -> None:
    t = table(s3_uri, s3_options)
    opts = opt_args(s3_options)
    assert run("policy", "set", s3_uri, *opts, "mvcc.retention.retain_versions=3").exit_code == 0
    assert mvcc.open_table(s3_uri, storage_options=s3_options).version == t.version + 1
    entries = shown(s3_uri, *opts)["policy"]
    assert (entries[policy.RETAIN_VERSIONS]["value"], entries[policy.RETAIN_VERSIONS]["source"]) == ("3", "table")
    bad = run("policy", "set", s3_uri, *opts, "mvcc.retention.retain_versions=three")
    assert bad.exit_code == 2 and mvcc.open_table(s3_uri, storage_options=s3_options).version == t.version + 1
