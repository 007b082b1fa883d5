"""`mvcc branches list|create|delete|publish`."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from click.testing import CliRunner, Result

import mvcc_core as mvcc
from mvcc_core import cli


def run(*args: Any) -> Result:
    return CliRunner().invoke(cli.cli, [str(a) for a in args], catch_exceptions=False)


def test_branches_commands_create_list_publish_and_delete(tmp_uri: str) -> None:
    t = mvcc.write_table(pa.table({"id": [1, 2]}), tmp_uri)
    t.append(pa.table({"id": [3]}))
    assert run("branches", "list", tmp_uri).output.strip() == "no branches"
    created = run("branches", "create", tmp_uri, "audit", "--version", 1)
    assert created.exit_code == 0 and "created branch audit at version 1 of main" in created.output
    mvcc.open_table(tmp_uri, branch="audit").append(pa.table({"id": [9]}))
    assert run("branches", "create", tmp_uri, "sub", "--from-branch", "audit").exit_code == 0
    listed = json.loads(run("branches", "list", tmp_uri, "--json").stdout)
    assert [(b["branch"], b["parent_branch"], b["parent_version"], b["latest_version"]) for b in listed] == [
        ("audit", "main", 1, 2),
        ("sub", "audit", 2, 2),
    ]
    mvcc.open_table(tmp_uri, branch="sub").append(pa.table({"id": [10]}))
    into_audit = json.loads(run("branches", "publish", tmp_uri, "sub", "--delete-branch", "--json").stdout)
    assert into_audit == {"branch": "sub", "into": "audit", "version": 3, "published": True}
    published = run("branches", "publish", tmp_uri, "audit", "-m", "audited")
    assert published.exit_code == 0 and "published branch audit as version 3 of main" in published.output
    assert sorted(mvcc.open_table(tmp_uri).to_table()["id"].to_pylist()) == [1, 2, 3, 9, 10]
    assert "nothing new" in run("branches", "publish", tmp_uri, "audit").output
    assert run("branches", "delete", tmp_uri, "audit").exit_code == 0
    assert json.loads(run("branches", "list", tmp_uri, "--json").stdout) == []


def test_branches_commands_refuse_bad_input_in_their_own_words(tmp_uri: str) -> None:
    mvcc.write_table(pa.table({"id": [1]}), tmp_uri).create_branch("audit")
    again = run("branches", "create", tmp_uri, "audit")
    assert again.exit_code == 1 and f"mvcc branches delete {tmp_uri} audit" in again.stderr
    bad = run("branches", "create", tmp_uri, "a/b")
    assert bad.exit_code == 1 and "invalid branch name 'a/b'" in bad.stderr
    assert run("branches", "create", tmp_uri, "x", "--version", "-3").exit_code == 2  # usage error, named
    for args in (("delete", "nope"), ("publish", "nope")):
        missing = run("branches", *args[:1], tmp_uri, *args[1:])
        assert missing.exit_code == 1 and "has no branch 'nope'" in missing.stderr
    assert mvcc.open_table(tmp_uri).branches.list().keys() == {"audit"}  # nothing left behind


def test_publish_of_a_write_that_cannot_run_again_exits_3_every_time(tmp_uri: str) -> None:
    t = mvcc.write_table(pa.table({"id": [1, 2, 3]}), tmp_uri)
    b = t.create_branch("feat")
    b.overwrite(pa.table({"id": [7]}))  # an overwrite is not recorded in a form a publish can run again
    t.delete("id = 2")  # main changed the rows the branch replaced
    before = mvcc.open_table(tmp_uri).version
    for _ in range(2):  # not "run again" (75): the answer does not change
        refused = run("branches", "publish", tmp_uri, "feat")
        assert refused.exit_code == 3 and "redo its writes on a new one" in refused.stderr
    assert mvcc.open_table(tmp_uri).version == before
