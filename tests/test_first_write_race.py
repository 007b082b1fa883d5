"""First writes racing to create a table: every writer succeeds, the losers under the usual conflict rules.

Writers in separate OS processes all find no table (a failpoint holds each commit until every writer has
looked), so all but one lose the put-if-not-exists of version 1 and are applied to the winner's table: an
Append, the partition overwrite, or an Overwrite as a later version. `mode="create"` keeps refusing. The
randomized test replays the committed versions on plain Python rows and compares.
"""

from __future__ import annotations

import datetime as dt
import logging
import multiprocessing as mp
import os
import random
from typing import Any

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core import failpoints

DAYS = [dt.date(2026, 11, 1), dt.date(2026, 11, 2), dt.date(2026, 11, 3)]
HOLD = "sleep(1.0)"  # how long each commit waits after its transaction file: every writer looks meanwhile
LOST = "created the table first"  # what mvcc.commit logs when a first write is applied to the winner's table


def rows(day: dt.date, ids: list[int], writer: str) -> pa.Table:
    return pa.table(
        {
            "day": pa.array([day] * len(ids), pa.date32()),
            "id": pa.array(ids, pa.int64()),
            "writer": pa.array([writer] * len(ids), pa.string()),
        }
    )


def where_day(day: dt.date) -> str:
    return f"day = DATE '{day.isoformat()}'"


class _Lost(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lost = False

    def emit(self, record: logging.LogRecord) -> None:
        self.lost = self.lost or LOST in record.getMessage()


def _writer(uri: str, opts: dict | None, spec: dict[str, Any], barrier: Any, results: Any) -> None:
    """One writer process: wait for the others, write once (again on a retryable conflict, as an orchestrator
    would), report whether it lost the race for version 1 and how it ended."""
    failpoints.arm("commit.after_transaction_file", HOLD)
    seen = _Lost()
    log = logging.getLogger("mvcc.commit")
    log.setLevel(logging.INFO)
    log.addHandler(seen)
    data = rows(spec["day"], spec["ids"], spec["name"])
    where = where_day(spec["day"]) if spec["kind"] == "partition" else None
    mode = "append" if spec["kind"] == "append" else spec.get("mode", "overwrite")
    barrier.wait()
    outcome = "ok"
    for _ in range(30):
        try:
            partition = {"where": where} if where is not None else {}
            mvcc.write_table(
                data, uri, mode=mode, storage_options=opts, transaction_properties={"writer": spec["name"]}, **partition
            )
            break
        except mvcc.RetryableConflictError:
            failpoints.disarm("commit.after_transaction_file")
            continue
        except Exception as exc:  # noqa: BLE001 - reported to the test
            outcome = f"{type(exc).__name__}: {exc}"
            break
    results.put((spec["name"], seen.lost, outcome))


def race(uri: str, opts: dict | None, specs: list[dict[str, Any]]) -> dict[str, tuple[bool, str]]:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(specs))
    results = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(uri, opts, spec, barrier, results)) for spec in specs]
    for p in procs:
        p.start()
    out = {}
    for _ in procs:
        name, lost, outcome = results.get(timeout=180)
        out[name] = (lost, outcome)
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0] * len(procs)
    return out


def replay(table: mvcc.Table, specs: list[dict[str, Any]]) -> list[tuple]:
    """The plain evaluation: every committed write applied in version order to a list of rows."""
    by_name = {s["name"]: s for s in specs}
    state: list[tuple] = []
    for info in table.versions():
        spec = by_name[info.transaction_properties["writer"]]
        new = [(spec["day"], i, spec["name"]) for i in spec["ids"]]
        if spec["kind"] == "append":
            state += new
        elif spec["kind"] == "partition":
            state = [r for r in state if r[0] != spec["day"]] + new
        else:
            state = new
    return sorted(state)


def content(table: mvcc.Table) -> list[tuple]:
    return sorted((r["day"], r["id"], r["writer"]) for r in table.to_table().to_pylist())


def data_files(uri: str) -> list[str]:
    return sorted(os.listdir(os.path.join(uri, "data")))


@pytest.mark.slow  # several seconds: the slow tier (README, "Set-up")
def test_racing_first_appends_all_land_one_version_each(tmp_uri) -> None:
    specs = [{"name": f"w{i}", "kind": "append", "day": DAYS[0], "ids": [10 * i, 10 * i + 1]} for i in range(4)]
    outcomes = race(tmp_uri, None, specs)
    assert {o for _, o in outcomes.values()} == {"ok"}
    assert sum(lost for lost, _ in outcomes.values()) == 3  # one created the table, three lost the race
    t = mvcc.open_table(tmp_uri)
    infos = t.versions()
    assert len(infos) == 4
    assert sorted(i.operation for i in infos) == ["Append", "Append", "Append", "Overwrite"]
    assert sorted(i.transaction_properties["writer"] for i in infos) == ["w0", "w1", "w2", "w3"]
    assert content(t) == replay(t, specs)
    assert len(data_files(tmp_uri)) == 4  # nothing written twice, nothing left behind


@pytest.mark.slow
def test_racing_first_partition_overwrites_each_replace_their_day(tmp_uri) -> None:
    specs = [{"name": f"w{i}", "kind": "partition", "day": DAYS[i], "ids": [i, 100 + i]} for i in range(3)]
    outcomes = race(tmp_uri, None, specs)
    assert {o for _, o in outcomes.values()} == {"ok"}
    assert sum(lost for lost, _ in outcomes.values()) == 2
    t = mvcc.open_table(tmp_uri)
    assert sorted(i.operation for i in t.versions()) == ["Overwrite", "Update", "Update"]
    assert [t.transaction(v).operation.replace_predicate for v in (2, 3)] != ["", ""]
    assert content(t) == replay(t, specs)


@pytest.mark.slow
def test_racing_plain_overwrites_win_as_later_versions(tmp_uri) -> None:
    specs = [{"name": f"w{i}", "kind": "overwrite", "day": DAYS[0], "ids": [i]} for i in range(3)]
    outcomes = race(tmp_uri, None, specs)
    assert {o for _, o in outcomes.values()} == {"ok"}
    assert sum(lost for lost, _ in outcomes.values()) == 2
    t = mvcc.open_table(tmp_uri)
    assert [i.operation for i in t.versions()] == ["Overwrite"] * 3
    assert content(t) == replay(t, specs)  # the last one committed wins


@pytest.mark.slow
def test_racing_creates_leave_one_table_and_refuse_the_rest(tmp_uri) -> None:
    specs = [{"name": f"w{i}", "kind": "overwrite", "mode": "create", "day": DAYS[0], "ids": [i]} for i in range(3)]
    outcomes = race(tmp_uri, None, specs)
    ended = sorted(o.split(":")[0] for _, o in outcomes.values())
    assert ended == ["TableExistsError", "TableExistsError", "ok"]
    t = mvcc.open_table(tmp_uri)
    assert t.version == 1 and len(data_files(tmp_uri)) == 1  # the refused writes removed their files


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_random_first_writes_match_a_plain_replay(tmp_uri, seed: int) -> None:
    rng = random.Random(seed)
    specs = []
    for i in range(4):
        kind = rng.choice(["append", "append", "partition", "partition", "overwrite"])
        ids = rng.sample(range(1000), rng.randint(0, 4))
        specs.append({"name": f"w{i}", "kind": kind, "day": rng.choice(DAYS), "ids": ids})
    outcomes = race(tmp_uri, None, specs)
    assert {o for _, o in outcomes.values()} == {"ok"}, outcomes
    t = mvcc.open_table(tmp_uri)
    assert len(t.versions()) == len(specs)
    assert content(t) == replay(t, specs)


@pytest.mark.slow
@pytest.mark.s3
def test_racing_first_writes_on_s3(s3_uri, s3_options) -> None:
    specs = [
        {"name": "a", "kind": "append", "day": DAYS[0], "ids": [1, 2]},
        {"name": "b", "kind": "partition", "day": DAYS[1], "ids": [3]},
        {"name": "c", "kind": "append", "day": DAYS[2], "ids": [4, 5, 6]},
    ]
    outcomes = race(s3_uri, s3_options, specs)
    assert {o for _, o in outcomes.values()} == {"ok"}
    assert sum(lost for lost, _ in outcomes.values()) == 2
    t = mvcc.open_table(s3_uri, storage_options=s3_options)
    assert len(t.versions()) == 3
    assert content(t) == replay(t, specs)


# ---- the loser's path, step by step (create_table_from_fragments: its table appears before it commits) ----


def test_fragments_for_a_new_table_append_to_the_winner(tmp_uri) -> None:
    schema = rows(DAYS[0], [], "").schema
    mine = mvcc.write_fragments(rows(DAYS[0], [1, 2], "late"), tmp_uri, schema=schema)
    mvcc.write_table(rows(DAYS[1], [3], "winner"), tmp_uri)
    t = mvcc.create_table_from_fragments(mine, tmp_uri, schema=schema, mode="append", commit_message="late")
    assert t.version == 2 and t.transaction().operation.name == "Append"
    assert t.transaction().read_version == 1
    assert content(t) == [(DAYS[0], 1, "late"), (DAYS[0], 2, "late"), (DAYS[1], 3, "winner")]


def test_fragments_for_a_new_table_replace_their_partition_of_the_winner(tmp_uri) -> None:
    schema = rows(DAYS[0], [], "").schema
    mine = mvcc.write_fragments(rows(DAYS[0], [1], "late"), tmp_uri, schema=schema, where=where_day(DAYS[0]))
    mvcc.write_table(pa.concat_tables([rows(DAYS[0], [7, 8], "winner"), rows(DAYS[1], [9], "winner")]), tmp_uri)
    t = mvcc.create_table_from_fragments(mine, tmp_uri, schema=schema, mode="overwrite", where=where_day(DAYS[0]))
    assert t.transaction().operation.name == "Update"
    assert content(t) == [(DAYS[0], 1, "late"), (DAYS[1], 9, "winner")]


def test_a_loser_with_another_schema_gets_a_schema_error_and_leaves_nothing(tmp_uri) -> None:
    schema = rows(DAYS[0], [], "").schema
    mine = mvcc.write_fragments(rows(DAYS[0], [1], "late"), tmp_uri, schema=schema)
    mvcc.write_table(pa.table({"id": pa.array([1], pa.int64())}), tmp_uri)
    before = data_files(tmp_uri)
    with pytest.raises(mvcc.SchemaError, match="another writer created the table .* first"):
        mvcc.create_table_from_fragments(mine, tmp_uri, schema=schema, mode="append")
    assert len(data_files(tmp_uri)) == len(before) - 1  # our file is removed, the winner's kept
    assert mvcc.open_table(tmp_uri).version == 1


def test_create_mode_still_refuses_and_says_the_table_appeared_meanwhile(tmp_uri) -> None:
    schema = rows(DAYS[0], [], "").schema
    mine = mvcc.write_fragments(rows(DAYS[0], [1], "late"), tmp_uri, schema=schema)
    mvcc.write_table(rows(DAYS[1], [3], "winner"), tmp_uri)
    with pytest.raises(mvcc.TableExistsError) as info:
        mvcc.create_table_from_fragments(mine, tmp_uri, schema=schema)
    assert info.value.created_concurrently and info.value.version == 1
    with pytest.raises(mvcc.TableExistsError) as info:
        mvcc.write_table(rows(DAYS[1], [3], "again"), tmp_uri)
    assert not info.value.created_concurrently  # it was there when the write looked: refused for good


def test_where_needs_overwrite_mode_and_checks_every_row_of_a_new_table(tmp_uri) -> None:
    with pytest.raises(ValueError, match="mode='overwrite'"):
        mvcc.write_table(rows(DAYS[0], [1], "x"), tmp_uri, mode="append", where=where_day(DAYS[0]))
    with pytest.raises(mvcc.errors.PredicateError):
        mvcc.write_table(rows(DAYS[1], [1], "x"), tmp_uri, mode="overwrite", where=where_day(DAYS[0]))
    assert not os.path.exists(tmp_uri) or not [f for _, _, fs in os.walk(tmp_uri) for f in fs]
    t = mvcc.write_table(rows(DAYS[0], [1], "x"), tmp_uri, mode="overwrite", where=where_day(DAYS[0]))
    assert t.version == 1 and content(t) == [(DAYS[0], 1, "x")]


@pytest.mark.slow
def test_racing_first_appends_through_an_external_manifest_store(tmp_path) -> None:
    """The loser reads the winner through the same commit handler (here a SQLite manifest store)."""
    uri, store = str(tmp_path / "t"), f"sqlite://{tmp_path / 'manifests.db'}"
    specs = [{"name": f"w{i}", "kind": "append", "day": DAYS[i], "ids": [i]} for i in range(3)]
    outcomes = race(uri, {"external_store": store}, specs)
    assert {o for _, o in outcomes.values()} == {"ok"}
    assert sum(lost for lost, _ in outcomes.values()) == 2
    t = mvcc.open_table(uri, external_store=store)
    assert sorted(i.operation for i in t.versions()) == ["Append", "Append", "Overwrite"]
    assert content(t) == replay(t, specs)
