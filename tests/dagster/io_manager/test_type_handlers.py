"""Type handlers and column projection through real materializations: pyarrow, pandas and polars outputs and
inputs, a user's own handler added by subclassing the IO manager, a type no handler takes refused before anything
is written, and ``columns`` input metadata read as a projection of the scan (also under a partition filter on a
column it leaves out)."""

from typing import Any

import dagster as dg
import pandas as pd
import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_dagster import MvccIOManager, MvccTypeHandler
from mvcc_dagster.io_manager import PandasTypeHandler, PolarsTypeHandler, PyArrowTypeHandler, SparkTypeHandler
from mvcc_dagster.io_manager.type_handlers import handler_for_input, handler_for_output
from mvcc_dagster.metadata import COLUMNS, PARTITION_EXPR

pl = pytest.importorskip("polars", reason="polars is not installed (extra 'dev')")

ROWS = {"id": [1, 2, 3, 4], "name": ["a", "b", "c", "d"], "score": [0.5, 1.5, 2.5, 3.5]}


def _loaded(result: dg.ExecuteInProcessResult, step: str) -> dict[str, Any]:
    events = [e for e in result.all_events if e.event_type == dg.DagsterEventType.LOADED_INPUT and e.step_key == step]
    assert len(events) == 1
    return {k: v.value for k, v in events[0].event_specific_data.metadata.items()}


def test_handlers_are_chosen_by_type() -> None:
    handlers = MvccIOManager.type_handlers()
    assert [type(h) for h in handlers] == [PyArrowTypeHandler, PandasTypeHandler, PolarsTypeHandler, SparkTypeHandler]
    table = pa.table(ROWS)
    assert isinstance(handler_for_output(table, handlers, writer="w"), PyArrowTypeHandler)
    assert isinstance(handler_for_output(table.to_batches()[0], handlers, writer="w"), PyArrowTypeHandler)
    assert isinstance(handler_for_output(table.to_pandas(), handlers, writer="w"), PandasTypeHandler)
    assert isinstance(handler_for_output(pl.from_arrow(table), handlers, writer="w"), PolarsTypeHandler)
    assert isinstance(handler_for_input(pd.DataFrame, handlers), PandasTypeHandler)
    assert isinstance(handler_for_input(pl.DataFrame, handlers), PolarsTypeHandler)
    assert isinstance(handler_for_input(Any, handlers), PyArrowTypeHandler)  # no annotation: a pyarrow Table
    assert isinstance(handler_for_input(dict, handlers), PyArrowTypeHandler)

    class NotAFrame:  # a class named DataFrame in a pandas-like module is not taken by its name
        __module__ = "pandas.core.frame"

    NotAFrame.__name__ = NotAFrame.__qualname__ = "DataFrame"
    with pytest.raises(TypeError, match=r"got pandas\.core\.frame\.DataFrame \(add an MvccTypeHandler for it\)"):
        handler_for_output(NotAFrame(), handlers, writer="MvccIOManager")


def test_polars_output_and_input_round_trip(instance: dg.DagsterInstance, warehouse: str) -> None:
    expected = pa.table(ROWS)

    @dg.asset
    def scores() -> pl.DataFrame:
        return pl.from_arrow(expected)

    seen: dict[str, Any] = {}

    @dg.asset
    def doubled(scores: pl.DataFrame) -> pl.DataFrame:
        seen["type"] = type(scores)
        return scores.with_columns(pl.col("score") * 2)

    @dg.asset
    def as_arrow(doubled: pa.Table) -> pa.Table:
        seen["arrow"] = doubled
        return doubled

    io = MvccIOManager(root_uri=warehouse)
    assert dg.materialize([scores, doubled, as_arrow], instance=instance, resources={"io_manager": io}).success
    assert seen["type"] is pl.DataFrame
    assert mvcc.open_table(f"{warehouse}/scores").to_table().to_pydict() == ROWS  # polars' strings: large_string
    # what polars wrote, read back as Arrow: the plain evaluation's rows
    assert seen["arrow"].to_pydict() == {**ROWS, "score": [2 * s for s in ROWS["score"]]}


class Rows:
    """A user's own output type: a list of dicts."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.records = records


class RowsHandler(MvccTypeHandler):
    @property
    def handled_types(self) -> tuple[type, ...]:
        return (Rows,)

    def to_arrow(self, obj: Any) -> pa.Table:
        return pa.Table.from_pylist(obj.records)

    def from_arrow(self, table: pa.Table) -> Any:
        return Rows(table.to_pylist())


class RowsIOManager(MvccIOManager):
    @classmethod
    def type_handlers(cls) -> list[MvccTypeHandler]:
        return [RowsHandler(), *super().type_handlers()]


def test_a_user_handler_added_by_subclassing(instance: dg.DagsterInstance, warehouse: str) -> None:
    records = [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]

    @dg.asset
    def people() -> Rows:
        return Rows(records)

    seen: dict[str, Any] = {}

    @dg.asset(ins={"people": dg.AssetIn(metadata={COLUMNS: ["name"]})})
    def names(people: Rows) -> None:
        seen["people"] = people

    io = RowsIOManager(root_uri=warehouse)
    result = dg.materialize([people, names], instance=instance, resources={"io_manager": io})
    assert result.success
    assert mvcc.open_table(f"{warehouse}/people").to_table().to_pylist() == records
    assert isinstance(seen["people"], Rows)
    assert seen["people"].records == [{"name": "a"}, {"name": "b"}]


def test_a_type_no_handler_takes_fails_before_writing(instance: dg.DagsterInstance, warehouse: str) -> None:
    @dg.asset
    def people() -> Rows:
        return Rows([{"id": 1}])

    result = dg.materialize(
        [people], instance=instance, resources={"io_manager": MvccIOManager(root_uri=warehouse)}, raise_on_error=False
    )
    assert not result.success
    message = result.get_step_failure_events()[0].event_specific_data.error.message
    assert "asset people: output type: MvccIOManager stores what its type handlers take" in message
    assert "PandasTypeHandler (pandas.core.frame.DataFrame)" in message
    assert f"got {__name__}.Rows (add an MvccTypeHandler for it)" in message
    with pytest.raises(mvcc.TableNotFoundError):
        mvcc.open_table(f"{warehouse}/people")


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The arguments of every `Table.to_table` call (the real method runs): where the projection went."""
    calls: list[dict[str, Any]] = []
    real = mvcc.Table.to_table

    def recording(self: mvcc.Table, columns: Any = None, filter: Any = None, **kwargs: Any) -> pa.Table:  # noqa: A002
        calls.append({"columns": columns, "filter": filter})
        return real(self, columns=columns, filter=filter, **kwargs)

    monkeypatch.setattr(mvcc.Table, "to_table", recording)
    return calls


@pytest.mark.parametrize("annotation", [pa.Table, pd.DataFrame, pl.DataFrame])
def test_columns_metadata_projects_the_scan(
    instance: dg.DagsterInstance, warehouse: str, scans: list[dict[str, Any]], annotation: type
) -> None:
    source = pa.table(ROWS)

    @dg.asset
    def wide() -> pa.Table:
        return source

    seen: dict[str, Any] = {}

    @dg.asset(ins={"wide": dg.AssetIn(metadata={COLUMNS: ["score", "id"]})})
    def narrow(wide: annotation) -> None:  # type: ignore[valid-type]  # the parametrized type
        seen["wide"] = wide

    io = MvccIOManager(root_uri=warehouse)
    result = dg.materialize([wide, narrow], instance=instance, resources={"io_manager": io})
    assert result.success
    got = seen["wide"]
    assert isinstance(got, annotation)
    as_arrow = (
        got
        if isinstance(got, pa.Table)
        else pa.Table.from_pandas(got)
        if annotation is pd.DataFrame
        else got.to_arrow()
    )
    assert as_arrow.to_pydict() == {"score": ROWS["score"], "id": ROWS["id"]}  # in the order asked for
    assert [c["columns"] for c in scans] == [["score", "id"]]  # the projection went into the scan
    assert _loaded(result, "narrow")["mvcc/columns"] == ["score", "id"]


def test_columns_with_a_partition_filter_on_a_column_left_out(
    instance: dg.DagsterInstance, warehouse: str, scans: list[dict[str, Any]]
) -> None:
    parts = dg.StaticPartitionsDefinition(["x", "y"])

    @dg.asset(partitions_def=parts, metadata={PARTITION_EXPR: "part"})
    def src(context: dg.AssetExecutionContext) -> pa.Table:
        key = context.partition_key
        return pa.table({"part": [key] * 3, "v": [1, 2, 3] if key == "x" else [10, 20, 30], "w": ["p", "q", "r"]})

    seen: dict[str, pa.Table] = {}

    @dg.asset(partitions_def=parts, ins={"src": dg.AssetIn(metadata={COLUMNS: ["v"]})})
    def dst(context: dg.AssetExecutionContext, src: pa.Table) -> None:
        seen[context.partition_key] = src

    io = MvccIOManager(root_uri=warehouse)
    for key in ("x", "y"):
        assert dg.materialize([src], instance=instance, partition_key=key, resources={"io_manager": io}).success
    result = dg.materialize(
        [src, dst], instance=instance, partition_key="y", selection=[dst], resources={"io_manager": io}
    )
    assert result.success
    assert seen["y"].to_pydict() == {"v": [10, 20, 30]}  # partition y only, its `part` column not read out
    assert scans[-1]["columns"] == ["v"] and "part" in scans[-1]["filter"]


@pytest.mark.parametrize(
    ("columns", "problem"),
    [
        (["id", "nope"], "input metadata 'columns': column(s) ['nope'] are not in the table"),
        ("id", "input metadata 'columns': must be a list of column names, got 'id'"),
        ([1], "input metadata 'columns': must be a list of column names, got [1]"),
    ],
)
def test_bad_columns_metadata_fails_naming_it(
    instance: dg.DagsterInstance, warehouse: str, columns: Any, problem: str
) -> None:
    @dg.asset
    def wide() -> pa.Table:
        return pa.table(ROWS)

    @dg.asset(ins={"wide": dg.AssetIn(metadata={COLUMNS: columns})})
    def narrow(wide: pa.Table) -> None:
        raise AssertionError("never reached")

    io = MvccIOManager(root_uri=warehouse)
    assert dg.materialize([wide], instance=instance, resources={"io_manager": io}).success
    result = dg.materialize(
        [wide, narrow], instance=instance, selection=[narrow], resources={"io_manager": io}, raise_on_error=False
    )
    assert not result.success
    message = result.get_step_failure_events()[0].event_specific_data.error.message
    assert f"asset wide: {problem}" in message
