"""One case per pair of operations, through the real commit path: two handles open the same version, one
commits "theirs", the other then commits "ours".

EXPECTED is transcribed from the "Compatibility" sections of the specification, read as "the
operations that conflict with <ours>"; it is not derived from mvcc_core.txn.conflicts. Each case is built so
that the specification's condition holds where it has one (overlapping fragments, same config key, same
field, same base name, same MemWAL region), and row-level changes touch different rows (so a rebase is
expected to land). DEVIATIONS lists where mvcc deliberately differs, with the reason.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_core.format import operations as ops
from mvcc_core.maintenance.compaction import CompactionTask
from mvcc_core.table import DatasetBasePath

OK, RETRY, FAIL = "ok", "retry", "fail"
NAMES = ["A", "D", "OW", "CI", "RW", "M", "P", "RS", "RF", "U", "UC", "DR", "MW", "UB"]
FULL = {
    "A": "Append", "D": "Delete", "OW": "Overwrite", "CI": "CreateIndex", "RW": "Rewrite", "M": "Merge",
    "P": "Project", "RS": "Restore", "RF": "ReserveFragments", "U": "Update", "UC": "UpdateConfig",
    "DR": "DataReplacement", "MW": "UpdateMemWalState", "UB": "UpdateBases",
}  # fmt: skip

# ours -> {theirs: outcome}; pairs not listed are compatible. "rebase" cases land, so they are OK here.
SPEC: dict[str, dict[str, str]] = {
    # "These are the operations that conflict with append: Overwrite, Restore, UpdateMemWalState"
    "A": {"OW": FAIL, "RS": FAIL, "MW": FAIL},
    # conflict: OW, RS, MW; retryable: Merge/Rewrite/DataReplacement on overlapping fragments; Delete and
    # Update rebase (different rows here)
    "D": {"OW": FAIL, "RS": FAIL, "MW": FAIL, "M": RETRY, "RW": RETRY, "DR": RETRY, "D": OK, "U": OK},
    # retryable: UpdateConfig (same key; our Overwrite sets no config, so compatible), Overwrite, UpdateMemWalState
    "OW": {"OW": RETRY, "MW": RETRY},
    # conflict: OW, RS, MW; retryable: Rewrite (overlap, no stable row ids, no fragment reuse index),
    # DataReplacement (overlap, replaced column indexed); CreateIndex rebases only for singleton indices
    "CI": {"OW": FAIL, "RS": FAIL, "MW": FAIL, "RW": RETRY, "DR": RETRY},
    # conflict: OW, RS; retryable: Merge, DataReplacement/Delete/Update/Rewrite (overlap), CreateIndex (overlap)
    "RW": {"OW": FAIL, "RS": FAIL, "M": RETRY, "DR": RETRY, "D": RETRY, "U": RETRY, "RW": RETRY, "CI": RETRY},
    # conflict: OW, RS, MW, Project; retryable: Update, Append, Delete, Merge, Rewrite, DataReplacement
    "M": {
        "OW": FAIL,
        "RS": FAIL,
        "MW": FAIL,
        "P": FAIL,
        "U": RETRY,
        "A": RETRY,
        "D": RETRY,
        "M": RETRY,
        "RW": RETRY,
        "DR": RETRY,
    },  # fmt: skip
    # conflict: OW, RS, MW; retryable: Project, Merge
    "P": {"OW": FAIL, "RS": FAIL, "MW": FAIL, "P": RETRY, "M": RETRY},
    # "Here are the operations that conflict with Restore: UpdateMemWalState"
    "RS": {"MW": FAIL},
    # "Here are the operations that conflict with ReserveFragments: Overwrite, Restore"
    "RF": {"OW": FAIL, "RS": FAIL},
    # conflict: OW, RS; retryable: Rewrite, DataReplacement (overlap), Merge; Delete/Update rebase
    "U": {"OW": FAIL, "RS": FAIL, "RW": RETRY, "DR": RETRY, "M": RETRY, "D": OK, "U": OK},
    # conflict: Overwrite, UpdateConfig (same config)
    "UC": {"OW": FAIL, "UC": FAIL},
    # conflict: OW, RS, MW; retryable: DataReplacement (same field, overlapping fragments)
    "DR": {"OW": FAIL, "RS": FAIL, "MW": FAIL, "DR": RETRY},
    # UpdateMemWalState has no compatibility section: see DEVIATIONS
    "MW": {},
    # "only conflicts with other UpdateBases operations ... with the same id, name, or path"
    "UB": {"UB": FAIL},
}

# (ours, theirs) -> (what mvcc does, why). Every entry is also documented in docs/reference/conflicts.md.
DEVIATIONS: dict[tuple[str, str], tuple[str, str]] = {
    ("UC", "UC"): (RETRY, "a concurrent change of the same key can simply be re-applied on the new version"),
    ("DR", "CI"): (RETRY, "symmetric with CreateIndex's rule: an index on the replaced column would go stale"),
    ("DR", "RW"): (RETRY, "symmetric with Rewrite's rule: the replaced fragment was rewritten"),
    ("DR", "U"): (RETRY, "symmetric with Update's rule: the replaced fragment was changed"),
    ("DR", "M"): (RETRY, "symmetric with Merge's rule: Merge replaced every fragment"),
    ("MW", "OW"): (FAIL, "spec silent: the MemWAL state was replaced with the table"),
    ("MW", "RS"): (FAIL, "spec silent: the MemWAL state went back in history"),
    ("MW", "MW"): (RETRY, "spec silent: a region's merged generation must move forward from the latest"),
    ("RW", "D"): (OK, "the concurrent deletions are carried onto the rewritten fragments (rewrite_rebase.py)"),
    ("RW", "U"): (OK, "a REWRITE_ROWS update's deletions are carried onto the rewritten fragments"),
}

REGION = uuid.UUID(int=7)


def _expected(ours: str, theirs: str) -> str:
    if (ours, theirs) in DEVIATIONS:
        return DEVIATIONS[(ours, theirs)][0]
    return SPEC[ours].get(theirs, OK)


def _base(tmp: Path) -> None:
    t = mvcc.write_table(
        pa.table({"id": pa.array(range(30), pa.int64()), "k": pa.array(range(30), pa.int64()), "v": ["a"] * 30}),
        str(tmp / "template"),
        max_rows_per_file=10,
    )  # fragments 0, 1, 2
    t.commit(ops.ReserveFragments(num_fragments=4))  # ids 3..6 for the Rewrites below


def _rewrite(t: mvcc.Table, new_id: int) -> None:
    fragments = tuple(f.metadata.SerializeToString() for f in t.get_fragments()[:2])
    task = CompactionTask(read_version=t.version, fragments=fragments, new_fragment_ids=(new_id,),
                          target_rows_per_fragment=100)  # fmt: skip
    mvcc.compaction.commit(t, [task.execute(t.uri)])


def _ops(role: str, tmp: Path) -> dict[str, Callable[[mvcc.Table], object]]:
    ours = role == "ours"
    row = 2 if ours else 1  # row-level changes touch different rows of fragment 0
    return {
        "A": lambda t: t.append(pa.table({"id": [100], "k": [100], "v": ["new"]})),
        "D": lambda t: t.delete(f"id = {row}"),
        "OW": lambda t: t.overwrite(pa.table({"id": [0], "k": [0], "v": ["over"]})),
        "CI": lambda t: t.create_index("k", name=f"k_{role}"),
        "RW": lambda t: _rewrite(t, 4 if ours else 3),
        "M": lambda t: t.add_columns({f"w_{role}": "id + 1"}),
        "P": lambda t: t.alter_columns({"path": "v", "name": f"v_{role}"}),
        "RS": lambda t: t.commit(ops.Restore(version=1)),  # with this handle's read version
        "RF": lambda t: t.commit(ops.ReserveFragments(num_fragments=1)),
        "U": lambda t: t.update({"v": f"'{role}'"}, where=f"id = {row + 2}", mode="rewrite_rows"),
        "UC": lambda t: t.update_config({"shared.key": role}),
        "DR": lambda t: t.replace_column("k", {0: list(range(100, 110))}),
        "MW": lambda t: t.mark_generations_merged({REGION: 2 if ours else 1}),
        "UB": lambda t: t.add_bases([DatasetBasePath(str(tmp / f"base-{role}"), name="shared")]),
    }


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("matrix")
    _base(root)
    return root / "template"


@pytest.mark.parametrize("theirs", NAMES)
@pytest.mark.parametrize("ours", NAMES)
def test_pair(template: Path, tmp_path: Path, ours: str, theirs: str) -> None:
    uri = tmp_path / "t"
    shutil.copytree(template, uri)
    a, b = mvcc.open_table(str(uri)), mvcc.open_table(str(uri))
    _ops("theirs", tmp_path)[theirs](a)
    assert a.version == 3
    try:
        _ops("ours", tmp_path)[ours](b)
        outcome = OK
    except mvcc.RetryableConflictError as exc:
        outcome = RETRY
        assert exc.read_version == 2 and exc.operation == FULL[ours]
    except mvcc.errors.BasePathError:
        outcome = FAIL  # a clashing base path is refused before committing, or when the clash is found
    except mvcc.IncompatibleConflictError as exc:
        outcome = FAIL
        assert exc.read_version == 2 and exc.conflicting_operation == FULL[theirs]
    assert outcome == _expected(ours, theirs), f"{FULL[ours]} after {FULL[theirs]}"
    latest = mvcc.open_table(str(uri))
    assert latest.version == (4 if outcome == OK else 3)
    latest.to_table()  # whatever happened, the table reads


def test_clone_is_only_ever_the_first_operation(template: Path, tmp_path: Path) -> None:
    """ "The Clone operation can only be the first operation in a dataset ... no such thing as a conflict"."""
    t = mvcc.open_table(str(template))
    other = mvcc.write_table(pa.table({"id": [1]}), str(tmp_path / "other"))
    with pytest.raises(mvcc.TableExistsError):
        t.clone(other.uri)
    clone = t.clone(str(tmp_path / "clone"))
    assert [v.operation for v in clone.versions()] == ["Clone"]
