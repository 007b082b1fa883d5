"""A pylance user's script runs unchanged against mvcc_core.

The same script body runs against pylance (`import lance`, when installed) and against mvcc_core, and the
results are compared where the semantics are the same. Where pylance differs, a test below asserts both
sides of the difference documented in docs/pylance_compat.md, so that a change on either side is noticed.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import mvcc_core as mvcc

try:
    import lance
except ImportError:  # pragma: no cover - pylance is in the dev environment
    lance = None

needs_lance = pytest.mark.skipif(lance is None, reason="pylance is not installed")

# (write_dataset, dataset): the only two names that differ between the libraries
MVCC = (mvcc.write_table, mvcc.open_table)
LANCE = (lance.write_dataset, lance.dataset) if lance is not None else None


def data(n: int = 20) -> pa.Table:
    return pa.table({"id": pa.array(range(n), pa.int64()), "v": [f"v{i}" for i in range(n)]})


def script(write: Callable[..., Any], dataset: Callable[..., Any], path: Path) -> dict[str, Any]:
    """What a pylance user writes, with pylance's names only. Four fragments of five rows."""
    out: dict[str, Any] = {}
    ds = write(data(), path, mode="create", max_rows_per_file=5)
    out["fresh"] = (ds.version, ds.latest_version, ds.version == ds.latest_version)
    out["deleted"] = dict(ds.delete("id IN (1, 6, 7, 13)"))
    out["num_deleted_rows"] = ds.delete("id = 2")["num_deleted_rows"]
    ds.insert(pa.table({"id": pa.array([100, 101], pa.int64()), "v": ["a", "b"]}))
    out["after_insert"] = (ds.version, ds.latest_version, ds.version == ds.latest_version, ds.count_rows())
    # reads by position, across fragments with deletions
    out["head"] = ds.head(3).to_pylist()
    out["head_past_end"] = ds.head(1000).num_rows
    out["take"] = ds.take([7, 0, 3, 16, 3]).to_pylist()
    out["take_columns"] = ds.take([4, 1], columns=["v"]).to_pylist()
    out["limit_offset"] = ds.to_table(filter="id > 2", limit=6, offset=3).to_pylist()
    out["limit"] = ds.to_table(limit=4).to_pylist()
    out["offset"] = ds.to_table(offset=14).to_pylist()
    out["offset_past_end"] = ds.to_table(filter="id > 2", offset=1000).num_rows
    out["columns_limit"] = ds.to_table(columns=["id"], filter="v = 'v9' OR id >= 100", limit=2).to_pylist()
    # time travel
    old = ds.checkout_version(1)
    out["old"] = (old.version, old.count_rows(), old.version == old.latest_version, ds.version)
    # a scalar index, then a filter it answers
    ds.create_scalar_index("id", "BTREE")
    out["indices"] = [(i["name"], i["fields"]) for i in ds.list_indices()]
    out["indexed"] = ds.to_table(filter="id = 8").to_pylist()
    # update: the result object; rows may move, so compare as a set
    out["updated"] = dict(ds.update({"v": "'upd'"}, where="id >= 17"))
    out["rows_after_update"] = sorted(ds.to_table().to_pylist(), key=lambda r: r["id"])
    # history
    versions = ds.versions()
    out["versions"] = [v["version"] for v in versions]
    out["timestamps_ordered"] = all(
        a["timestamp"] <= b["timestamp"] for a, b in zip(versions, versions[1:], strict=False)
    )
    out["metadata_is_dict"] = all(isinstance(v["metadata"], dict) for v in versions)
    txns = ds.get_transactions(3)
    out["transactions"] = [(t.read_version, type(t.operation).__name__, isinstance(t.uuid, str)) for t in txns]
    out["all_transactions"] = len(ds.get_transactions(100))
    reopened = dataset(path)
    out["reopened"] = (reopened.version, reopened.latest_version, reopened.count_rows())
    out["reopened_old"] = dataset(path, version=2).count_rows()
    return out


EXPECTED_MVCC = {
    "fresh": (1, 1, True),
    "deleted": {"num_deleted_rows": 4},
    "num_deleted_rows": 1,
    "after_insert": (4, 4, True, 17),
    "old": (1, 20, False, 4),
    "indices": [("id_idx", ["id"])],
    "updated": {"num_rows_updated": 5},
    "versions": [1, 2, 3, 4, 5, 6],
    "transactions": [(5, "Update", True), (4, "CreateIndex", True), (3, "Append", True)],
    "all_transactions": 6,
    "reopened": (6, 6, 17),
    "reopened_old": 16,
}


def test_script_runs_against_mvcc(tmp_path: Path) -> None:
    out = script(*MVCC, tmp_path / "t")
    for key, value in EXPECTED_MVCC.items():
        assert out[key] == value, key
    live = [i for i in range(20) if i not in (1, 2, 6, 7, 13)] + [100, 101]
    row = {i: {"id": i, "v": f"v{i}" if i < 100 else "ab"[i - 100]} for i in live}
    assert out["head"] == [row[0], row[3], row[4]]
    assert out["take"] == [row[live[p]] for p in (7, 0, 3, 16, 3)]
    assert out["take_columns"] == [{"v": row[live[4]]["v"]}, {"v": row[live[1]]["v"]}]
    assert out["limit_offset"] == [row[i] for i in [i for i in live if i > 2][3:9]]
    assert out["limit"] == [row[i] for i in live[:4]] and out["offset"] == [row[i] for i in live[14:]]
    assert out["offset_past_end"] == 0 and out["head_past_end"] == 17
    assert out["columns_limit"] == [{"id": 9}, {"id": 100}]
    assert out["indexed"] == [row[8]]
    assert out["rows_after_update"] == [{**row[i], "v": "upd"} if i >= 17 else row[i] for i in live]


@needs_lance
def test_same_script_same_results_in_pylance(tmp_path: Path) -> None:
    """The strongest proof: pylance itself gives the same answers to the same script."""
    ours = script(*MVCC, tmp_path / "mvcc")
    theirs = script(*LANCE, tmp_path / "lance")
    differ = {"indices"}  # pylance adds an index's type and fragments; only name and fields are compared below
    for key in sorted(set(ours) - differ):
        assert ours[key] == theirs[key], key
    assert [(i["name"], i["fields"]) for i in lance.dataset(tmp_path / "lance").list_indices()] == ours["indices"]


def test_take_out_of_range_raises_index_error(tmp_path: Path) -> None:
    t = mvcc.write_table(data(5), tmp_path / "t")
    t.delete("id = 0")
    with pytest.raises(IndexError, match="4"):
        t.take([0, 4])
    with pytest.raises(IndexError):
        t.take([-1])
    assert t.take([]).num_rows == 0 and t.take([]).schema == t.schema


# ---- documented differences (docs/pylance_compat.md), both sides asserted -------------------------


@needs_lance
def test_difference_take_out_of_range_error_type(tmp_path: Path) -> None:
    ds = lance.write_dataset(data(5), tmp_path / "lance")
    with pytest.raises(OSError):  # noqa: PT011 - pylance raises a plain OSError from Rust
        ds.take([5])
    with pytest.raises(IndexError):
        mvcc.write_table(data(5), tmp_path / "mvcc").take([5])


@needs_lance
def test_difference_delete_matching_nothing(tmp_path: Path) -> None:
    ds = lance.write_dataset(data(5), tmp_path / "lance")
    assert ds.delete("id > 100") == {"num_deleted_rows": 0} and ds.version == 2  # pylance commits an empty Delete
    t = mvcc.write_table(data(5), tmp_path / "mvcc")
    assert t.delete("id > 100") == {"num_deleted_rows": 0} and t.version == 1  # mvcc commits nothing
    assert t.update({"v": "'x'"}, where="id > 100") == {"num_rows_updated": 0} and t.version == 1


@needs_lance
def test_difference_version_metadata_and_timestamps(tmp_path: Path) -> None:
    props = {"run": "42"}
    ds = lance.write_dataset(data(5), tmp_path / "lance", commit_message="load", transaction_properties=props)
    v = ds.versions()[0]
    assert v["metadata"]["total_rows"] == "5"  # pylance: the manifest's summary
    assert v["timestamp"].tzinfo is None  # pylance: naive local time
    txn = ds.get_transactions(1)[0]
    assert txn.transaction_properties == {**props, "__lance_commit_message": "load"}

    t = mvcc.write_table(data(5), tmp_path / "mvcc", commit_message="load", transaction_properties=props)
    v = t.versions()[0]
    assert v["metadata"] == props == v.transaction_properties  # mvcc: the transaction's properties
    assert v["timestamp"].tzinfo is not None and v["timestamp"].utcoffset().total_seconds() == 0
    assert isinstance(v["timestamp"], datetime) and v["message"] == v.message == "load"
    txn = t.get_transactions(1)[0]
    assert txn.transaction_properties == props and txn.message == "load"


@needs_lance
def test_difference_insert_returns(tmp_path: Path) -> None:
    ds = lance.write_dataset(data(5), tmp_path / "lance")
    assert ds.insert(data(2)) is None and ds.version == 2
    t = mvcc.write_table(data(5), tmp_path / "mvcc")
    assert t.insert(data(2)) is t and t.version == 2  # mvcc returns the handle (chainable)
    assert t.insert(data(1), mode="overwrite").count_rows() == 1
    with pytest.raises(ValueError, match="insert mode"):
        t.insert(data(1), mode="create")


@needs_lance
def test_difference_positional_limit(tmp_path: Path) -> None:
    ds = lance.write_dataset(data(5), tmp_path / "lance")
    assert ds.to_table(None, None, 2).num_rows == 2  # pylance: limit is the third positional
    t = mvcc.write_table(data(5), tmp_path / "mvcc")
    with pytest.raises(TypeError):
        t.to_table(None, None, 2)  # mvcc: limit and offset are keyword-only


def test_mvcc_extras_kept(tmp_path: Path) -> None:
    """What mvcc keeps beyond pylance: datetime checkout, dry_run cleanup, properties on every write."""
    t = mvcc.write_table(data(5), tmp_path / "t")
    first = t.timestamp
    t.append(data(1), transaction_properties={"k": "v"})
    assert t.checkout_version(first).version == 1  # a datetime: the version current then
    stats = t.cleanup_old_versions(older_than=timedelta(0), dry_run=True)
    assert stats.old_versions == 1 and stats.removed_versions == (1,)
    assert [v.version for v in t.versions()] == [1, 2]  # dry run: nothing removed
    assert t.versions()[-1]["metadata"] == {"k": "v"}
    t.tags.create("v1", 1)
    assert t.checkout_version("v1").count_rows() == 5
