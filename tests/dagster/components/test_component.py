"""`MvccTableComponent`: the example dg project (examples/components) passes `dg check defs` through the real
CLI with the component found through the package's entry point; a defs.yaml yields the asset, checks, jobs,
schedule and sensors, which run against a real table; bad config fails with the setting named."""

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pydantic
import pytest

import mvcc_core as mvcc
from mvcc_dagster import MvccTableComponent
from mvcc_dagster.health import CHECKS

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "components"
DG = Path(sys.executable).with_name("dg")


@pytest.fixture(scope="module")
def entry_point_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the entry points this checkout's pyproject.toml declares, as an installed
    distribution's metadata (what `pip install` writes), so `dg` sees exactly the declared registration
    without reinstalling the shared environment."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    dist = tmp_path_factory.mktemp("entry_points") / "mvcc_entry_points-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mvcc-entry-points\nVersion: 0\n")
    lines = []
    for group, entries in declared.items():
        lines.append(f"[{group}]")
        lines.extend(f"{name} = {value}" for name, value in entries.items())
    (dist / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return dist.parent


def run_dg(args: list[str], cwd: Path, entry_points: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(entry_points)]),
        "DAGSTER_HOME": str(tmp_path),
        "MVCC_WAREHOUSE": str(tmp_path / "warehouse"),
    }
    return subprocess.run([str(DG), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180, check=False)


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_example_project_passes_dg_check_defs(entry_point_path: Path, tmp_path: Path) -> None:
    """`dg list components` finds the component through the entry point; `dg check defs` passes on the
    example's defs.yaml files; `dg list defs` shows what one table yields."""
    listed = run_dg(["list", "components", "--json"], EXAMPLE, entry_point_path, tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "mvcc_dagster.MvccTableComponent" in {c["key"] for c in json.loads(listed.stdout)["items"]}

    checked = run_dg(["check", "defs"], EXAMPLE, entry_point_path, tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    out = checked.stdout + checked.stderr
    assert "All component YAML validated successfully" in out and "All definitions loaded successfully" in out

    shown = run_dg(["list", "defs", "--json"], EXAMPLE, entry_point_path, tmp_path)
    assert shown.returncode == 0, shown.stderr
    defs = json.loads(shown.stdout)
    assets = {a["asset_key"]: a for a in defs["assets"]}
    assert set(assets) == {"sales/raw_orders", "sales/orders"}
    assert assets["sales/orders"]["dependency_keys"] == ["sales/raw_orders"]
    assert not assets["sales/orders"]["is_executable"]  # external: written elsewhere, recorded by the sensor
    assert {c["key"] for c in defs["asset_checks"]} == {
        f"sales/{t}:{c}" for t in ("orders", "raw_orders") for c in CHECKS
    }
    names = {j["name"] for j in defs["jobs"]}
    assert "mvcc_index__sales__orders__order_id_idx" in names
    for table in ("sales__orders", "sales__raw_orders"):
        assert {f"mvcc_{k}__{table}" for k in ("compaction", "retention", "restore", "tag", "maintenance")} <= names
    assert {s["name"] for s in defs["schedules"]} == {
        "mvcc_maintenance_schedule__sales__orders",
        "mvcc_maintenance_schedule__sales__raw_orders",
    }
    assert {s["name"] for s in defs["sensors"]} == {
        f"mvcc_{k}_sensor__sales__{t}" for k in ("version", "health") for t in ("orders", "raw_orders")
    }


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_dg_check_defs_names_bad_config(entry_point_path: Path, tmp_path: Path) -> None:
    """A misspelt attribute, a missing key and a cron that does not parse fail `dg check defs` with the file,
    the setting and the table named."""
    project = tmp_path / "project"
    subprocess.run(["cp", "-r", str(EXAMPLE), str(project)], check=True)
    defs_dir = project / "mvcc_components_example" / "defs"
    orders = defs_dir / "orders" / "defs.yaml"
    orders.write_text(orders.read_text().replace("  key: sales/orders", "  table: sales/orders"))
    bad = run_dg(["check", "defs"], project, entry_point_path, tmp_path)
    out = bad.stdout + bad.stderr
    assert bad.returncode != 0
    assert "'key' is a required property" in out and "'table' was unexpected" in out and "orders/defs.yaml" in out

    orders.write_text(orders.read_text().replace("  table: sales/orders", "  key: sales/orders"))
    raw = defs_dir / "raw_orders" / "defs.yaml"
    raw.write_text(raw.read_text().replace('cron: "0 2 * * *"', 'cron: "every night"'))
    bad = run_dg(["check", "defs"], project, entry_point_path, tmp_path)
    out = bad.stdout + bad.stderr
    assert bad.returncode != 0
    assert "maintenance schedule of sales/raw_orders: cron 'every night' does not parse" in out


def component(warehouse: str, **attributes: object) -> MvccTableComponent:
    return MvccTableComponent.from_attributes_dict(
        attributes={"key": "sales/orders", "root_uri": warehouse, **attributes}
    )


def test_defs_yaml_loads_from_defs_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The example's defs folder loads in process (`load_from_defs_folder`): one asset spec per table with its
    deps, seven checks per table, the jobs, a stopped schedule in the configured timezone, stopped sensors,
    and one `mvcc` resource shared by both tables."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.setenv("MVCC_WAREHOUSE", str(tmp_path))
    defs = dg.load_from_defs_folder(path_within_project=EXAMPLE)
    specs = {s.key.to_user_string(): s for s in defs.resolve_all_asset_specs()}
    assert set(specs) == {"sales/orders", "sales/raw_orders"}
    assert [d.asset_key for d in specs["sales/orders"].deps] == [dg.AssetKey(["sales", "raw_orders"])]
    assert specs["sales/orders"].kinds == {"mvcc"} and specs["sales/orders"].group_name == "sales"
    assert specs["sales/orders"].metadata["dagster/uri"].value == f"{tmp_path}/sales/orders"
    schedule = defs.resolve_schedule_def("mvcc_maintenance_schedule__sales__orders")
    assert schedule.cron_schedule == "30 3 * * *" and schedule.execution_timezone == "Europe/Berlin"
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    sensors = {s.name: s for s in defs.sensors}
    assert all(s.default_status == dg.DefaultSensorStatus.STOPPED for s in sensors.values())
    assert sensors["mvcc_version_sensor__sales__raw_orders"].minimum_interval_seconds == 60
    assert defs.resources["mvcc"].root_uri == str(tmp_path)
    assert defs.resolve_job_def("mvcc_index__sales__orders__order_id_idx") is not None


def test_component_parts_run_on_a_table(instance: dg.DagsterInstance, warehouse: str) -> None:
    """What the component yields works: the version sensor records an outside commit on the asset, the
    checks fail on a fragmented table with the configured thresholds, the compaction job (from the
    component's own Definitions, its resource bound by the component) compacts, and the checks pass."""
    comp = component(
        warehouse,
        maintenance={"cron": "0 4 * * *", "target_rows_per_fragment": 1000, "executor": "in_process"},
        health={"small_fragments": {"warn": 4, "error": 8}, "storage_amplification": {"warn": 1000, "error": 1000}},
        retention={"older_than_days": 0, "retain_versions": 1},
    )
    defs = dg.build_defs_for_component(comp)
    uri = f"{warehouse}/sales/orders"
    t = mvcc.write_table(pa.table({"n": [0]}), uri)
    for i in range(1, 10):
        t.append(pa.table({"n": [i]}))

    sensor = next(s for s in defs.sensors if s.name == "mvcc_version_sensor__sales__orders")
    result = sensor(dg.build_sensor_context(instance=instance, resources=defs.resources))
    assert [e.metadata["mvcc/version"].value for e in result.asset_events] == list(range(1, 11))
    assert all(isinstance(e, dg.AssetMaterialization) for e in result.asset_events)
    assert {e.asset_key for e in result.asset_events} == {dg.AssetKey(["sales", "orders"])}

    with_checks = dg.Definitions.merge(
        defs, dg.Definitions(jobs=[dg.define_asset_job("health", selection=dg.AssetSelection.all_asset_checks())])
    )

    def evaluate_checks() -> list[dg.AssetCheckEvaluation]:
        result = with_checks.resolve_job_def("health").execute_in_process(instance=instance)
        return result.get_asset_check_evaluations()

    evaluations = evaluate_checks()
    assert {e.check_name for e in evaluations} == set(CHECKS)
    small = next(e for e in evaluations if e.check_name == "small_fragments")
    assert not small.passed and small.severity == dg.AssetCheckSeverity.ERROR

    job = defs.resolve_job_def("mvcc_compaction__sales__orders")
    assert job.execute_in_process(instance=instance).success
    assert len(mvcc.open_table(uri).get_fragments()) == 1
    retention = defs.resolve_job_def("mvcc_retention__sales__orders")
    assert retention.execute_in_process(instance=instance).success
    evaluations = evaluate_checks()
    assert all(e.passed for e in evaluations), [(e.check_name, e.metadata) for e in evaluations if not e.passed]
    assert sorted(mvcc.open_table(uri).to_table()["n"].to_pylist()) == list(range(10))


def test_optional_parts_and_uri_named_tables(warehouse: str) -> None:
    """`define_asset: false` (an @asset writes the table), no health / schedule / version sensor, a table
    named by uri without a root (the code location binds `mvcc`)."""
    comp = MvccTableComponent.from_attributes_dict(
        attributes={
            "key": "orders",
            "uri": f"{warehouse}/elsewhere/orders",
            "define_asset": False,
            "health": None,
            "maintenance": None,
            "version_sensor": {"enabled": False},
        }
    )
    defs = dg.build_defs_for_component(comp)
    assert not list(defs.assets or []) and not list(defs.asset_checks or [])
    assert not list(defs.schedules or []) and not list(defs.sensors or []) and not defs.resources
    assert {j.name for j in defs.jobs} == {f"mvcc_{k}__orders" for k in ("compaction", "retention", "restore", "tag")}


def test_bad_config_is_named(warehouse: str) -> None:
    with pytest.raises(pydantic.ValidationError, match="key"):
        MvccTableComponent.from_attributes_dict(attributes={"root_uri": warehouse})
    with pytest.raises(pydantic.ValidationError, match="key"):
        component(warehouse, key="")
    with pytest.raises(pydantic.ValidationError, match="executor"):
        component(warehouse, maintenance={"executor": "threads"})
    with pytest.raises(pydantic.ValidationError, match="older_than"):
        component(warehouse, retention={"older_than": 3})
    with pytest.raises(ValueError, match=r"maintenance schedule of sales/orders: cron '61 \* \* \* \*' does not parse"):
        dg.build_defs_for_component(component(warehouse, maintenance={"cron": "61 * * * *"}))
    with pytest.raises(ValueError, match="retention of sales/orders: retain_versions must be a positive int"):
        dg.build_defs_for_component(component(warehouse, retention={"retain_versions": 0}))
    with pytest.raises(ValueError, match="ERROR threshold"):
        dg.build_defs_for_component(component(warehouse, health={"deleted_ratio": {"warn": 0.5, "error": 0.1}}))


def test_health_sensor_requests_index_optimize(instance: dg.DagsterInstance, warehouse: str) -> None:
    """With `indices`, rows the index does not cover make the core advise an index optimize, the component's
    health sensor requests the index optimize job (no run config needed, the advice in its tags), and after it
    nothing is requested."""
    comp = component(
        warehouse,
        indices=[{"column": "n"}],
        health={"unindexed_rows": {"warn": 5, "error": 50}, "small_fragments": {"warn": 100, "error": 100}},
    )
    defs = dg.build_defs_for_component(comp)
    uri = f"{warehouse}/sales/orders"
    t = mvcc.write_table(pa.table({"n": list(range(10))}), uri)
    assert defs.resolve_job_def("mvcc_index__sales__orders__n_idx").execute_in_process(instance=instance).success
    # 20 of 30 rows outside the index: the advice optimize_indices scores 0.67, above advice_score (0.5); the
    # two fragments' compact advice scores 0.5, not above it
    t.checkout_latest().append(pa.table({"n": list(range(10, 30))}))

    sensor = next(s for s in defs.sensors if s.name == "mvcc_health_sensor__sales__orders")
    result = sensor(dg.build_sensor_context(instance=instance, resources=defs.resources))
    assert [r.job_name for r in result.run_requests] == ["mvcc_index_optimize__sales__orders"]
    assert result.run_requests[0].tags["mvcc/advice"] == "optimize_indices"
    job = defs.resolve_job_def("mvcc_index_optimize__sales__orders")
    assert job.execute_in_process(instance=instance, tags=result.run_requests[0].tags).success
    again = sensor(dg.build_sensor_context(instance=instance, resources=defs.resources, cursor=result.cursor))
    assert not again.run_requests
    (index,) = mvcc.open_table(uri).list_indices()
    assert index["name"] == "n_idx" and len(index["fragment_ids"]) == 2
