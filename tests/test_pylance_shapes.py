"""pylance's shapes: `get_fragments()` as `LanceFragment`s, `write_dataset`'s and `tags.create`'s positional order.

Each test runs the same calls against pylance (when installed) and mvcc_core and compares the answers.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import mvcc_core as mvcc

try:
    import lance
except ImportError:  # pragma: no cover - pylance is in the dev environment
    lance = None

needs_lance = pytest.mark.skipif(lance is None, reason="pylance is not installed")


def _fragments(write, path) -> list[tuple]:
    ds = write(pa.table({"a": list(range(10))}), str(path), None, "create", max_rows_per_file=5)
    ds.delete("a IN (1, 2, 7)")
    return [
        (
            f.fragment_id,
            f.physical_rows,
            f.num_deletions,
            f.count_rows(),
            f.count_rows("a > 3"),
            len(f.data_files()),
            f.deletion_file() is not None and f.deletion_file().startswith("_deletions/"),
            f.to_table().column("a").to_pylist(),
            f.head(1).column("a").to_pylist(),
            f.metadata.id == f.fragment_id,
        )
        for f in ds.get_fragments()
    ]


@needs_lance
def test_fragments_answer_as_pylance_fragments(tmp_path) -> None:
    assert _fragments(mvcc.write_table, tmp_path / "m") == _fragments(lance.write_dataset, tmp_path / "l")


def test_fragment_data_files_and_lookup(tmp_path) -> None:
    t = mvcc.write_table(pa.table({"a": list(range(10))}), str(tmp_path / "t"), max_rows_per_file=5)
    first, second = t.get_fragments()
    (file,) = first.data_files()
    assert file.path == first.metadata.files[0].path and file.file_size_bytes > 0 and file.base_id is None
    assert first.deletion_file() is None and first.schema == t.schema
    assert t.get_fragment(second.fragment_id) == second and t.get_fragment(99) is None


def test_write_table_takes_the_schema_third_and_refuses_a_mode_there(tmp_path) -> None:
    schema = pa.schema([pa.field("a", pa.int64(), nullable=False)])
    t = mvcc.write_table(pa.table({"a": [1]}), str(tmp_path / "t"), schema, "create")
    assert t.schema == schema
    with pytest.raises(TypeError, match="pass mode='append' by keyword"):
        mvcc.write_table(pa.table({"a": [1]}), str(tmp_path / "t"), "append")


def test_tags_create_takes_the_branch_third(tmp_path) -> None:
    t = mvcc.write_table(pa.table({"a": [1]}), str(tmp_path / "t"))
    branch = t.create_branch("b")
    branch.append(pa.table({"a": [2]}))
    t.tags.create("on-branch", branch.version, "b")
    t.tags.create("on-main", 1, None)
    assert t.tags.list()["on-branch"]["version"] == branch.version and t.tags.list()["on-main"] == {"version": 1}
    with pytest.raises(TypeError, match="not both"):
        t.tags.create("twice", ("b", 2), "b")
    t.tags.update("on-main", branch.version, "b")
    assert t.tags.list()["on-main"]["version"] == branch.version


def _tuned(write, path) -> list:
    ds = write(pa.table({"a": list(range(20))}), str(path), max_rows_per_file=5)
    tuning = {"batch_readahead": 2, "scan_in_order": True, "prefilter": True, "late_materialization": ["a"]}
    return [
        ds.to_table(filter="a > 12", limit=3, batch_size=None, **tuning).column("a").to_pylist(),
        sum(b.num_rows for b in ds.to_batches(batch_size=4, filter="a < 9", **tuning)),
        ds.scanner(filter="a % 2 = 0", batch_size=None, **tuning).to_table().num_rows,
    ]


@needs_lance
def test_pylance_scan_tuning_is_accepted_and_changes_no_answer(tmp_path) -> None:
    assert (
        _tuned(mvcc.write_table, tmp_path / "m") == _tuned(lance.write_dataset, tmp_path / "l") == [[13, 14, 15], 9, 10]
    )


def test_scan_tuning_of_the_wrong_type_is_refused(tmp_path) -> None:
    t = mvcc.write_table(pa.table({"a": [1]}), str(tmp_path / "t"))
    with pytest.raises(TypeError, match="batch_readahead must be an int"):
        t.to_table(batch_readahead="many")
    with pytest.raises(TypeError, match="late_materialization must be True, False or a list"):
        t.scanner(late_materialization="a")
