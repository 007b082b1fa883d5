"""`mvcc verify` (core and CLI) checks every file under `_refs/`: each branch ref decodes, its parent exists
without a cycle and has the fork version, each branch's files exist, each tag names an existing version, and
nothing else lies there (a temporary file of a killed write is a warning, or a problem when it ends like a final
name). Each damage is made on a real local table and must turn `ok` into one problem and exit 1."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

import mvcc_core as mvcc
from mvcc_core import cli
from mvcc_core.format.referenced_files import version_files
from mvcc_core.verify import verify


def table(root: Path) -> mvcc.Table:
    """main: versions 1-2; branch b1 forked at 2 with one append (version 3); a tag on each."""
    t = mvcc.write_table(pa.table({"id": [1, 2]}), str(root))
    t.append(pa.table({"id": [3]}))
    b = t.create_branch("b1")
    b.append(pa.table({"id": [9]}))
    t.tags.create("on-main", 1)
    t.tags.create("on-b1", ("b1", 3))
    return t


def verify_cli(root: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli.cli, ["verify", str(root), *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def refs(root: Path) -> Path:
    return root / "_refs"


def write_ref(root: Path, name: str, **changes: object) -> None:
    path = refs(root) / "branches" / f"{name}.json"
    doc = json.loads(path.read_text()) if path.exists() else json.loads((refs(root) / "branches/b1.json").read_text())
    doc.update(changes)
    path.write_text(json.dumps(doc))


def garbage_ref(root: Path) -> None:
    (refs(root) / "branches/b1.json").write_bytes(b"\x00not json")


def ref_to_a_missing_version(root: Path) -> None:
    write_ref(root, "b1", parentVersion=42)


def parent_outside_the_table(root: Path) -> None:
    write_ref(root, "b1", parentBranch="ghost")


def ref_cycle(root: Path) -> None:
    write_ref(root, "b2", parentBranch="b1")
    write_ref(root, "b1", parentBranch="b2")


def missing_branch_data_file(root: Path) -> None:
    t = mvcc.open_table(str(root))
    b = t.checkout(("b1", None))
    main_files = {f.uri for f in version_files(t.state.store, t.manifest)}
    only_branch = [f for f in version_files(b.state.store, b.manifest) if f.kind == "data" and f.uri not in main_files]
    assert only_branch
    (root / only_branch[0].path).unlink()


def tag_naming_no_version(root: Path) -> None:
    (refs(root) / "tags/on-main.json").write_text(json.dumps({"version": 77}))


def tag_naming_no_branch(root: Path) -> None:
    (refs(root) / "tags/on-b1.json").write_text(json.dumps({"version": 3, "branch": "gone"}))


def garbage_tag(root: Path) -> None:
    (refs(root) / "tags/on-main.json").write_text("{version: one")


def tmp_file_shaped_like_a_ref(root: Path) -> None:
    (refs(root) / "branches" / f"_tmp-{uuid.uuid4().hex}-x.json").write_text("{}")


def tmp_file_shaped_like_a_tag(root: Path) -> None:
    (refs(root) / "tags" / f"_tmp-{uuid.uuid4().hex}-x.json").write_text("{}")


def stray_file_under_refs(root: Path) -> None:
    (refs(root) / "notes.txt").write_text("hello")


def stray_file_among_branches(root: Path) -> None:
    (refs(root) / "branches/b1.json.bak").write_text("{}")


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "garbage ref": (garbage_ref, "branch ref .*b1.json cannot be read"),
    "ref to a missing version": (ref_to_a_missing_version, "forked at version 42 of main, which has no such version"),
    "parent outside the table": (parent_outside_the_table, "parent branch 'ghost' does not exist"),
    "ref cycle": (ref_cycle, "its parents form a cycle: b1 -> b2 -> b1"),
    "missing data file of a branch": (missing_branch_data_file, r"branch b1 version 3: data .*: missing"),
    "tag naming no version": (tag_naming_no_version, "tag 'on-main' names version 77 of main, which does not exist"),
    "tag naming no branch": (tag_naming_no_branch, "tag 'on-b1' names branch 'gone', which does not exist"),
    "garbage tag": (garbage_tag, "tag file .*on-main.json is not JSON"),
    "temporary ref shaped like a final name": (tmp_file_shaped_like_a_ref, "a temporary file shaped like a final"),
    "temporary tag shaped like a final name": (tmp_file_shaped_like_a_tag, "a temporary file shaped like a final"),
    "stray file under _refs": (stray_file_under_refs, "notes.txt: not a file mvcc writes under _refs/"),
    "stray file among branch refs": (stray_file_among_branches, "b1.json.bak: not a branch ref"),
}


def test_a_healthy_table_with_branches_and_tags_is_ok(tmp_path: Path) -> None:
    table(tmp_path / "t")
    report = verify(mvcc.open_table(str(tmp_path / "t")), all_versions=True)
    assert report.ok and report.versions == [1, 2] and report.branches == {"b1": [2, 3]}, report
    code, out, err = verify_cli(tmp_path / "t")
    assert code == 0 and out.startswith("ok: 2 version(s) of 2 branch(es)"), (out, err)


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_each_damage_is_a_problem(tmp_path: Path, damage: str) -> None:
    root = tmp_path / "t"
    table(root)
    make, says = DAMAGE[damage]
    make(root)
    code, out, err = verify_cli(root)
    assert code == 1, (damage, out, err)
    assert pytest.importorskip("re").search(says, out), (damage, out)
    assert "problem(s) in" in err and "Traceback" not in err
    as_json = json.loads(CliRunner().invoke(cli.cli, ["verify", str(root), "--json"]).stdout)
    assert not as_json["ok"] and as_json["problems"], damage


def test_a_temporary_file_is_a_warning_and_a_scratch_branch_a_note(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table(root)
    (refs(root) / "branches" / f"_tmp-{uuid.uuid4().hex}-b2.json.part").write_text("{")
    scratch = f"_mvcc-publish-{uuid.uuid4().hex}"
    marker = {"branch": "b1", "branchIdentifier": "x", "leaseUntil": 4102444800}
    write_ref(root, scratch, mvccScratch=marker)
    code, out, err = verify_cli(root)
    assert code == 0 and out.splitlines()[-1].startswith("ok:"), (out, err)
    assert "warning: branch " in out and "a temporary file left by a write that did not finish" in out
    assert f"note: scratch branch {scratch} of a publish" in out
    unmarked = f"_mvcc-publish-{uuid.uuid4().hex}"
    write_ref(root, unmarked)
    code, out, _ = verify_cli(root)
    assert code == 1 and "a scratch branch's name without the scratch marker" in out
    (refs(root) / "branches" / f"{unmarked}.json").unlink()
    (refs(root) / "branches" / f"{scratch}.json").write_text("garbage")
    code, out, _ = verify_cli(root)
    assert code == 1 and "scratch branch ref does not decode" in out


def test_all_checks_every_kept_version_of_each_branch(tmp_path: Path) -> None:
    root = tmp_path / "t"
    t = table(root)
    b = t.checkout(("b1", None))
    first = {f.path for f in version_files(b.state.store, b.manifest) if f.kind == "data"}
    b.overwrite(pa.table({"id": [100]}))  # version 4 of b1 no longer uses version 3's appended file
    latest = {f.path for f in version_files(b.state.store, b.checkout_latest().manifest) if f.kind == "data"}
    main = {f.path for f in version_files(t.state.store, t.manifest)}
    gone = sorted(first - latest - main)
    assert gone
    (root / gone[0]).unlink()
    assert verify_cli(root)[0] == 0  # the branch's latest version does not use it
    code, out, _ = verify_cli(root, "--all")
    assert code == 1 and "branch b1 version 3: data" in out and "missing" in out, out


def test_branch_checks_only_that_branch(tmp_path: Path) -> None:
    root = tmp_path / "t"
    t = table(root)
    t.create_branch("b2")
    missing_branch_data_file(root)  # b1's damage
    assert verify_cli(root, "--branch", "b2")[0] == 0
    code, out, _ = verify_cli(root, "--branch", "b1")
    assert code == 1 and "branch b1 version 3: data" in out, out
    report = verify(t, branch="b2")
    assert report.ok and report.versions == [] and list(report.branches) == ["b2"]
    code, _, err = verify_cli(root, "--branch", "nope")
    assert code == 1 and "--branch nope: " in err and "has no branch 'nope'" in err
    code, _, err = verify_cli(root, "--branch", "b1", "--version", "2")
    assert code == 2 and "give --branch or --version" in err


def test_refs_are_checked_on_every_backend(any_uri) -> None:
    uri, opts = any_uri
    t = mvcc.write_table(pa.table({"id": [1, 2]}), uri, storage_options=opts)
    t.create_branch("b1").append(pa.table({"id": [3]}))
    assert verify(t).ok
    store = t.state.store
    store.put("_refs/branches/b2.json", json.dumps({"parentBranch": "ghost", "parentVersion": 1}).encode())
    store.put("_refs/stray.bin", b"x")
    store.put("_refs/tags/old.json", json.dumps({"version": 99}).encode())
    report = verify(mvcc.open_table(uri, storage_options=opts))
    found = sorted((p.kind, p.path.rsplit("/", 1)[-1], p.problem.split(":")[0][:40]) for p in report.problems)
    assert [f[:2] for f in found] == [
        ("branch", "b2.json"),  # its tree has no manifest
        ("branch", "b2.json"),  # its parent is no branch
        ("ref", "stray.bin"),
        ("tag", "old.json"),
    ], found
    assert report.branches == {"b1": [2]}
