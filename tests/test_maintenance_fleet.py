"""`plan_fleet` / `run_fleet`: one maintenance plan over many tables on one byte budget. A randomized fleet of
20 small tables with different defects (small fragments, deletions, an index that misses rows, old versions, a
missing and a corrupt table): the budget holds, the ranking is benefit per byte, the broken tables are reported
and the others planned and run, and every table keeps its rows. Quiet hours in zones, across clock changes."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core.compaction import FleetPlan, QuietHours, plan_fleet, run_fleet


def batch(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([i % 7 for i in ids], pa.int64())})


def base(uri: str, rows: int = 60) -> mvcc.Table:
    t = mvcc.write_table(batch(list(range(rows))), uri)
    t.update_config({"mvcc.compaction.target_rows_per_fragment": "50"})
    return t


def small_fragments(uri: str, rng: random.Random) -> None:
    t = base(uri)
    for i in range(rng.randint(2, 6)):
        t.append(batch([1000 + 10 * i + k for k in range(rng.randint(1, 8))]))


def deletions(uri: str, rng: random.Random) -> None:
    t = base(uri, rows=rng.randint(80, 200))
    t.delete(f"id < {rng.randint(20, 60)}")


def unindexed(uri: str, rng: random.Random) -> None:
    t = base(uri)
    t.create_index("id", "BTREE")
    t.append(batch(list(range(5000, 5000 + rng.randint(50, 120)))))


def old_versions(uri: str, rng: random.Random) -> None:
    t = base(uri)
    t.update_config({"mvcc.retention.older_than": "0s", "mvcc.retention.retain_versions": "1"})
    for _ in range(rng.randint(1, 3)):
        t.update_config({"note": str(rng.random())})


def healthy(uri: str, rng: random.Random) -> None:
    base(uri, rows=rng.randint(50, 90))


def corrupt(uri: str) -> None:
    """Every manifest of the table overwritten with garbage: it cannot be opened."""
    for name in os.listdir(Path(uri) / "_versions"):
        if name.endswith(".manifest"):
            (Path(uri) / "_versions" / name).write_bytes(b"not a manifest")


DEFECTS: dict[str, Callable[[str, random.Random], None]] = {
    "small_fragments": small_fragments,
    "deletions": deletions,
    "unindexed": unindexed,
    "old_versions": old_versions,
    "healthy": healthy,
}


def fleet(root: Path, seed: int, size: int = 18) -> tuple[dict[str, str], dict[str, str]]:
    """`size` tables with random defects (every defect at least once), one corrupt and one missing: names to URIs
    and names to defects."""
    rng = random.Random(seed)
    kinds = list(DEFECTS) + [rng.choice(list(DEFECTS)) for _ in range(size - len(DEFECTS))]
    rng.shuffle(kinds)
    uris: dict[str, str] = {}
    defects: dict[str, str] = {}
    for i, kind in enumerate(kinds):
        name = f"t{i:02d}_{kind}"
        uris[name] = str(root / name)
        defects[name] = kind
        DEFECTS[kind](uris[name], rng)
    uris["broken"] = str(root / "broken")
    base(uris["broken"])
    corrupt(uris["broken"])
    defects["broken"] = "corrupt"
    uris["gone"] = str(root / "gone")
    defects["gone"] = "missing"
    return uris, defects


def rows_of(uri: str) -> list[int]:
    return sorted(mvcc.open_table(uri).to_table(columns=["id"]).column("id").to_pylist())


def greedy(ranked: list[Any], max_bytes: int) -> list[str]:
    """The names the greedy fill chooses, recomputed from the ranked entries."""
    chosen, spent = [], 0
    for e in ranked:
        if spent == 0 and e.bytes_to_rewrite > max_bytes:
            chosen.append(e.name)
            spent = max_bytes
        elif spent + e.bytes_to_rewrite <= max_bytes:
            chosen.append(e.name)
            spent += e.bytes_to_rewrite
    return chosen


@pytest.mark.parametrize(
    "seed", [7, pytest.param(1234, marks=pytest.mark.slow), pytest.param(99, marks=pytest.mark.slow)]
)
def test_a_randomized_fleet_is_planned_in_budget_and_run_without_losing_rows(tmp_path: Path, seed: int) -> None:
    uris, defects = fleet(tmp_path, seed)
    now = datetime.now(UTC)
    unbounded = plan_fleet(uris, now=now)
    advised = [e for e in unbounded.chosen]
    total = sum(e.bytes_to_rewrite for e in advised)
    assert total > 0
    budget = max(total // 2, 1)
    plan = plan_fleet(uris, max_bytes=budget, now=now)

    # every table is in the plan once; the broken ones say why, healthy ones have nothing to do
    names = [e.name for e in (*plan.chosen, *plan.left)]
    assert sorted(names) == sorted(uris)
    assert plan.entry("gone").reason == "missing"
    broken = plan.entry("broken")
    assert broken.reason == "unreadable" and "CorruptManifestError" in broken.detail
    for name, kind in defects.items():
        entry = plan.entry(name)
        if kind == "healthy":
            assert entry.reason == "nothing_advised" and entry.advice == ()
        elif kind in ("small_fragments", "deletions"):
            assert {"compact", "materialize_deletions"} & set(entry.kinds), (name, entry)
        elif kind == "unindexed":
            assert "optimize_indices" in entry.kinds
        elif kind == "old_versions":
            assert "retention" in entry.kinds

    # the ranking is benefit per byte of cost, and the budget is filled greedily in that order
    ranked = sorted((e for e in (*plan.chosen, *plan.left) if e.rank is not None), key=lambda e: e.rank)
    assert [e.priority for e in ranked] == sorted((e.priority for e in ranked), reverse=True)
    assert all(e.priority == pytest.approx(e.benefit / ((e.bytes_to_rewrite + 4 * 2**20) / 2**20)) for e in ranked)
    assert [e.name for e in plan.chosen] == greedy(ranked, budget)
    assert plan.chosen_bytes <= budget and plan.chosen
    assert all(e.reason == "over_budget" for e in plan.left if e.advice)
    assert plan.carried_bytes == sum(e.bytes_to_rewrite for e in plan.left if e.reason == "over_budget")

    before = {name: rows_of(uri) for name, uri in uris.items() if defects[name] not in ("corrupt", "missing")}
    run = run_fleet(plan)
    assert [r.name for r in run.results] == [e.name for e in plan.chosen] and run.failed == ()
    for r in run.results:
        entry = plan.entry(r.name)
        expected = [
            step
            for step, kinds in (
                ("compact", {"compact", "materialize_deletions"}),
                ("optimize_indices", {"optimize_indices"}),
                ("retention", {"retention"}),
            )
            if kinds & set(entry.kinds)
        ]
        assert list(r.steps) == expected
        if r.compaction is not None:
            assert entry.byte_share is not None and r.compaction.bytes_read <= entry.byte_share
    assert {name: rows_of(uris[name]) for name in before} == before

    # what the run did is no longer advised; what was left over budget is chosen next time
    again = plan_fleet(uris, max_bytes=budget)
    for r in run.results:
        assert again.entry(r.name).reason == "nothing_advised", again.entry(r.name)
    carried = {e.name for e in plan.left if e.reason == "over_budget"}
    if carried:
        assert {e.name for e in again.chosen} & carried


def test_ranking_is_benefit_per_byte_and_the_first_big_table_gets_a_partial_share(tmp_path: Path) -> None:
    uris = {}
    for name, appends, size in (("few_big", 2, 40), ("many_small", 8, 2), ("some", 4, 10)):
        t = base(str(tmp_path / name), rows=5)
        for i in range(appends):
            t.append(batch([100 + 100 * i + k for k in range(size)]))
        uris[name] = str(tmp_path / name)
    plan = plan_fleet(uris, run_cost_bytes=1)  # no fixed cost: the ranking is the advice's benefit per byte
    ranked = list(plan.chosen)
    ratio = [e.benefit / e.bytes_to_rewrite for e in ranked]
    assert ratio == sorted(ratio, reverse=True) and [e.rank for e in ranked] == [1, 2, 3]
    first = ranked[0]
    tiny = plan_fleet(uris, max_bytes=first.bytes_to_rewrite // 2, run_cost_bytes=1)
    assert [e.name for e in tiny.chosen] == [first.name]
    assert tiny.chosen[0].byte_share == first.bytes_to_rewrite // 2 and "partial" in tiny.chosen[0].detail
    assert all(e.reason == "over_budget" for e in tiny.left)
    limited = plan_fleet(uris, max_tables=2, run_cost_bytes=1)
    assert [e.name for e in limited.chosen] == [e.name for e in ranked[:2]]
    assert limited.left[0].reason == "over_table_limit" and "limit of 2 tables" in limited.left[0].detail


def test_the_plan_round_trips_through_json_and_runs_by_uri(tmp_path: Path) -> None:
    uris = {"a": str(tmp_path / "a"), "b": str(tmp_path / "b")}
    small_fragments(uris["a"], random.Random(1))
    deletions(uris["b"], random.Random(2))
    plan = plan_fleet({"a": mvcc.open_table(uris["a"]), "b": uris["b"]}, max_bytes="1MiB")
    assert plan.max_bytes == 2**20 and len(plan.chosen) == 2
    text = json.dumps(plan.to_dict())
    back = FleetPlan.from_dict(json.loads(text))
    assert back == plan and back.to_dict()["summary"] == plan.summary()
    before = {n: rows_of(u) for n, u in uris.items()}
    run = run_fleet(back)  # no tables: opened by the URIs in the plan
    assert run.failed == () and all(r.steps == ("compact",) for r in run.results)
    assert json.loads(json.dumps(run.to_dict()))["failed"] == []
    assert {n: rows_of(u) for n, u in uris.items()} == before


def test_a_table_that_breaks_between_plan_and_run_is_reported_and_the_others_run(tmp_path: Path) -> None:
    uris = {n: str(tmp_path / n) for n in ("a", "b", "c")}
    for i, uri in enumerate(uris.values()):
        small_fragments(uri, random.Random(i))
    plan = plan_fleet(uris)
    assert len(plan.chosen) == 3
    corrupt(uris["b"])
    run = run_fleet(plan)
    assert [r.name for r in run.failed] == ["b"]
    failed = run.result("b")
    assert failed.errors[0].step == "open" and failed.errors[0].error_type == "CorruptManifestError"
    assert run.result("a").ok and run.result("c").ok and run.result("a").compaction is not None


def test_concurrent_planning_gives_the_serial_plan(tmp_path: Path) -> None:
    uris, _ = fleet(tmp_path, seed=3, size=8)
    now = datetime.now(UTC)
    serial = plan_fleet(uris, max_bytes=4000, now=now, max_workers=1)
    concurrent = plan_fleet(uris, max_bytes=4000, now=now, max_workers=4)
    assert serial == concurrent


def test_planning_uses_threads_only_for_tables_on_an_object_store() -> None:
    from mvcc_core.maintenance.fleet import DEFAULT_PLAN_WORKERS, _default_workers

    assert _default_workers({"a": "/data/a", "b": "memory://b", "c": "file:///data/c"}) == 1
    assert _default_workers({"a": "/data/a", "b": "s3://bucket/b"}) == DEFAULT_PLAN_WORKERS == 8


@pytest.mark.s3
@pytest.mark.slow  # about 5 s of writes to the moto server
def test_a_fleet_on_s3_is_planned_concurrently(s3_uri: str, s3_options: dict[str, Any]) -> None:
    uris = {}
    for i in range(4):
        uri = f"{s3_uri}-{i}"
        t = mvcc.write_table(batch(list(range(10))), uri, storage_options=s3_options)
        t.update_config({"mvcc.compaction.target_rows_per_fragment": "50"})
        for j in range(i):
            t.append(batch([100 + j]))
        uris[f"t{i}"] = uri
    uris["gone"] = f"{s3_uri}-gone"
    now = datetime.now(UTC)
    serial = plan_fleet(uris, storage_options=s3_options, now=now, max_workers=1)
    concurrent = plan_fleet(uris, storage_options=s3_options, now=now, max_workers=4)
    assert serial == concurrent == plan_fleet(uris, storage_options=s3_options, now=now)
    assert [e.name for e in concurrent.chosen] == ["t3", "t2", "t1"]  # most fragments merged first
    assert concurrent.entry("t0").reason == "nothing_advised" and concurrent.entry("gone").reason == "missing"


# ---- quiet hours -------------------------------------------------------------------------------------


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_quiet_hours_across_midnight_in_a_zone() -> None:
    night = QuietHours("22:00", "06:00", "Europe/Amsterdam")
    assert str(night) == "22:00-06:00 Europe/Amsterdam"
    window = night.window_at(utc("2026-07-01T21:30:00"))  # 23:30 in Amsterdam (CEST, +02:00)
    assert window is not None
    assert window[0].isoformat() == "2026-07-01T22:00:00+02:00" and window[1].isoformat() == "2026-07-02T06:00:00+02:00"
    assert night.contains(utc("2026-07-02T03:59:00"))  # 05:59 local
    assert not night.contains(utc("2026-07-02T04:00:00"))  # 06:00 local: closed
    assert night.next_opening(utc("2026-07-01T12:00:00")).isoformat() == "2026-07-01T22:00:00+02:00"
    assert night.next_opening(utc("2026-01-15T21:30:00")).isoformat() == "2026-01-16T22:00:00+01:00"  # CET, +01:00
    # the same instant is inside the window in one zone and outside it in another
    assert QuietHours("22:00", "06:00", "America/New_York").contains(utc("2026-07-01T08:00:00"))  # 04:00 EDT
    assert not night.contains(utc("2026-07-01T08:00:00"))  # 10:00 CEST
    day = QuietHours("01:00", "05:00")  # UTC, not across midnight
    assert day.contains(utc("2026-07-01T01:00:00")) and not day.contains(utc("2026-07-01T05:00:00"))


def test_quiet_hours_on_the_nights_the_clocks_change() -> None:
    night = QuietHours("22:00", "06:00", "Europe/Amsterdam")
    autumn = night.window_at(utc("2026-10-25T01:00:00"))
    spring = night.window_at(utc("2026-03-29T01:00:00"))
    assert autumn is not None and spring is not None
    assert autumn[1] - autumn[0] == timedelta(hours=9) and spring[1] - spring[0] == timedelta(hours=7)
    skipped = QuietHours("02:30", "04:00", "Europe/Amsterdam")  # 02:30 does not exist on 2026-03-29
    assert skipped.next_opening(utc("2026-03-28T23:00:00")).isoformat() == "2026-03-29T03:30:00+02:00"


def test_a_plan_outside_the_quiet_hours_chooses_nothing_and_says_when(tmp_path: Path) -> None:
    uris = {"a": str(tmp_path / "a")}
    small_fragments(uris["a"], random.Random(5))
    night = QuietHours("22:00", "06:00", "Europe/Amsterdam")
    plan = plan_fleet(uris, window=night, now=utc("2026-07-01T10:00:00"))
    assert plan.chosen == () and plan.left[0].reason == "outside_window"
    assert "they open at 2026-07-01T22:00:00+02:00, in 10 hours" in plan.left[0].detail
    assert plan.next_window is not None and plan.window_closes is None
    inside = plan_fleet(uris, window=night, now=utc("2026-07-01T21:00:00"))
    assert [e.name for e in inside.chosen] == ["a"]
    assert inside.window_closes is not None and inside.window_closes.isoformat() == "2026-07-02T06:00:00+02:00"


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: QuietHours("22:00", "22:00"), "are empty"),
        (lambda: QuietHours("25:00", "06:00"), "is not a time of day"),
        (lambda: QuietHours("10pm", "06:00"), "use HH:MM"),
        (lambda: QuietHours("22:00", "06:00", "Mars/Olympus"), "is not a time zone"),
        (lambda: QuietHours("22:00", "06:00").contains(datetime(2026, 7, 1)), "has no time zone"),
        (lambda: plan_fleet({}, max_bytes=0), "max_bytes must be a positive int"),
        (lambda: plan_fleet({}, max_bytes="lots"), "max_bytes='lots' is not valid"),
        (lambda: plan_fleet({}, max_tables=True), "max_tables must be a positive int"),
        (lambda: plan_fleet({}, now=datetime(2026, 7, 1)), "has no time zone"),
    ],
)
def test_bad_input_is_refused_in_words(make: Callable[[], object], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        make()


def test_tables_that_are_not_tables_are_refused() -> None:
    with pytest.raises(TypeError, match="a mapping of names"):
        plan_fleet(["/tmp/t"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="table 'x' is a int: give a Table, a TableState or a URI"):
        plan_fleet({"x": 3})


def test_the_fleet_names_are_public() -> None:
    names = {"FleetEntry", "FleetError", "FleetPlan", "FleetRun", "FleetTableResult", "QuietHours"}
    assert names | {"plan_fleet", "run_fleet"} <= set(mvcc.compaction.__all__)


def test_a_partial_share_bounds_the_run_on_a_table_handle_which_moves(tmp_path: Path) -> None:
    t = mvcc.write_table(batch(list(range(400))), str(tmp_path / "t"), max_rows_per_file=100)
    t.update_config({"mvcc.compaction.target_rows_per_fragment": "40"})
    t.delete("id % 100 < 50")  # half of each of the 4 fragments: 4 groups of one, above the target
    plan = plan_fleet({"t": t})
    whole = plan.chosen[0].bytes_to_rewrite
    partial = plan_fleet({"t": t}, max_bytes=whole // 2)
    assert partial.chosen[0].byte_share == whole // 2
    before, version = rows_of(str(tmp_path / "t")), t.version
    run = run_fleet(partial)
    metrics = run.result("t").compaction
    assert metrics is not None and 0 < metrics.bytes_read <= whole // 2 and metrics.deferred_groups > 0
    assert t.version == metrics.version and t.version > version  # the handle given moved to the Rewrite
    assert rows_of(str(tmp_path / "t")) == before
    again = plan_fleet({"t": t})
    assert again.chosen[0].bytes_to_rewrite == metrics.deferred_bytes  # the rest, for the next plan
