"""Compaction's pipeline (reader pool -> row groups -> encoder thread): reads of compacted tables against a plain
evaluation of the same changes, and a failure on either side of the encoder leaving nothing behind.

Row groups, read parts and the read-ahead window are made tiny, so a few hundred rows cross every hand-off many
times (the production sizes need a million rows for that)."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core.format import fragments
from mvcc_core.maintenance import compaction


@pytest.fixture
def tiny_row_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fragments, "ROW_GROUP_ROWS", 16)
    monkeypatch.setattr(compaction, "ROW_GROUP_ROWS", 16)
    monkeypatch.setattr(compaction, "_READ_PART_ROWS", 24)
    monkeypatch.setattr(compaction, "_READ_AHEAD_ROWS", 40)


def _rows(rng: random.Random, start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    values = [None if rng.random() < 0.1 else (float("nan") if rng.random() < 0.1 else rng.uniform(-5, 5)) for _ in ids]
    names = [None if rng.random() < 0.1 else f"n{rng.randrange(7)}" * rng.randrange(3) for _ in ids]
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "value": pa.array(values, pa.float64()), "name": pa.array(names, pa.string())}
    )


def _values(column: pa.ChunkedArray) -> list:
    return ["NaN" if isinstance(v, float) and v != v else v for v in column.to_pylist()]  # NaN equal to NaN


def _same(actual: pa.Table, expected: pa.Table) -> None:
    """The same columns and rows in the same order."""
    assert actual.schema.names == expected.schema.names
    for name in expected.schema.names:
        assert _values(actual.column(name)) == _values(expected.column(name)), name


@pytest.mark.parametrize("seed", range(6))
def test_compacted_reads_equal_a_plain_evaluation(tmp_path: Path, tiny_row_groups: None, seed: int) -> None:
    """Random appends and deletes (deletion vectors on some fragments), with and without stable row ids, then a
    compaction into fragments of a random target: the table reads, in order, what a plain evaluation of the same
    changes over Arrow tables gives; stable row ids stay with their rows."""
    rng = random.Random(seed)
    stable = seed % 2 == 1
    model = _rows(rng, 0, rng.randrange(1, 60))
    table = mvcc.write_table(
        model, str(tmp_path / "t"), max_rows_per_file=rng.choice([7, 13, 40]), enable_stable_row_ids=stable
    )
    next_id = model.num_rows
    for _ in range(rng.randrange(8, 20)):
        if rng.random() < 0.75:
            more = _rows(rng, next_id, rng.randrange(1, 30))
            table.append(more)
            model = pa.concat_tables([model, more])
            next_id += more.num_rows
        else:
            modulus, rest, above = rng.randrange(2, 9), rng.randrange(2), rng.randrange(next_id)
            table.delete(f"id % {modulus} = {rest} AND id > {above}")
            ids = model.column("id").to_numpy()
            model = model.filter(pa.array(~((ids % modulus == rest) & (ids > above))))
    before = table.to_table(with_row_id=stable)
    old_ids = {f.fragment_id for f in table.get_fragments()}
    target = rng.choice([10, 33, 100, 1_000])
    metrics = table.optimize.compact_files(target_rows_per_fragment=target)
    _same(table.to_table(), model)
    _same(mvcc.open_table(str(tmp_path / "t")).to_table(with_row_id=stable), before)  # row ids stay with rows
    assert 0 < metrics.rows <= model.num_rows and metrics.fragments_removed > 1
    new = [f for f in table.get_fragments() if f.fragment_id not in old_ids]
    assert len(new) == metrics.fragments_added and sum(f.physical_rows for f in new) == metrics.rows
    assert all(f.physical_rows <= target and f.deletion_file() is None for f in new)


def _encoder_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("mvcc-encode")]


def _many_small_fragments(uri: str) -> mvcc.Table:
    table = mvcc.write_table(_rows(random.Random(1), 0, 40), uri, max_rows_per_file=10)
    for start in range(40, 200, 10):
        table.append(_rows(random.Random(start), start, 10))
    return table


def test_a_read_failing_after_row_groups_were_encoded_leaves_nothing(tmp_path: Path, tiny_row_groups: None) -> None:
    """A data file missing near the end: the encoder thread has written row groups of the new file by then; the
    error is the read's, and the partial file is removed only after the encoder stopped."""
    uri = str(tmp_path / "t")
    table = _many_small_fragments(uri)
    (tmp_path / "t" / "data" / table.get_fragments()[-2].data_files()[0].path).unlink()
    files_before = set((tmp_path / "t" / "data").iterdir())
    with pytest.raises(mvcc.errors.ObjectNotFoundError, match="missing"):
        table.optimize.compact_files(target_rows_per_fragment=1_000)
    assert set((tmp_path / "t" / "data").iterdir()) == files_before
    assert not _encoder_threads()


def test_an_encode_failing_midway_is_raised_and_leaves_nothing(
    tmp_path: Path, tiny_row_groups: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The encoder thread fails on its third row group (a full disk: a fault nothing else produces here): the
    task raises that error, stops reading, and removes what it wrote; the table is unchanged."""
    uri = str(tmp_path / "t")
    table = _many_small_fragments(uri)
    expected = table.to_table()
    files_before = set((tmp_path / "t" / "data").iterdir())
    write = compaction._write_row_group
    calls = []

    def failing(writer: fragments.FragmentWriter, rows: pa.Table) -> None:
        calls.append(rows.num_rows)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        write(writer, rows)

    monkeypatch.setattr(compaction, "_write_row_group", failing)
    with pytest.raises(OSError, match="No space left"):
        table.optimize.compact_files(target_rows_per_fragment=1_000)
    assert len(calls) <= 3 + compaction._ENCODE_AHEAD  # writes queued behind the failed one were dropped
    assert set((tmp_path / "t" / "data").iterdir()) == files_before
    assert not _encoder_threads()
    _same(mvcc.open_table(uri).to_table(), expected)
