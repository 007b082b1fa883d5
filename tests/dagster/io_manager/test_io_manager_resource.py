"""`MvccIOManager` takes the `MvccResource` the deployment binds as ``mvcc`` (or builds one from its own
fields, as before): one place names and opens the tables; giving both, or neither, is refused in words."""

import dagster as dg
import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_dagster import MvccIOManager, MvccResource


def test_takes_or_builds_the_resource(warehouse: str) -> None:
    resource = MvccResource(root_uri=warehouse, storage_options={"region": "x"})
    assert MvccIOManager(mvcc=resource).tables() is resource
    built = MvccIOManager(root_uri=warehouse, external_store="memory://locks").tables()
    assert (built.root_uri, built.external_store, built.uri("a/b")) == (warehouse, "memory://locks", f"{warehouse}/a/b")
    with pytest.raises(ValueError, match="either mvcc=MvccResource\\(...\\) or root_uri .*not both"):
        MvccIOManager(mvcc=resource, root_uri=warehouse).tables()
    with pytest.raises(ValueError, match="needs mvcc=MvccResource\\(...\\) or root_uri"):
        MvccIOManager().tables()


@pytest.mark.slow
def test_writes_and_reads_through_the_bound_resource(instance: dg.DagsterInstance, warehouse: str) -> None:
    @dg.asset
    def events() -> pa.Table:
        return pa.table({"n": [1, 2, 3]})

    @dg.asset
    def total(events: pa.Table) -> pa.Table:
        return pa.table({"total": [sum(events["n"].to_pylist())]})

    resource = MvccResource(root_uri=warehouse)
    result = dg.materialize(
        [events, total], instance=instance, resources={"io_manager": MvccIOManager(mvcc=resource), "mvcc": resource}
    )
    assert result.success
    assert mvcc.open_table(f"{warehouse}/total").to_table()["total"].to_pylist() == [6]
