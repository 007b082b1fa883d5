"""Branch writes and publishes against a plain evaluation: random sequences of appends, deletes, updates,
merge_inserts and compactions on a branch and on main, published at random points.

The model is a dict id -> value per branch. A publish that succeeds must leave main equal to main's rows with
the branch's changes since its base applied (rows it deleted gone, rows it changed at the branch's value,
rows it added present); when main has not moved, that is exactly the branch's rows. A publish that raises a
conflict must leave main as it was, and is only allowed when main committed since the base.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core.errors import CommitConflictError

Rows = dict[int, int]


def rows_of(t: mvcc.Table) -> Rows:
    table = t.to_table(columns=["id", "v"])
    return dict(zip(table["id"].to_pylist(), table["v"].to_pylist(), strict=True))


def write(rng: random.Random, t: mvcc.Table, model: Rows, next_id: list[int]) -> None:
    """One random write on `t`, applied to `model` too."""
    kind = rng.choice(["append", "delete", "update", "merge", "compact"])
    if kind == "append" or not model:
        new = list(range(next_id[0], next_id[0] + rng.randint(1, 3)))
        next_id[0] += len(new)
        values = [rng.randint(0, 99) for _ in new]
        t.append(pa.table({"id": new, "v": values}))
        model.update(zip(new, values, strict=True))
    elif kind == "delete":
        mod, rem = rng.randint(2, 4), rng.randint(0, 3)
        t.delete(f"id % {mod} = {rem}")
        for key in [k for k in model if k % mod == rem]:
            del model[key]
    elif kind == "update":
        key = rng.choice(sorted(model))
        t.update({"v": "v + 1000"}, where=f"id = {key}", mode=rng.choice([None, "rewrite_rows", "rewrite_columns"]))
        model[key] += 1000
    elif kind == "merge":
        keys = rng.sample(sorted(model), min(2, len(model))) + [next_id[0]]
        next_id[0] += 1
        values = [rng.randint(0, 99) for _ in keys]
        t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
            pa.table({"id": keys, "v": values})
        )
        model.update(zip(keys, values, strict=True))
    else:
        t.optimize.compact_files(target_rows_per_fragment=64)


def merged(main: Rows, base: Rows, branch: Rows) -> Rows:
    """main with the branch's changes since `base`."""
    out = {k: v for k, v in main.items() if not (k in base and k not in branch)}
    out.update({k: v for k, v in branch.items() if base.get(k) != v})
    return out


@pytest.mark.parametrize("seed", range(3))
def test_branch_writes_and_publishes_match_a_plain_evaluation(tmp_uri: str, seed: int) -> None:
    run_sequence(tmp_uri, seed, steps=8)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3, 63))
def test_many_more_sequences(tmp_uri: str, seed: int) -> None:
    run_sequence(tmp_uri, seed, steps=20)


def run_sequence(tmp_uri: str, seed: int, steps: int = 14) -> None:
    """`steps` random writes and publishes, then a last publish; checked against the model after each."""
    rng = random.Random(seed)
    main = mvcc.write_table(pa.table({"id": list(range(10)), "v": list(range(10))}), tmp_uri)
    main_model: Rows = rows_of(main)
    next_id = [100]
    branch, base, branch_model = None, {}, {}
    published = conflicts = 0
    for step in range(steps + 1):
        if branch is None:
            branch = main.create_branch(f"b{step}")
            base, branch_model = dict(main_model), dict(main_model)
            main_moved = False
        action = rng.random() if step < steps else 1.0
        if action < 0.5:
            write(rng, branch, branch_model, next_id)
            assert rows_of(branch) == branch_model, (seed, step)
        elif action < 0.75:
            write(rng, main, main_model, next_id)
            main_moved = True
        else:
            before = main.version
            try:
                main.publish_branch(branch.branch, delete_branch=rng.random() < 0.5)
            except CommitConflictError:
                conflicts += 1
                assert main_moved, "a conflict without a concurrent commit"
                assert mvcc.open_table(tmp_uri).version == before and rows_of(mvcc.open_table(tmp_uri)) == main_model
                main.branches.delete(branch.branch)
            else:
                expected = branch_model if not main_moved else merged(main_model, base, branch_model)
                main_model = expected
                assert rows_of(mvcc.open_table(tmp_uri)) == main_model, (seed, step)
                assert main.version <= before + 1  # one version, or none when nothing was new
                published += 1
            branch = None
        assert rows_of(mvcc.open_table(tmp_uri)) == main_model, (seed, step)
    assert published + conflicts > 0
