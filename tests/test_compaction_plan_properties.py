"""`compaction.plan` puts the caller's commit message and transaction properties on its ReserveFragments
(an orchestrator marks its own reservation, e.g. with its run id); bad properties commit nothing."""

import pyarrow as pa
import pytest

import mvcc_core as mvcc


def fragmented(uri: str) -> mvcc.Table:
    t = mvcc.write_table(pa.table({"n": [0]}), uri)
    for i in range(1, 4):
        t.append(pa.table({"n": [i]}))
    return t


def test_reserve_fragments_carries_properties(tmp_path) -> None:
    t = fragmented(str(tmp_path / "t"))
    plan = mvcc.compaction.plan(
        t,
        mvcc.compaction.CompactionOptions(),
        commit_message="reserve for run r1",
        transaction_properties={"run": "r1"},
    )
    assert plan.tasks
    reserve = mvcc.open_table(str(tmp_path / "t")).versions()[-1]
    assert reserve.operation == "ReserveFragments"
    assert reserve.transaction_properties == {"run": "r1"} and reserve.message == "reserve for run r1"
    # keyword options of CompactionOptions still pass through **kwargs
    assert mvcc.compaction.plan(t.checkout_latest(), target_rows_per_fragment=2).options.target_rows_per_fragment == 2


def test_default_message_and_no_properties(tmp_path) -> None:
    t = fragmented(str(tmp_path / "t"))
    mvcc.compaction.plan(t)
    reserve = mvcc.open_table(str(tmp_path / "t")).versions()[-1]
    assert reserve.transaction_properties == {} and reserve.message == "compaction: reserve fragment ids"


def test_bad_properties_commit_nothing(tmp_path) -> None:
    t = fragmented(str(tmp_path / "t"))
    with pytest.raises(TypeError, match="transaction_properties must map str to str"):
        mvcc.compaction.plan(t, transaction_properties={"run": 1})
    assert mvcc.open_table(str(tmp_path / "t")).version == t.version
