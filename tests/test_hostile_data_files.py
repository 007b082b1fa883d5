"""Data files that disagree with the manifest referencing them (docs/reference/format.md, "Invariants of a
manifest"), on a
local disk, in memory and on the S3 server: another row count than `physical_rows`, a column the data file claims
missing or of another kind of type, no Parquet file at all. Every read that opens such a file (scans with and
without filter, delete, compaction) raises `DataFileMismatchError` naming the file and the column, never Arrow's
untyped errors or nulls in place of data; `mvcc verify --deep` reports it. Also: a tag in a subfolder is deleted
through the API and the CLI (the bad-tag and missing-file cases on every backend are in test_bad_tags.py and
test_read_faults.py)."""

from __future__ import annotations

import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result
from test_hostile_manifests import tamper

import mvcc_core as mvcc
from mvcc_core import cli


def run(*args: object) -> Result:
    return CliRunner().invoke(cli.cli, [str(a) for a in args], catch_exceptions=False)


def opts_args(opts: dict[str, Any] | None) -> list[str]:
    return [arg for k, v in (opts or {}).items() for arg in ("--storage-option", f"{k}={v}")]


def two_fragments(uri: str, opts: dict[str, Any] | None) -> mvcc.Table:
    """Fragment 0: ids 0..2 with s 'a'..'c'; fragment 1: ids 3..4."""
    t = mvcc.write_table(
        pa.table({"id": pa.array([0, 1, 2], pa.int64()), "s": ["a", "b", "c"]}), uri, storage_options=opts
    )
    return t.append(pa.table({"id": pa.array([3, 4], pa.int64()), "s": ["d", "e"]}))


def replace_first_file(t: mvcc.Table, data: pa.Table | bytes) -> str:
    """Overwrite fragment 0's data file with `data` (a table written as Parquet with the file's own column
    names, or raw bytes); returns the file's path as the manifest records it."""
    path = t.manifest.fragments[0].files[0].path
    if isinstance(data, pa.Table):
        sink = io.BytesIO()
        pq.write_table(data, sink)
        data = sink.getvalue()
    t.state.store.put(f"data/{path}", data)
    size = len(data)
    tamper(t, lambda m: setattr(m.fragments[0].files[0], "file_size_bytes", size))  # the size stays consistent
    return path


def physical_names(t: mvcc.Table) -> tuple[str, str]:
    ids = {f.name: f.id for f in t.manifest.fields}
    return f"c{ids['id']}", f"c{ids['s']}"


READS = {
    "to_table": lambda t: t.to_table(),
    "filter": lambda t: t.to_table(filter="id > 0"),
    "filter_s": lambda t: t.to_table(filter="s = 'a'"),
    "count_filter": lambda t: t.count_rows("id >= 0 AND s IS NOT NULL"),
    "delete": lambda t: t.delete("id = 1 AND s = 'b'"),
    "compaction": lambda t: t.optimize.compact_files(),
}


def bad_files(t: mvcc.Table) -> dict[str, tuple[pa.Table | bytes, str | None]]:
    """Each hostile replacement of fragment 0's file and the column its error must name."""
    c_id, c_s = physical_names(t)
    return {
        "type": (pa.table({c_id: ["x", "y", "z"], c_s: ["a", "b", "c"]}), "id"),
        "missing": (pa.table({c_id: pa.array([0, 1, 2], pa.int64())}), "s"),
        "nested": (pa.table({c_id: pa.array([0, 1, 2], pa.int64()), c_s: pa.array([[1], [2], [3]])}), "s"),
        "zero_bytes": (b"", None),
        "garbage": (b"not a parquet file at all", None),
    }


@pytest.mark.parametrize("case", ["type", "missing", "nested", "zero_bytes", "garbage"])
@pytest.mark.parametrize("read", sorted(READS))
def test_a_data_file_of_another_schema_is_a_typed_error(
    any_uri: tuple[str, dict[str, Any] | None], case: str, read: str
) -> None:
    uri, opts = any_uri
    t = two_fragments(uri, opts)
    data, column = bad_files(t)[case]
    path = replace_first_file(t, data)
    before = [(f.id, f.files[0].path) for f in t.manifest.fragments]
    with pytest.raises(mvcc.errors.DataFileMismatchError) as err:
        READS[read](mvcc.open_table(uri, storage_options=opts))
    assert path in str(err.value) and err.value.path.endswith(path)
    if column is not None:
        assert err.value.column == column and repr(column) in str(err.value)
    after = mvcc.open_table(uri, storage_options=opts).manifest  # no data committed (compaction reserves ids)
    assert [(f.id, f.files[0].path) for f in after.fragments] == before and not any(
        f.HasField("deletion_file") for f in after.fragments
    )


@pytest.mark.parametrize("physical_rows", [2, 5])
@pytest.mark.parametrize("read", ["to_table", "filter", "filter_s", "count_filter", "delete", "compaction"])
def test_a_row_count_other_than_physical_rows_fails_every_read(tmp_path: Any, physical_rows: int, read: str) -> None:
    uri = str(tmp_path / "t")
    t = two_fragments(uri, None)
    path = t.manifest.fragments[0].files[0].path
    tamper(t, lambda m: setattr(m.fragments[0], "physical_rows", physical_rows))
    with pytest.raises(mvcc.errors.DataFileMismatchError, match=f"physical_rows says {physical_rows}") as err:
        READS[read](mvcc.open_table(uri))
    assert err.value.path == path
    # without a filter count_rows trusts the manifest, like Lance's (docs/reference/format.md)
    assert mvcc.open_table(uri).count_rows() == 2 + physical_rows
    result = run("verify", uri, "--deep", "--json")
    assert result.exit_code == 1
    problems = json.loads(result.stdout)["problems"]
    assert any(p["path"].endswith(path) and f"the manifest records {physical_rows}" in p["problem"] for p in problems)


def test_a_column_added_later_still_reads_as_nulls(tmp_path: Any) -> None:
    """The check leaves the format's rule alone: a column no data file claims reads as nulls."""
    uri = str(tmp_path / "t")
    t = two_fragments(uri, None)
    t.add_columns(pa.schema([("n", pa.int32())]))
    t = mvcc.open_table(uri)
    assert t.to_table(columns=["n"]).column("n").null_count == 5
    assert t.to_table(filter="n IS NULL").num_rows == 5
    t.optimize.compact_files()
    assert mvcc.open_table(uri).to_table().num_rows == 5


def test_verify_deep_reports_a_data_file_of_another_schema(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    t = two_fragments(uri, None)
    data, _ = bad_files(t)["zero_bytes"]
    path = replace_first_file(t, data)
    result = run("verify", uri, "--deep", "--json")
    assert result.exit_code == 1
    assert any(p["path"].endswith(path) for p in json.loads(result.stdout)["problems"])


# ---- bad tags and missing files on every backend


def test_a_tag_in_a_subfolder_is_deleted_through_the_api(any_uri: tuple[str, dict[str, Any] | None]) -> None:
    uri, opts = any_uri
    t = two_fragments(uri, opts)
    t.tags.create("good", 1)
    t.state.store.put("_refs/tags/sub/n.json", b'{"version": 1}')
    assert list(t.tags.read_all().problems) == ["_refs/tags/sub/n.json"]
    for bad in ("sub/../good", "../sub/n", "sub//n", "sub/missing", "/sub/n", "sub\\n"):
        with pytest.raises(mvcc.errors.TagError):
            t.tags.delete(bad)
    with pytest.raises(mvcc.errors.TagError):
        t.tags.create("sub/m", 1)
    t.tags.delete("sub/n")
    listing = t.tags.read_all()
    assert listing.problems == {} and listing.tags == {"good": 1}
    assert not t.state.store.exists("_refs/tags/sub/n.json")


def test_a_tag_in_a_subfolder_is_deleted_through_the_cli(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    t = two_fragments(uri, None)
    t.state.store.put("_refs/tags/sub/deeper/n.json", b"{not json")
    assert run("verify", uri).exit_code == 1
    result = run("tags", "delete", uri, "sub/deeper/n")
    assert result.exit_code == 0, result.output
    assert run("verify", uri).exit_code == 0
