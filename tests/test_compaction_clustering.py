"""Clustering compaction (`sort_by`, `zorder_by`): the rows are the same multiset after, the new files are in the
order asked for (judged from the Parquet files' own statistics with pyarrow.parquet), a selective filter's scan
keeps only the files those statistics allow, and concurrent appends and deletes survive."""

from __future__ import annotations

import io
import multiprocessing
import random
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from maintenance_files import file_rows

import mvcc_core as mvcc
from mvcc_core import failpoints
from mvcc_core.format.bases import data_file_location
from mvcc_core.maintenance.clustering import zorder_codes
from mvcc_core.read.scan import Scan


def random_table(uri: str, opts, rng: random.Random, stable: bool = False) -> mvcc.Table:
    """Small appends of (id, user, x, y, s), with nulls in `user` and `s`, and some deletes."""
    t = None
    next_id = 0
    for _ in range(rng.randint(6, 14)):
        n = rng.choice([3, 20, 60, 150])
        ids = list(range(next_id, next_id + n))
        next_id += n
        data = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "user": pa.array([None if rng.random() < 0.05 else rng.randint(0, 999) for _ in ids], pa.int64()),
                "x": pa.array([rng.randint(0, 999) for _ in ids], pa.int32()),
                "y": pa.array([rng.randint(0, 999) for _ in ids], pa.int32()),
                "s": [None if rng.random() < 0.05 else f"k{rng.randint(0, 50):02d}" for _ in ids],
            }
        )
        if t is None:
            t = mvcc.write_table(data, uri, storage_options=opts, enable_stable_row_ids=stable)
        else:
            t.append(data)
    assert t is not None
    t.delete(f"id % {rng.randint(4, 9)} = 1")
    return t


def rows(t: mvcc.Table) -> list[tuple]:
    return sorted((tuple(r.values()) for r in t.to_table().to_pylist()), key=repr)


def parquet_files(t: mvcc.Table) -> list[pq.ParquetFile]:
    """Each fragment's data file, in manifest order, read from the store's bytes."""
    state = t.state
    out = []
    for frag in state.manifest.fragments:
        assert len(frag.files) == 1
        store, rel = data_file_location(state.store, state.manifest.base_paths, frag.files[0])
        out.append(pq.ParquetFile(io.BytesIO(store.get(rel))))
    return out


def ranges(file: pq.ParquetFile, column: str) -> list[tuple[object, object]]:
    """(min, max) of `column` in each row group, from the file's footer."""
    index = file.schema_arrow.names.index(column)
    meta = file.metadata
    out = []
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(index).statistics
        out.append((stats.min, stats.max) if stats is not None and stats.has_min_max else (None, None))
    return out


def nulls(file: pq.ParquetFile, column: str) -> list[bool]:
    """Whether each row group of the file holds a null in `column`, from its footer."""
    index = file.schema_arrow.names.index(column)
    meta = file.metadata
    return [bool(meta.row_group(g).column(index).statistics.null_count) for g in range(meta.num_row_groups)]


def physical(t: mvcc.Table, column: str) -> str:
    """The column's name in the data files (mvcc writes physical names)."""
    names = parquet_files(t)[0].schema_arrow.names
    return names[t.schema.names.index(column)]


@pytest.mark.parametrize("seed", [0, 1, *(pytest.param(s, marks=pytest.mark.slow) for s in range(2, 5))])
def test_sort_by_rewrites_every_fragment_in_key_order(any_uri, seed: int) -> None:
    uri, opts = any_uri
    rng = random.Random(seed)
    t = random_table(uri, opts, rng)
    before = rows(t)
    metrics = t.optimize.compact_files(sort_by=["user", "id"], target_rows_per_fragment=rng.choice([40, 100, 250]))
    assert metrics.version is not None and rows(t) == before
    assert sorted(file_rows(t), key=repr) == before  # the files hold the rows (no deletion vectors left)
    # the table reads back in key order, nulls last, and each file's values are in order, as its row groups
    users = [r["user"] for r in t.to_table(columns=["user"]).to_pylist()]
    present = [u for u in users if u is not None]
    assert present == sorted(present) and users[len(present) :] == [None] * (len(users) - len(present))
    col = physical(t, "user")
    previous_max = None
    for file in parquet_files(t):
        values = [v for v in file.read().column(col).to_pylist() if v is not None]
        assert values == sorted(values)
        for low, high in ranges(file, col):
            if low is None:
                continue
            if previous_max is not None:
                assert low >= previous_max  # ranges do not overlap (equal keys may straddle a boundary)
            previous_max = high


@pytest.mark.parametrize("seed", range(3))
def test_a_selective_filter_on_the_sort_key_reads_a_fraction_of_the_files(any_uri, seed: int) -> None:
    uri, opts = any_uri
    rng = random.Random(seed)
    t = random_table(uri, opts, rng)
    t.optimize.compact_files(target_rows_per_fragment=10_000)  # bin-packed: one row order, keys everywhere
    t.optimize.compact_files(sort_by=["user"], target_rows_per_fragment=60)
    col = physical(t, "user")
    low = rng.randint(0, 900)
    where = f"user >= {low} AND user < {low + 50}"
    # the files whose own statistics may hold a match, judged with pyarrow.parquet alone. Arrow's pruning keeps a
    # row group with values and nulls whatever the range (its guarantee is "in range or null"), and drops one of
    # nulls only: judged the same way here
    may_match = set()
    for frag, file in zip(t.state.manifest.fragments, parquet_files(t), strict=True):
        for (lo, hi), null in zip(ranges(file, col), nulls(file, col), strict=True):
            if lo is not None and (null or (hi >= low and lo < low + 50)):
                may_match.add(frag.id)
    scanned = {f.id for f in Scan(t.state.store, t.state.manifest, filter=where).candidate_fragments()}
    total = len(t.state.manifest.fragments)
    assert scanned == may_match
    assert len(scanned) <= max(3, total // 4), (len(scanned), total)
    expected = sorted(r for r in rows(t) if r[1] is not None and low <= r[1] < low + 50)
    assert sorted(tuple(r.values()) for r in t.to_table(filter=where).to_pylist()) == expected


def interleave_reference(values: list[list[int]], bits: int) -> list[int]:
    """Morton code by the definition, bit by bit in Python: bit b of column j lands at b*k + (k-1-j)."""
    k = len(values)
    out = []
    for row in zip(*values, strict=True):
        code = 0
        for b in range(bits):
            for j, v in enumerate(row):
                code |= ((v >> b) & 1) << (b * k + (k - 1 - j))
        out.append(code)
    return out


@pytest.mark.parametrize("k", [2, 3, 4])
def test_zorder_codes_match_the_definition(k: int) -> None:
    rng = np.random.default_rng(k)
    n = 300
    names = [f"c{j}" for j in range(k)]
    table = pa.table({name: rng.integers(-50, 50, n) for name in names})
    bits = 64 // k
    top = (1 << bits) - 1
    scaled = []
    for name in names:
        column = table.column(name).to_pylist()
        distinct = sorted(set(column))
        rank = {v: i for i, v in enumerate(distinct)}
        most = len(distinct) - 1
        scaled.append([min(int(rank[v] * (top / most)), top) for v in column])
    assert zorder_codes(table, tuple(names)).tolist() == interleave_reference(scaled, bits)


def test_zorder_ranks_strings_and_nulls() -> None:
    table = pa.table({"s": ["b", None, "a", "b", "c"], "n": [1.5, 0.5, None, 2.5, 0.5]})
    codes = zorder_codes(table, ("s", "n")).tolist()
    # equal values share a rank: rows 0 and 3 differ only in n; the null string sorts after every string
    order = sorted(range(5), key=lambda i: codes[i])
    assert order.index(0) < order.index(3)
    assert codes[1] > codes[4] > codes[2]


@pytest.mark.parametrize("seed", [0, 1, *(pytest.param(s, marks=pytest.mark.slow) for s in range(2, 4))])
def test_zorder_by_keeps_the_rows_and_a_box_filter_touches_few_files(any_uri, seed: int) -> None:
    uri, opts = any_uri
    rng = random.Random(seed)
    t = random_table(uri, opts, rng)
    for _ in range(3):
        t.append(
            pa.table(
                {
                    "id": pa.array(range(10_000 + _ * 400, 10_400 + _ * 400), pa.int64()),
                    "user": pa.array([rng.randint(0, 999) for _ in range(400)], pa.int64()),
                    "x": pa.array([rng.randint(0, 999) for _ in range(400)], pa.int32()),
                    "y": pa.array([rng.randint(0, 999) for _ in range(400)], pa.int32()),
                    "s": ["k"] * 400,
                }
            )
        )
    before = rows(t)
    t.optimize.compact_files(zorder_by=["x", "y"], target_rows_per_fragment=64)
    assert rows(t) == before and sorted(file_rows(t), key=repr) == before
    x0, y0 = rng.randint(0, 900), rng.randint(0, 900)
    where = f"x >= {x0} AND x < {x0 + 50} AND y >= {y0} AND y < {y0 + 50}"  # 5% x 5%
    cx, cy = physical(t, "x"), physical(t, "y")
    may_match = set()
    for frag, file in zip(t.state.manifest.fragments, parquet_files(t), strict=True):
        for (xl, xh), (yl, yh) in zip(ranges(file, cx), ranges(file, cy), strict=True):
            if xh >= x0 and xl < x0 + 50 and yh >= y0 and yl < y0 + 50:
                may_match.add(frag.id)
    scanned = {f.id for f in Scan(t.state.store, t.state.manifest, filter=where).candidate_fragments()}
    total = len(t.state.manifest.fragments)
    assert scanned == may_match and len(scanned) <= total // 3, (len(scanned), total)
    expected = sorted(r for r in before if x0 <= r[2] < x0 + 50 and y0 <= r[3] < y0 + 50)
    assert sorted((tuple(r.values()) for r in t.to_table(filter=where).to_pylist()), key=repr) == sorted(
        expected, key=repr
    )


def test_where_scopes_the_clustering(tmp_uri) -> None:
    t = random_table(tmp_uri, None, random.Random(3))
    t.optimize.compact_files(target_rows_per_fragment=100)
    before_ids = {f.id for f in t.state.manifest.fragments}
    scope = {f.id for f in Scan(t.state.store, t.state.manifest, filter="id < 200").candidate_fragments()}
    before = rows(t)
    metrics = t.optimize.compact_files(sort_by=["user"], where="id < 200", target_rows_per_fragment=100)
    assert metrics.fragments_removed == len(scope) < len(before_ids)
    assert before_ids - scope <= {f.id for f in t.state.manifest.fragments}  # the others kept their ids
    assert rows(t) == before


# ---- concurrency -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stable", [True, False])
@pytest.mark.parametrize("layout", [{"sort_by": ["user"]}, {"zorder_by": ["x", "s"]}])
def test_a_concurrent_append_is_kept_and_concurrent_deletes_are_carried(tmp_uri, stable: bool, layout) -> None:
    """By row id with stable row ids, else by the Rewrite's row map; twice over (a rebased Rewrite rebased again)."""
    t = random_table(tmp_uri, None, random.Random(5), stable=stable)
    plan = mvcc.compaction.plan(t, target_rows_per_fragment=50, **layout)
    results = mvcc.compaction.run_tasks(plan.tasks, plan.state)
    other = mvcc.open_table(tmp_uri)
    other.append(pa.table({"id": [99_999], "user": [5], "x": [1], "y": [1], "s": ["z"]}).cast(other.schema))
    live = other.to_table(columns=["id"]).column("id").to_pylist()
    gone = random.Random(1).sample(live, 30)
    other.delete(f"id IN ({', '.join(map(str, gone[:15]))})")
    other.delete(f"id IN ({', '.join(map(str, gone[15:]))})")
    expected = rows(mvcc.open_table(tmp_uri))
    committed = mvcc.compaction.commit(t, results)
    final = mvcc.open_table(tmp_uri)
    assert committed.version == final.version and rows(final) == expected
    assert not {r[0] for r in rows(final)} & set(gone) and 99_999 in {r[0] for r in rows(final)}


def test_a_permuted_rewrite_without_its_row_map_is_retryable(tmp_uri) -> None:
    """A clustering Rewrite read back without its row map (and no row ids) cannot place deleted rows: retryable,
    never carried by the row-order rule."""
    from dataclasses import replace

    t = random_table(tmp_uri, None, random.Random(6))
    plan = mvcc.compaction.plan(t, sort_by=["user"], target_rows_per_fragment=50)
    results = mvcc.compaction.run_tasks(plan.tasks, plan.state)
    txn = mvcc.compaction.rewrite_transaction(plan.state, results)
    assert txn.operation.row_sources is not None
    txn = replace(txn, operation=replace(txn.operation, row_sources=None))
    mvcc.open_table(tmp_uri).delete("id = 2")
    expected = rows(mvcc.open_table(tmp_uri))
    with pytest.raises(mvcc.RetryableConflictError):
        plan.state.commit(txn)
    assert rows(mvcc.open_table(tmp_uri)) == expected


def _writer(uri: str, log_path: str, stop_path: str, seed: int, opts: dict | None = None) -> None:
    """Append small batches and delete rows until `stop_path` exists; log each acknowledged change."""
    rng = random.Random(seed)
    next_id = 1_000_000
    with open(log_path, "w") as log:
        while not Path(stop_path).exists():
            t = mvcc.open_table(uri, storage_options=opts)
            try:
                if rng.random() < 0.5:
                    ids = list(range(next_id, next_id + rng.randint(1, 4)))
                    next_id = ids[-1] + 1
                    t.append(
                        pa.table(
                            {
                                "id": pa.array(ids, pa.int64()),
                                "user": pa.array([rng.randint(0, 999) for _ in ids], pa.int64()),
                                "x": pa.array([rng.randint(0, 999) for _ in ids], pa.int32()),
                                "y": pa.array([rng.randint(0, 999) for _ in ids], pa.int32()),
                                "s": ["w"] * len(ids),
                            }
                        )
                    )
                    log.write(f"ack append {' '.join(map(str, ids))}\n")
                else:
                    live = t.to_table(columns=["id"]).column("id").to_pylist()
                    chosen = rng.sample(live, min(len(live), rng.randint(1, 4)))
                    t.delete(f"id IN ({', '.join(map(str, chosen))})")
                    log.write(f"ack delete {' '.join(map(str, chosen))}\n")
            except mvcc.RetryableConflictError:
                log.write("retry\n")
            log.flush()


@pytest.mark.slow  # a writer in another process for seconds: the slow tier's kind
@pytest.mark.parametrize("stable", [True, False])
def test_clustering_beside_a_writer_process_keeps_every_acknowledged_change(tmp_path: Path, stable: bool) -> None:
    uri = str(tmp_path / "t")
    t = random_table(uri, None, random.Random(11), stable=stable)
    expected_ids = set(t.to_table(columns=["id"]).column("id").to_pylist())
    log_path, stop_path = str(tmp_path / "writer.log"), str(tmp_path / "stop")
    proc = multiprocessing.get_context("spawn").Process(target=_writer, args=(uri, log_path, stop_path, 3))
    proc.start()
    landed = lost = 0
    try:
        started = time.monotonic()
        while not (Path(log_path).exists() and "ack" in Path(log_path).read_text()):
            assert time.monotonic() - started < 120 and proc.is_alive(), "the writer did not start"
            time.sleep(0.1)
        deadline = time.monotonic() + 10
        turn = 0
        while time.monotonic() < deadline:
            layout = {"sort_by": ["user"]} if turn % 2 == 0 else {"zorder_by": ["x", "y"]}
            turn += 1
            try:
                with failpoints.armed("commit.after_transaction_file", "sleep(0.1)"):
                    metrics = mvcc.open_table(uri).optimize.compact_files(target_rows_per_fragment=80, **layout)
                landed += metrics.version is not None
            except mvcc.RetryableConflictError:
                lost += 1
    finally:
        Path(stop_path).touch()
        proc.join(timeout=60)
    assert proc.exitcode == 0
    for line in Path(log_path).read_text().splitlines():
        words = line.split()
        if words[0] == "ack":
            ids = {int(w) for w in words[2:]}
            expected_ids = expected_ids | ids if words[1] == "append" else expected_ids - ids
    final = mvcc.open_table(uri)
    final_ids = final.to_table(columns=["id"]).column("id").to_pylist()
    assert sorted(final_ids) == sorted(expected_ids)  # as multisets: no row lost, none doubled or revived
    assert landed > 0
    print(f"stable={stable}: {landed} clustering Rewrites landed, {lost} lost to the writer")


@pytest.mark.slow
def test_clustering_beside_a_writer_thread_on_every_store(any_uri, tmp_path: Path) -> None:
    """The same on local disk, in memory and on S3, with the writer in a thread of this process."""
    import threading

    uri, opts = any_uri
    t = random_table(uri, opts, random.Random(12), stable=False)
    expected_ids = set(t.to_table(columns=["id"]).column("id").to_pylist())
    log_path, stop_path = str(tmp_path / "writer.log"), str(tmp_path / "stop")
    writer = threading.Thread(target=_writer, args=(uri, log_path, stop_path, 5, opts))
    writer.start()
    landed = 0
    try:
        deadline = time.monotonic() + 6
        turn = 0
        while time.monotonic() < deadline:
            layout = {"sort_by": ["s", "user"]} if turn % 2 == 0 else {"zorder_by": ["user", "x", "y"]}
            turn += 1
            try:
                metrics = mvcc.open_table(uri, storage_options=opts).optimize.compact_files(
                    target_rows_per_fragment=80, **layout
                )
                landed += metrics.version is not None
            except mvcc.RetryableConflictError:
                pass
    finally:
        Path(stop_path).touch()
        writer.join(timeout=60)
    assert not writer.is_alive() and Path(log_path).read_text().count("ack delete") > 0
    for line in Path(log_path).read_text().splitlines():
        words = line.split()
        if words[0] == "ack":
            ids = {int(w) for w in words[2:]}
            expected_ids = expected_ids | ids if words[1] == "append" else expected_ids - ids
    final_ids = mvcc.open_table(uri, storage_options=opts).to_table(columns=["id"]).column("id").to_pylist()
    assert sorted(final_ids) == sorted(expected_ids) and landed > 0


# ---- options, policy ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"sort_by": ["user"], "zorder_by": ["x", "y"]}, "not both"),
        ({"zorder_by": ["x"]}, "2 to 4 columns, got 1"),
        ({"zorder_by": ["x", "y", "user", "id", "s"]}, "2 to 4 columns, got 5"),
        ({"sort_by": ["user", "user"]}, "more than once"),
        ({"sort_by": []}, "list of column names"),
        ({"sort_by": ["user"], "defer_index_remap": True}, "defer_index_remap"),
    ],
)
def test_bad_clustering_options_are_refused(kwargs, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        mvcc.compaction.CompactionOptions(**kwargs)


def test_an_unknown_column_is_refused_before_anything_is_committed(tmp_uri) -> None:
    t = random_table(tmp_uri, None, random.Random(1))
    version = t.version
    with pytest.raises(ValueError, match="sort_by names column 'nope'"):
        t.optimize.compact_files(sort_by=["nope"])
    with pytest.raises(ValueError, match="zorder_by names column 'z'"):
        t.optimize.compact_files(zorder_by=["x", "z"])
    assert mvcc.open_table(tmp_uri).version == version


def test_compaction_follows_the_clustering_policy_and_an_explicit_layout_wins(any_uri) -> None:
    uri, opts = any_uri
    t = random_table(uri, opts, random.Random(2))
    before = rows(t)
    t.update_config({"mvcc.compaction.sort_by": "user", "mvcc.compaction.target_rows_per_fragment": "100"})
    t.optimize.compact_files()
    users = [u for u in t.to_table(columns=["user"]).column("user").to_pylist() if u is not None]
    assert users == sorted(users) and rows(t) == before
    with pytest.raises(ValueError, match="cannot both be set"):
        t.update_config({"mvcc.compaction.zorder_by": "x,y"})
    t.update_config({"mvcc.compaction.zorder_by": "x,y", "mvcc.compaction.sort_by": None})
    assert t.optimize.compact_files(sort_by=["id"]).version is not None  # explicit wins over the policy
    ids = t.to_table(columns=["id"]).column("id").to_pylist()
    assert ids == sorted(ids)
    t.commit(mvcc.operations.UpdateConfig.of({"mvcc.compaction.sort_by": "user"}, []))  # around the check
    with pytest.raises(ValueError, match="both set"):
        t.optimize.compact_files()


def test_the_cli_compacts_with_sort_by_and_shows_the_layout_on_a_dry_run(tmp_uri) -> None:
    from click.testing import CliRunner

    from mvcc_core.cli import cli

    t = random_table(tmp_uri, None, random.Random(4))
    version = t.version
    runner = CliRunner()
    dry = runner.invoke(cli, ["compact", tmp_uri, "--sort-by", "user", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "layout: sort by user" in dry.output and mvcc.open_table(tmp_uri).version == version
    both = runner.invoke(cli, ["compact", tmp_uri, "--sort-by", "user", "--zorder-by", "x,y"])
    assert both.exit_code != 0 and "not both" in both.output
    done = runner.invoke(cli, ["compact", tmp_uri, "--zorder-by", "x,y", "--target-rows-per-fragment", "100"])
    assert done.exit_code == 0, done.output
    after = mvcc.open_table(tmp_uri)
    assert after.version > version and rows(after) == rows(t)
    codes = zorder_codes(after.to_table(columns=["x", "y"]), ("x", "y"))
    assert (np.diff(codes.astype(np.float64)) >= 0).all()  # written in z-order
