"""A corrupt manifest never wedges a table.

Garbage is written over a real manifest file (found through the public `ManifestLocation` listing), then:
`versions()` reports it and lists the others; retention reports and removes a corrupt old version (a dry
run removes nothing); with the latest manifest corrupt, writes are refused with an error that says to
restore, `restore(N)` commits past it, and writes work again.
"""

from __future__ import annotations

from datetime import timedelta

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core.format.manifest import ManifestLocation, list_manifests


def rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def ids(t: mvcc.Table) -> list[int]:
    return sorted(t.to_table().column("id").to_pylist())


def four_versions(uri: str, opts: dict | None) -> mvcc.Table:
    """Versions 1..4: 3 rows, +2 rows, delete id 0, +1 row."""
    t = mvcc.write_table(rows(0, 3), uri, storage_options=opts, commit_message="v1")
    t.append(rows(3, 2), commit_message="v2")
    t.delete("id = 0", commit_message="v3")
    t.append(rows(5, 1), commit_message="v4")
    return t


def location(t: mvcc.Table, version: int) -> ManifestLocation:
    found = {loc.version: loc for loc in list_manifests(t.state.store, t.state.committer.handler)}
    return found[version]


def corrupt(t: mvcc.Table, version: int) -> str:
    path = location(t, version).path
    assert path in {m.path for m in t.state.store.list("_versions")}
    t.state.store.put(path, b"this is not a manifest")
    return path


def test_versions_report_a_corrupt_old_manifest(any_uri) -> None:
    uri, opts = any_uri
    corrupt(four_versions(uri, opts), 2)
    t = mvcc.open_table(uri, storage_options=opts)
    versions = t.versions()
    assert [v.version for v in versions] == [1, 2, 3, 4]
    bad = versions[1]
    assert bad.error is not None and "corrupt" in bad.error and bad["error"] == bad.error
    assert bad.timestamp is None and bad.operation is None
    assert [(v.operation, v.message, v.error) for i, v in enumerate(versions) if i != 1] == [
        ("Overwrite", "v1", None),
        ("Delete", "v3", None),
        ("Append", "v4", None),
    ]
    assert ids(mvcc.open_table(uri, version=3, storage_options=opts)) == [1, 2, 3, 4]
    with pytest.raises(mvcc.errors.CorruptManifestError):
        mvcc.open_table(uri, version=2, storage_options=opts)
    assert ids(t) == [1, 2, 3, 4, 5]


def test_cleanup_reports_and_removes_a_corrupt_old_manifest(any_uri) -> None:
    uri, opts = any_uri
    path = corrupt(four_versions(uri, opts), 2)
    t = mvcc.open_table(uri, storage_options=opts)
    listing = {m.path for m in t.state.store.list("")}

    dry = t.cleanup_old_versions(older_than=timedelta(0), dry_run=True)
    assert dry.corrupt_versions == (2,) and dry.removed_versions == (1, 2, 3)
    assert {m.path for m in t.state.store.list("")} == listing  # a dry run removes nothing
    assert [v.version for v in t.versions()] == [1, 2, 3, 4]

    done = t.cleanup_old_versions(older_than=timedelta(0))
    assert done.corrupt_versions == (2,) and done.removed_versions == (1, 2, 3)
    assert path not in {m.path for m in t.state.store.list("_versions")}
    assert [(v.version, v.error) for v in t.versions()] == [(4, None)]
    reopened = mvcc.open_table(uri, storage_options=opts)
    assert ids(reopened) == [1, 2, 3, 4, 5]
    assert reopened.cleanup_old_versions(older_than=timedelta(0)).corrupt_versions == ()


def test_corrupt_old_manifest_kept_when_young(tmp_uri) -> None:
    corrupt(four_versions(tmp_uri, None), 2)
    t = mvcc.open_table(tmp_uri)
    stats = t.cleanup_old_versions(older_than=timedelta(days=1))
    assert stats.corrupt_versions == (2,) and stats.removed_versions == ()
    assert [v.version for v in t.versions()] == [1, 2, 3, 4]


def test_corrupt_latest_manifest_restore_commits_past_it(any_uri) -> None:
    uri, opts = any_uri
    four_versions(uri, opts)
    writer = mvcc.open_table(uri, version=3, storage_options=opts)  # opened before the damage
    corrupt(writer, 4)

    with pytest.raises(mvcc.errors.CorruptManifestError):
        mvcc.open_table(uri, storage_options=opts)
    old = mvcc.open_table(uri, version=2, storage_options=opts)  # an older version still opens
    assert ids(old) == [0, 1, 2, 3, 4]
    for handle in (old, writer):
        with pytest.raises(mvcc.errors.CorruptManifestError, match=r"restore") as info:
            handle.append(rows(10, 1))
        assert "Table.restore" in str(info.value) and "latest" in str(info.value)
    assert old.latest_version == 4

    old.restore(2, commit_message="rescue")
    assert old.version == 5 and ids(old) == [0, 1, 2, 3, 4]
    assert old.transaction().operation.name == "Restore"
    reopened = mvcc.open_table(uri, storage_options=opts)
    assert reopened.version == 5 and ids(reopened) == [0, 1, 2, 3, 4]
    reopened.append(rows(10, 1))
    assert reopened.version == 6 and ids(reopened) == [0, 1, 2, 3, 4, 10]
    versions = reopened.versions()
    assert [v.version for v in versions] == [1, 2, 3, 4, 5, 6]
    assert versions[3].error is not None and all(v.error is None for i, v in enumerate(versions) if i != 3)
    assert (versions[4].operation, versions[4].message) == ("Restore", "rescue")
    assert ids(mvcc.open_table(uri, version=1, storage_options=opts)) == [0, 1, 2]
    # retention then removes the corrupt version with the other old ones
    stats = reopened.cleanup_old_versions(older_than=timedelta(0))
    assert stats.corrupt_versions == (4,) and [v.version for v in reopened.versions()] == [6]


def test_restore_to_the_corrupt_version_is_refused(tmp_uri) -> None:
    t = four_versions(tmp_uri, None)
    corrupt(t, 4)
    old = mvcc.open_table(tmp_uri, version=3)
    with pytest.raises(mvcc.errors.CorruptManifestError):
        old.restore(4)
    assert old.latest_version == 4


@pytest.mark.parametrize("damaged", [[4], [4, 3], [4, 3, 2, 1]])
def test_opening_a_corrupt_latest_names_the_way_out(any_uri, damaged: list[int]) -> None:
    """The error of opening (or writing on) a table whose latest manifest is corrupt names the newest intact
    version and how to restore it, in the API's words and the command's; following it works."""
    uri, opts = any_uri
    t = four_versions(uri, opts)
    for version in damaged:
        corrupt(t, version)
    intact = next((v for v in (3, 2, 1) if v not in damaged), None)
    with pytest.raises(mvcc.errors.CorruptManifestError) as opening:
        mvcc.open_table(uri, storage_options=opts)
    assert opening.value.intact_version == intact
    message = str(opening.value)
    assert "is the latest version" in message and "cannot be opened at its latest version" in message
    if intact is None:
        assert "no older version is intact" in message
        return
    assert f"the newest intact version is {intact}" in message
    assert f"Table.restore({intact})" in message and f"mvcc restore {uri} --version {intact}" in message
    with pytest.raises(mvcc.errors.CorruptManifestError) as writing:  # a handle that never read the damaged manifests
        mvcc.open_table(uri, version=intact, storage_options=opts).append(rows(10, 1))
    assert writing.value.intact_version == intact and f"mvcc restore {uri} --version {intact}" in str(writing.value)
    mvcc.open_table(uri, version=intact, storage_options=opts).restore()  # what the message says
    assert ids(mvcc.open_table(uri, storage_options=opts)) == ids(
        mvcc.open_table(uri, version=intact, storage_options=opts)
    )
