"""`mvcc cleanup` follows the table's `mvcc.retention.*` policy when no flag is given, an explicit flag wins, and
every run says where each setting came from; real tables on a local disk and in memory."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner, Result

import mvcc_core as mvcc
from mvcc_core import cli


def run(*args: Any) -> Result:
    return CliRunner().invoke(cli.cli, [str(a) for a in args], catch_exceptions=False)


def versions(uri: str, policy: dict[str, str] | None = None) -> mvcc.Table:
    """Versions 1..5 of appends, then (with `policy`) one UpdateConfig setting it: version 6."""
    t = mvcc.write_table(pa.table({"id": [0]}), uri)
    for i in range(1, 5):
        t.append(pa.table({"id": [i]}))
    if policy:
        t.update_config(policy)
    return t


def dry(uri: str, *flags: str) -> dict[str, Any]:
    result = run("cleanup", uri, *flags, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("where", ["local", "memory"])
def test_no_flag_follows_the_tables_policy(where: str, tmp_uri: str, memory_uri: str) -> None:
    uri = tmp_uri if where == "local" else memory_uri
    t = versions(uri, {"mvcc.retention.older_than": "0s", "mvcc.retention.retain_versions": "2"})
    plan = dry(uri)
    assert plan["removed_versions"] == [1, 2, 3, 4]  # all but the newest 2 (5 and the policy's own 6)
    assert (plan["older_than"], plan["older_than_from"]) == ("0s", "table")
    assert (plan["retain_versions"], plan["retain_versions_from"]) == (2, "table")
    text = run("cleanup", uri, "--dry-run")
    assert text.exit_code == 0, text.output
    assert (
        "retention: older than 0s (the table's mvcc.retention.older_than); versions kept whatever their age: the "
        "newest 2 (the table's mvcc.retention.retain_versions)" in text.stdout
    )
    assert "would remove 4 versions (1-4)" in text.stdout and "--apply" in text.stderr
    assert [v.version for v in mvcc.open_table(uri).versions()] == [1, 2, 3, 4, 5, 6]  # a dry run
    applied = run("cleanup", uri, "--apply", "--json")
    assert applied.exit_code == 0, applied.output
    assert [v.version for v in mvcc.open_table(uri).versions()] == [5, 6]
    assert mvcc.open_table(uri).count_rows() == t.count_rows()


def test_an_explicit_flag_wins_over_the_policy(tmp_uri: str) -> None:
    versions(tmp_uri, {"mvcc.retention.older_than": "0s", "mvcc.retention.retain_versions": "2"})
    young = dry(tmp_uri, "--older-than", "7d")
    assert young["removed_versions"] == [] and young["older_than_from"] == "flag"
    assert young["retain_versions_from"] == "table"
    fewer = dry(tmp_uri, "--retain-versions", "4")
    assert fewer["removed_versions"] == [1, 2] and fewer["retain_versions_from"] == "flag"
    assert fewer["older_than_from"] == "table"
    text = run("cleanup", tmp_uri, "--retain-versions", "4")
    assert (
        "the newest 4 (--retain-versions)" in text.stdout and "(the table's mvcc.retention.older_than)" in text.stdout
    )


def test_without_policy_or_flag_the_default_applies_and_says_so(tmp_uri: str) -> None:
    versions(tmp_uri)
    plan = dry(tmp_uri)
    assert plan["removed_versions"] == [] and (plan["older_than"], plan["older_than_from"]) == ("14d", "default")
    assert (plan["retain_versions"], plan["retain_versions_from"]) == (None, "default")
    text = run("cleanup", tmp_uri)
    assert "older than 14d (the default); versions kept whatever their age: none (the default: no floor)" in text.stdout


def test_a_tagged_version_refusal_names_the_key_the_age_came_from(tmp_uri: str) -> None:
    t = versions(tmp_uri, {"mvcc.retention.older_than": "0s"})
    t.tags.create("keep", 2)
    refused = run("cleanup", tmp_uri, "--apply")
    assert refused.exit_code == 1
    assert "cleanup with mvcc.retention.older_than=0s (the table's policy) would remove tagged versions" in (
        refused.stderr
    )
    assert "keep (version 2)" in refused.stderr and len(mvcc.open_table(tmp_uri).versions()) == 6


def test_a_bad_policy_value_is_reported_with_the_way_out(tmp_uri: str) -> None:
    t = versions(tmp_uri)
    t.commit(mvcc.operations.UpdateConfig.of({"mvcc.retention.older_than": "a fortnight"}, []))
    bad = run("cleanup", tmp_uri)
    assert bad.exit_code == 1
    assert "the table's mvcc.retention.older_than=a fortnight is not valid: not a duration" in bad.stderr
    assert "mvcc policy set URI mvcc.retention.older_than=VALUE" in bad.stderr and "--older-than" in bad.stderr
    assert dry(tmp_uri, "--older-than", "0s")["older_than_from"] == "flag"  # the flag needs no policy


def test_apply_and_dry_run_together_is_a_usage_error(tmp_uri: str) -> None:
    versions(tmp_uri)
    both = run("cleanup", tmp_uri, "--apply", "--dry-run")
    assert both.exit_code == 2 and "not both" in both.stderr
