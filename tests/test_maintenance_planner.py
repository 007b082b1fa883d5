"""The compaction planner: a `where` scope (only fragments whose statistics may match are rewritten, every other
keeps its id and files), a byte budget taken by benefit per byte, and the table's policy keys. Judged from the
data files' own bytes and rows (tests/maintenance_files.py), on local disk, in memory and on S3."""

from __future__ import annotations

import random
from datetime import timedelta

import pyarrow as pa
import pytest
from maintenance_files import file_rows, fragment_files, fragment_rows

import mvcc_core as mvcc
from mvcc_core.errors import PredicateError

DAYS = ["2026-10-30", "2026-10-31", "2026-11-01", "2026-11-02"]


def batch(ids: list[int], day: str, noisy: bool = False) -> pa.Table:
    """Rows (id, day, v); `noisy`: v random, so the file does not compress to nothing."""
    rng = random.Random(ids[0] if ids else 0)
    values = [rng.getrandbits(62) for _ in ids] if noisy else [i * 3 for i in ids]
    return pa.table({"id": pa.array(ids, pa.int64()), "day": [day] * len(ids), "v": pa.array(values, pa.int64())})


def daily_table(uri: str, opts, rng: random.Random) -> mvcc.Table:
    """Appends day by day (a few small ones a day, in day order), a big fragment now and then, some deletes."""
    t = None
    next_id = 0
    for day in DAYS:
        for _ in range(rng.randint(2, 6)):
            n = rng.choice([1, 3, 5, 40]) if rng.random() < 0.9 else 300
            ids = list(range(next_id, next_id + n))
            next_id += n
            t = (
                mvcc.write_table(batch(ids, day), uri, storage_options=opts)
                if t is None
                else (t.append(batch(ids, day)) or t)
            )
    assert t is not None
    t.delete(f"id % {rng.randint(5, 11)} = 0")
    return t


def rows(t: mvcc.Table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in t.to_table().to_pylist())


@pytest.mark.parametrize("seed", [0, 1, *(pytest.param(s, marks=pytest.mark.slow) for s in range(2, 6))])
def test_scoped_compaction_rewrites_only_fragments_that_may_match(any_uri, seed: int) -> None:
    uri, opts = any_uri
    rng = random.Random(seed)
    t = daily_table(uri, opts, rng)
    day = rng.choice(DAYS)
    before_rows, before_files, before_contents = rows(t), fragment_files(t), fragment_rows(t)
    metrics = t.optimize.compact_files(where=f"day = '{day}'", target_rows_per_fragment=100)
    after_files = fragment_files(t)
    assert rows(t) == before_rows == file_rows(t)
    removed = set(before_files) - set(after_files)
    for frag_id in removed:  # a rewritten fragment's own rows make the filter possible (min <= day <= max)
        days = [r[1] for r in before_contents[frag_id]] or ["(no live rows)"]
        assert min(days) <= day <= max(days) or not before_contents[frag_id], (frag_id, days)
    for frag_id in set(before_files) & set(after_files):  # every other fragment: same id, same bytes
        assert after_files[frag_id] == before_files[frag_id]
    assert metrics.fragments_removed == len(removed)
    # every rewritten group was day-only: its new fragments hold that day's rows and no other
    new = set(after_files) - set(before_files)
    assert all(r[1] == day for frag_id in new for r in fragment_rows(t)[frag_id]) or any(
        min(r[1] for r in before_contents[f]) != max(r[1] for r in before_contents[f]) for f in removed
    )


def test_scope_on_plan_and_its_errors(tmp_uri) -> None:
    t = mvcc.write_table(batch([0], DAYS[0]), tmp_uri)
    for i, day in enumerate(sorted(DAYS * 2)):
        t.append(batch([i + 1], day))
    version = t.version
    scoped = mvcc.compaction.plan(t, where=f"day = '{DAYS[1]}'")
    assert scoped.fragments == 2 and scoped.reserved_version == version + 1
    with pytest.raises(PredicateError):
        mvcc.compaction.plan(t.checkout_latest(), where="no_such_column = 1")
    with pytest.raises(ValueError, match="where must be a SQL filter"):
        mvcc.compaction.plan(t.checkout_latest(), where="  ")
    assert mvcc.open_table(tmp_uri).version == version + 1  # the bad ones committed nothing


def test_budget_takes_most_benefit_per_byte_and_leaves_the_rest_for_the_next_run(any_uri) -> None:
    uri, opts = any_uri
    # two big fragments (one file fewer for many bytes), a wall, then ten tiny ones (nine files fewer, few bytes)
    t = mvcc.write_table(batch(list(range(0, 3000)), DAYS[0], True), uri, storage_options=opts)
    t.append(batch(list(range(3000, 6000)), DAYS[0], True))
    t.append(batch(list(range(6000, 20000)), DAYS[1]))
    for i in range(10):
        t.append(batch([20000 + i], DAYS[2]))
    before, before_files = rows(t), fragment_files(t)
    big = sum(f.file_size_bytes for f in t.get_fragments()[0].data_files() + t.get_fragments()[1].data_files())
    tiny = sum(df.file_size_bytes for f in t.get_fragments()[3:] for df in f.data_files())
    assert tiny < big
    first = t.optimize.compact_files(target_rows_per_fragment=10_000, max_bytes=tiny + 1)
    assert first.fragments_removed == 10 and first.bytes_read == tiny  # the tiny ones first
    assert (first.deferred_groups, first.deferred_fragments, first.deferred_bytes) == (1, 2, big)
    assert set(fragment_files(t)) >= {0, 1, 2} and all(fragment_files(t)[i] == before_files[i] for i in (0, 1, 2))
    second = t.optimize.compact_files(target_rows_per_fragment=10_000, max_bytes=tiny + 1)  # at least one group
    assert second.fragments_removed == 2 and second.deferred_groups == 0 and second.bytes_read == big
    assert t.optimize.compact_files(target_rows_per_fragment=10_000).version is None
    assert rows(t) == before == file_rows(t)


@pytest.mark.parametrize("seed", range(4))
def test_budgeted_runs_converge_to_the_same_rows(tmp_uri, seed: int) -> None:
    rng = random.Random(seed)
    t = daily_table(tmp_uri, None, rng)
    before = rows(t)
    budget = rng.choice([500, 2000, 8000])
    for _ in range(60):
        metrics = t.optimize.compact_files(target_rows_per_fragment=200, max_bytes=budget)
        if metrics.version is None:
            break
        assert rows(t) == before
    else:
        pytest.fail("budgeted compaction never finished")
    assert metrics.deferred_groups == 0 and rows(t) == before == file_rows(t)
    assert mvcc.compaction.plan_unreserved(t, target_rows_per_fragment=200).tasks == []


def test_each_budgeted_run_reads_at_most_the_budget_unless_one_group_is_bigger(tmp_uri) -> None:
    t = mvcc.write_table(batch([0], DAYS[0]), tmp_uri)
    for i in range(1, 60):
        t.append(batch(list(range(i * 10, i * 10 + (i % 7) + 1)), DAYS[i % 4]))
    budget = 4000
    while True:
        found = mvcc.compaction.plan_unreserved(t, target_rows_per_fragment=8, max_bytes=budget)
        metrics = t.optimize.compact_files(target_rows_per_fragment=8, max_bytes=budget)
        if metrics.version is None:
            break
        assert metrics.bytes_read <= budget or len(found.tasks) == 1
        assert metrics.fragments_removed == found.fragments


# ---- policy in the table's configuration --------------------------------------------------------


def test_policy_keys_drive_compaction_and_an_explicit_argument_wins(any_uri) -> None:
    uri, opts = any_uri
    t = mvcc.write_table(batch([0], DAYS[0]), uri, storage_options=opts)
    for i in range(1, 12):
        t.append(batch([i], DAYS[0]))
    t.update_config({"mvcc.compaction.target_rows_per_fragment": "4"})
    assert mvcc.open_table(uri, storage_options=opts).config["mvcc.compaction.target_rows_per_fragment"] == "4"
    plan = mvcc.compaction.plan_unreserved(t)
    assert plan.options.target_rows_per_fragment == 4 and len(plan.tasks) == 3
    explicit = mvcc.compaction.plan_unreserved(t, target_rows_per_fragment=6)
    assert len(explicit.tasks) == 2
    before = rows(t)
    metrics = t.optimize.compact_files()
    assert metrics.fragments_added == 3 and all(f.physical_rows <= 4 for f in t.get_fragments())
    assert rows(t) == before == file_rows(t)


def test_policy_budget_and_byte_target(tmp_uri) -> None:
    t = mvcc.write_table(batch(list(range(100)), DAYS[0]), tmp_uri)
    for i in range(1, 20):
        t.append(batch(list(range(i * 100, i * 100 + 100)), DAYS[0]))
    size = sum(df.file_size_bytes for f in t.get_fragments() for df in f.data_files())
    per_row = size / 2000
    t.update_config({"mvcc.compaction.target_bytes_per_fragment": str(int(per_row * 500))})
    plan = mvcc.compaction.plan_unreserved(t)
    assert all(task.target_rows_per_fragment in (499, 500, 501) for task in plan.tasks)
    t.update_config({"mvcc.compaction.max_bytes": "1KiB"})
    one = t.optimize.compact_files()
    assert one.deferred_groups > 0 and len({f.id for f in t.state.manifest.fragments}) == 20 - one.fragments_removed + 1
    assert t.optimize.compact_files(max_bytes=10**9).deferred_groups == 0  # explicit wins over the policy


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("mvcc.compaction.target_rows_per_fragment", "0", "must be positive"),
        ("mvcc.compaction.target_rows_per_fragment", "many", "use a positive whole number, e.g. 10"),
        ("mvcc.retention.retain_versions", "1.5", "use a positive whole number"),
        ("mvcc.compaction.materialize_deletions_threshold", "lots", "use a fraction in \\[0, 1\\], e.g. 0.1"),
        ("mvcc.compaction.target_bytes_per_fragment", "12 parsecs", "number of bytes"),
        ("mvcc.compaction.materialize_deletions_threshold", "1.5", "fraction in \\[0, 1\\]"),
        ("mvcc.compaction.max_bytes", "-3", "number of bytes"),
        ("mvcc.retention.older_than", "a fortnight", "not a duration"),
        ("mvcc.retention.retain_versions", "0", "must be positive"),
        ("mvcc.compaction.sort_by", "id,nope", "column 'nope', which the table does not have"),
        ("mvcc.compaction.sort_by", "id,,day", "separated by commas"),
        ("mvcc.compaction.zorder_by", "id", "2 to 4 columns, got 1"),
        ("mvcc.compaction.zorder_by", "id,day,v,id", "more than once"),
        ("mvcc.compaction.zorder_by", "id,day,v,a,b", "2 to 4 columns, got 5"),
        ("mvcc.compaction.target_row", "5", "not a maintenance key"),
    ],
)
def test_update_config_refuses_a_bad_policy_value_naming_the_key(tmp_uri, key: str, value: str, words: str) -> None:
    t = mvcc.write_table(batch([0], DAYS[0]), tmp_uri)
    with pytest.raises(ValueError, match=words) as info:
        t.update_config({key: value})
    assert key in str(info.value)
    assert mvcc.open_table(tmp_uri).version == 1 and key not in mvcc.open_table(tmp_uri).config


def test_a_bad_value_written_around_the_check_is_reported_at_compaction(tmp_uri) -> None:
    t = mvcc.write_table(batch([0], DAYS[0]), tmp_uri)
    t.commit(mvcc.operations.UpdateConfig.of({"mvcc.compaction.max_bytes": "lots"}, []))
    with pytest.raises(ValueError, match="'mvcc.compaction.max_bytes' = 'lots'"):
        t.optimize.compact_files()
    assert t.optimize.compact_files(max_bytes=100).version is None  # explicit: the policy is not read


def test_removing_a_policy_key_is_always_allowed(tmp_uri) -> None:
    t = mvcc.write_table(batch([0], DAYS[0]), tmp_uri)
    t.update_config({"mvcc.retention.retain_versions": "3"})
    t.update_config({"mvcc.retention.retain_versions": None})
    assert "mvcc.retention.retain_versions" not in t.config


def test_retention_follows_the_policy_and_an_explicit_argument_wins(any_uri) -> None:
    uri, opts = any_uri
    t = mvcc.write_table(batch([0], DAYS[0]), uri, storage_options=opts)
    for i in range(1, 6):
        t.append(batch([i], DAYS[0]))
    t.update_config({"mvcc.retention.older_than": "0s", "mvcc.retention.retain_versions": "3"})
    assert t.cleanup_old_versions(dry_run=True).old_versions == 4  # 7 versions, the newest 3 kept
    assert t.cleanup_old_versions(retain_versions=5, dry_run=True).old_versions == 2
    assert t.cleanup_old_versions(older_than=timedelta(days=1), dry_run=True).old_versions == 0
    stats = t.cleanup_old_versions()
    assert stats.old_versions == 4 and [v.version for v in mvcc.open_table(uri, storage_options=opts).versions()] == [
        5,
        6,
        7,
    ]
    assert rows(t) == [(i, DAYS[0], i * 3) for i in range(6)]
