"""Maintenance decided by the core's advice and the table's policy, in real `airflow dags test` runs (a temporary
AIRFLOW_HOME with sqlite, tests/airflow/conftest.py): the advise operator's short circuit, the nightly example on a
healthy table, the fleet example on a budget, the compaction group's partial commit, and compaction options
reaching the core. Slow tier: each run starts Airflow."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_dags import EXAMPLES, fragmented, operations, output, succeeded, unreferenced_data_files

import mvcc_core as mvcc

pytestmark = pytest.mark.slow


_LATEST_RUN = "(SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1)"


def xcoms(home: Any, dag_id: str, task_id: str) -> dict[int, Any]:
    """The return values one task of `dag_id`'s latest run pushed, by map index (-1: not mapped), from the
    metadata database."""
    with sqlite3.connect(home.home / "airflow.db") as db:
        rows = db.execute(
            "SELECT map_index, value FROM xcom WHERE dag_id = ? AND task_id = ? AND key = 'return_value' "
            f"AND run_id = {_LATEST_RUN}",
            (dag_id, task_id, dag_id),
        ).fetchall()
    return {int(index): json.loads(value) for index, value in rows}


def states(home: Any, dag_id: str) -> dict[str, str]:
    """The final state of each task instance of `dag_id`'s latest run (mapped ones as ``task_id[map_index]``)."""
    with sqlite3.connect(home.home / "airflow.db") as db:
        rows = db.execute(
            f"SELECT task_id, map_index, state FROM task_instance WHERE dag_id = ? AND run_id = {_LATEST_RUN}",
            (dag_id, dag_id),
        ).fetchall()
    return {(t if i < 0 else f"{t}[{i}]"): s for t, i, s in rows}


def healthy(uri: str) -> mvcc.Table:
    """A table nothing would pay on: one fragment, no index, versions younger than any retention."""
    return mvcc.write_table(pa.table({"id": list(range(100)), "v": [f"r{i}" for i in range(100)]}), uri)


def test_the_advise_operator_short_circuits_on_a_healthy_table_and_not_on_a_fragmented_one(
    airflow_home: Any, warehouse: str, tmp_path: Path
) -> None:
    fragmented(f"{warehouse}/small")
    healthy(f"{warehouse}/healthy")
    marks = tmp_path / "marks"
    marks.mkdir()
    dag = airflow_home.write_dag(
        "advise_dag",
        f"""
        from datetime import datetime
        from pathlib import Path
        from airflow.sdk import DAG, task
        from mvcc_airflow import MvccAdviseOperator

        with DAG("advise_dag", schedule=None, start_date=datetime(2026, 1, 1)):
            for name in ("small", "healthy"):
                advice = MvccAdviseOperator(task_id=f"advise_{{name}}", table=name, short_circuit=True)

                @task(task_id=f"act_{{name}}")
                def act(name=name):
                    Path({str(marks)!r}, name).write_text("ran")

                @task(task_id=f"after_{{name}}", trigger_rule="none_failed")  # skipped whatever its rule
                def after(name=name):
                    Path({str(marks)!r}, "after_" + name).write_text("ran")

                advice >> act() >> after()
        """,
    )
    run = airflow_home.test_dag("advise_dag", dag, warehouse=warehouse)
    assert succeeded(run), output(run)[-4000:]
    assert sorted(p.name for p in marks.iterdir()) == ["after_small", "small"]
    got = states(airflow_home, "advise_dag")
    assert got["advise_healthy"] == got["advise_small"] == "success"
    assert got["act_healthy"] == got["after_healthy"] == "skipped"
    small, fine = (
        xcoms(airflow_home, "advise_dag", "advise_small")[-1],
        xcoms(airflow_home, "advise_dag", "advise_healthy")[-1],
    )
    assert small["due"] == ["compact"] and small["advice"][0]["kind"] == "compact"
    assert small["advice"][0]["fragments_before"] == 20 and small["advice"][0]["fragments_after"] == 1
    assert small["metrics"]["small_fragments"] == 20 and small["metrics"]["top_advice"] == "compact"
    assert small["metrics"]["top_advice_score"] == pytest.approx(0.95)
    assert fine["due"] == [] and fine["advice"] == [] and fine["metrics"]["small_fragments"] == 0
    assert fine["version"] == 1 and fine["operation"] is None
    assert "nothing advised; skipping the downstream tasks" in output(run)


def test_the_nightly_example_on_a_healthy_table_runs_no_compaction(airflow_home: Any, warehouse: str) -> None:
    t = healthy(f"{warehouse}/events")
    dag = airflow_home.dags / "mvcc_nightly_maintenance.py"
    shutil.copy(EXAMPLES / "mvcc_nightly_maintenance.py", dag)
    run = airflow_home.test_dag("mvcc_nightly_maintenance", dag, warehouse=warehouse)
    assert succeeded(run), output(run)[-4000:]
    assert operations(t, t.version) == []  # no ReserveFragments, no Rewrite, nothing committed
    got = states(airflow_home, "mvcc_nightly_maintenance")
    assert got.pop("advise") == "success"
    assert set(got.values()) == {"skipped"}, got
    assert {"mvcc_compaction.reserve_fragments", "optimize_indices", "cleanup"} <= set(got)


def test_the_nightly_example_runs_only_the_step_that_is_due(airflow_home: Any, warehouse: str) -> None:
    uri = f"{warehouse}/events"
    t = mvcc.write_table(pa.table({"id": list(range(50))}), uri)
    t.update_config({"mvcc.compaction.target_rows_per_fragment": "10"})  # the policy: 50-row fragments are big
    t.create_index("id")
    t = t.append(pa.table({"id": list(range(50, 100))}))  # a fragment the index misses: only that is advised
    assert [a.kind for a in t.optimize.recommend()] == ["optimize_indices"]
    before = t.version
    dag = airflow_home.dags / "mvcc_nightly_maintenance.py"
    shutil.copy(EXAMPLES / "mvcc_nightly_maintenance.py", dag)
    run = airflow_home.test_dag("mvcc_nightly_maintenance", dag, warehouse=warehouse)
    assert succeeded(run), output(run)[-4000:]
    assert operations(t, before) == ["CreateIndex"]  # no ReserveFragments: the compaction was not due
    got = states(airflow_home, "mvcc_nightly_maintenance")
    assert got["advise"] == got["optimize_indices"] == "success"
    assert got["mvcc_compaction.reserve_fragments"] == got["mvcc_compaction.commit_rewrite"] == "skipped"
    assert got["cleanup_dry_run"] == got["cleanup"] == "skipped"
    assert mvcc.open_table(uri).optimize.recommend() == []


def test_the_fleet_example_compacts_the_due_tables_within_the_budget_in_rank_order(
    airflow_home: Any, warehouse: str
) -> None:
    tables = {
        "events": fragmented(f"{warehouse}/events", batches=40),  # the most benefit
        "clicks": fragmented(f"{warehouse}/clicks", batches=20),
        "orders": fragmented(f"{warehouse}/orders", batches=10),  # due, but over what the budget leaves
        "partner_feed": healthy(f"{warehouse}/partner_feed"),  # nothing advised
    }
    before = {name: t.version for name, t in tables.items()}
    cost = {name: t.optimize.recommend()[0].bytes_to_rewrite for name, t in tables.items() if name != "partner_feed"}
    budget = cost["events"] + cost["clicks"] + cost["orders"] // 2
    dag = airflow_home.dags / "mvcc_fleet_maintenance.py"
    shutil.copy(EXAMPLES / "mvcc_fleet_maintenance.py", dag)
    run = airflow_home.test_dag("mvcc_fleet_maintenance", dag, warehouse=warehouse, conf={"max_bytes": str(budget)})
    assert succeeded(run), output(run)[-4000:]
    plan = xcoms(airflow_home, "mvcc_fleet_maintenance", "plan_fleet")[-1]
    assert [e["name"] for e in plan["chosen"]] == ["events", "clicks"] and plan["max_bytes"] == budget
    left = {e["name"]: e["reason"] for e in plan["left"]}
    assert left == {"orders": "over_budget", "partner_feed": "nothing_advised"}
    assert plan["steps"]["compact"] == [
        {"table": "events", "max_bytes": cost["events"]},
        {"table": "clicks", "max_bytes": cost["clicks"]},
    ]
    compacted = xcoms(airflow_home, "mvcc_fleet_maintenance", "compact")
    assert [compacted[i]["table"] for i in sorted(compacted)] == [f"{warehouse}/events", f"{warehouse}/clicks"]
    assert sum(c["metrics"]["bytes_read"] for c in compacted.values()) <= budget
    for name in ("events", "clicks"):
        assert operations(tables[name], before[name]) == ["ReserveFragments", "Rewrite"], name
        assert len(mvcc.open_table(f"{warehouse}/{name}").get_fragments()) == 1
    for name in ("orders", "partner_feed"):
        assert operations(tables[name], before[name]) == [], name
    got = states(airflow_home, "mvcc_fleet_maintenance")
    assert got["compact[0]"] == got["compact[1]"] == "success" and "compact[2]" not in got
    assert got["optimize_indices[0]"] == got["optimize_indices[1]"] == "skipped"  # no index on either table


def test_a_partial_commit_of_the_group_commits_the_groups_a_conflict_did_not_touch(
    airflow_home: Any, warehouse: str, tmp_path: Path
) -> None:
    uri = f"{warehouse}/events"
    t = fragmented(uri)  # 20 fragments of 10 rows: 4 groups of 5 at a target of 50 rows
    before = t.version
    result = tmp_path / "commit.json"
    dag = airflow_home.write_dag(
        "group_partial_dag",
        f"""
        import json
        from datetime import datetime
        from airflow.sdk import DAG, task
        import mvcc_core as mvcc
        from mvcc_airflow import mvcc_compaction_group

        with DAG("group_partial_dag", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
            mvcc_compaction_group(
                "events", group_id="compact", options={{"target_rows_per_fragment": 50}}, partial_progress=True
            )

            @task
            def outside_update():  # another writer rewrites a column of the first group's first fragment
                mvcc.open_table({uri!r}).update({{"v": "'x'"}}, where="id < 5", mode="rewrite_columns")

            @task
            def record(committed):
                open({str(result)!r}, "w").write(json.dumps(committed))

            dag.get_task("compact.rewrite_fragments") >> outside_update() >> dag.get_task("compact.commit_rewrite")
            record(dag.get_task("compact.commit_rewrite").output)
        """,
    )
    run = airflow_home.test_dag("group_partial_dag", dag, warehouse=warehouse)
    assert succeeded(run), output(run)[-4000:]
    assert operations(t, before) == ["ReserveFragments", "Update", "Rewrite"]
    committed = json.loads(result.read_text())
    metrics = committed["metrics"]
    assert metrics["tasks"] == 4 and metrics["committed_tasks"] == [1, 2, 3]
    assert (metrics["fragments_removed"], metrics["fragments_added"], metrics["rows"]) == (15, 3, 150)
    (dropped,) = metrics["dropped"]
    first = [f.fragment_id for f in t.get_fragments()][:5]  # the handle is still at the version the plan read
    assert dropped["task"] == 0 and dropped["fragments"] == first and dropped["reason"]
    latest = mvcc.open_table(uri)
    assert latest.version == committed["version"] and len(latest.get_fragments()) == 5 + 3
    rows = latest.to_table().sort_by("id")
    assert rows.num_rows == 200 and rows.column("v").to_pylist()[:6] == ["x"] * 5 + ["r5"]
    assert not unreferenced_data_files(uri)  # the dropped group's files were removed
    assert "lost to a concurrent commit and was dropped" in output(run)


def _file_ranges(t: mvcc.Table, column: str) -> list[tuple[Any, Any]]:
    """Each data file's (min, max) of `column`, from the Parquet footers' own row-group statistics, in fragment
    order."""
    ranges = []
    for fragment in t.get_fragments():
        for data_file in fragment.data_files():
            meta = pq.ParquetFile(Path(t.uri) / "data" / Path(data_file.path).name).metadata
            # the file names its columns by field id (PARQUET:field_id); this table's files hold every field, in
            # the schema's order
            field_id = str(data_file.fields[t.schema.get_field_index(column)]).encode()
            written = meta.schema.to_arrow_schema()
            (index,) = [i for i, f in enumerate(written) if (f.metadata or {}).get(b"PARQUET:field_id") == field_id]
            stats = [meta.row_group(i).column(index).statistics for i in range(meta.num_row_groups)]
            assert all(s is not None and s.has_min_max for s in stats)
            ranges.append((min(s.min for s in stats), max(s.max for s in stats)))
    return ranges


def test_compaction_options_reach_the_core_and_the_asset_event_carries_the_health_figures(
    airflow_home: Any, warehouse: str
) -> None:
    uri = f"{warehouse}/events"
    t = None
    for batch in range(8):  # each append's keys spread over the whole range: every fragment overlaps every other
        data = pa.table({"key": [(batch * 37 + i * 53) % 400 for i in range(50)], "batch": [batch] * 50})
        t = mvcc.write_table(data, uri) if t is None else t.append(data)
    assert t is not None
    t.update_config({"mvcc.compaction.target_rows_per_fragment": "100"})  # the table's policy: the target
    before = t.version
    dag = airflow_home.write_dag(
        "compact_sorted_dag",
        """
        from datetime import datetime
        from airflow.sdk import DAG
        from mvcc_airflow import MvccCompactOperator, table_asset

        with DAG("compact_sorted_dag", schedule=None, start_date=datetime(2026, 1, 1)):
            MvccCompactOperator(
                task_id="compact",
                table="events",
                sort_by="{{ params.sort_by }}",
                max_bytes="1MiB",
                outlets=[table_asset("events")],
                params={"sort_by": "key"},
            )
        """,
    )
    run = airflow_home.test_dag("compact_sorted_dag", dag, warehouse=warehouse)
    assert succeeded(run), output(run)[-4000:]
    assert operations(t, before) == ["ReserveFragments", "Rewrite"]
    latest = mvcc.open_table(uri)
    assert latest.count_rows() == 400 and len(latest.get_fragments()) == 4
    ranges = _file_ranges(latest, "key")
    assert ranges == sorted(ranges) and all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    assert all(lo < hi for lo, hi in ranges)
    with sqlite3.connect(airflow_home.home / "airflow.db") as db:
        events = db.execute(
            "SELECT asset.uri, asset_event.extra FROM asset_event JOIN asset ON asset.id = asset_event.asset_id"
        ).fetchall()
    (extra,) = [json.loads(e) for asset_uri, e in events if asset_uri == f"mvcc://file{uri}"]
    assert extra["mvcc/version"] == latest.version and extra["mvcc/operation"] == "Rewrite"
    assert extra["mvcc/small_fragments"] == 0 and extra["mvcc/deleted_share"] == 0.0
    assert extra["mvcc/versions_kept"] == len(latest.versions())
    live = sum(df.file_size_bytes for f in latest.get_fragments() for df in f.data_files())
    assert extra["mvcc/live_bytes"] == live and extra["mvcc/stored_bytes"] > live  # the old fragments are kept
    assert extra["mvcc/top_advice"] is None and extra["mvcc/top_advice_score"] == 0.0
