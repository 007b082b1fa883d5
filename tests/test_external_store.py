"""External manifest store (spec "External Manifest Store"): SQLite and DynamoDB, real processes, real crashes.

The object stores here are driven without conditional writes: S3 (moto server) with ``conditional_put=false``,
where any put-if-not-exists would raise CommitNotSupportedError, and a local directory, where the committer
goes through the external store. DynamoDB is moto's server mode on 127.0.0.1, the same process that serves S3.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import pickle
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core import failpoints
from mvcc_core.errors import CommitNotSupportedError, MvccError
from mvcc_core.format.naming import ManifestNaming, manifest_path
from mvcc_core.io import open_store
from mvcc_core.txn.external_store import (
    DynamoDBManifestStore,
    ExternalManifestStore,
    ExternalStoreError,
    ExternalStoreMismatchError,
    ExternalStoreSyncError,
    ExternalStoreUnavailableError,
    SQLiteManifestStore,
    is_staged,
    open_external_store,
    staged_manifest_path,
)
from mvcc_core.txn.transaction import read_transaction

S3_KEY, S3_REGION = "testing", "us-east-1"  # as in conftest.py
WRITERS = 8
COMMITS_PER_WRITER = 3
CRASH_POINTS = [
    "commit.after_stage",
    "commit.after_external_commit",
    "commit.after_copy",
    "commit.before_external_update",
]


def _dynamodb_uri(endpoint: str, table: str, **extra: Any) -> str:
    query = {"region": S3_REGION, "endpoint": endpoint, "access_key_id": S3_KEY, "secret_access_key": S3_KEY, **extra}
    return f"dynamodb://{table}?" + "&".join(f"{k}={v}" for k, v in query.items())


@pytest.fixture
def dynamodb_store_uri(s3_server: str) -> str:
    """A fresh DynamoDB table on the session's moto server (which serves DynamoDB as well as S3)."""
    uri = _dynamodb_uri(s3_server, f"mvcc-{uuid.uuid4().hex[:12]}")
    store = open_external_store(uri)
    assert isinstance(store, DynamoDBManifestStore)
    store.create_table()
    store.close()
    return uri


@dataclass
class Backend:
    name: str
    uri: str
    options: dict[str, Any] | None
    store_uri: str

    def store(self) -> ExternalManifestStore:
        store = open_external_store(self.store_uri)
        assert store is not None
        return store

    def object_store(self):  # noqa: ANN201 - test helper
        return open_store(self.uri, self.options)


@pytest.fixture(
    params=[
        "sqlite-local",
        pytest.param("sqlite-s3", marks=pytest.mark.s3),
        pytest.param("dynamodb-s3", marks=pytest.mark.s3),
    ]
)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """(table uri, storage options, store URI): the object store never does a conditional write."""
    kind: str = request.param
    store_uri = (
        f"sqlite://{tmp_path / 'manifests.db'}"
        if kind.startswith("sqlite")
        else request.getfixturevalue("dynamodb_store_uri")
    )
    if kind.endswith("local"):
        return Backend(kind, str(tmp_path / "table"), None, store_uri)
    options = {**request.getfixturevalue("s3_options"), "conditional_put": "false"}
    return Backend(kind, request.getfixturevalue("s3_uri"), options, store_uri)


def _copy_table(backend: Backend, dest: Path) -> str:
    """Copy every object of the table to a local directory: what a user does to move a table."""
    src = backend.object_store()
    dst = open_store(str(dest))
    for meta in src.list(""):
        dst.put(meta.path, src.get(meta.path))
    return str(dest)


def _staged_files(backend: Backend) -> list[str]:
    return [m.path for m in backend.object_store().list("_versions") if is_staged(m.path)]


def _all_files(backend: Backend) -> list[str]:
    return sorted(m.path for m in backend.object_store().list(""))


def _create(backend: Backend, ids: list[int]) -> mvcc.Table:
    return mvcc.write_table(
        pa.table({"id": pa.array(ids, pa.int64())}),
        backend.uri,
        storage_options=backend.options,
        external_store=backend.store_uri,
    )


# ---- the store contract --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("dynamodb", marks=pytest.mark.s3)])
def test_store_contract(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    uri = f"sqlite://{tmp_path / 'db.sqlite'}" if kind == "sqlite" else request.getfixturevalue("dynamodb_store_uri")
    store = open_external_store(uri)
    assert store is not None
    assert store.get_latest_version("s3://b/t") is None
    assert store.put_if_not_exists("s3://b/t", 1, "s3://b/t/_versions/1.manifest-aa")
    assert not store.put_if_not_exists("s3://b/t", 1, "s3://b/t/_versions/1.manifest-bb")  # taken: a lost race
    assert store.put_if_not_exists("s3://b/t", 2, "s3://b/t/_versions/2.manifest-cc")
    assert store.put_if_not_exists("s3://b/other", 7, "s3://b/other/_versions/7.manifest")  # keyed by table
    assert store.get("s3://b/t", 1) == "s3://b/t/_versions/1.manifest-aa"
    assert store.get("s3://b/t", 3) is None
    assert store.get_latest_version("s3://b/t") == (2, "s3://b/t/_versions/2.manifest-cc")
    store.put("s3://b/t", 2, "s3://b/t/_versions/2.manifest")
    assert store.get_latest_version("s3://b/t") == (2, "s3://b/t/_versions/2.manifest")
    with pytest.raises(ExternalStoreError):
        store.put("s3://b/t", 9, "s3://b/t/_versions/9.manifest")  # step 4 never creates an entry
    assert store.get("s3://b/t", 9) is None
    # picklable (handed to child processes), and the copy sees the same entries
    clone = pickle.loads(pickle.dumps(store))
    assert clone.get_latest_version("s3://b/other") == (7, "s3://b/other/_versions/7.manifest")
    store.close()
    clone.close()


def test_store_uris_and_options(tmp_path: Path) -> None:
    store = open_external_store(f"sqlite://{tmp_path / 'x.db'}?timeout=5")
    assert isinstance(store, SQLiteManifestStore) and store.timeout == 5.0
    dyn = open_external_store("dynamodb://tbl?region=eu-west-1&endpoint=http://127.0.0.1:1&max_attempts=1")
    assert isinstance(dyn, DynamoDBManifestStore) and dyn.table_name == "tbl"
    assert open_external_store(store) is store and open_external_store(None) is None
    for bad in ("redis://x", "no-scheme", f"sqlite://{tmp_path}/x.db?bogus=1", "dynamodb://t?color=red"):
        with pytest.raises(ExternalStoreError):
            open_external_store(bad)
    with pytest.raises(ExternalStoreUnavailableError):  # its directory does not exist
        SQLiteManifestStore(str(tmp_path / "missing" / "x.db")).get_latest_version("x")
    (tmp_path / "garbage.db").write_bytes(b"not a database" * 100)
    with pytest.raises(ExternalStoreError, match="garbage.db"):
        mvcc.write_table(pa.table({"id": [1]}), str(tmp_path / "t"), external_store=f"sqlite://{tmp_path}/garbage.db")
    assert not (tmp_path / "t").exists()


def test_staged_names() -> None:
    staged = staged_manifest_path(5, ManifestNaming.V1, "ab" * 16)
    assert staged == f"_versions/5.manifest-{'ab' * 16}" and is_staged(staged)
    assert not is_staged(manifest_path(5, ManifestNaming.V2))
    assert is_staged(staged_manifest_path(5, ManifestNaming.V2, str(uuid.uuid4())))


# ---- commits through the store -------------------------------------------------------------------------


@pytest.mark.s3
def test_no_conditional_put_needs_a_store(s3_uri: str, s3_options: dict[str, Any], tmp_path: Path) -> None:
    options = {**s3_options, "conditional_put": "false"}
    with pytest.raises(CommitNotSupportedError, match="external manifest store"):
        mvcc.write_table(pa.table({"id": [1]}), s3_uri, storage_options=options)
    # the same object store, with a store given through storage_options
    options["external_store"] = f"sqlite://{tmp_path / 'db'}"
    t = mvcc.write_table(pa.table({"id": [1]}), s3_uri, storage_options=options)
    t.append(pa.table({"id": [2]}))
    assert mvcc.open_table(s3_uri, storage_options=options).to_table()["id"].to_pylist() == [1, 2]


def test_commit_protocol_leaves_final_manifests(backend: Backend) -> None:
    t = _create(backend, [1, 2])
    t.append(pa.table({"id": [3]}))
    t.update_config(upsert={"k": "v"})
    store = backend.store()
    for version in (1, 2, 3):
        path = store.get(t.uri, version)
        assert path == f"{t.uri}/{manifest_path(version, ManifestNaming.V2)}", path  # step 4 done
    assert _staged_files(backend) == []  # winners remove their staged file after step 4
    # a reader unaware of the store reads the same table: the manifests are in the object store
    plain = mvcc.open_table(backend.uri, storage_options=backend.options)
    assert plain.version == 3 and plain.to_table()["id"].to_pylist() == [1, 2, 3]
    # time travel and the version list go through the same paths
    opened = mvcc.open_table(backend.uri, storage_options=backend.options, external_store=backend.store_uri)
    assert [v.version for v in opened.versions()] == [1, 2, 3]
    assert opened.checkout(2).to_table()["id"].to_pylist() == [1, 2, 3]


def test_existing_table_adopts_a_store(tmp_path: Path) -> None:
    """A table created without the store: the store knows no version, so the object store says where to go on."""
    uri, db = str(tmp_path / "t"), f"sqlite://{tmp_path / 'db'}"
    mvcc.write_table(pa.table({"id": [1]}), uri).append(pa.table({"id": [2]}))
    t = mvcc.open_table(uri, external_store=db)
    assert t.version == 2
    t.append(pa.table({"id": [3]}))
    store = open_external_store(db)
    assert store.get_latest_version(t.uri) == (3, f"{t.uri}/{manifest_path(3, ManifestNaming.V2)}")
    assert mvcc.open_table(uri).to_table()["id"].to_pylist() == [1, 2, 3]


def _appender(uri: str, opts: dict | None, store_uri: str, writer: int, commits: int, barrier: Any) -> None:
    t = mvcc.open_table(uri, storage_options=opts, external_store=store_uri)
    barrier.wait()
    for i in range(commits):
        t.append(pa.table({"id": pa.array([writer * 1000 + i], pa.int64())}), max_retries=200)


@pytest.mark.slow
def test_eight_processes_commit_through_the_store(backend: Backend) -> None:
    _create(backend, [])
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(WRITERS)
    procs = [
        ctx.Process(
            target=_appender,
            args=(backend.uri, backend.options, backend.store_uri, w, COMMITS_PER_WRITER, barrier),
        )
        for w in range(WRITERS)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    assert [p.exitcode for p in procs] == [0] * WRITERS

    total = WRITERS * COMMITS_PER_WRITER
    store = backend.store()
    t = mvcc.open_table(backend.uri, storage_options=backend.options, external_store=store)
    # every commit landed once, versions contiguous, each entry finalized and each manifest its own
    assert t.version == total + 1
    infos = t.versions()
    assert [v.version for v in infos] == list(range(1, total + 2))
    assert [v.operation for v in infos] == ["Overwrite"] + ["Append"] * total
    assert len({v.uuid for v in infos}) == total + 1
    objects = backend.object_store()
    for version in range(1, total + 2):
        assert store.get(t.uri, version) == f"{t.uri}/{manifest_path(version, ManifestNaming.V2)}"
        manifest = t.checkout(version).manifest
        assert read_transaction(objects, manifest.transaction_file).uuid == infos[version - 1].uuid
    assert store.get(t.uri, total + 2) is None
    # rows complete, fragments distinct
    ids = sorted(t.to_table()["id"].to_pylist())
    assert ids == sorted(w * 1000 + i for w in range(WRITERS) for i in range(COMMITS_PER_WRITER))
    assert len({f.fragment_id for f in t.get_fragments()}) == total
    # losers removed their staged manifests
    assert _staged_files(backend) == []


# ---- failpoints ---------------------------------------------------------------------------------------


def test_failpoints_arm_and_disarm() -> None:
    assert failpoints.armed_points() == {}
    failpoints.failpoint("commit.after_stage")  # unarmed: nothing
    with failpoints.armed("commit.after_stage"), pytest.raises(failpoints.FailpointError) as info:
        failpoints.failpoint("commit.after_stage")
    assert info.value.name == "commit.after_stage" and isinstance(info.value, MvccError)
    assert failpoints.armed_points() == {}
    with pytest.raises(ValueError, match="unknown failpoint"):
        failpoints.arm("commit.after_stgae")
    with pytest.raises(ValueError, match="bad action"):
        failpoints.arm("commit.after_stage", "explode")
    assert failpoints.parse_spec("commit.after_stage=exit(3); commit.after_copy=sleep(0.01),commit.after_copy") == {
        "commit.after_stage": "exit(3)",
        "commit.after_copy": "raise",
    }
    with failpoints.armed("commit.after_copy", "sleep(0.01)"):
        failpoints.failpoint("commit.after_copy")


def test_failpoint_exit_kills_a_child_process() -> None:
    env = {**os.environ, failpoints.ENV_VAR: "commit.after_stage=exit(5)"}
    code = "from mvcc_core.failpoints import failpoint; failpoint('commit.after_stage'); print('alive')"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 5 and "alive" not in proc.stdout


def test_raise_after_the_store_commit_still_commits(tmp_path: Path) -> None:
    """In-process crash after step 2: the caller sees the failure, yet the version is committed (step 2 is it)."""
    uri, db = str(tmp_path / "t"), f"sqlite://{tmp_path / 'db'}"
    t = mvcc.write_table(pa.table({"id": [1]}), uri, external_store=db)
    with failpoints.armed("commit.after_external_commit"), pytest.raises(failpoints.FailpointError):
        t.append(pa.table({"id": [2]}))
    assert mvcc.open_table(uri).version == 1  # unaware reader: one version behind
    assert mvcc.open_table(uri, external_store=db).to_table()["id"].to_pylist() == [1, 2]
    assert mvcc.open_table(uri).version == 2  # the aware reader finalized it


_CHILD = """
import json, sys
import pyarrow as pa
import mvcc_core as mvcc
uri, opts, store_uri, row = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
t = mvcc.open_table(uri, storage_options=opts, external_store=store_uri or None)
t.append(pa.table({"id": pa.array([row], pa.int64())}))
print("survived")
"""


def _crash_append(uri: str, opts: dict | None, store_uri: str, row: int, point: str) -> None:
    env = {**os.environ, failpoints.ENV_VAR: f"{point}=exit"}
    args = [sys.executable, "-c", _CHILD, uri, json.dumps(opts), store_uri, str(row)]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == failpoints.DEFAULT_EXIT_CODE, proc.stderr[-2000:]
    assert "survived" not in proc.stdout


@pytest.mark.parametrize("point", CRASH_POINTS)
@pytest.mark.slow
def test_writer_killed_at_each_failpoint(backend: Backend, point: str, tmp_path: Path) -> None:
    _create(backend, [1]).append(pa.table({"id": pa.array([2], pa.int64())}))  # versions 1, 2
    _crash_append(backend.uri, backend.options, backend.store_uri, 100, point)
    store = backend.store()
    uri = backend.object_store().uri  # the store's key; not opened through the store, which would synchronize
    committed = point != "commit.after_stage"  # step 2 is the commit point
    finalized = point in ("commit.after_copy", "commit.before_external_update")

    entry = store.get(uri, 3)
    assert (entry is not None) == committed
    if committed:
        assert is_staged(entry)  # the writer died before step 4
    assert len(_staged_files(backend)) == 1  # the crashed writer's staged manifest

    # A reader that does not know the store: the object store alone, at most one version behind.
    unaware = mvcc.open_table(backend.uri, storage_options=backend.options)
    assert unaware.version == (3 if finalized else 2)
    # Copying the directory now gives a readable table without the store (same view as the unaware reader).
    copy_before = _copy_table(backend, tmp_path / "copy-before")
    assert mvcc.open_table(copy_before).to_table()["id"].to_pylist() == unaware.to_table()["id"].to_pylist()

    # The next writer through the store: it synchronizes a committed version, and ignores an uncommitted one.
    t = mvcc.open_table(backend.uri, storage_options=backend.options, external_store=store)
    assert t.version == (3 if committed else 2)
    t.append(pa.table({"id": pa.array([200], pa.int64())}))
    expected = [1, 2, 100, 200] if committed else [1, 2, 200]
    latest = 4 if committed else 3
    assert t.version == latest
    for version in range(1, latest + 1):  # no committed version lost, every entry finalized
        assert store.get(uri, version) == f"{uri}/{manifest_path(version, ManifestNaming.V2)}"
    assert store.get(uri, latest + 1) is None
    assert (
        sorted(
            mvcc.open_table(backend.uri, storage_options=backend.options, external_store=store)
            .to_table()["id"]
            .to_pylist()
        )
        == expected
    )
    if committed:
        assert sorted(t.checkout(3).to_table()["id"].to_pylist()) == [1, 2, 100]
    # A committed staged manifest was finalized and removed; an uncommitted one is an orphan left to retention.
    assert len(_staged_files(backend)) == (0 if committed else 1)

    # Copying the directory elsewhere gives a readable table without the store, at the latest version.
    copy_after = mvcc.open_table(_copy_table(backend, tmp_path / "copy-after"))
    assert copy_after.version == latest
    assert sorted(copy_after.to_table()["id"].to_pylist()) == expected
    assert [v.version for v in copy_after.versions()] == list(range(1, latest + 1))


@pytest.mark.parametrize("point", ["commit.after_transaction_file", "commit.before_manifest_put"])
@pytest.mark.slow
def test_writer_killed_in_the_plain_commit_path(tmp_uri: str, point: str) -> None:
    mvcc.write_table(pa.table({"id": pa.array([1], pa.int64())}), tmp_uri)
    _crash_append(tmp_uri, None, "", 100, point)
    t = mvcc.open_table(tmp_uri)
    assert t.version == 1 and t.to_table()["id"].to_pylist() == [1]
    t.append(pa.table({"id": pa.array([2], pa.int64())}))
    assert mvcc.open_table(tmp_uri).to_table()["id"].to_pylist() == [1, 2]


# ---- bad input ----------------------------------------------------------------------------------------


def _entry(uri: str, version: int, staged: bool) -> str:
    rel = manifest_path(version, ManifestNaming.V2)
    return f"{uri}/{rel}-{uuid.uuid4().hex}" if staged else f"{uri}/{rel}"


@pytest.mark.parametrize("staged", [True, False], ids=["staged", "final"])
def test_entry_pointing_to_a_missing_file(backend: Backend, staged: bool) -> None:
    uri = _create(backend, [1]).uri
    store = backend.store()
    bogus = _entry(uri, 2, staged)
    assert store.put_if_not_exists(uri, 2, bogus)
    before = _all_files(backend)
    with pytest.raises(ExternalStoreSyncError, match="version 2"):
        mvcc.open_table(backend.uri, storage_options=backend.options, external_store=store)
    with pytest.raises(ExternalStoreSyncError):
        mvcc.write_table(
            pa.table({"id": [5]}), backend.uri, mode="append", storage_options=backend.options, external_store=store
        )
    assert _all_files(backend) == before  # nothing written
    assert store.get(uri, 2) == bogus  # and the store left as it was
    # without the store the table still reads (version 1: the store's version 2 has no manifest anywhere)
    assert mvcc.open_table(backend.uri, storage_options=backend.options).version == 1


def test_store_entry_of_another_table(tmp_path: Path) -> None:
    db = f"sqlite://{tmp_path / 'db'}"
    a = mvcc.write_table(pa.table({"id": [1]}), str(tmp_path / "a"), external_store=db)
    b = mvcc.write_table(pa.table({"id": [2]}), str(tmp_path / "b"), external_store=db)
    b.append(pa.table({"id": [3]}))
    store = open_external_store(db)
    # version 2 of table a, pointing into table b's directory
    assert store.put_if_not_exists(a.uri, 2, store.get(b.uri, 2))

    def files() -> list[Path]:
        return sorted(p.relative_to(tmp_path) for d in ("a", "b") for p in (tmp_path / d).rglob("*"))

    before = files()
    for action in (
        lambda: mvcc.open_table(a.uri, external_store=db),
        lambda: mvcc.write_table(pa.table({"id": [9]}), a.uri, mode="append", external_store=db),
    ):
        with pytest.raises(ExternalStoreMismatchError, match="another table"):
            action()
    assert files() == before
    # an entry inside the table but naming another version is refused too
    store.put(a.uri, 2, f"{a.uri}/{manifest_path(1, ManifestNaming.V2)}")
    with pytest.raises(ExternalStoreMismatchError, match="not a manifest of version 2"):
        mvcc.open_table(a.uri, external_store=db)


def test_unreachable_dynamodb(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store_uri = _dynamodb_uri(f"http://127.0.0.1:{port}", "t", connect_timeout=1, read_timeout=1, max_attempts=1)
    uri = tmp_path / "t"
    start = time.monotonic()
    with pytest.raises(ExternalStoreUnavailableError, match="DynamoDB"):
        mvcc.write_table(pa.table({"id": [1]}), str(uri), external_store=store_uri)
    assert time.monotonic() - start < 30
    assert not uri.exists()  # nothing written


@pytest.mark.s3
def test_missing_dynamodb_table(s3_server: str, tmp_path: Path) -> None:
    store_uri = _dynamodb_uri(s3_server, f"absent-{uuid.uuid4().hex[:8]}")
    with pytest.raises(ExternalStoreUnavailableError, match="does not exist"):
        mvcc.write_table(pa.table({"id": [1]}), str(tmp_path / "t"), external_store=store_uri)
    assert not (tmp_path / "t").exists()


def test_sqlite_store_shared_by_threads(tmp_path: Path) -> None:
    """One store object used by several threads: each version is won by exactly one of them."""
    from concurrent.futures import ThreadPoolExecutor

    store = SQLiteManifestStore(str(tmp_path / "db"))

    def claim(i: int) -> list[int]:
        return [v for v in range(50) if store.put_if_not_exists("t", v, f"t/_versions/{v}.manifest-{i:032x}")]

    with ThreadPoolExecutor(8) as pool:
        won = [v for r in pool.map(claim, range(8)) for v in r]
    assert sorted(won) == list(range(50))


@pytest.mark.slow
def test_reader_finalizes_while_the_writer_is_paused(tmp_path: Path) -> None:
    """A reader synchronizes a version whose writer is still alive between steps 2 and 3; both finish cleanly."""
    uri, db = str(tmp_path / "t"), f"sqlite://{tmp_path / 'db'}"
    mvcc.write_table(pa.table({"id": pa.array([1], pa.int64())}), uri, external_store=db)
    store = open_external_store(db)
    base = open_store(uri).uri
    env = {**os.environ, failpoints.ENV_VAR: "commit.after_external_commit=sleep(3)"}
    args = [sys.executable, "-W", "error::RuntimeWarning", "-c", _CHILD, uri, "null", db, "2"]
    child = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while store.get(base, 2) is None:  # wait for the writer's step 2
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.05)
        assert is_staged(store.get(base, 2))
        t = mvcc.open_table(uri, external_store=db)  # the reader finalizes version 2 (copy, update, unstage)
        assert t.version == 2 and t.to_table()["id"].to_pylist() == [1, 2]
        assert store.get(base, 2) == f"{base}/{manifest_path(2, ManifestNaming.V2)}"
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    # the writer then found its staged file gone and the final one there: success, and no warning
    assert child.returncode == 0 and "survived" in out, err[-2000:]
    assert [m.path for m in open_store(uri).list("_versions") if is_staged(m.path)] == []
    assert mvcc.open_table(uri).version == 2


def test_v1_naming_and_write_fragments_through_the_store(tmp_path: Path) -> None:
    """V1 names stage as `{version}.manifest-{uuid}` (the specification's spelling); commits of prepared fragments."""
    uri, db = str(tmp_path / "t"), f"sqlite://{tmp_path / 'db'}"
    t = mvcc.write_table(pa.table({"id": [1]}), uri, manifest_naming="v1", external_store=db)
    fragments = mvcc.write_fragments(pa.table({"id": [2, 3]}), uri, external_store=db)
    t.commit(mvcc.operations.Append(fragments=fragments))
    store = open_external_store(db)
    assert store.get_latest_version(t.uri) == (2, f"{t.uri}/_versions/2.manifest")
    assert sorted(mvcc.open_table(uri).to_table()["id"].to_pylist()) == [1, 2, 3]
    with failpoints.armed("commit.after_external_commit"), pytest.raises(failpoints.FailpointError):
        t.update_config(upsert={"k": "v"})
    entry = store.get(t.uri, 3)
    assert entry is not None and entry.startswith(f"{t.uri}/_versions/3.manifest-") and is_staged(entry)
    assert mvcc.open_table(uri, external_store=db).config == {"k": "v"}
    names = sorted(n for n in os.listdir(tmp_path / "t" / "_versions") if "manifest" in n)
    assert names == [f"{v}.manifest" for v in (1, 2, 3)]  # finalized, the staged file removed


def test_unreferenced_staged_manifests(tmp_path: Path) -> None:
    """What retention may delete: staged files no store entry needs (an orphan), never a committed one."""
    from mvcc_core.txn.external_store import unreferenced_staged_manifests

    uri, db = str(tmp_path / "t"), f"sqlite://{tmp_path / 'db'}"
    t = mvcc.write_table(pa.table({"id": [1]}), uri, external_store=db)
    objects, store = open_store(uri), open_external_store(db)
    with failpoints.armed("commit.after_stage"), pytest.raises(failpoints.FailpointError):
        t.append(pa.table({"id": [2]}))  # died before step 2: an orphan
    (orphan,) = [m.path for m in objects.list("_versions") if is_staged(m.path)]
    with failpoints.armed("commit.after_copy"), pytest.raises(failpoints.FailpointError):
        t.append(pa.table({"id": [3]}))  # committed, copied, store not updated
    committed = store.get(objects.uri, 2)
    assert is_staged(committed)
    assert unreferenced_staged_manifests(objects, store) == []  # too young: could be a live writer's
    assert unreferenced_staged_manifests(objects, store, min_age_seconds=0) == [orphan]
    # Without the store, staged files whose final manifest exists are garbage: here both (the orphan's version 2
    # was committed by the second writer, whose step 3 ran); the store-aware reader still finds the final copy.
    both = sorted([orphan, committed[len(objects.uri) + 1 :]])
    assert sorted(unreferenced_staged_manifests(objects, min_age_seconds=0)) == both
    objects.delete_many(unreferenced_staged_manifests(objects, store, min_age_seconds=0))
    assert mvcc.open_table(uri, external_store=db).to_table()["id"].to_pylist() == [1, 3]
    assert [m.path for m in objects.list("_versions") if is_staged(m.path)] == []
