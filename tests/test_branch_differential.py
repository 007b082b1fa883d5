"""Branch writes and publishes against a plain evaluation: random sequences of appends, deletes, updates,
merge_inserts, compactions and config changes on a branch and on main, published at random points.

The model is a dict id -> value per branch. Every publish lands (these writes can all run again). A publish of
the branch's changes as they are must leave main equal to main's rows with the branch's changes since its base
applied (rows it deleted gone, rows it changed at the branch's value, rows it added present; when main has not
moved, exactly the branch's rows), and is allowed only when the two sides changed no row of the base in common
and inserted no new key in common. A publish that re-ran the branch's writes (its commit says so) must leave
main equal to the branch's writes evaluated again, in order, on main's rows (a retrying writer's result).
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core.format.branches import list_refs
from mvcc_core.table.branch_replay import PUBLISHED_BY_REPLAY

Rows = dict[int | str, int]  # id -> v, and "config:<key>" -> its value (a config key is a row of the model too)
CONFIG_KEYS = ("a", "b")


def rows_of(t: mvcc.Table) -> Rows:
    table = t.to_table(columns=["id", "v"])
    rows: Rows = dict(zip(table["id"].to_pylist(), table["v"].to_pylist(), strict=True))
    rows |= {f"config:{k}": int(v) for k, v in t.manifest.config.items() if k in CONFIG_KEYS}
    return rows


def ids_of(rows: Rows) -> list[int]:
    return sorted(k for k in rows if isinstance(k, int))


Op = Callable[[Rows], set[int]]
#: keys merge_inserts draw their new rows from on both sides, so that main and a branch insert the same new key
SHARED_NEW_KEYS = range(500, 506)


def delete_op(mod: int, rem: int) -> Op:
    def apply(rows: Rows) -> set[int]:
        gone = {k for k in ids_of(rows) if k % mod == rem}
        for key in gone:
            del rows[key]
        return gone

    return apply


def update_op(mod: int, rem: int) -> Op:
    def apply(rows: Rows) -> set[int]:
        hit = {k for k in ids_of(rows) if k % mod == rem}
        for key in hit:
            rows[key] += 1000
        return hit

    return apply


def upsert_op(new: Rows) -> Op:
    def apply(rows: Rows) -> set[int]:
        hit = set(new) & set(rows)
        rows.update(new)
        return hit

    return apply


def write(rng: random.Random, t: mvcc.Table, model: Rows, next_id: list[int]) -> tuple[Op, set[int]]:
    """One random write on `t`, applied to `model` too; returns it as an operation on any rows (what running it
    again evaluates) and the keys it inserted through merge_insert."""
    kind = rng.choice(["append", "delete", "update", "merge", "compact", "config"])
    inserted: set[int] = set()
    if kind == "append" or not ids_of(model):
        new = list(range(next_id[0], next_id[0] + rng.randint(1, 3)))
        next_id[0] += len(new)
        values = [rng.randint(0, 99) for _ in new]
        t.append(pa.table({"id": new, "v": values}))
        op = upsert_op(dict(zip(new, values, strict=True)))  # new keys: an insert wherever it runs
    elif kind == "delete":
        mod, rem = rng.randint(2, 4), rng.randint(0, 3)
        t.delete(f"id % {mod} = {rem}")
        op = delete_op(mod, rem)
    elif kind == "config":
        key, value = rng.choice(CONFIG_KEYS), rng.randint(0, 99)
        t.update_config({key: str(value)})
        op = upsert_op({f"config:{key}": value})
    elif kind == "update":
        mod, rem = rng.choice([(1000, rng.choice(ids_of(model))), (rng.randint(3, 5), rng.randint(0, 2))])
        mode = rng.choice([None, "rewrite_rows", "rewrite_columns"])
        t.update({"v": "v + 1000"}, where=f"id % {mod} = {rem}", mode=mode)
        op = update_op(mod, rem)
    elif kind == "merge":
        keys = sorted(set(rng.sample(ids_of(model), min(2, len(ids_of(model)))) + [rng.choice(SHARED_NEW_KEYS)]))
        values = [rng.randint(0, 99) for _ in keys]
        t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
            pa.table({"id": keys, "v": values})
        )
        inserted = set(keys) - set(model)
        op = upsert_op(dict(zip(keys, values, strict=True)))
    else:
        t.optimize.compact_files(target_rows_per_fragment=64)
        op = upsert_op({})
    op(model)
    return op, inserted


def replayed(t: mvcc.Table) -> bool:
    """Whether `t`'s latest version is a publish that ran the branch's writes again."""
    txn = t._state.committer.load_transaction(t.manifest)
    assert txn is not None
    return txn.transaction_properties.get(PUBLISHED_BY_REPLAY) == "true"


def merged(main: Rows, base: Rows, branch: Rows) -> Rows:
    """main with the branch's changes since `base`."""
    out = {k: v for k, v in main.items() if not (k in base and k not in branch)}
    out.update({k: v for k, v in branch.items() if base.get(k) != v})
    return out


#: seeds 6 and 10 publish by running the branch's writes again; seed 0 publishes a branch's config change as it is
FAST_SEEDS = (0, 6, 10)


@pytest.mark.parametrize("seed", FAST_SEEDS)
def test_branch_writes_and_publishes_match_a_plain_evaluation(tmp_uri: str, seed: int) -> None:
    run_sequence(tmp_uri, seed, steps=8)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [s for s in range(63) if s not in FAST_SEEDS])
def test_many_more_sequences(tmp_uri: str, seed: int) -> None:
    run_sequence(tmp_uri, seed, steps=20)


def run_sequence(tmp_uri: str, seed: int, steps: int = 14) -> int:
    """`steps` random writes and publishes, then a last publish; checked against the model after each. Returns
    how many publishes re-ran the branch's writes."""
    rng = random.Random(seed)
    main = mvcc.write_table(pa.table({"id": list(range(10)), "v": list(range(10))}), tmp_uri)
    main_model: Rows = rows_of(main)
    next_id = [100]
    branch = None
    published = replays = 0
    for step in range(steps + 1):
        if branch is None:
            branch = main.create_branch(f"b{step}")
            base, branch_model = dict(main_model), dict(main_model)
            branch_ops: list[Op] = []
            touched = {"main": set(), "branch": set()}  # keys of the base each side deleted or changed
            inserted = {"main": set(), "branch": set()}  # new keys each side's merge_inserts inserted
            main_moved = False
        action = rng.random() if step < steps else 1.0
        if action < 0.5:
            before_write, before_version = dict(branch_model), branch.version
            op, new_keys = write(rng, branch, branch_model, next_id)
            if branch.version != before_version:  # a write that matched nothing commits nothing: nothing to re-run
                branch_ops.append(op)
            touched["branch"] |= op(before_write) & set(base)
            inserted["branch"] |= new_keys
            assert rows_of(branch) == branch_model, (seed, step)
        elif action < 0.75:
            before_write = dict(main_model)
            op, new_keys = write(rng, main, main_model, next_id)
            touched["main"] |= op(before_write) & set(base)
            inserted["main"] |= new_keys
            main_moved = True
        else:
            before = main.version
            main.publish_branch(branch.branch, delete_branch=rng.random() < 0.5)
            latest = mvcc.open_table(tmp_uri)
            if latest.version > before and replayed(latest):
                replays += 1
                expected = dict(main_model)
                for op in branch_ops:  # the plain evaluation of running the branch's writes again on main
                    op(expected)
            else:
                conflict = touched["main"] & touched["branch"] or inserted["main"] & inserted["branch"]
                assert not conflict, f"seed {seed} step {step}: the same rows or new keys, published as they were"
                expected = branch_model if not main_moved else merged(main_model, base, branch_model)
            main_model = expected
            assert rows_of(latest) == main_model, (seed, step)
            assert latest.version <= before + 1  # one version, or none when nothing was new
            assert (
                list_refs(latest.state.store, scratch=True).keys() == latest.branches.list().keys()
            )  # no scratch left
            published += 1
            branch = None
        assert rows_of(mvcc.open_table(tmp_uri)) == main_model, (seed, step)
    assert published > 0
    return replays
