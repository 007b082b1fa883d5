"""Shallow and deep clones on local disk and S3: same rows, own history, writes never reach the source."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core.table import DatasetBasePath


def data(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "v": [f"v{i}" for i in range(n)]})


def ids(t: mvcc.Table) -> list[int]:
    return sorted(t.to_table().column("id").to_pylist())


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def two_uris(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "local":
        return str(tmp_path / "src"), str(tmp_path / "clone"), None
    bucket = request.getfixturevalue("s3_bucket")
    opts = request.getfixturevalue("s3_options")
    prefix = uuid.uuid4().hex
    return f"s3://{bucket}/{prefix}/src", f"s3://{bucket}/{prefix}/clone", opts


def source_objects(uri: str, opts) -> list[str]:
    store = mvcc.open_table(uri, storage_options=opts).state.store
    return sorted(m.path for m in store.list(""))


@pytest.mark.parametrize("shallow", [True, False])
def test_clone_reads_the_same_rows_and_never_touches_the_source(two_uris, shallow) -> None:
    src_uri, clone_uri, opts = two_uris
    src = mvcc.write_table(data(0, 30), src_uri, storage_options=opts, max_rows_per_file=10)
    src.delete("id < 5")
    src.tags.create("before", src.version)
    src.append(data(100, 3))  # the clone is taken from the tag, before this append
    before = source_objects(src_uri, opts)
    clone = src.clone(clone_uri, version="before", shallow=shallow)
    assert clone.version == 1 and [v.operation for v in clone.versions()] == ["Clone"]
    assert ids(clone) == list(range(5, 30))
    assert bool(clone.manifest.base_paths) == shallow
    clone.delete("id = 10")
    clone.update({"v": "'changed'"}, where="id = 11")
    clone.append(data(200, 2))
    clone.add_columns({"w": "id * 2"})
    expected = [i for i in range(5, 30) if i != 10] + [200, 201]
    reopened = mvcc.open_table(clone_uri, storage_options=opts)
    assert ids(reopened) == expected and reopened.checkout(1).count_rows() == 25
    assert reopened.to_table(filter="id = 11").column("v").to_pylist() == ["changed"]
    assert source_objects(src_uri, opts) == before  # nothing written to the source
    assert ids(mvcc.open_table(src_uri, storage_options=opts)) == list(range(5, 30)) + [100, 101, 102]


def test_shallow_clone_of_a_removed_source_fails_clearly_deep_clone_survives(tmp_path) -> None:
    src = mvcc.write_table(data(0, 10), str(tmp_path / "src"))
    shallow = src.clone(str(tmp_path / "shallow"))
    deep = src.clone(str(tmp_path / "deep"), shallow=False)
    shutil.rmtree(tmp_path / "src")
    assert ids(deep) == list(range(10))
    assert shallow.count_rows() == 10  # metadata only
    with pytest.raises(mvcc.errors.ObjectNotFoundError, match="shallow clone"):
        shallow.to_table()
    with pytest.raises(mvcc.errors.ObjectNotFoundError):
        shallow.delete("id = 1")


def test_shallow_clone_after_source_cleanup_of_a_deletion_file(tmp_path) -> None:
    src = mvcc.write_table(data(0, 10), str(tmp_path / "src"))
    src.delete("id = 3")
    shallow = src.clone(str(tmp_path / "shallow"))
    for path in (tmp_path / "src" / "_deletions").iterdir():  # what retention on the source would remove
        path.unlink()
    with pytest.raises(mvcc.errors.ObjectNotFoundError, match="shallow clone"):
        shallow.to_table()


def test_deep_clone_copies_base_path_data_and_clone_of_a_clone(tmp_path) -> None:
    src = mvcc.write_table(data(0, 5), str(tmp_path / "src"))
    src.add_bases([DatasetBasePath(str(tmp_path / "extra"), name="extra")])
    src.append(data(50, 5), target_base="extra")
    shallow = src.clone(str(tmp_path / "a"))
    second = shallow.clone(str(tmp_path / "b"))  # a shallow clone of a shallow clone: both bases resolve
    deep = second.clone(str(tmp_path / "c"), shallow=False)
    shutil.rmtree(tmp_path / "extra")
    shutil.rmtree(tmp_path / "src")
    assert ids(deep) == list(range(5)) + list(range(50, 55))
    with pytest.raises(mvcc.errors.ObjectNotFoundError):
        second.to_table()


def test_clone_bad_input_writes_nothing(tmp_path) -> None:
    src = mvcc.write_table(data(0, 5), str(tmp_path / "src"))
    other = mvcc.write_table(data(0, 1), str(tmp_path / "other"))
    with pytest.raises(mvcc.TableExistsError):
        src.clone(str(tmp_path / "src"))
    before = sorted(p.name for p in (tmp_path / "other").rglob("*"))
    with pytest.raises(mvcc.TableExistsError):
        src.clone(other.uri, shallow=False)
    assert sorted(p.name for p in (tmp_path / "other").rglob("*")) == before
    with pytest.raises(mvcc.VersionNotFoundError):
        src.clone(str(tmp_path / "x"), version=7)
    assert not (tmp_path / "x").exists()


def test_shallow_clone_on_s3_references_without_copying(s3_bucket, s3_options, s3_client) -> None:
    prefix = uuid.uuid4().hex
    src = mvcc.write_table(data(0, 10), f"s3://{s3_bucket}/{prefix}/src", storage_options=s3_options)
    src.clone(f"s3://{s3_bucket}/{prefix}/clone")
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=s3_bucket, Prefix=f"{prefix}/clone/")["Contents"]]
    assert not [k for k in keys if "/data/" in k]  # only a manifest and a transaction
