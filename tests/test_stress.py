"""Eight processes for a bounded time run a mix of appends, deletes, updates, upserts, compactions, index
builds and config changes on one table. Afterwards the history must be serial and complete, every operation
must have committed or raised a typed conflict error, and the table must equal a replay, computed with
plain pyarrow, of what each committed version did (each writer logs its operations with the version they
landed as).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import random
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mvcc_core as mvcc
from mvcc_core.io import open_store
from mvcc_core.read.sql_filter import to_expression
from mvcc_core.txn.transaction import read_transaction

WRITERS = 8


def _rows(ids: list[int], v: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([v] * len(ids), pa.int64())})


def _worker(uri: str, opts: dict | None, writer: int, seconds: float, log_path: str, barrier) -> None:
    rng = random.Random(writer)
    log = []
    barrier.wait()
    t = mvcc.open_table(uri, storage_options=opts)
    deadline = time.monotonic() + seconds
    counter = 0
    while time.monotonic() < deadline:
        counter += 1
        kind = rng.choice(["append", "append", "delete", "update", "upsert", "compact", "index", "config"])
        target = rng.randrange(0, 100)
        entry: dict = {"kind": kind}
        try:
            before = t.version
            if kind == "append":
                ids = [(writer + 1) * 1_000_000 + counter * 10 + i for i in range(3)]  # never an initial id
                t.append(_rows(ids, writer))
                entry["ids"] = ids
            elif kind == "delete":
                t.delete(f"id = {target}")
                entry["id"] = target
            elif kind == "update":
                t.update({"v": "v + 1"}, where=f"id = {target}", mode=rng.choice(["rewrite_rows", "rewrite_columns"]))
                entry["id"] = target
            elif kind == "upsert":
                ids = [target, (writer + 1) * 1_000_000 + 500_000 + counter]
                t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
                    _rows(ids, -writer)
                )
                entry["ids"] = ids
                entry["v"] = -writer
            elif kind == "compact":  # half of them keep the index through a fragment reuse index
                t.optimize.compact_files(target_rows_per_fragment=1_000, defer_index_remap=rng.random() < 0.5)
            elif kind == "index":
                if rng.random() < 0.5:
                    t.create_index("id", name="id_idx")
                else:
                    t.optimize.optimize_indices()  # rebuilds, trims the fragment reuse index
            else:
                t.update_config({f"writer.{writer}": str(counter)})
            entry["outcome"] = "committed" if t.version != before else "nothing"
            entry["version"] = t.version
        except (mvcc.RetryableConflictError, mvcc.IncompatibleConflictError) as exc:
            entry["outcome"] = type(exc).__name__
            t = t.checkout_latest()
        log.append(entry)
    Path(log_path).write_text(json.dumps(log))


def _replay(initial: pa.Table, entries: list[dict]) -> dict[int, int]:
    """The table's rows after the committed row changes, applied in version order with pyarrow."""
    table = initial
    for e in sorted(entries, key=lambda e: e["version"]):
        if e["kind"] == "append":
            table = pa.concat_tables([table, _rows(e["ids"], e["writer"])])
        elif e["kind"] == "delete":
            table = table.filter(pc.not_equal(table["id"], e["id"]))
        elif e["kind"] == "update":
            hit = pc.equal(table["id"], e["id"])
            table = table.set_column(1, "v", pc.if_else(hit, pc.add(table["v"], 1), table["v"]))
        elif e["kind"] == "upsert":
            keys = pa.array(e["ids"], pa.int64())
            table = pa.concat_tables([table.filter(pc.invert(pc.is_in(table["id"], keys))), _rows(e["ids"], e["v"])])
    return dict(zip(table["id"].to_pylist(), table["v"].to_pylist(), strict=True))


@pytest.mark.parametrize("backend", ["local", pytest.param("s3", marks=pytest.mark.s3)])
@pytest.mark.slow
def test_eight_writers_mixed_operations(backend, tmp_path, request) -> None:
    if backend == "s3":
        uri, opts, seconds = request.getfixturevalue("s3_uri"), request.getfixturevalue("s3_options"), 8.0
    else:
        uri, opts, seconds = str(tmp_path / "t"), None, 6.0
    initial = _rows(list(range(100)), 0)
    mvcc.write_table(initial, uri, storage_options=opts, max_rows_per_file=20)
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(WRITERS)
    logs = [str(tmp_path / f"log{w}.json") for w in range(WRITERS)]
    procs = [ctx.Process(target=_worker, args=(uri, opts, w, seconds, logs[w], barrier)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * WRITERS  # any other exception fails the writer
    entries = []
    for w, path in enumerate(logs):
        for e in json.loads(Path(path).read_text()):
            e["writer"] = w
            entries.append(e)
    outcomes = {e["outcome"] for e in entries}
    assert outcomes <= {"committed", "nothing", "RetryableConflictError", "IncompatibleConflictError"}
    committed = [e for e in entries if e["outcome"] == "committed"]
    assert len(committed) > 2 * WRITERS, f"only {len(committed)} commits"

    # the history is serial: versions contiguous, each with its own readable transaction file
    t = mvcc.open_table(uri, storage_options=opts)
    infos = t.versions()
    assert [v.version for v in infos] == list(range(1, t.version + 1))
    store = open_store(uri, opts)
    uuids = set()
    for v in range(1, t.version + 1):
        txn = read_transaction(store, t.checkout(v).manifest.transaction_file)
        uuids.add(txn.uuid)
    assert len(uuids) == t.version
    # every committed row change is the version its writer saw, and no two claim the same version
    row_changes = [e for e in committed if e["kind"] in ("append", "delete", "update", "upsert")]
    assert len({e["version"] for e in row_changes}) == len(row_changes)
    for e in row_changes:
        assert infos[e["version"] - 1].operation in {"Append", "Delete", "Update"}
    # the table equals the replay: nothing lost, nothing duplicated
    got = t.to_table()
    assert len(set(got["id"].to_pylist())) == got.num_rows
    assert dict(zip(got["id"].to_pylist(), got["v"].to_pylist(), strict=True)) == _replay(initial, row_changes)
    # the index (maybe through the fragment reuse index) answers as a full scan does
    for predicate in ["id = 7", "id = 55", "id < 30", "id >= 1000000", "id IN (3, 60, 99)"]:
        expected = got.filter(to_expression(predicate, got.schema))
        assert sorted(t.to_table(filter=predicate)["id"].to_pylist()) == sorted(expected["id"].to_pylist())
