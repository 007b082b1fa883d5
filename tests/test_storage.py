"""ObjectStore on a local directory, in memory and on a real S3 HTTP server (moto), without mocks.

The commit protocol rests on put_if_not_exists being exactly-once across processes, so that is tested with
several OS processes racing for the same name on each backend that claims to support it. On S3 the atomicity
of the conditional PUT itself belongs to the server: real S3 is assumed atomic, and the test server is made so
(tests/moto_server.py).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.memory import MemoryFileSystem

import mvcc_core.io as storage_mod
import mvcc_core.io.s3 as s3_backend
from mvcc_core.errors import CommitNotSupportedError, ObjectNotFoundError, StorageError
from mvcc_core.io import ObjectMeta, ObjectStore, open_store

V2_LATEST = "_versions/18446744073709551613.manifest"
V2_OLDER = "_versions/18446744073709551614.manifest"


@pytest.fixture
def store(any_uri: tuple[str, dict[str, Any] | None]) -> ObjectStore:
    uri, options = any_uri
    return open_store(uri, options)


def _s3_client(store: ObjectStore) -> Any:
    """The botocore client behind an S3 store (to hook its events)."""
    return store._backend.s3.client


def _count_calls(store: ObjectStore, operation: str) -> tuple[list[int], list[dict[str, Any]]]:
    """Count HTTP requests of `operation` and record the API parameters of each call."""
    sent: list[int] = []
    params: list[dict[str, Any]] = []

    def on_send(**kwargs: Any) -> None:
        sent.append(1)

    def on_params(params: dict[str, Any], **kwargs: Any) -> None:
        recorded.append(dict(params))

    recorded = params
    events = _s3_client(store).meta.events
    events.register(f"before-send.s3.{operation}", on_send)
    events.register(f"before-parameter-build.s3.{operation}", on_params)
    return sent, params


# --- basic object operations, every backend ------------------------------------------------------------


def test_put_get_head_exists(store: ObjectStore) -> None:
    assert not store.exists("a/b.bin")
    store.put("a/b.bin", b"hello world")
    assert store.get("a/b.bin") == b"hello world"
    assert store.exists("a/b.bin")
    assert not store.exists("a")  # a "directory" is not an object
    meta = store.head("a/b.bin")
    assert meta.path == "a/b.bin" and meta.size == 11
    assert meta.last_modified is not None and meta.last_modified.utcoffset() == timedelta(0)
    assert store.list("a") == [meta]
    store.put("a/b.bin", b"replaced")  # unconditional overwrite
    assert store.get("a/b.bin") == b"replaced"
    store.put("empty", b"")
    assert store.get("empty") == b"" and store.head("empty").size == 0


def test_get_range(store: ObjectStore) -> None:
    store.put("r.bin", bytes(range(100)))
    assert store.get_range("r.bin", 10, 20) == bytes(range(10, 20))
    assert store.get_range("r.bin", 0, 1) == b"\x00"
    assert store.get_range("r.bin", 90, 200) == bytes(range(90, 100))  # clipped like a slice
    assert store.get_range("r.bin", 100, 150) == b""
    assert store.get_range("r.bin", 5, 5) == b""
    with pytest.raises(ValueError):
        store.get_range("r.bin", 5, 4)


def test_list_is_sorted_recursive_relative_and_scoped(store: ObjectStore) -> None:
    names = ["d/c", "d/a", "d/b/z", "d/b/y", "dx/other", "top"]
    for name in names:
        store.put(name, name.encode())
    listed = store.list("d")
    assert [m.path for m in listed] == ["d/a", "d/b/y", "d/b/z", "d/c"]  # not "dx/..."
    assert all(isinstance(m, ObjectMeta) and m.size == len(m.path) for m in listed)
    assert [m.path for m in store.list("d/")] == [m.path for m in listed]
    assert [m.path for m in store.list("d/b")] == ["d/b/y", "d/b/z"]
    assert [m.path for m in store.list("")] == sorted(names)
    assert store.list("nothing-here") == []
    assert store.list("top") == []  # an object is not a directory


def test_list_first(store: ObjectStore) -> None:
    assert store.list_first("_versions") is None
    store.put(V2_OLDER, b"older")
    store.put(V2_LATEST, b"latest")
    store.put("_versionsX/0", b"not in the prefix")
    first = store.list_first("_versions")
    assert first is not None and first.path == V2_LATEST and first.size == len(b"latest")


def test_copy(store: ObjectStore) -> None:
    store.put("src/x", b"payload")
    store.copy("src/x", "dst/deep/y")
    assert store.get("dst/deep/y") == b"payload"
    assert store.get("src/x") == b"payload"
    store.put("src/z", b"other")
    store.copy("src/z", "dst/deep/y")  # copy overwrites
    assert store.get("dst/deep/y") == b"other"
    with pytest.raises(ObjectNotFoundError):
        store.copy("src/missing", "dst/never")
    assert not store.exists("dst/never")


def test_delete_many(store: ObjectStore) -> None:
    names = [f"del/{i:02d}" for i in range(12)]
    for name in names:
        store.put(name, b"x")
    store.delete_many(names[:5] + ["del/missing", "never/there"])  # missing ones are ignored
    assert [m.path for m in store.list("del")] == names[5:]
    store.delete_many(iter(names[5:]))
    store.delete_many([])
    assert store.list("del") == []


def test_missing_objects_raise_object_not_found(store: ObjectStore) -> None:
    store.put("dir/present", b"1")
    for call in (
        lambda: store.get("dir/absent"),
        lambda: store.get("dir"),
        lambda: store.get_range("dir/absent", 0, 10),
        lambda: store.get_range("dir/absent", 3, 3),
        lambda: store.head("dir/absent"),
        lambda: store.head("dir"),
        lambda: store.rename_if_not_exists("dir/absent", "dir/other"),
    ):
        with pytest.raises(ObjectNotFoundError) as info:
            call()
        assert isinstance(info.value, FileNotFoundError)
        assert store.uri in str(info.value)


def test_put_if_not_exists(store: ObjectStore) -> None:
    assert store.supports_atomic_commit
    store.check_commit_supported()
    assert store.put_if_not_exists(V2_OLDER, b"first") is True
    assert store.put_if_not_exists(V2_OLDER, b"second") is False
    assert store.get(V2_OLDER) == b"first"
    # no temporary files are left behind, and only the one object is listed
    assert [m.path for m in store.list("_versions")] == [V2_OLDER]


def test_put_new_writes_a_fresh_object_and_its_directories(store: ObjectStore) -> None:
    store.put_new("_deletions/7-3-123.bin", b"vector")
    assert store.get("_deletions/7-3-123.bin") == b"vector"
    assert [m.path for m in store.list("_deletions")] == ["_deletions/7-3-123.bin"]  # nothing else left behind


def test_put_new_refuses_an_existing_name_on_local_disk(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "t"))
    store.put_new("_deletions/1-1-1.bin", b"first")
    with pytest.raises(StorageError, match="put_new"):
        store.put_new("_deletions/1-1-1.bin", b"second")
    assert store.get("_deletions/1-1-1.bin") == b"first"


def test_rename_if_not_exists(store: ObjectStore) -> None:
    store.put("staged/a", b"A")
    store.put("staged/b", b"B")
    assert store.rename_if_not_exists("staged/a", "final/x") is True
    assert store.get("final/x") == b"A"
    assert not store.exists("staged/a")
    # the name is taken: nothing changes, the source stays for the caller to clean up
    assert store.rename_if_not_exists("staged/b", "final/x") is False
    assert store.get("final/x") == b"A"
    assert store.get("staged/b") == b"B"


def test_copy_if_not_exists(store: ObjectStore) -> None:
    store.put("staged/a", b"A")
    store.put("staged/b", b"B")
    assert store.copy_if_not_exists("staged/a", "final/x") is True
    assert store.get("final/x") == b"A" and store.get("staged/a") == b"A"  # the source stays
    # the name is taken: nothing changes, with or without the caller's bytes
    assert store.copy_if_not_exists("staged/b", "final/x") is False
    assert store.copy_if_not_exists("staged/b", "final/x", b"B") is False
    assert store.get("final/x") == b"A"
    assert store.copy_if_not_exists("staged/b", "final/deep/y", b"B") is True  # a new "directory"
    assert store.get("final/deep/y") == b"B"
    store.delete_many(["staged/a"])
    assert store.get("final/x") == b"A"  # a copy, not the same name: removing the source keeps it
    with pytest.raises(ObjectNotFoundError):
        store.copy_if_not_exists("staged/missing", "final/never")
    assert not store.exists("final/never")


def test_local_copy_if_not_exists_is_a_hard_link(tmp_path: Path) -> None:
    """Locally no file is created: the final name is a second link to the source's inode."""
    store = open_store(str(tmp_path))
    store.put("_versions/1.manifest-abc", b"M")
    assert store.copy_if_not_exists("_versions/1.manifest-abc", "_versions/1.manifest") is True
    src, dst = (os.stat(tmp_path / "_versions" / n) for n in ("1.manifest-abc", "1.manifest"))
    assert src.st_ino == dst.st_ino and dst.st_nlink == 2
    assert sorted(os.listdir(tmp_path / "_versions")) == ["1.manifest", "1.manifest-abc"]  # no temporary left


def test_arrow_filesystem_round_trip(store: ObjectStore) -> None:
    table = pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]})
    fs = store.arrow_filesystem()
    assert fs is store.arrow_filesystem()  # built once
    pq.write_table(table, store.arrow_path("data/part-0.parquet"), filesystem=fs)
    assert store.exists("data/part-0.parquet")
    assert pq.read_table(store.arrow_path("data/part-0.parquet"), filesystem=fs).equals(table)
    assert [m.path for m in store.list("data")] == ["data/part-0.parquet"]
    # bytes written through the store are readable through arrow, too
    store.put("data/raw.parquet", store.get("data/part-0.parquet"))
    assert pq.read_table(store.arrow_path("data/raw.parquet"), filesystem=fs).equals(table)


def test_store_pickles_to_an_equivalent_store(store: ObjectStore) -> None:
    store.put("p", b"pickled")
    clone = pickle.loads(pickle.dumps(store))
    assert clone.uri == store.uri and clone.scheme == store.scheme
    assert clone.get("p") == b"pickled"


# --- uri normalization and local specifics -------------------------------------------------------------


def test_uri_normalization(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    rel = ObjectStore("rel/table/")
    assert rel.scheme == "file" and rel.uri == str(tmp_path / "rel" / "table")
    assert rel.full_path("_versions/1.manifest") == f"{tmp_path}/rel/table/_versions/1.manifest"
    assert rel.arrow_path("x") == f"{tmp_path}/rel/table/x"
    assert isinstance(rel.arrow_filesystem(), pafs.LocalFileSystem)
    file_uri = ObjectStore(f"file://{tmp_path}/t/")
    assert file_uri.scheme == "file" and file_uri.uri == f"file://{tmp_path}/t"
    file_uri.put("a", b"1")
    assert (tmp_path / "t" / "a").read_bytes() == b"1"
    mem = ObjectStore("memory://mvcc-norm/")
    assert mem.scheme == "memory" and mem.uri == "memory://mvcc-norm"
    assert mem.full_path("a/b") == "/mvcc-norm/a/b"
    assert open_store(mem) is mem


def test_local_put_if_not_exists_leaves_no_temporary_files(tmp_uri: str) -> None:
    store = ObjectStore(tmp_uri)
    assert store.put_if_not_exists("_versions/1.manifest", b"1")
    assert not store.put_if_not_exists("_versions/1.manifest", b"2")
    store.put("_versions/2.manifest", b"2")
    store.copy("_versions/2.manifest", "_versions/3.manifest")
    assert sorted(os.listdir(Path(tmp_uri) / "_versions")) == ["1.manifest", "2.manifest", "3.manifest"]
    assert storage_mod.is_temporary("_versions/_tmp-abc-1.manifest")
    assert storage_mod.TEMP_PREFIX > "9"  # in-flight temporary files sort after all-digit manifest names


def test_unexpected_local_errors_become_storage_errors(tmp_uri: str) -> None:
    store = ObjectStore(tmp_uri)
    store.put("file", b"I am a file")
    with pytest.raises(StorageError) as info:
        store.put("file/child", b"cannot live below a file")
    assert not isinstance(info.value, ObjectNotFoundError)
    assert store.uri in str(info.value) and "file/child" in str(info.value)


# --- stores that cannot commit -------------------------------------------------------------------------


class _PlainFileSystem(MemoryFileSystem):
    """An fsspec protocol mvcc has no atomic primitive for (a private in-memory store)."""

    protocol = "mvccplain"
    store: dict[str, Any] = {}  # fsspec keeps the memory store on the class
    pseudo_dirs = [""]

    @classmethod
    def _strip_protocol(cls, path: str) -> str:
        return MemoryFileSystem._strip_protocol(str(path).removeprefix("mvccplain://"))


def test_unknown_protocol_reads_and_writes_but_cannot_commit() -> None:
    import fsspec

    fsspec.register_implementation("mvccplain", _PlainFileSystem, clobber=True)
    store = ObjectStore(f"mvccplain://t-{uuid.uuid4().hex}")
    assert store.scheme == "mvccplain"
    store.put("a/b", b"plain")
    assert store.get("a/b") == b"plain"
    assert [m.path for m in store.list("a")] == ["a/b"]
    assert store.list_first("") == store.list("")[0]
    assert store.supports_atomic_commit is False
    with pytest.raises(CommitNotSupportedError) as info:
        store.check_commit_supported()
    assert "external manifest store" in str(info.value) and store.uri in str(info.value)
    with pytest.raises(CommitNotSupportedError):
        store.put_if_not_exists("_versions/1.manifest", b"x")
    with pytest.raises(CommitNotSupportedError):
        store.rename_if_not_exists("a/b", "a/c")
    assert not store.exists("_versions/1.manifest") and store.exists("a/b")


def test_http_protocol_cannot_commit() -> None:
    store = ObjectStore("http://127.0.0.1:9/some/table")
    assert store.scheme == "http" and not store.supports_atomic_commit
    with pytest.raises(CommitNotSupportedError, match="external manifest store"):
        store.check_commit_supported()


def test_protocol_fsspec_does_not_know_is_a_storage_error() -> None:
    with pytest.raises(StorageError, match="nosuchproto://x"):
        ObjectStore("nosuchproto://x/y")


# --- exactly-once under contention (several OS processes) ---------------------------------------------

_ROUNDS = 4
_PROCESSES = 8


def _contend(uri: str, options: dict[str, Any] | None, names: list[str], me: int, barrier: Any, results: Any) -> None:
    store = ObjectStore(uri, options)
    store.exists("warm-up")  # connect before the race, so all processes start together
    for name in names:
        barrier.wait()
        won = store.put_if_not_exists(name, f"writer-{me}".encode())
        results.put((name, me, won))


def _race(uri: str, options: dict[str, Any] | None) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(_PROCESSES)
    results = ctx.Queue()
    names = [f"_versions/{18446744073709551614 - i}.manifest" for i in range(_ROUNDS)]
    procs = [ctx.Process(target=_contend, args=(uri, options, names, me, barrier, results)) for me in range(_PROCESSES)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=60) for _ in range(_ROUNDS * _PROCESSES)]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    store = ObjectStore(uri, options)
    for name in names:
        winners = [me for (n, me, won) in outcomes if n == name and won]
        assert len(winners) == 1, f"{name}: winners {winners}"
        assert store.get(name) == f"writer-{winners[0]}".encode()
    assert [m.path for m in store.list("_versions")] == sorted(names)


@pytest.mark.slow
def test_put_if_not_exists_exactly_once_local(tmp_uri: str) -> None:
    _race(tmp_uri, None)


@pytest.mark.s3
@pytest.mark.slow
def test_put_if_not_exists_exactly_once_s3(s3_uri: str, s3_options: dict[str, Any]) -> None:
    """Eight processes race conditional PUTs through the S3 backend: exactly one wins each name.

    What this proves: our S3 client path is exactly-once given a server whose conditional PUT is atomic. Each
    process sends one PUT with `If-None-Match: *` per name and reports a win only on a 2xx; a 412 (or 409) is a
    loss; the winner's bytes are what is stored; losers leave nothing behind.

    What it does not prove: that S3 is atomic. That is assumed of real S3 (documented for conditional writes).
    moto alone is not: its handler checks for the key and stores it in two steps on a threaded server, and
    under load two requests could both pass the check (the flake this test once showed). The session's server
    (tests/moto_server.py) therefore handles write requests one at a time, which is what makes the server side
    atomic here; see the storage section of docs/reference/format.md.
    """
    _race(s3_uri, s3_options)


def test_session_s3_server_handles_writes_one_at_a_time() -> None:
    """The middleware the session's moto server runs behind: no two write requests are in moto at once
    (so moto's check-then-store conditional PUT is atomic), reads still overlap, and a request body
    (plain or chunked) reaches moto intact."""
    import io
    import threading
    import time

    from moto_server import SerializedWrites
    from werkzeug.wsgi import get_input_stream

    inside = {"PUT": 0, "GET": 0}
    most = {"PUT": 0, "GET": 0}
    bodies: list[bytes] = []
    guard = threading.Lock()

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        method = environ["REQUEST_METHOD"]
        with guard:
            inside[method] += 1
            most[method] = max(most[method], inside[method])
        time.sleep(0.02)  # a handler that is slow between its check and its write
        with guard:
            inside[method] -= 1
        if method == "PUT":
            bodies.append(get_input_stream(environ).read())  # as moto's Flask request reads it
        start_response("200 OK", [])
        return [b""]

    server = SerializedWrites(app)

    def request(method: str, body: bytes, chunked: bool) -> None:
        environ: dict[str, Any] = {"REQUEST_METHOD": method, "wsgi.input": io.BytesIO(body)}
        if chunked:  # werkzeug's server: no Content-Length, a stream that ends after the last chunk
            environ["HTTP_TRANSFER_ENCODING"] = "chunked"
            environ["wsgi.input_terminated"] = True
        else:
            environ["CONTENT_LENGTH"] = str(len(body))
        server(environ, lambda status, headers: None)

    threads = [threading.Thread(target=request, args=("PUT", b"x" * i, i % 2 == 0)) for i in range(1, 9)] + [
        threading.Thread(target=request, args=("GET", b"", False)) for _ in range(8)
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert most["PUT"] == 1
    assert most["GET"] > 1
    assert sorted(bodies) == [b"x" * i for i in range(1, 9)]


# --- S3 specifics --------------------------------------------------------------------------------------


@pytest.mark.s3
def test_moto_server_enforces_if_none_match(s3_client, s3_bucket: str) -> None:
    """The S3 tests only prove something if the server refuses a second conditional PUT."""
    from botocore.exceptions import ClientError

    client = s3_client
    key = f"conditional/{uuid.uuid4().hex}"
    client.put_object(Bucket=s3_bucket, Key=key, Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError) as info:
        client.put_object(Bucket=s3_bucket, Key=key, Body=b"2", IfNoneMatch="*")
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert client.get_object(Bucket=s3_bucket, Key=key)["Body"].read() == b"1"


@pytest.mark.s3
def test_s3_list_first_is_one_request_with_max_keys_1(s3_uri: str, s3_options: dict[str, Any]) -> None:
    store = ObjectStore(s3_uri, s3_options)
    names = [f"_versions/{18446744073709551614 - v:020d}.manifest" for v in range(50)]
    for name in names:
        store.put(name, b"m")
    sent, params = _count_calls(store, "ListObjectsV2")
    first = store.list_first("_versions")
    assert first is not None and first.path == min(names)
    assert len(sent) == 1
    assert len(params) == 1 and params[0]["MaxKeys"] == 1
    assert params[0]["Prefix"].endswith("/_versions/")
    assert [m.path for m in store.list("_versions")] == sorted(names)


@pytest.mark.s3
def test_s3_list_follows_continuation_tokens(s3_uri: str, s3_options: dict[str, Any]) -> None:
    store = ObjectStore(s3_uri, s3_options)
    for i in range(5):
        store.put(f"pages/{i}", b"x")
    # force small pages so the continuation-token loop runs against the real server
    client = _s3_client(store)

    def small_pages(params: dict[str, Any], **kw: Any) -> None:
        params.setdefault("MaxKeys", 2)

    client.meta.events.register("before-parameter-build.s3.ListObjectsV2", small_pages)
    sent, _ = _count_calls(store, "ListObjectsV2")
    assert [m.path for m in store.list("pages")] == [f"pages/{i}" for i in range(5)]
    assert len(sent) == 3


@pytest.mark.s3
def test_s3_delete_many_is_batched(s3_uri: str, s3_options: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(s3_backend, "_S3_DELETE_BATCH", 7)
    store = ObjectStore(s3_uri, s3_options)
    names = [f"batch/{i:02d}" for i in range(20)]
    for name in names:
        store.put(name, b"x")
    sent, params = _count_calls(store, "DeleteObjects")
    store.delete_many([*names, "batch/missing"])
    assert len(sent) == 3
    assert [len(p["Delete"]["Objects"]) for p in params] == [7, 7, 7]
    assert store.list("batch") == []


@pytest.mark.s3
def test_s3_get_is_one_get_object_request(
    s3_uri: str, s3_options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole-object read is one GetObject, no HeadObject for its size first (a manifest read is one round
    trip), also for an object larger than the chunks its body is read in."""
    store = ObjectStore(s3_uri, s3_options)
    small, large = b"m" * 100, bytes(range(256)) * 4096
    store.put("g/small", small)
    store.put("g/large", large)
    monkeypatch.setattr(s3_backend, "_READ_CHUNK", 64 * 1024)  # large is 16 chunks
    for name, data in (("g/small", small), ("g/large", large)):
        gets, _ = _count_calls(store, "GetObject")
        heads, _ = _count_calls(store, "HeadObject")
        assert store.get(name) == data
        assert (len(gets), len(heads)) == (1, 0)
    with pytest.raises(ObjectNotFoundError):
        store.get("g/missing")


@pytest.mark.s3
def test_s3_copy_is_server_side(s3_uri: str, s3_options: dict[str, Any]) -> None:
    store = ObjectStore(s3_uri, s3_options)
    store.put("c/src", b"abc" * 1000)
    sent, _ = _count_calls(store, "CopyObject")
    store.copy("c/src", "c/dst")
    assert len(sent) == 1
    assert store.get("c/dst") == b"abc" * 1000


@pytest.mark.s3
def test_s3_storage_options_are_translated(s3_server: str) -> None:
    store = ObjectStore(
        "s3://mvcc-test/some/table/",
        {
            "access_key_id": "AK",
            "secret_access_key": "SK",
            "aws_session_token": "TOK",
            "endpoint": s3_server,
            "region": "eu-west-1",
            "allow_http": "true",
            "requester_pays": False,
        },
    )
    assert store.uri == "s3://mvcc-test/some/table" and store.scheme == "s3"
    assert store.full_path("_versions/x") == "mvcc-test/some/table/_versions/x"
    assert store.arrow_path("data/a.parquet") == "mvcc-test/some/table/data/a.parquet"
    fs = store.fs
    assert (fs.key, fs.secret, fs.token) == ("AK", "SK", "TOK")
    assert fs.client_kwargs == {"endpoint_url": s3_server, "region_name": "eu-west-1"}
    assert fs.dircache.use_listings_cache is False
    assert store.supports_atomic_commit
    # an s3fs option pyarrow has no equivalent for: arrow goes through fsspec instead
    assert isinstance(store.arrow_filesystem(), pafs.PyFileSystem)


@pytest.mark.s3
def test_s3_arrow_filesystem_is_native_when_possible(s3_uri: str, s3_options: dict[str, Any]) -> None:
    store = ObjectStore(s3_uri, s3_options)
    assert isinstance(store.arrow_filesystem(), pafs.S3FileSystem)


@pytest.mark.s3
@pytest.mark.parametrize("value", ["false", False, "disabled"])
def test_s3_without_conditional_put_cannot_commit(s3_uri: str, s3_options: dict[str, Any], value: Any) -> None:
    store = ObjectStore(s3_uri, {**s3_options, "conditional_put": value})
    assert store.supports_atomic_commit is False
    with pytest.raises(CommitNotSupportedError) as info:
        store.check_commit_supported()
    assert "external manifest store" in str(info.value) and store.uri in str(info.value)
    with pytest.raises(CommitNotSupportedError):
        store.put_if_not_exists("_versions/1.manifest", b"x")
    store.put("still/works", b"yes")  # plain reads and writes are unaffected
    assert store.get("still/works") == b"yes"


@pytest.mark.s3
def test_s3_store_from_aws_environment_variables(s3_server: str, s3_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    store = ObjectStore(s3_uri)
    assert store.put_if_not_exists("_versions/1.manifest", b"env")
    assert not store.put_if_not_exists("_versions/1.manifest", b"again")
    assert store.get("_versions/1.manifest") == b"env"
    assert store.list_first("_versions") == store.head("_versions/1.manifest")
    arrow_fs = store.arrow_filesystem()
    assert isinstance(arrow_fs, pafs.S3FileSystem)
    table = pa.table({"x": [1, 2]})
    pq.write_table(table, store.arrow_path("data/env.parquet"), filesystem=arrow_fs)
    assert store.head("data/env.parquet").size > 0
    assert pq.read_table(store.arrow_path("data/env.parquet"), filesystem=arrow_fs).equals(table)


def _use_inherited_store(store: ObjectStore, results: Any) -> None:
    try:
        results.put(store.get("inherited"))
    except BaseException as exc:  # report, do not hang the parent
        results.put(repr(exc))


@pytest.mark.s3
def test_s3_store_survives_fork(s3_uri: str, s3_options: dict[str, Any]) -> None:
    """A store inherited through fork (no pickling) rebuilds its S3 client instead of failing."""
    store = ObjectStore(s3_uri, s3_options)
    store.put("inherited", b"from the parent")
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    proc = ctx.Process(target=_use_inherited_store, args=(store, results))
    proc.start()
    assert results.get(timeout=30) == b"from the parent"
    proc.join(timeout=30)
    assert proc.exitcode == 0


@pytest.mark.s3
def test_s3_missing_bucket_is_a_storage_error(s3_options: dict[str, Any]) -> None:
    store = ObjectStore(f"s3://mvcc-no-such-bucket-{uuid.uuid4().hex[:8]}/t", s3_options)
    with pytest.raises(StorageError) as info:
        store.list("_versions")
    assert store.uri in str(info.value)
    with pytest.raises(ObjectNotFoundError):
        store.get("x")


@pytest.mark.parametrize("fsync", [None, "true"])
def test_local_fsync_option_syncs_every_file_of_a_commit(tmp_path, monkeypatch, fsync) -> None:
    """Durability against power loss cannot be produced in a test: count what reaches fsync instead."""
    import os

    import pyarrow as pa

    import mvcc_core as mvcc

    opts = {"fsync": fsync} if fsync else None
    t = mvcc.write_table(pa.table({"id": [1, 2, 3]}), str(tmp_path / "t"), storage_options=opts)
    synced: list[str] = []
    real = os.fsync

    def recording(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", recording)
    t.append(pa.table({"id": [4]}))
    t.delete("id = 2")
    monkeypatch.undo()
    root = str(tmp_path / "t")
    files = {p[len(root) + 1 :].split("/")[0] for p in synced if p.startswith(root + "/") and "." in p[-10:]}
    directories = {p[len(root) + 1 :] for p in synced if os.path.isdir(p)}
    if fsync is None:
        assert synced == []  # off by default, as object_store's LocalFileSystem and delta-rs
    else:  # the data file, the deletion file, the transaction and the manifest, and their directories
        assert files == {"data", "_deletions", "_transactions", "_versions"}, synced
        assert {"data", "_deletions", "_transactions", "_versions"} <= directories, synced
    assert mvcc.open_table(str(tmp_path / "t")).to_table().column("id").to_pylist() == [1, 3, 4]
