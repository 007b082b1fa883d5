"""Concurrent writers in separate OS processes, and the conflict outcomes of the commit loop."""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import statistics
import threading

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core.format.manifest import CommitHandler
from mvcc_core.io import open_store
from mvcc_core.txn.commit import Committer
from mvcc_core.txn.transaction import read_transaction

COMMITS_PER_WRITER = 5


def _appender(uri: str, opts: dict | None, writer: int, commits: int, barrier) -> None:
    barrier.wait()
    t = mvcc.open_table(uri, storage_options=opts)
    for i in range(commits):
        key = writer * 1000 + i
        t.append(pa.table({"writer": [writer], "key": [key]}), max_retries=100)


def _run_writers(uri: str, opts: dict | None, writers: int) -> None:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(writers)
    procs = [ctx.Process(target=_appender, args=(uri, opts, w, COMMITS_PER_WRITER, barrier)) for w in range(writers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]


@pytest.mark.parametrize("writers", [2, 8])
@pytest.mark.parametrize("backend", ["local", pytest.param("s3", marks=pytest.mark.s3)])
@pytest.mark.slow
def test_concurrent_appenders(backend, writers, tmp_uri, request) -> None:
    if backend == "s3":
        uri, opts = request.getfixturevalue("s3_uri"), request.getfixturevalue("s3_options")
    else:
        uri, opts = tmp_uri, None
    mvcc.write_table(
        pa.table({"writer": pa.array([], pa.int64()), "key": pa.array([], pa.int64())}),
        uri,
        storage_options=opts,
    )
    _run_writers(uri, opts, writers)

    t = mvcc.open_table(uri, storage_options=opts)
    total = writers * COMMITS_PER_WRITER
    # every commit landed exactly once, versions are contiguous
    infos = t.versions()
    assert [v.version for v in infos] == list(range(1, total + 2))
    assert [v.operation for v in infos] == ["Overwrite"] + ["Append"] * total
    assert len({v.uuid for v in infos}) == total + 1
    # every version names its own transaction file, which exists and matches
    store = open_store(uri, opts)
    for v in range(1, total + 2):
        m = t.checkout(v).manifest
        txn = read_transaction(store, m.transaction_file)
        assert txn.uuid == infos[v - 1].uuid
    # the rows are the union of what was written
    keys = sorted(t.to_table()["key"].to_pylist())
    assert keys == sorted(w * 1000 + i for w in range(writers) for i in range(COMMITS_PER_WRITER))
    assert len({f.fragment_id for f in t.get_fragments()}) == total


# ---- conflict outcomes through the real commit path ------------------------------------------


def _two_handles(uri: str):
    mvcc.write_table(pa.table({"id": [1, 2, 3]}), uri)
    return mvcc.open_table(uri), mvcc.open_table(uri)


def test_append_after_restore_is_incompatible(tmp_uri) -> None:
    mvcc.write_table(pa.table({"id": [1]}), tmp_uri).append(pa.table({"id": [2]}))
    a, b = mvcc.open_table(tmp_uri), mvcc.open_table(tmp_uri)
    a.restore(1)
    with pytest.raises(mvcc.IncompatibleConflictError) as info:
        b.append(pa.table({"id": [3]}))
    err = info.value
    assert err.read_version == 2 and err.conflicting_versions == [3]
    assert err.operation == "Append" and err.conflicting_operation == "Restore"
    assert not isinstance(err, mvcc.RetryableConflictError)
    assert mvcc.open_table(tmp_uri).to_table()["id"].to_pylist() == [1]
    # the failed append left no data file behind
    assert len(list((__import__("pathlib").Path(tmp_uri) / "data").iterdir())) == 2


def test_append_after_overwrite_is_incompatible(tmp_uri) -> None:
    a, b = _two_handles(tmp_uri)
    a.overwrite(pa.table({"id": [9]}))
    with pytest.raises(mvcc.IncompatibleConflictError):
        b.append(pa.table({"id": [4]}))


def test_appends_are_compatible_with_everything_else(tmp_uri) -> None:
    a, b = _two_handles(tmp_uri)
    a.update_config(upsert={"k": "v"})
    a.commit(mvcc.operations.ReserveFragments(num_fragments=2))
    b.append(pa.table({"id": [4]}))
    assert b.version == 4 and b.config == {"k": "v"}
    assert b.to_table()["id"].to_pylist() == [1, 2, 3, 4]


def test_update_config_same_key_is_retryable(tmp_uri) -> None:
    a, b = _two_handles(tmp_uri)
    a.update_config(upsert={"k": "a"})
    with pytest.raises(mvcc.RetryableConflictError) as info:
        b.update_config(upsert={"k": "b"})
    assert info.value.conflicting_versions == [2]
    b.update_config(upsert={"other": "x"})  # different key: compatible
    assert b.config == {"k": "a", "other": "x"}
    retry = mvcc.open_table(tmp_uri)
    retry.update_config(upsert={"k": "b"})
    assert retry.config["k"] == "b"


def test_overwrite_vs_overwrite_is_retryable_and_restore_wins(tmp_uri) -> None:
    a, b = _two_handles(tmp_uri)
    a.overwrite(pa.table({"id": [7]}))
    with pytest.raises(mvcc.RetryableConflictError):
        b.overwrite(pa.table({"id": [8]}))
    c = mvcc.open_table(tmp_uri, version=1)
    c.restore()  # restore trumps the concurrent overwrite
    assert c.to_table()["id"].to_pylist() == [1, 2, 3]


def test_reserve_fragments_after_overwrite_is_incompatible(tmp_uri) -> None:
    a, b = _two_handles(tmp_uri)
    a.overwrite(pa.table({"id": [7]}))
    with pytest.raises(mvcc.IncompatibleConflictError):
        b.commit(mvcc.operations.ReserveFragments(num_fragments=3))
    b2 = mvcc.open_table(tmp_uri)
    b2.commit(mvcc.operations.ReserveFragments(num_fragments=3))
    a.commit(mvcc.operations.ReserveFragments(num_fragments=1), read_version=2)  # concurrent reserves are compatible
    assert a.manifest.max_fragment_id == b2.manifest.max_fragment_id + 1


class _AlwaysLoses(CommitHandler):
    """A commit handler whose every publish finds the version taken (a writer that never wins a race)."""

    def publish(self, store, manifest, naming) -> bool:
        return False


def test_exhausted_retries_raise_retryable_and_remove_the_staged_files(tmp_uri) -> None:
    t = mvcc.write_table(pa.table({"id": [1]}), tmp_uri)
    state = t.state
    loser = mvcc.Table(dataclasses.replace(state, committer=Committer(state.store, handler=_AlwaysLoses())))
    before = sorted(m.path for m in state.store.list("data"))
    txn = loser.append_uncommitted(pa.table({"id": [2]}))
    assert len(txn.files) == 1 and txn.files[0].startswith(f"{state.uri}/data/")
    with pytest.raises(mvcc.RetryableConflictError, match="3 times"):
        loser.commit(txn, max_retries=2)
    assert mvcc.open_table(tmp_uri).version == 1
    assert sorted(m.path for m in state.store.list("data")) == before  # the definite failure cleaned up


def test_backoff_spreads_losers_over_more_slots_each_time() -> None:
    import random

    from mvcc_core.txn.commit import BACKOFF_CAP_SECONDS, backoff_delay

    rng = random.Random(7)
    slot = 0.004
    for attempt in range(12):
        delays = [backoff_delay(attempt, slot, rng) for _ in range(400)]
        slots_allowed = 2 ** (min(attempt, 8) + 1)
        assert max(delays) <= min(BACKOFF_CAP_SECONDS, slots_allowed * slot)
        if attempt <= 3:
            assert min(delays) < slot  # slot 0: retrying at once is possible
        else:
            assert statistics.mean(delays) > slots_allowed * slot / 4
    assert backoff_delay(30, 10.0, rng) <= BACKOFF_CAP_SECONDS  # a slow attempt is clamped


def test_latest_lookup_starts_from_a_known_version(tmp_uri) -> None:
    from mvcc_core.format import manifest as manifest_mod

    t = mvcc.write_table(pa.table({"id": [0]}), tmp_uri)
    for i in range(1, 40):
        t.append(pa.table({"id": [i]}))
    store = t.state.store
    hinted = manifest_mod.latest_from_hint(store)
    assert hinted is not None and hinted.version == t.version == 40
    stats = []
    original = store.exists
    store.exists = lambda rel: stats.append(rel) or original(rel)  # count the walk's stat calls
    try:
        known = manifest_mod.location_of(store, 39, t.manifest_naming)
        assert manifest_mod.latest_manifest_location(store, known).version == 40
        walked = len(stats)
        stats.clear()
        assert manifest_mod.latest_manifest_location(store).version == 40
    finally:
        store.exists = original
    # from v39: 39, 40, 42 (missing), 41 (missing), 40 again (the retention re-check); from the hint (v32): 32, 33,
    # 35, 39, 47 (missing), 43, 41 (missing), 40, 40 again = 9 (a walk one by one took 11)
    assert walked == 5 and len(stats) == 9


def test_the_latest_is_found_from_a_hint_of_any_age_in_logarithmic_stats(tmp_uri) -> None:
    import json
    import math

    from mvcc_core.format import manifest as manifest_mod
    from mvcc_core.format import naming

    t = mvcc.write_table(pa.table({"id": [0]}), tmp_uri)
    store = t.state.store
    for version in range(2, 41):  # versions 2..40 as names only: the search stats names, it reads no manifest
        store.put(naming.manifest_path(version, t.manifest_naming), b"")
    stats = []
    original = store.exists
    store.exists = lambda rel: stats.append(rel) or original(rel)
    try:
        for hinted in range(1, 41):
            hint = {"version": hinted, "naming": t.manifest_naming.value}
            store.put(manifest_mod.LATEST_HINT, json.dumps(hint).encode())
            stats.clear()
            assert manifest_mod.latest_manifest_location(store).version == 40
            assert stats  # the search ran (not a listing)
            assert len(stats) <= 2 * math.ceil(math.log2(40 - hinted + 1)) + 3, hinted  # a walk: 40 - hinted + 2
    finally:
        store.exists = original


def test_a_reader_never_misses_a_version_committed_before_it_looked(tmp_uri) -> None:
    # a writer commits while readers open the table: each open sees at least the versions committed before it
    # began, whatever the hint (rewritten every 32 versions) says
    t = mvcc.write_table(pa.table({"id": [0]}), tmp_uri)
    committed = [t.version]
    done = threading.Event()
    stale = []

    def write() -> None:
        writer = mvcc.open_table(tmp_uri)
        for i in range(1, 45):
            writer.append(pa.table({"id": [i]}))
            committed.append(writer.version)
        done.set()

    thread = threading.Thread(target=write)
    thread.start()
    while not done.is_set():
        before = committed[-1]
        seen = mvcc.open_table(tmp_uri).version
        if seen < before:
            stale.append((seen, before))
    thread.join()
    assert not stale
    assert mvcc.open_table(tmp_uri).version == committed[-1] == 45
