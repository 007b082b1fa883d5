"""Staged transactions, the public write seam.

For every write with an uncommitted form: staging plus `Table.commit` gives the same table as the
committed method; `Transaction.abort` leaves the table's directory exactly as it was; a staged
transaction that loses a conflict, or whose commit is refused, is refused with the typed error and leaves
no file behind. Directories are listed with the backend's own client (os.walk, fsspec's memory
filesystem, boto3), not through mvcc.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

import mvcc_core as mvcc

Listing = dict[str, int]


def base(n: int = 12) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "n": pa.array([i * 10 for i in range(n)], pa.int64()),
            "s": [f"s{i}" for i in range(n)],
        }
    )


NEW = pa.table({"id": pa.array([100, 101], pa.int64()), "n": pa.array([1, 2], pa.int64()), "s": ["a", "b"]})
UPSERT = pa.table({"id": pa.array([1, 200], pa.int64()), "n": pa.array([-1, -2], pa.int64()), "s": ["u", "v"]})


def make(uri: str, opts: dict[str, Any] | None) -> mvcc.Table:
    """Three fragments of four rows (so deletes and updates touch some fragments, not all)."""
    return mvcc.write_table(base(), uri, storage_options=opts, max_rows_per_file=4)


@pytest.fixture
def lister(request: pytest.FixtureRequest) -> Callable[[str], Listing]:
    """Every object under a table root (path relative to it -> size), read with the backend's own client."""

    def listing(uri: str) -> Listing:
        if uri.startswith("s3://"):
            client = request.getfixturevalue("s3_client")
            bucket, _, prefix = uri[len("s3://") :].partition("/")
            out: Listing = {}
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
                for obj in page.get("Contents", []):
                    out[obj["Key"][len(prefix) + 1 :]] = obj["Size"]
            return out
        if uri.startswith("memory://"):
            from fsspec.implementations.memory import MemoryFileSystem

            fs = MemoryFileSystem()
            root = fs._strip_protocol(uri)
            try:
                found = fs.find(root, detail=True)
            except FileNotFoundError:
                return {}
            return {path[len(root) + 1 :]: info["size"] for path, info in found.items()}
        return {
            os.path.relpath(os.path.join(d, f), uri): os.path.getsize(os.path.join(d, f))
            for d, _, files in os.walk(uri)
            for f in files
        }

    return listing


def relative(t: mvcc.Table, files: list[str]) -> set[str]:
    """A staged transaction's full URIs as paths relative to the table root (all of them are under it)."""
    root = t.uri.rstrip("/") + "/"
    assert all(f.startswith(root) for f in files), (root, files)
    return {f[len(root) :] for f in files}


def merge_builder(t: mvcc.Table) -> mvcc.table.MergeInsertBuilder:
    return t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()


# name -> (stage it: Transaction, run the committed method, the operation committed)
WRITES: dict[str, tuple[Callable[[mvcc.Table], Any], Callable[[mvcc.Table], Any], str]] = {
    "append": (lambda t: t.append_uncommitted(NEW), lambda t: t.append(NEW), "Append"),
    "overwrite": (lambda t: t.overwrite_uncommitted(NEW), lambda t: t.overwrite(NEW), "Overwrite"),
    "delete": (lambda t: t.delete_uncommitted("id IN (1, 9)"), lambda t: t.delete("id IN (1, 9)"), "Delete"),
    "update_rows": (
        lambda t: t.update_uncommitted({"n": "n + 1000"}, "id >= 6", mode="rewrite_rows"),
        lambda t: t.update({"n": "n + 1000"}, "id >= 6", mode="rewrite_rows"),
        "Update",
    ),
    "update_columns": (
        lambda t: t.update_uncommitted({"n": "n + 1000", "s": "'x'"}, "id >= 6", mode="rewrite_columns"),
        lambda t: t.update({"n": "n + 1000", "s": "'x'"}, "id >= 6", mode="rewrite_columns"),
        "Update",
    ),
    "merge_insert": (
        lambda t: merge_builder(t).execute_uncommitted(UPSERT)[0],
        lambda t: merge_builder(t).execute(UPSERT),
        "Update",
    ),
    "create_index": (lambda t: t.create_index_uncommitted("id"), lambda t: t.create_index("id"), "CreateIndex"),
}


def snapshot(t: mvcc.Table) -> dict[str, Any]:
    versions = t.versions()
    return {
        "rows": t.to_table().to_pylist(),
        "schema": t.schema,
        "versions": [v.version for v in versions],
        "operations": [v.operation for v in versions],
        "fragments": [f.physical_rows for f in t.get_fragments()],
        "indices": [(i["name"], i["fields"], i["fragment_ids"]) for i in t.list_indices()],
    }


@pytest.mark.parametrize("write", list(WRITES))
def test_staged_then_commit_equals_committed_method(any_uri, write) -> None:
    uri, opts = any_uri
    stage, direct, operation = WRITES[write]
    staged_t, direct_t = make(f"{uri}/staged", opts), make(f"{uri}/direct", opts)
    before = staged_t.to_table()

    txn = stage(staged_t)
    assert isinstance(txn, mvcc.Transaction)
    assert txn.read_version == 1 and txn.operation.name == operation and txn.files
    # nothing visible yet: neither this handle nor a fresh one sees a new version
    assert staged_t.version == staged_t.latest_version == 1
    assert mvcc.open_table(f"{uri}/staged", storage_options=opts).to_table().equals(before)

    assert staged_t.commit(txn) is staged_t
    assert staged_t.version == 2 and txn.files == []  # the version owns them now
    direct(direct_t)
    assert snapshot(staged_t) == snapshot(direct_t)
    reopened = mvcc.open_table(f"{uri}/staged", storage_options=opts)
    assert snapshot(reopened) == snapshot(direct_t)
    assert reopened.versions()[-1].operation == operation == reopened.transaction().operation.name
    assert reopened.transaction().uuid == txn.uuid


@pytest.mark.parametrize("write", list(WRITES))
def test_abort_leaves_directory_as_it_was(any_uri, lister, write) -> None:
    uri, opts = any_uri
    t = make(uri, opts)
    before = lister(uri)
    txn = WRITES[write][0](t)
    staged = relative(t, txn.files)
    during = lister(uri)
    assert staged and staged <= set(during) and set(during) - set(before) == staged
    txn.abort(opts)
    assert txn.files == []
    assert lister(uri) == before
    assert t.version == t.latest_version == 1 and t.to_table().equals(base())


# staged write, what another handle commits first, the error the stale staged one gets
CONFLICTS = [
    ("append", lambda o: o.overwrite(base(3)), mvcc.IncompatibleConflictError),
    ("overwrite", lambda o: o.overwrite(base(3)), mvcc.RetryableConflictError),
    ("delete", lambda o: o.delete("id = 1"), mvcc.RetryableConflictError),  # the same row
    ("delete", lambda o: o.overwrite(base(3)), mvcc.IncompatibleConflictError),
    ("update_rows", lambda o: o.delete("id = 9"), mvcc.RetryableConflictError),
    ("update_columns", lambda o: o.overwrite(base(3)), mvcc.IncompatibleConflictError),
    ("merge_insert", lambda o: o.delete("id = 1"), mvcc.RetryableConflictError),
    ("create_index", lambda o: o.overwrite(base(3)), mvcc.IncompatibleConflictError),
    ("create_index", lambda o: o.restore(1), mvcc.IncompatibleConflictError),
]


@pytest.mark.parametrize(("write", "theirs", "error"), CONFLICTS, ids=lambda x: getattr(x, "__name__", None))
def test_staged_loser_is_refused_and_its_files_removed(any_uri, lister, write, theirs, error) -> None:
    uri, opts = any_uri
    t = make(uri, opts)
    txn = WRITES[write][0](t)
    staged = relative(t, txn.files)
    other = mvcc.open_table(uri, storage_options=opts)
    theirs(other)
    expected_rows = other.to_table()
    before = lister(uri)
    assert staged <= set(before)

    with pytest.raises(error):
        t.commit(txn)
    after = lister(uri)
    # the staged files and everything the failed commit wrote (its transaction file) are gone; nothing else
    assert after == {p: s for p, s in before.items() if p not in staged}
    assert txn.files == []
    assert t.version == 1 and t.latest_version == other.version
    assert mvcc.open_table(uri, storage_options=opts).to_table().equals(expected_rows)


def test_delete_of_other_rows_is_rebased_not_refused(tmp_uri) -> None:
    """The counterpart of the conflict above: different rows of the same fragment rebase and commit."""
    t = make(tmp_uri, None)
    txn = t.delete_uncommitted("id = 2")
    mvcc.open_table(tmp_uri).delete("id = 1")
    t.commit(txn)
    assert t.version == 3 and sorted(t.to_table().column("id").to_pylist()) == [0, *range(3, 12)]


def test_commit_refused_by_the_table_removes_staged_files(tmp_path, lister) -> None:
    """A Delete staged on one table names a fragment another table does not have: InvalidOperationError,
    and the staged deletion file (in the first table's directory) and the transaction file are removed."""
    a_uri, b_uri = str(tmp_path / "a"), str(tmp_path / "b")
    a = make(a_uri, None)
    b = mvcc.write_table(base(4), b_uri)
    a_before, b_before = lister(a_uri), lister(b_uri)
    txn = a.delete_uncommitted("id = 10")  # in fragment 2; b has fragment 0 only
    assert relative(a, txn.files) and set(lister(a_uri)) > set(a_before)
    with pytest.raises(mvcc.errors.InvalidOperationError, match="not in version"):
        b.commit(txn)
    assert lister(a_uri) == a_before and lister(b_uri) == b_before
    assert b.version == 1 and a.version == 1


def test_commit_on_corrupt_latest_removes_staged_files(any_uri, lister) -> None:
    uri, opts = any_uri
    t = make(uri, opts)
    t.append(NEW)
    txn = t.append_uncommitted(NEW)
    latest = t.state.latest_location()
    assert latest.version == 2 and latest.path.startswith("_versions/")
    t.state.store.put(latest.path, b"garbage")
    before = lister(uri)
    # another handle (say a driver committing what workers staged); `t` itself still has version 2 in memory
    committer = mvcc.open_table(uri, version=1, storage_options=opts)
    with pytest.raises(mvcc.errors.CorruptManifestError, match="restore"):
        committer.commit(txn)
    staged = {p for p in before if p.startswith("data/")} - set(lister(uri))
    assert len(staged) == 1 and lister(uri) == {p: s for p, s in before.items() if p not in staged}


# ---- commit properties ---------------------------------------------------------------------------


def test_properties_and_messages_shown_by_versions_and_get_transactions(any_uri) -> None:
    uri, opts = any_uri
    t = mvcc.write_table(
        base(), uri, storage_options=opts, commit_message="load", transaction_properties={"kind": "create"}
    )
    t.append(NEW, commit_message="more", transaction_properties={"kind": "append", "run": "7"})
    t.delete("id = 3", commit_message="gdpr", transaction_properties={"kind": "delete"})
    t.update({"n": "0"}, "id = 4", commit_message="fix", transaction_properties={"kind": "update"})
    merge_builder(t).execute(UPSERT, commit_message="upsert", transaction_properties={"kind": "merge"})
    t.create_index("id", commit_message="idx", transaction_properties={"kind": "index"})
    txn = t.overwrite_uncommitted(NEW, commit_message="staged", transaction_properties={"kind": "overwrite"})
    assert txn.transaction_properties == {"kind": "overwrite"} and txn.message == "staged"
    t.commit(txn)
    t.restore(1, commit_message="back", transaction_properties={"kind": "restore"})
    expected = [
        ("Overwrite", "load", {"kind": "create"}),
        ("Append", "more", {"kind": "append", "run": "7"}),
        ("Delete", "gdpr", {"kind": "delete"}),
        ("Update", "fix", {"kind": "update"}),
        ("Update", "upsert", {"kind": "merge"}),
        ("CreateIndex", "idx", {"kind": "index"}),
        ("Overwrite", "staged", {"kind": "overwrite"}),
        ("Restore", "back", {"kind": "restore"}),
    ]
    for handle in (t, mvcc.open_table(uri, storage_options=opts)):
        versions = handle.versions()
        assert [(v.operation, v.message, v.transaction_properties) for v in versions] == expected
        assert [(v["operation"], v["message"], v["metadata"]) for v in versions] == expected
        assert [v["version"] for v in versions] == list(range(1, 9)) and all(v.error is None for v in versions)
        assert dict(versions[1])["transaction_properties"] == {"kind": "append", "run": "7"}
        txns = handle.get_transactions(20)
        assert [(x.operation.name, x.message, x.transaction_properties) for x in txns] == expected[::-1]
        assert [x.transaction_properties for x in handle.get_transactions(2)] == [
            {"kind": "restore"},
            {"kind": "overwrite"},
        ]


BAD_PROPERTY_WRITES: dict[str, Callable[[mvcc.Table, Any], Any]] = {
    "append": lambda t, p: t.append(NEW, transaction_properties=p),
    "append_uncommitted": lambda t, p: t.append_uncommitted(NEW, transaction_properties=p),
    "overwrite": lambda t, p: t.overwrite(NEW, transaction_properties=p),
    "delete": lambda t, p: t.delete("id = 1", transaction_properties=p),
    "update_rows": lambda t, p: t.update({"n": "1"}, "id = 1", mode="rewrite_rows", transaction_properties=p),
    "update_columns": lambda t, p: t.update({"n": "1"}, "id = 1", mode="rewrite_columns", transaction_properties=p),
    "merge_insert": lambda t, p: merge_builder(t).execute(UPSERT, transaction_properties=p),
    "merge_insert_uncommitted": lambda t, p: merge_builder(t).execute_uncommitted(UPSERT, transaction_properties=p),
    "create_index": lambda t, p: t.create_index("id", transaction_properties=p),
    "restore": lambda t, p: t.restore(1, transaction_properties=p),
    "update_config": lambda t, p: t.update_config({"a": "b"}, transaction_properties=p),
    "write_table_append": lambda t, p: mvcc.write_table(
        NEW, t.uri, mode="append", storage_options=t.state.storage_options, transaction_properties=p
    ),
}


@pytest.mark.parametrize("write", BAD_PROPERTY_WRITES)
@pytest.mark.parametrize("bad", [{"run": 7}, {7: "run"}, [("run", "7")]], ids=["int-value", "int-key", "list"])
def test_bad_properties_raise_type_error_before_anything_is_written(tmp_uri, lister, write, bad) -> None:
    t = make(tmp_uri, None)
    before = lister(tmp_uri)
    with pytest.raises(TypeError, match="transaction_properties"):
        BAD_PROPERTY_WRITES[write](t, bad)
    assert lister(tmp_uri) == before
    assert t.version == t.latest_version == 1


def test_write_table_bad_properties_write_nothing(tmp_uri) -> None:
    with pytest.raises(TypeError, match="transaction_properties"):
        mvcc.write_table(base(), tmp_uri, transaction_properties={"run": 1})
    assert not os.path.exists(tmp_uri) or not any(files for _, _, files in os.walk(tmp_uri))


def test_options_are_keyword_only(tmp_uri, lister) -> None:
    t = make(tmp_uri, None)
    before = lister(tmp_uri)
    staged = t.append_uncommitted(NEW)
    calls = [
        lambda: t.append(NEW, 10),
        lambda: t.append_uncommitted(NEW, 10),
        lambda: t.overwrite(NEW, NEW.schema),
        lambda: t.delete("id = 1", "message"),
        lambda: t.delete_uncommitted("id = 1", "message"),
        lambda: t.update({"n": "1"}, "id = 1", "rewrite_rows"),
        lambda: t.create_index("id", "BTREE", "name"),
        lambda: t.create_index_uncommitted("id", "BTREE", "name"),
        lambda: merge_builder(t).execute(UPSERT, "message"),
        lambda: t.commit(staged, 1),
        lambda: mvcc.write_table(NEW, tmp_uri, "append", NEW.schema),
        lambda: mvcc.open_table(tmp_uri, 1, None),
    ]
    for call in calls:
        with pytest.raises(TypeError, match="positional"):
            call()
    staged.abort()
    assert lister(tmp_uri) == before
    assert t.version == t.latest_version == 1
