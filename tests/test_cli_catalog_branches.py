"""`mvcc catalog branches list|create|delete|publish ROOT` (docs/guide/cli.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from catalog_helpers import IDS, make
from click.testing import CliRunner, Result

import mvcc_core as mvcc
from mvcc_core import cli, failpoints
from mvcc_core.catalog import Catalog


def run(*args: Any) -> Result:
    return CliRunner().invoke(cli.cli, [str(a) for a in args], catch_exceptions=False)


def run_json(*args: Any) -> Any:
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(params=["memory", "local"])
def root(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue("memory_uri" if request.param == "memory" else "tmp_uri")


def ids(cat: Catalog, name: str, branch: str | None = None) -> list[int]:
    return sorted(cat.table(name, branch=branch).to_table()["id"].to_pylist())


def test_create_list_publish_and_delete(root: str) -> None:
    cat = make(root)
    assert run("catalog", "branches", "list", root).stdout.strip() == "no catalog branches"
    point = cat.latest_version
    created = run("catalog", "branches", "create", root, "audit")
    assert created.exit_code == 0 and created.stdout == f"created catalog branch audit at catalog version {point}\n"
    with cat.transaction(branch="audit") as tx:
        tx.table("s.a").append(pa.table({"id": [10]}))
        tx.table("s.b").delete("id = 2")
    with cat.transaction() as tx:  # main moves on another table meanwhile
        tx.table("s.c").append(pa.table({"id": [30]}))
    [listed] = run_json("catalog", "branches", "list", root)
    assert {k: listed[k] for k in ("branch", "parent_version", "latest_version", "tables_written")} == {
        "branch": "audit",
        "parent_version": point,
        "latest_version": point + 1,
        "tables_written": ["s.a", "s.b"],
    }
    table = run("catalog", "branches", "list", root).stdout
    assert "audit" in table and "s.a, s.b" in table
    published = run_json("catalog", "branches", "publish", root, "audit", "-m", "audited")
    assert published == {
        "branch": "audit",
        "into": "main",
        "version": point + 2,
        "published": True,
        "tables": ["s.a", "s.b"],
        "branch_deleted": False,
    }
    assert (ids(cat, "s.a"), ids(cat, "s.b"), ids(cat, "s.c")) == ([1, 2, 3, 10], [1, 3], [1, 2, 3, 30])
    assert cat.versions()[-1].message == "audited"
    again = run("catalog", "branches", "publish", root, "audit", "--delete-branch")
    assert again.exit_code == 0 and again.stdout == (
        f"catalog branch audit has nothing new; main stays at catalog version {point + 2}\n"
        "deleted catalog branch audit\n"
    )
    assert run_json("catalog", "branches", "list", root) == [] and cat.branches() == {}
    assert cat.latest_version == point + 2


def test_delete_names_the_forks_it_removes_and_publish_text(root: str) -> None:
    cat = make(root)
    assert run("catalog", "branches", "create", root, "dev").exit_code == 0
    with cat.transaction(branch="dev") as tx:
        tx.table("s.c").append(pa.table({"id": [4]}))
    published = run("catalog", "branches", "publish", root, "dev")
    assert published.stdout == f"published catalog branch dev as catalog version {cat.latest_version} (s.c)\n"
    deleted = run("catalog", "branches", "delete", root, "dev")
    assert deleted.exit_code == 0 and deleted.stdout == "deleted catalog branch dev and its forks of s.c\n"
    assert cat.table("s.c").branches.list() == {} and ids(cat, "s.c") == [1, 2, 3, 4]


def test_a_conflict_with_main_exits_by_kind_and_leaves_main_untouched(root: str) -> None:
    cat = make(root)
    cat.create_branch("dev")
    with cat.transaction(branch="dev") as tx:
        tx.table("s.a").append(pa.table({"id": [10]}))
    cat.drop_table("s.a")  # the table the branch wrote is gone from main: nothing can make the publish meaningful
    before = cat.latest_version
    refused = run("catalog", "branches", "publish", root, "dev", "--delete-branch")
    assert refused.exit_code == cli.EXIT_INCOMPATIBLE_CONFLICT and refused.stdout == ""
    assert "IncompatibleCatalogConflictError" in refused.stderr and "Traceback" not in refused.stderr
    assert cat.latest_version == before and list(cat.branches()) == ["dev"]  # not deleted either


def bad_input(root: str, table: str, missing: str) -> list[tuple[list[str], str]]:
    """(arguments after `mvcc catalog`, what stderr must say) of every catalog command given bad input."""
    out: list[tuple[list[str], str]] = []
    for command in (["branches", "list"], ["branches", "create", "x"], ["branches", "delete", "x"], ["cleanup"]):
        out.append(([*command[:2], missing, *command[2:]], f"no catalog at {missing}"))
        out.append(([*command[:2], table, *command[2:]], f"{table} is a table, not a catalog"))
    out.append((["branches", "publish", missing, "x"], f"no catalog at {missing}"))
    for command in ("delete", "publish"):
        out.append((["branches", command, root, "nope"], f"catalog {root} has no branch 'nope' (its branches: dev; "))
    out.append((["branches", "create", root, "dev"], f"delete it with: mvcc catalog branches delete {root} dev"))
    out.append((["branches", "create", root, "a/b"], "invalid branch name 'a/b'"))
    out.append((["branches", "create", root, "main"], "'main' is the default branch"))
    return out


def test_bad_input_is_one_line_in_the_commands_words_and_leaves_nothing(tmp_path: Path) -> None:
    root, table, missing = str(tmp_path / "cat"), str(tmp_path / "table"), str(tmp_path / "missing")
    cat = make(root)
    cat.create_branch("dev")
    mvcc.write_table(pa.table({"id": [1]}), table)
    files = sorted(p for p in tmp_path.rglob("*"))
    for args, says in bad_input(root, table, missing):
        result = run("catalog", *args)
        assert (result.exit_code, result.stdout) == (1, ""), (args, result.output)
        assert result.stderr.startswith("mvcc: error: ") and result.stderr.count("\n") == 1, (args, result.stderr)
        assert says in result.stderr and "__manifest" not in result.stderr.replace("__manifest/", ""), result.stderr
    assert sorted(p for p in tmp_path.rglob("*")) == files and not Path(missing).exists()  # nothing written
    assert list(cat.branches()) == ["dev"]


def test_create_after_a_delete_that_stopped_half_way_says_what_to_run(memory_uri: str) -> None:
    cat = make(memory_uri)
    cat.create_branch("dev")
    with cat.transaction(branch="dev") as tx:
        tx.table("s.a").append(pa.table({"id": [10]}))
    with failpoints.armed("catalog.branch.delete.after_catalog", "raise"), pytest.raises(mvcc.errors.FailpointError):
        cat.delete_branch("dev")
    refused = run("catalog", "branches", "create", memory_uri, "dev")
    assert refused.exit_code == 1 and "catalog.cleanup()" not in refused.stderr
    assert f"reclaim them first with: mvcc catalog cleanup {memory_uri} --apply" in refused.stderr
    assert cat.branches() == {}
    again = run("catalog", "branches", "delete", memory_uri, "dev")  # the catalog's branch is gone: cleanup it is
    assert again.exit_code == 1 and f"stopped half-way are reclaimed by: mvcc catalog cleanup {memory_uri} --apply" in (
        again.stderr
    )
    fork = f"{cat.snapshot().entry('s.a').path}@dev"
    planned = run_json("catalog", "cleanup", memory_uri)
    assert planned["dry_run"] and planned["forks_removed"] == [fork]
    assert "dev" in cat.table("s.a").branches.list()  # the dry run deleted nothing
    applied = run("catalog", "cleanup", memory_uri, "--apply")
    assert applied.exit_code == 0 and f"forks: {fork}\n" in applied.stdout
    assert cat.table("s.a").branches.list() == {} and ids(cat, "s.a") == [1, 2, 3]
    assert run("catalog", "branches", "create", memory_uri, "dev").exit_code == 0


@pytest.mark.s3
@pytest.mark.slow  # about 3 s on the session's moto server
def test_on_s3_with_storage_options_and_the_aws_variables(s3_uri: str, s3_options: dict[str, Any]) -> None:
    cat = Catalog.create(s3_uri, storage_options=s3_options)
    cat.create_schema("s")
    with cat.transaction() as tx:
        tx.create_table("s.a", IDS)
        tx.table("s.a").append(pa.table({"id": [1]}))
    flags = [arg for key, value in s3_options.items() for arg in ("-o", f"{key}={value}")]
    assert run("catalog", "branches", "create", s3_uri, "dev", *flags).exit_code == 0
    with cat.transaction(branch="dev") as tx:
        tx.table("s.a").append(pa.table({"id": [2]}))
    env = {
        "AWS_ACCESS_KEY_ID": s3_options["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": s3_options["aws_secret_access_key"],
        "AWS_ENDPOINT_URL": s3_options["aws_endpoint"],
        "AWS_REGION": s3_options["aws_region"],
    }
    runner = CliRunner(env=env)
    listed = runner.invoke(cli.cli, ["catalog", "branches", "list", s3_uri, "--json"], catch_exceptions=False)
    assert [b["tables_written"] for b in json.loads(listed.stdout)] == [["s.a"]]
    published = runner.invoke(cli.cli, ["catalog", "branches", "publish", s3_uri, "dev", "--delete-branch", "--json"])
    assert json.loads(published.stdout)["tables"] == ["s.a"]
    assert ids(cat, "s.a") == [1, 2] and cat.branches() == {}


def test_a_row_conflict_runs_the_writes_again_and_one_that_cannot_exits_3(root: str) -> None:
    """Main deleted a row the branch deleted too: the core runs the branch's writes again on main's rows, so one
    command publishes. An overwrite cannot run again: exit 3 with what to do, on every run (never 75, which
    `until ...; [ $? -ne 75 ]` would loop on), main untouched and the branch kept."""
    cat = make(root)
    for name in ("dev", "dev2"):
        cat.create_branch(name)
    with cat.transaction(branch="dev") as tx:
        tx.table("s.a").delete("id = 1")
        tx.table("s.b").append(pa.table({"id": [4]}))
    with cat.transaction(branch="dev2") as tx:
        tx.table("s.c").overwrite(pa.table({"id": [7]}), where="id >= 2")
    with cat.transaction() as tx:
        tx.table("s.a").delete("id = 1")
        tx.table("s.c").delete("id = 2")
    published = run_json("catalog", "branches", "publish", root, "dev")
    assert published["published"] and published["tables"] == ["s.b"]  # s.a: its delete was main's already
    assert ids(cat, "s.a") == [2, 3] and ids(cat, "s.b") == [1, 2, 3, 4]
    before = cat.latest_version
    for _ in range(2):
        refused = run("catalog", "branches", "publish", root, "dev2")
        assert refused.exit_code == cli.EXIT_INCOMPATIBLE_CONFLICT, refused.stderr
        assert "IncompatibleCatalogConflictError" in refused.stderr and "can run again" in refused.stderr
        assert "delete the branch" in refused.stderr
    assert cat.latest_version == before and ids(cat, "s.c") == [1, 3] and "dev2" in cat.branches()
