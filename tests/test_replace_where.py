"""Partition-scoped overwrites (`overwrite(data, where=...)`, Delta's replaceWhere) and the distributed-writer
seam (`write_fragments`, `*_fragments_uncommitted`, `create_table_from_fragments`)."""

from __future__ import annotations

import datetime as dt
import multiprocessing as mp
import os

import pyarrow as pa
import pytest

import mvcc_core as mvcc

DAY1, DAY2 = dt.date(2026, 11, 1), dt.date(2026, 11, 2)
ONE = "day = DATE '2026-11-01'"


def rows(day: dt.date, ids: range, v: str = "old") -> pa.Table:
    return pa.table(
        {
            "day": pa.array([day] * len(ids), pa.date32()),
            "id": pa.array(list(ids), pa.int64()),
            "v": pa.array([v] * len(ids), pa.string()),
        }
    )


def content(t: mvcc.Table) -> list[tuple]:
    return sorted((r["day"], r["id"], r["v"]) for r in t.to_table().to_pylist())


def listing(uri: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), uri) for d, _, fs in os.walk(uri) for f in fs)


@pytest.fixture
def table(any_uri) -> tuple[mvcc.Table, str, dict | None]:
    uri, opts = any_uri
    t = mvcc.write_table(
        pa.concat_tables([rows(DAY1, range(0, 10)), rows(DAY2, range(10, 20))]), uri, storage_options=opts
    )
    return t, uri, opts


def test_replaces_exactly_the_matching_rows_in_one_commit(table) -> None:
    t, uri, opts = table
    t.overwrite(rows(DAY1, range(100, 103), "new"), where=ONE, transaction_properties={"run": "7"})
    assert t.version == 2
    expected = [(DAY1, i, "new") for i in range(100, 103)] + [(DAY2, i, "old") for i in range(10, 20)]
    assert content(t) == content(mvcc.open_table(uri, storage_options=opts)) == sorted(expected)
    txn = t.transaction()
    assert txn.operation.name == "Update" and txn.operation.replace_predicate == ONE
    assert t.versions()[-1].transaction_properties == {"run": "7"}


def test_fails_closed_when_a_new_row_is_outside_the_predicate(tmp_uri) -> None:
    t = mvcc.write_table(rows(DAY1, range(0, 5)), tmp_uri)
    before = listing(tmp_uri)
    bad = pa.concat_tables([rows(DAY1, range(50, 52), "new"), rows(DAY2, range(52, 53), "stray")])
    with pytest.raises(mvcc.errors.PredicateError, match=r"day = DATE '2026-11-01'.*'id': 52"):
        t.overwrite(bad, where=ONE)
    with pytest.raises(mvcc.errors.PredicateError):
        t.overwrite(rows(DAY1, range(1), "x"), where="day = ")  # does not parse
    with pytest.raises(mvcc.errors.PredicateError):
        t.overwrite(rows(DAY1, range(1), "x"), where="nope = 1")  # no such column
    assert listing(tmp_uri) == before and mvcc.open_table(tmp_uri).version == 1


def test_null_never_matches(tmp_uri) -> None:
    t = mvcc.write_table(rows(DAY1, range(0, 2)), tmp_uri)
    with pytest.raises(mvcc.errors.PredicateError, match="do not match"):
        t.overwrite(pa.table({"day": pa.array([None], pa.date32()), "id": [1], "v": ["x"]}), where=ONE)


def test_empty_data_only_deletes(tmp_uri) -> None:
    t = mvcc.write_table(pa.concat_tables([rows(DAY1, range(0, 3)), rows(DAY2, range(3, 5))]), tmp_uri)
    t.overwrite(rows(DAY1, range(0)), where=ONE)
    assert content(t) == [(DAY2, 3, "old"), (DAY2, 4, "old")]


def test_staged_form_equals_the_committed_one(tmp_uri) -> None:
    t = mvcc.write_table(pa.concat_tables([rows(DAY1, range(0, 3)), rows(DAY2, range(3, 5))]), tmp_uri)
    txn = t.overwrite_uncommitted(rows(DAY1, range(7, 9), "new"), where=ONE)
    assert mvcc.open_table(tmp_uri).version == 1 and all(f.startswith(t.uri) for f in txn.files)
    t.commit(txn)
    assert content(t) == [(DAY1, 7, "new"), (DAY1, 8, "new"), (DAY2, 3, "old"), (DAY2, 4, "old")]


def test_an_append_of_the_same_partition_makes_it_retryable(table) -> None:
    t, uri, opts = table
    ours = mvcc.open_table(uri, storage_options=opts)
    staged = ours.overwrite_uncommitted(rows(DAY1, range(100, 102), "new"), where=ONE)
    mvcc.open_table(uri, storage_options=opts).append(rows(DAY1, range(200, 201), "concurrent"))
    with pytest.raises(mvcc.RetryableConflictError, match="partition-scoped overwrite") as caught:
        ours.commit(staged)
    assert caught.value.conflicting_operation == "Append"
    latest = mvcc.open_table(uri, storage_options=opts)
    assert latest.version == 2 and (DAY1, 200, "concurrent") in content(latest)
    # run again on the new version: the concurrent row is replaced too
    latest.overwrite(rows(DAY1, range(100, 102), "new"), where=ONE)
    assert [r for r in content(latest) if r[0] == DAY1] == [(DAY1, 100, "new"), (DAY1, 101, "new")]


def test_an_append_of_another_partition_does_not_conflict(tmp_uri) -> None:
    mvcc.write_table(pa.concat_tables([rows(DAY1, range(0, 3)), rows(DAY2, range(3, 5))]), tmp_uri)
    ours = mvcc.open_table(tmp_uri)
    staged = ours.overwrite_uncommitted(rows(DAY1, range(100, 101), "new"), where=ONE)
    mvcc.open_table(tmp_uri).append(rows(DAY2, range(300, 301), "other"))
    ours.commit(staged)
    assert ours.version == 3
    assert content(ours) == [(DAY1, 100, "new")] + [(DAY2, i, "old") for i in (3, 4)] + [(DAY2, 300, "other")]


def test_an_upsert_inserting_into_the_partition_makes_it_retryable(tmp_uri) -> None:
    t = mvcc.write_table(pa.concat_tables([rows(DAY1, range(0, 3)), rows(DAY2, range(3, 5))]), tmp_uri)
    ours = mvcc.open_table(tmp_uri)
    staged = ours.overwrite_uncommitted(rows(DAY1, range(100, 101), "new"), where=ONE)
    upsert = mvcc.open_table(tmp_uri).merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
    upsert.execute(rows(DAY1, range(400, 401), "upserted"))
    with pytest.raises(mvcc.RetryableConflictError):
        ours.commit(staged)
    assert t.checkout_latest().version == 2


def test_a_delete_of_another_row_is_merged(tmp_uri) -> None:
    mvcc.write_table(pa.concat_tables([rows(DAY1, range(0, 3)), rows(DAY2, range(3, 5))]), tmp_uri)
    ours = mvcc.open_table(tmp_uri)
    staged = ours.overwrite_uncommitted(rows(DAY1, range(100, 101), "new"), where=ONE)
    mvcc.open_table(tmp_uri).delete("id = 4")  # same fragment, a row outside the partition
    ours.commit(staged)
    assert content(ours) == [(DAY1, 100, "new"), (DAY2, 3, "old")]


def _replace_day(uri: str, day: str, start: int, barrier) -> None:
    barrier.wait()
    t = mvcc.open_table(uri)
    data = rows(dt.date.fromisoformat(day), range(start, start + 5), f"w{start}")
    for _ in range(50):  # retry on the new version, as an orchestrator would
        try:
            t.overwrite(data, where=f"day = DATE '{day}'")
            return
        except mvcc.RetryableConflictError:
            t = t.checkout_latest()
    raise AssertionError("never committed")


def _append_day(uri: str, day: str, start: int, barrier) -> None:
    barrier.wait()
    mvcc.open_table(uri).append(rows(dt.date.fromisoformat(day), range(start, start + 5), f"a{start}"))


@pytest.mark.slow
def test_writers_of_one_partition_in_processes_never_leave_duplicates(tmp_uri) -> None:
    """Two processes replace day 1 while a third appends to day 2: day 1 ends with exactly one writer's rows."""
    mvcc.write_table(pa.concat_tables([rows(DAY1, range(0, 3)), rows(DAY2, range(3, 5))]), tmp_uri)
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(3)
    procs = [
        ctx.Process(target=_replace_day, args=(tmp_uri, "2026-11-01", 100, barrier)),
        ctx.Process(target=_replace_day, args=(tmp_uri, "2026-11-01", 200, barrier)),
        ctx.Process(target=_append_day, args=(tmp_uri, "2026-11-02", 300, barrier)),
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    final = content(mvcc.open_table(tmp_uri))
    day1 = [r for r in final if r[0] == DAY1]
    assert day1 in ([(DAY1, i, "w100") for i in range(100, 105)], [(DAY1, i, "w200") for i in range(200, 205)])
    assert [r for r in final if r[0] == DAY2] == [(DAY2, 3, "old"), (DAY2, 4, "old")] + [
        (DAY2, i, "a300") for i in range(300, 305)
    ]


def test_distributed_writers_commit_fragments_once(tmp_uri) -> None:
    schema = rows(DAY1, range(0)).schema
    first = mvcc.write_fragments(rows(DAY1, range(0, 4)), tmp_uri, schema=schema, file_prefix="w1")
    second = mvcc.write_fragments(rows(DAY2, range(4, 6)), tmp_uri, schema=schema, file_prefix="w1")
    assert all(os.path.basename(f.files[0].path).startswith("w1-") for f in first + second)
    t = mvcc.create_table_from_fragments(first + second, tmp_uri, schema=schema, commit_message="created by tasks")
    assert t.version == 1 and len(content(t)) == 6
    late = mvcc.write_fragments(rows(DAY1, range(90, 91)), tmp_uri, file_prefix="late")
    with pytest.raises(mvcc.TableExistsError):  # another writer created the table first
        mvcc.create_table_from_fragments(late, tmp_uri, schema=schema)
    assert not [p for p in listing(tmp_uri) if "late-" in p]  # the losing write's files are gone
    more = mvcc.write_fragments(rows(DAY2, range(6, 7)), tmp_uri)
    t.commit(t.append_fragments_uncommitted(more))
    replaced = mvcc.write_fragments(rows(DAY1, range(10, 12), "new"), tmp_uri, where=ONE, file_prefix="w2")
    t.commit(t.overwrite_fragments_uncommitted(replaced, where=ONE))
    assert [r for r in content(t) if r[0] == DAY1] == [(DAY1, 10, "new"), (DAY1, 11, "new")]
    before = listing(tmp_uri)
    with pytest.raises(mvcc.errors.PredicateError):
        mvcc.write_fragments(rows(DAY2, range(20, 21)), tmp_uri, where=ONE, file_prefix="w3")
    with pytest.raises(ValueError, match="prefix"):
        mvcc.write_fragments(rows(DAY1, range(20, 21)), tmp_uri, file_prefix="../x")
    assert listing(tmp_uri) == before
    t.commit(t.overwrite_fragments_uncommitted(mvcc.write_fragments(rows(DAY2, range(30, 31)), tmp_uri)))
    assert content(t) == [(DAY2, 30, "old")]
