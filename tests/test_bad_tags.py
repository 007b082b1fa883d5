"""Bad tag files and out-of-range manifest names: a tag checked out raises a typed error naming the file and
value; listing, retention and `mvcc tags list` report a bad tag and go on; retention keeps every version while
a tag cannot be read; `mvcc verify` reports it and exits 1; manifest names of impossible versions are skipped."""

from __future__ import annotations

import json
import os
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner, Result

import mvcc_core as mvcc
from mvcc_core import cli
from mvcc_core.format.naming import U64_MAX
from mvcc_core.format.tags import TagListing

#: Bad tag files: (path under the table, bytes) and a word the problem must contain.
BAD_TAGS = {
    "nested": ("_refs/tags/sub/n.json", b'{"version": 1}', "sub/n"),
    "garbage": ("_refs/tags/garbage.json", b"{not json", "not JSON"),
    "string": ("_refs/tags/word.json", b'{"version": "abc"}', "'abc'"),
    "negative": ("_refs/tags/negative.json", b'{"version": -1}', "'-1'"),
    "huge": ("_refs/tags/huge.json", json.dumps({"version": 2**70}).encode(), str(2**70)),
    "bool": ("_refs/tags/flag.json", b'{"version": true}', "'True'"),
    "list": ("_refs/tags/listed.json", b"[1, 2]", 'no "version"'),
}


def run(*args: object) -> Result:
    return CliRunner().invoke(cli.cli, [str(a) for a in args], catch_exceptions=False)


def three_versions(uri: str) -> mvcc.Table:
    """Versions 1..3, each an append; tag "good" on version 2."""
    t = mvcc.write_table(pa.table({"a": [1]}), uri)
    for i in (2, 3):
        t = mvcc.write_table(pa.table({"a": [i]}), uri, mode="append")
    t.tags.create("good", 2)
    return t


def plant(uri: str, rel: str, data: bytes) -> None:
    path = Path(uri) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def with_bad_tag(tmp_path: Path, case: str) -> tuple[str, mvcc.Table, str, str]:
    """A table of `three_versions` with the bad tag file `case`: (uri, table, the file's path, its problem's word)."""
    uri = str(tmp_path / "t")
    t = three_versions(uri)
    rel, data, word = BAD_TAGS[case]
    plant(uri, rel, data)
    return uri, t, rel, word


@pytest.mark.parametrize("case", sorted(BAD_TAGS))
def test_a_bad_tag_is_reported_and_the_others_listed(tmp_path: Path, case: str) -> None:
    uri, t, rel, word = with_bad_tag(tmp_path, case)
    assert t.tags.list() == {"good": {"version": 2}}
    listing = t.tags.read_all()
    assert listing.tags == {"good": 2} and list(listing.problems) == [rel] and word in listing.problems[rel]
    result = run("tags", "list", uri, "--json")
    assert result.exit_code == 0 and json.loads(result.stdout) == {"good": 2}
    assert f"bad tag {rel}" in result.stderr and word in result.stderr
    assert t.checkout("good").version == 2


@pytest.mark.parametrize("case", ["garbage", "string", "negative", "huge", "bool", "list"])
def test_checking_out_a_bad_tag_raises_a_typed_error_naming_file_and_value(tmp_path: Path, case: str) -> None:
    uri, t, rel, word = with_bad_tag(tmp_path, case)
    name = Path(rel).stem
    with pytest.raises(mvcc.errors.CorruptTagError) as caught:
        t.checkout(name)
    assert caught.value.path.endswith(rel) and rel in str(caught.value) and word in str(caught.value)
    assert isinstance(caught.value, mvcc.errors.TagError)
    with pytest.raises(mvcc.errors.CorruptTagError):
        t.tags.get_version(name)
    result = run("show", uri, "--tag", name)
    assert result.exit_code == 1 and rel in result.output


@pytest.mark.parametrize("case", sorted(BAD_TAGS))
def test_cleanup_keeps_every_version_while_a_tag_cannot_be_read(tmp_path: Path, case: str) -> None:
    uri, t, rel, word = with_bad_tag(tmp_path, case)
    stats = t.cleanup_old_versions(older_than=timedelta(0), error_if_tagged_old_versions=True)
    assert stats.removed_versions == () and [p for p, _ in stats.bad_tags] == [rel]
    assert [v.version for v in mvcc.open_table(uri).versions()] == [1, 2, 3]
    result = run("cleanup", uri, "--older-than", "0s", "--apply")
    assert result.exit_code == 0, result.output
    assert f"bad tag {rel}" in result.stdout and "every version was kept" in result.stdout
    as_json = json.loads(run("cleanup", uri, "--older-than", "0s", "--json").stdout)
    assert as_json["removed_versions"] == [] and list(as_json["bad_tags"]) == [rel]
    assert [v.version for v in mvcc.open_table(uri).versions()] == [1, 2, 3]
    # once the bad file is gone, retention goes on as usual (the good tag still keeps version 2)
    os.remove(Path(uri) / rel)
    stats = t.cleanup_old_versions(older_than=timedelta(0), error_if_tagged_old_versions=False)
    assert stats.removed_versions == (1,) and stats.bad_tags == ()


def test_cleanup_still_removes_old_unreferenced_files_beside_a_bad_tag(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = three_versions(uri)
    plant(uri, "_refs/tags/garbage.json", b"{")
    plant(uri, "data/orphan.parquet", b"left by a killed writer")
    stats = t.cleanup_old_versions(older_than=timedelta(0), delete_unverified=True)
    assert stats.unverified_files_removed == 1 and stats.removed_versions == ()
    assert not (Path(uri) / "data/orphan.parquet").exists()


@pytest.mark.parametrize("case", ["garbage", "string", "huge"])
def test_a_bad_tag_can_be_moved_or_deleted(tmp_path: Path, case: str) -> None:
    uri, t, rel, _ = with_bad_tag(tmp_path, case)
    name = Path(rel).stem
    t.tags.update(name, 3)
    assert t.tags.get_version(name) == 3 and t.tags.read_all().problems == {}
    plant(uri, rel, BAD_TAGS[case][1])
    assert run("tags", "delete", uri, name).exit_code == 0
    assert t.tags.read_all() == TagListing({"good": 2}, {})
    with pytest.raises(mvcc.errors.TagError, match="no tag"):
        t.tags.delete(name)


def test_verify_reports_bad_tags_and_exits_1(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    three_versions(uri)
    assert run("verify", uri).exit_code == 0
    plant(uri, "_refs/tags/word.json", b'{"version": "abc"}')
    plant(uri, "_refs/tags/sub/n.json", b'{"version": 1}')
    result = run("verify", uri, "--json")
    assert result.exit_code == 1
    found = json.loads(result.stdout)["problems"]
    assert sorted(p["path"] for p in found if p["kind"] == "tag") == [
        f"{uri}/_refs/tags/sub/n.json",
        f"{uri}/_refs/tags/word.json",
    ]


@pytest.mark.parametrize(
    "name",
    [
        f"{1:020d}.manifest",  # V2 name of version 2^64 - 2: its successor has no name
        f"{0:020d}.manifest",  # V2 name of version 2^64 - 1
        "99999999999999999999.manifest",  # V2 name of a negative version
        f"{U64_MAX - 1}.manifest",  # read as a V2 name: version 1 again, fine
        f"{2**70}.manifest",  # V1 name beyond 2^64
    ],
)
def test_manifest_names_out_of_range_are_skipped(tmp_path: Path, name: str) -> None:
    uri = str(tmp_path / "t")
    t = three_versions(uri)
    versions = Path(uri) / "_versions"
    latest = sorted(p for p in versions.iterdir() if p.name.endswith(".manifest"))[0]
    shutil.copy(latest, versions / name)
    reopened = mvcc.open_table(uri)
    assert reopened.version == 3
    assert [v.version for v in reopened.versions()] == [1, 2, 3] or name == f"{U64_MAX - 1}.manifest"
    stats = reopened.cleanup_old_versions(older_than=timedelta(0), error_if_tagged_old_versions=False)
    assert 3 not in stats.removed_versions
    assert run("cleanup", uri, "--older-than", "0s", "--keep-tagged").exit_code == 0
    assert mvcc.open_table(uri).to_table().num_rows == t.to_table().num_rows


def test_a_latest_hint_out_of_range_is_ignored(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    three_versions(uri)
    plant(uri, "_versions/_latest_version_hint.json", json.dumps({"version": U64_MAX - 2, "naming": "v2"}).encode())
    assert mvcc.open_table(uri).version == 3
    plant(uri, "_versions/_latest_version_hint.json", json.dumps({"version": 2**70, "naming": "v2"}).encode())
    assert mvcc.open_table(uri).version == 3


@pytest.mark.parametrize("case", sorted(BAD_TAGS))
def test_bad_tags_on_every_backend(any_uri: tuple[str, dict[str, Any] | None], case: str) -> None:
    """The same bad tag files in memory and on the S3 server: listed as problems, checkout of one a typed error,
    retention keeps every version while one is there, and each (a nested one too) is deleted through the API."""
    uri, opts = any_uri
    t = mvcc.write_table(pa.table({"a": [1]}), uri, storage_options=opts)
    for i in (2, 3):
        t = mvcc.write_table(pa.table({"a": [i]}), uri, mode="append", storage_options=opts)
    t.tags.create("good", 2)
    rel, data, word = BAD_TAGS[case]
    t.state.store.put(rel, data)
    t = mvcc.open_table(uri, storage_options=opts)
    listing = t.tags.read_all()
    assert listing.tags == {"good": 2} and list(listing.problems) == [rel] and word in listing.problems[rel]
    name = rel[len("_refs/tags/") : -len(".json")]
    if case != "nested":
        with pytest.raises(mvcc.errors.CorruptTagError) as caught:
            t.checkout(name)
        assert rel in str(caught.value)
    stats = t.cleanup_old_versions(older_than=timedelta(0), error_if_tagged_old_versions=False)
    assert stats.removed_versions == () and [p for p, _ in stats.bad_tags] == [rel]
    t.tags.delete(name)
    assert t.tags.read_all() == TagListing({"good": 2}, {})
    stats = t.cleanup_old_versions(older_than=timedelta(0), error_if_tagged_old_versions=False)
    assert stats.removed_versions == (1,) and [v.version for v in t.versions()] == [2, 3]
