"""The Table API end to end: writes, reads, time travel, tags, restore, config, and bad input."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mvcc_core as mvcc
from mvcc_core.format import features
from mvcc_core.format.manifest import encode_manifest, latest_manifest_location
from mvcc_core.format.naming import U64_MAX
from mvcc_core.io import open_store


def people(n: int = 10, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})


def all_types_table() -> pa.Table:
    n = 4
    return pa.table(
        {
            "b": pa.array([True, False, None, True]),
            "i8": pa.array([1, -2, None, 4], pa.int8()),
            "i16": pa.array([1, -2, 3, None], pa.int16()),
            "i32": pa.array([1, 2, 3, 4], pa.int32()),
            "i64": pa.array([2**40, -1, None, 0], pa.int64()),
            "u8": pa.array([0, 255, 1, None], pa.uint8()),
            "u32": pa.array([0, 2**32 - 1, 1, 2], pa.uint32()),
            "u64": pa.array([0, 2**63, 1, None], pa.uint64()),
            "f32": pa.array([1.5, None, -0.25, 3.0], pa.float32()),
            "f64": pa.array([1e300, -1e-300, None, float("inf")], pa.float64()),
            "s": pa.array(["a", None, "ünïcode", ""], pa.string()),
            "ls": pa.array(["x", "y", None, "z"], pa.large_string()),
            "bin": pa.array([b"\x00\x01", None, b"", b"z"], pa.binary()),
            "lbin": pa.array([b"a", b"b", None, b"c"], pa.large_binary()),
            "fsb": pa.array([b"abcd", b"efgh", None, b"ijkl"], pa.binary(4)),
            "dec": pa.array(
                [decimal.Decimal("1.25"), None, decimal.Decimal("-99999999.99"), decimal.Decimal("0")],
                pa.decimal128(10, 2),
            ),
            "dec256": pa.array(
                [decimal.Decimal("1.5"), None, decimal.Decimal("2"), decimal.Decimal("3")],
                pa.decimal256(40, 5),
            ),
            "d32": pa.array([dt.date(2020, 1, 1), None, dt.date(1970, 1, 1), dt.date(2999, 12, 31)], pa.date32()),
            "ts": pa.array(
                [dt.datetime(2024, 1, 1, 12, 0), None, dt.datetime(1999, 1, 1), dt.datetime(2030, 5, 5)],
                pa.timestamp("us"),
            ),
            "ts_utc": pa.array([0, 1, None, 3], pa.timestamp("us", tz="UTC")),
            "ts_ny": pa.array([0, 10**9, 2, None], pa.timestamp("ms", tz="America/New_York")),
            "t64": pa.array([0, 1000, None, 5], pa.time64("us")),
            "dict": pa.array(["red", "green", "red", None]).dictionary_encode(),
            "st": pa.array(
                [{"x": 1, "y": "a"}, None, {"x": None, "y": "c"}, {"x": 4, "y": None}],
                pa.struct([("x", pa.int32()), ("y", pa.string())]),
            ),
            "lst": pa.array([[1, 2], [], None, [None, 4]], pa.list_(pa.int64())),
            "llst": pa.array([["a"], None, [], ["b", "c"]], pa.large_list(pa.string())),
            "fsl": pa.array([[1.0, 2.0], [3.0, 4.0], None, [5.0, 6.0]], pa.list_(pa.float32(), 2)),
            "mp": pa.array([[("k", 1)], None, [], [("a", 2), ("b", 3)]], pa.map_(pa.string(), pa.int64())),
            "nested": pa.array(
                [[{"tags": ["a", "b"], "v": 1.0}], None, [], [{"tags": None, "v": None}]],
                pa.list_(pa.struct([("tags", pa.list_(pa.string())), ("v", pa.float64())])),
            ),
        }
    ).slice(0, n)


def test_round_trip_every_type(any_uri) -> None:
    uri, opts = any_uri
    data = all_types_table()
    t = mvcc.write_table(data, uri, storage_options=opts)
    assert t.version == 1
    assert t.schema.equals(data.schema)
    assert t.to_table().equals(data)
    t.append(data)
    reopened = mvcc.open_table(uri, storage_options=opts)
    assert reopened.version == 2
    assert reopened.to_table().equals(pa.concat_tables([data, data]))
    assert reopened.checkout(1).to_table().equals(data)


def test_first_version_is_one_and_v2_names(tmp_uri) -> None:
    t = mvcc.write_table(people(3), tmp_uri)
    assert t.version == 1
    names = sorted(n for n in os.listdir(Path(tmp_uri) / "_versions") if n.endswith(".manifest"))
    assert names == ["18446744073709551614.manifest"]
    assert U64_MAX - 1 == 18446744073709551614
    assert t.manifest.transaction_file.startswith("0-")
    assert (Path(tmp_uri) / "_transactions" / t.manifest.transaction_file).exists()
    assert t.manifest.writer_version.library == "mvcc"
    assert t.manifest.timestamp.seconds > 0


def test_append_splits_files_and_assigns_fragment_ids(tmp_uri) -> None:
    t = mvcc.write_table(people(10), tmp_uri, max_rows_per_file=3)
    assert [f.fragment_id for f in t.get_fragments()] == [0, 1, 2, 3]
    assert [f.physical_rows for f in t.get_fragments()] == [3, 3, 3, 1]
    t.append(people(5, start=10), max_rows_per_file=4)
    assert [f.fragment_id for f in t.get_fragments()] == [0, 1, 2, 3, 4, 5]
    assert t.to_table()["id"].to_pylist() == list(range(15))
    assert t.count_rows() == 15


def test_time_travel_by_version_tag_and_timestamp(any_uri) -> None:
    uri, opts = any_uri
    t = mvcc.write_table(people(2), uri, storage_options=opts, commit_message="first")
    time.sleep(0.02)
    middle = dt.datetime.now(dt.UTC)
    time.sleep(0.02)
    t.append(people(3, start=2))
    t.tags.create("three-rows", 2)
    t.append(people(1, start=5))
    assert t.version == 3
    assert mvcc.open_table(uri, version=1, storage_options=opts).count_rows() == 2
    assert mvcc.open_table(uri, version="three-rows", storage_options=opts).count_rows() == 5
    assert mvcc.open_table(uri, asof=middle, storage_options=opts).version == 1
    assert t.checkout(middle.replace(tzinfo=None).astimezone(dt.UTC)).version == 1
    assert t.checkout("three-rows").to_table()["id"].to_pylist() == [0, 1, 2, 3, 4]
    assert t.checkout(dt.datetime.now(dt.UTC)).version == 3
    with pytest.raises(mvcc.VersionNotFoundError):
        t.checkout(dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    with pytest.raises(mvcc.VersionNotFoundError):
        t.checkout(99)
    with pytest.raises(mvcc.VersionNotFoundError):
        t.checkout("no-such-tag")
    infos = t.versions()
    assert [v.version for v in infos] == [1, 2, 3]
    assert [v.operation for v in infos] == ["Overwrite", "Append", "Append"]
    assert [v.read_version for v in infos] == [0, 1, 2]
    assert infos[0].message == "first"
    assert all(v.uuid for v in infos)


def test_tags(tmp_uri) -> None:
    t = mvcc.write_table(people(2), tmp_uri)
    t.append(people(1, start=2))
    t.tags.create("v1", 1)
    t.tags.create("v2.0-rc_1", 2)
    assert t.tags.list() == {"v1": {"version": 1}, "v2.0-rc_1": {"version": 2}}
    with pytest.raises(mvcc.errors.TagError, match="already exists"):
        t.tags.create("v1", 2)
    t.tags.update("v1", 2)
    assert t.tags.list()["v1"] == {"version": 2}
    t.tags.delete("v1")
    assert list(t.tags.list()) == ["v2.0-rc_1"]
    for bad in ["a/b", "..", "x..y", ".hidden", "", "-x", "a\\b"]:
        with pytest.raises(mvcc.errors.TagError):
            t.tags.create(bad, 1)
    with pytest.raises(mvcc.VersionNotFoundError):
        t.tags.create("missing", 7)
    with pytest.raises(mvcc.errors.TagError):
        t.tags.delete("never-created")
    assert sorted(os.listdir(Path(tmp_uri) / "_refs" / "tags")) == ["v2.0-rc_1.json"]


def test_restore_keeps_history(any_uri) -> None:
    uri, opts = any_uri
    t = mvcc.write_table(people(2), uri, storage_options=opts)
    t.append(people(3, start=2))
    t.append(people(4, start=5))
    t.tags.create("start", 1)
    t.restore("start")
    assert t.version == 4
    assert t.to_table().equals(people(2))
    t.append(people(1, start=100))
    assert t.to_table()["id"].to_pylist() == [0, 1, 100]
    # fragment ids are never reused across a restore
    ids = [f.fragment_id for f in t.get_fragments()]
    assert ids[-1] > 2
    old = t.checkout(3)
    old.restore()
    assert old.version == 6 and old.count_rows() == 9
    assert [v.operation for v in old.versions()][-3:] == ["Restore", "Append", "Restore"]


def test_reserve_fragments(tmp_uri) -> None:
    t = mvcc.write_table(people(3), tmp_uri, max_rows_per_file=1)
    assert t.manifest.max_fragment_id == 2
    t.commit(mvcc.operations.ReserveFragments(num_fragments=5), read_version=1)
    assert t.version == 2 and t.manifest.max_fragment_id == 7
    t.append(people(1, start=3))
    assert [f.fragment_id for f in t.get_fragments()] == [0, 1, 2, 8]
    with pytest.raises(mvcc.MvccError):
        t.commit(mvcc.operations.ReserveFragments(num_fragments=0))
    assert t.latest_version == 3


def test_update_config_and_metadata(tmp_uri) -> None:
    t = mvcc.write_table(people(1), tmp_uri)
    t.update_config(upsert={"a": "1", "b": "2"})
    t.update_config(upsert={"b": "3"}, delete=["a"])
    assert t.config == {"b": "3"}
    t.update_metadata(
        table_metadata={"owner": "data-eng"},
        schema_metadata={"k": "v"},
        field_metadata={"name": {"pii": "yes"}},
    )
    r = mvcc.open_table(tmp_uri)
    assert r.table_metadata == {"owner": "data-eng"}
    assert r.schema.metadata[b"k"] == b"v"
    assert r.schema.field("name").metadata == {b"pii": b"yes"}
    assert r.checkout(2).config == {"a": "1", "b": "2"}
    assert [v.operation for v in r.versions()] == [
        "Overwrite",
        "UpdateConfig",
        "UpdateConfig",
        "UpdateConfig",
    ]
    with pytest.raises(mvcc.SchemaError, match="nope"):
        t.update_metadata(field_metadata={"nope": {"x": "y"}})


def test_overwrite_changes_schema(any_uri) -> None:
    uri, opts = any_uri
    t = mvcc.write_table(people(3), uri, storage_options=opts)
    other = pa.table({"k": ["x", "y"], "v": [1.5, 2.5]})
    mvcc.write_table(other, uri, mode="overwrite", storage_options=opts)
    r = mvcc.open_table(uri, storage_options=opts)
    assert r.version == 2 and r.to_table().equals(other)
    assert r.checkout(1).to_table().equals(people(3))
    # same schema keeps field ids
    t2 = r.overwrite(pa.table({"k": ["z"], "v": [0.0]}))
    assert [f.id for f in t2.manifest.fields] == [f.id for f in r.checkout(2).manifest.fields]
    assert t.latest_version == 3


def test_filters_projection_row_address_and_batches(tmp_uri) -> None:
    t = mvcc.write_table(people(100), tmp_uri, max_rows_per_file=30)
    got = t.to_table(columns=["name"], filter="id % 10 = 0 AND name LIKE 'n%'")
    assert got.column_names == ["name"]
    assert got["name"].to_pylist() == [f"n{i}" for i in range(0, 100, 10)]
    assert t.to_table(filter=pc.field("id") >= 95)["id"].to_pylist() == [95, 96, 97, 98, 99]
    assert t.count_rows(filter="id < 42") == 42
    with_addr = t.to_table(filter="id IN (0, 31, 99)", with_row_address=True)
    assert with_addr["_rowaddr"].to_pylist() == [0, (1 << 32) | 1, (3 << 32) | 9]
    batches = list(t.to_batches(batch_size=7))
    assert max(b.num_rows for b in batches) <= 7
    assert sum(b.num_rows for b in batches) == 100
    assert pa.Table.from_batches(batches)["id"].to_pylist() == list(range(100))
    with pytest.raises(mvcc.SchemaError, match="nope"):
        t.to_table(columns=["nope"])


def test_count_rows_reads_no_data(tmp_uri) -> None:
    t = mvcc.write_table(people(50), tmp_uri, max_rows_per_file=10)
    for f in (Path(tmp_uri) / "data").iterdir():
        f.unlink()
    assert t.count_rows() == 50


def test_v1_named_table_opens_and_appends(any_uri) -> None:
    uri, opts = any_uri
    mvcc.write_table(people(2), uri, storage_options=opts, manifest_naming="v1")
    t = mvcc.open_table(uri, storage_options=opts)
    for i in range(10):
        t.append(people(1, start=2 + i))
    store = open_store(uri, opts)
    names = sorted(n for m in store.list("_versions") if (n := m.path.rsplit("/", 1)[-1]).endswith(".manifest"))
    assert names == sorted(f"{v}.manifest" for v in range(1, 12))
    assert latest_manifest_location(store).version == 11
    r = mvcc.open_table(uri, storage_options=opts)
    assert r.manifest_naming.value == "v1" and r.count_rows() == 12
    assert r.checkout(10).count_rows() == 11


# ---- bad input -------------------------------------------------------------------------------


def _snapshot(root: str) -> dict[str, bytes]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            p = os.path.join(dirpath, name)
            out[os.path.relpath(p, root)] = Path(p).read_bytes()
    return out


def test_corrupt_manifest_is_named(tmp_uri) -> None:
    t = mvcc.write_table(people(2), tmp_uri)
    t.append(people(2, start=2))
    latest = Path(tmp_uri) / "_versions" / "18446744073709551613.manifest"
    data = latest.read_bytes()
    latest.write_bytes(data[: len(data) // 2])
    with pytest.raises(mvcc.errors.CorruptManifestError, match="18446744073709551613.manifest"):
        mvcc.open_table(tmp_uri)
    assert mvcc.open_table(tmp_uri, version=1).count_rows() == 2
    latest.write_bytes(b"\x00" * len(data))
    with pytest.raises(mvcc.errors.CorruptManifestError):
        mvcc.open_table(tmp_uri)


def test_unknown_reader_feature_is_refused(tmp_uri) -> None:
    t = mvcc.write_table(people(2), tmp_uri)
    m = t.manifest.__class__()
    m.CopyFrom(t.manifest)
    m.reader_feature_flags |= 1 << 40
    (Path(tmp_uri) / "_versions" / "18446744073709551614.manifest").write_bytes(encode_manifest(m))
    with pytest.raises(mvcc.errors.UnsupportedFeatureError, match="bit 40"):
        mvcc.open_table(tmp_uri)
    assert features.describe(features.FLAG_DELETION_FILES) == ["deletion_files"]


def test_unknown_writer_feature_refuses_commit(tmp_uri) -> None:
    t = mvcc.write_table(people(2), tmp_uri)
    m = t.manifest.__class__()
    m.CopyFrom(t.manifest)
    m.writer_feature_flags |= 1 << 41
    (Path(tmp_uri) / "_versions" / "18446744073709551614.manifest").write_bytes(encode_manifest(m))
    r = mvcc.open_table(tmp_uri)
    assert r.count_rows() == 2
    with pytest.raises(mvcc.errors.UnsupportedFeatureError, match="bit 41"):
        r.append(people(1))
    assert r.latest_version == 1


def test_schema_mismatch_leaves_nothing(tmp_uri) -> None:
    t = mvcc.write_table(people(2), tmp_uri)
    before = _snapshot(tmp_uri)
    bad = [
        pa.table({"id": [1], "nam": ["x"]}),
        pa.table({"id": ["not-an-int"], "name": ["x"]}),
        pa.table({"id": [1], "name": ["x"], "extra": [1.0]}),
    ]
    for data in bad:
        with pytest.raises(mvcc.SchemaError) as info:
            t.append(data)
        assert any(c in str(info.value) for c in ("nam", "id", "name", "extra"))
    assert _snapshot(tmp_uri) == before
    assert t.version == 1 and t.latest_version == 1
    # a missing nullable column is not a mismatch: it is filled with nulls, as pylance's insert does
    t.append(pa.table({"id": [1]}))
    assert t.to_table().column("name").to_pylist()[-1] is None


def test_bad_predicate_fails_before_reading(tmp_uri) -> None:
    t = mvcc.write_table(people(2), tmp_uri)
    before = _snapshot(tmp_uri)
    for bad in ["id = = 1", "nope > 1", "name > 3 AND", "SELECT 1"]:
        with pytest.raises(mvcc.errors.PredicateError):
            t.to_table(filter=bad)
        with pytest.raises(mvcc.errors.PredicateError):
            t.count_rows(filter=bad)
    assert _snapshot(tmp_uri) == before


def test_create_on_existing_table_refused(tmp_uri) -> None:
    mvcc.write_table(people(2), tmp_uri)
    before = _snapshot(tmp_uri)
    with pytest.raises(mvcc.TableExistsError):
        mvcc.write_table(people(2), tmp_uri)
    assert _snapshot(tmp_uri) == before


def test_missing_table(tmp_uri) -> None:
    with pytest.raises(mvcc.TableNotFoundError, match=str(Path(tmp_uri).name)):
        mvcc.open_table(tmp_uri)


def test_append_mode_creates_and_overwrite_mode_creates(tmp_path) -> None:
    a = mvcc.write_table(people(2), str(tmp_path / "a"), mode="append")
    assert a.version == 1
    b = mvcc.write_table(people(2), str(tmp_path / "b"), mode="overwrite")
    assert b.version == 1
    mvcc.write_table(people(1, start=5), str(tmp_path / "a"), mode="append")
    assert mvcc.open_table(str(tmp_path / "a")).count_rows() == 3


def test_store_without_atomic_primitives_refuses_commit(tmp_uri, s3_uri, s3_options) -> None:
    opts = dict(s3_options, conditional_put="false")
    with pytest.raises(mvcc.errors.CommitNotSupportedError, match="external manifest store"):
        mvcc.write_table(people(1), s3_uri, storage_options=opts)


def test_write_fragments_then_commit(tmp_uri) -> None:
    t = mvcc.write_table(people(2), tmp_uri)
    frags = mvcc.write_fragments(people(3, start=2), tmp_uri, max_rows_per_file=2)
    assert t.latest_version == 1 and len(frags) == 2
    t.commit(mvcc.operations.Append(fragments=frags))
    assert t.version == 2 and t.to_table()["id"].to_pylist() == [0, 1, 2, 3, 4]


def test_stale_or_broken_latest_hint_is_never_trusted(tmp_uri) -> None:
    from mvcc_core.format.manifest import LATEST_HINT

    t = mvcc.write_table(people(1), tmp_uri)
    hint = Path(tmp_uri) / LATEST_HINT
    stale = hint.read_bytes()
    for i in range(3):
        t.append(people(1, start=i + 1))
    hint.write_bytes(stale)  # a hint left behind by a slow writer
    assert mvcc.open_table(tmp_uri).version == 4
    hint.write_bytes(b'{"version": 99, "naming": "v2"}')  # names a version that does not exist
    assert mvcc.open_table(tmp_uri).version == 4
    hint.write_bytes(b"garbage")
    assert mvcc.open_table(tmp_uri).version == 4
    hint.unlink()
    assert mvcc.open_table(tmp_uri).version == 4


@pytest.mark.s3
def test_s3_latest_version_is_one_list_request(s3_uri, s3_options) -> None:
    from test_storage import _count_calls

    t = mvcc.write_table(people(1), s3_uri, storage_options=s3_options)
    for i in range(40):
        t.update_config(upsert={"k": str(i)})
    store = open_store(s3_uri, s3_options)
    sent, params = _count_calls(store, "ListObjectsV2")
    location = latest_manifest_location(store)
    assert location.version == 41
    assert len(sent) == 1 and params[0]["MaxKeys"] == 1


def test_trim_version_cache_keeps_the_newest_and_reads_the_rest_again(tmp_uri) -> None:
    t = mvcc.write_table(people(2), tmp_uri)
    for i in range(5):
        t = t.append(people(2, start=10 * (i + 1)))
    for v in t.versions():
        t.checkout(v.version)  # every manifest read through the handle's cache
    cached = t.state.committer.cache.manifests
    assert len(cached) >= 6
    t.trim_version_cache(2)
    assert sorted(cached) == [5, 6]
    assert t.checkout(1).count_rows() == 2 and t.checkout(6).count_rows() == 12  # read again, not lost
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="keep must be a positive int"):
            t.trim_version_cache(bad)


def test_a_branch_handles_repr_names_its_branch(tmp_path: Path) -> None:
    t = mvcc.write_table(pa.table({"id": [1, 2, 3]}), str(tmp_path / "t"))
    audit = t.create_branch("audit")
    audit.delete("id = 1")
    assert repr(audit) == f"Table(uri={t.uri!r}, branch='audit', version={audit.version}, rows=2)"
    assert repr(t) == f"Table(uri={t.uri!r}, version={t.version}, rows=3)"
