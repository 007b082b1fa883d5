"""A user's first contact with the example deployment: the repository's instance settings (dagster_home), the
README's commands, a start-up without warnings, and what the UI shows (check descriptions, sizes / paths /
timestamps as Dagster's metadata types, an Events list without one observation per input load, version-sensor
ticks that say what they recorded, checks and maintenance on every table of the example)."""

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from types import ModuleType

import dagster as dg
import pyarrow as pa
import pytest

import mvcc_core as mvcc
from mvcc_dagster import (
    HealthThresholds,
    MvccCatalogResource,
    MvccIOManager,
    MvccResource,
    build_catalog_health_checks,
    build_catalog_maintenance_job,
    build_table_health_checks,
    build_version_sensor,
)
from mvcc_dagster.health import CHECKS, Level
from mvcc_dagster.maintenance import MaintenanceTarget
from mvcc_dagster.metadata import TABLE_TAG

ROOT = Path(__file__).resolve().parents[2]
HOME = ROOT / "dagster_home"
README = ROOT / "README.md"


def readme_blocks() -> list[str]:
    """The bash blocks of README.md's "Run it in Dagster" section."""
    text = README.read_text()
    section = text[text.index("## Run it in Dagster") :]
    section = section[: section.index("\n## ", 3)]
    return re.findall(r"```bash\n(.*?)```", section, re.S)


# ---- the instance and the README -------------------------------------------------------------------------


def test_repo_dagster_yaml_configures_the_instance(tmp_path: Path) -> None:
    """dagster_home/dagster.yaml in a real DagsterInstance: the run queue limits runs per value of the tag
    maintenance jobs carry, each pool has one slot, run retries are on (and may retry step failures)."""
    shutil.copy(HOME / "dagster.yaml", tmp_path / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        config = instance.get_concurrency_config()  # what the queued run coordinator's daemon reads
        assert config.run_queue_config is not None
        assert config.run_queue_config.tag_concurrency_limits == [
            {"key": TABLE_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
        ]
        assert config.pool_config.default_pool_limit == 1
        assert instance.run_retries_enabled
        assert instance.run_retries_retry_on_asset_or_op_failure
        assert instance.root_directory == str(tmp_path)
    # Only the settings are kept in git: the instance's own files in the home folder are ignored.
    ignored = subprocess.run(
        ["git", "check-ignore", "dagster_home/storage/runs.db", "dagster_home/dagster.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert ignored.stdout.split() == ["dagster_home/storage/runs.db"]


def test_readme_points_every_shell_at_the_repo_home() -> None:
    """Every shell block of the README exports the same DAGSTER_HOME, the folder holding the repo's dagster.yaml,
    and the UI is started with `dg dev` (plain `dagster dev` is superseded)."""
    first, second, *others = readme_blocks()  # the UI's shell, the second shell, then the WAP example's
    for block in (first, second, *others):
        assert 'export DAGSTER_HOME="$PWD/dagster_home"' in block
    assert "dg dev -w workspace.yaml" in first
    assert not re.search(r"^dagster dev", first + second, re.M)
    assert (HOME / "dagster.yaml").is_file()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_readme_second_shell_commands_work_as_pasted(tmp_path: Path) -> None:
    """The README's second-shell block, run by bash as pasted from a copy of the repository root (the
    example's files, its own dagster_home): a day materialized by `dg launch`, the outside writer's commits,
    and the version sensor started, all in the one instance of that home."""
    second = readme_blocks()[1]
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("definitions.py", "workspace.yaml"):
        shutil.copy(ROOT / name, repo / name)
    (repo / "examples").symlink_to(ROOT / "examples")
    (repo / "dagster_home").mkdir()
    shutil.copy(HOME / "dagster.yaml", repo / "dagster_home" / "dagster.yaml")
    warehouse = tmp_path / "warehouse"
    env = {**os.environ, "MVCC_WAREHOUSE": str(warehouse), "PYTHONPATH": str(ROOT)}
    env.pop("DAGSTER_HOME", None)
    out = subprocess.run(["bash", "-e", "-c", second], cwd=repo, env=env, capture_output=True, text=True, timeout=840)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "Started sensor mvcc_version_sensor" in out.stdout

    with dg.DagsterInstance.from_config(str(repo / "dagster_home")) as instance:
        for key in ("raw_events", "user_latest", "daily_revenue"):
            event = instance.get_latest_materialization_event(dg.AssetKey(key))
            assert event is not None and event.asset_materialization is not None
            assert event.asset_materialization.partition == "2026-11-01"
        (state,) = [s for s in instance.all_instigator_state() if s.name == "mvcc_version_sensor"]
        assert state.status.value == "RUNNING"
    assert mvcc.open_table(str(warehouse / "partner_feed")).version == 3


def test_definitions_load_without_warnings() -> None:
    """definitions.py, loaded and resolved as the code server does (`Definitions.validate_loadable`, the
    repository with every sensor's jobs bound to the resources), with every warning an error: the health
    sensor targets jobs that take ``mvcc`` from the code location, which made Dagster copy it with an empty
    `owners` and warn that the Beta parameter was used."""
    code = (
        "import runpy, dagster as dg\n"
        "defs = runpy.run_path('definitions.py')['defs']\n"
        "dg.Definitions.validate_loadable(defs)\n"
        "repo = defs.get_repository_def()\n"
        "print(len(repo.sensor_defs), 'sensors')\n"
    )
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "2 sensors" in out.stdout


# ---- what the UI shows -----------------------------------------------------------------------------------


def test_every_table_of_the_example_has_checks_and_maintenance(example: ModuleType) -> None:
    """Every table asset of the example (path tables, the catalog's, the one written outside Dagster) has the
    seven described health checks and maintenance jobs."""
    defs = example.defs
    tables = {
        "raw_events",
        "user_latest",
        "daily_revenue",
        "sales/revenue_by_segment",
        "partner_feed",
        "payments",
        "sales/orders",
        "sales/customers",
    }
    checks = {(k.asset_key.to_user_string(), k.name) for c in defs.asset_checks for k in c.check_keys}
    assert checks == {(t, c) for t in tables for c in CHECKS}
    for table in example.PATH_TABLES:
        suffix = MaintenanceTarget(table).suffix
        for kind in ("compaction", "retention", "restore", "maintenance"):
            assert defs.resolve_job_def(f"mvcc_{kind}__{suffix}").tags[TABLE_TAG] == table
    assert set(example.PATH_TABLES) | set(example.CATALOG_TABLES) == tables
    catalog_job = defs.resolve_job_def("mvcc_catalog_maintenance")
    assert sorted(n.name for n in catalog_job.graph.nodes) == ["cleanup_catalog", "compact_tables"]
    assert catalog_job.tags[TABLE_TAG] == "catalog"


@pytest.mark.slow  # several seconds: the slow tier (README, "Set-up")
def test_check_descriptions_name_measure_and_thresholds(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The webserver (in process, workspace.yaml) serves a description for each check of each table, saying
    what it measures and its thresholds; custom thresholds appear in their own descriptions."""
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget
    from dagster_webserver.app import create_app_from_workspace_process_context
    from starlette.testclient import TestClient

    monkeypatch.chdir(ROOT)
    query = (
        "{ assetNodes { assetKey { path } assetChecksOrError { ... on AssetChecks { checks { name description } } } } }"
    )
    with WorkspaceProcessContext(instance, WorkspaceFileTarget(paths=[str(ROOT / "workspace.yaml")])) as ctx:
        response = TestClient(create_app_from_workspace_process_context(ctx)).post("/graphql", json={"query": query})
    assert response.status_code == 200, response.text
    nodes = {
        "/".join(n["assetKey"]["path"]): n["assetChecksOrError"]["checks"]
        for n in response.json()["data"]["assetNodes"]
    }
    assert len(nodes) == 8
    for table, checks in nodes.items():
        descriptions = {c["name"]: c["description"] for c in checks}
        own = {"amounts_positive"} if table == "payments" else set()  # the write-audit-publish asset's audit
        assert set(descriptions) == set(CHECKS) | own, table
        assert "fewer than 100,000 live rows" in descriptions["small_fragments"]
        assert "WARN at 16, ERROR at 64" in descriptions["small_fragments"]
        assert "WARN at 0.1, ERROR at 0.3" in descriptions["deleted_rows"]
        assert "WARN at 30 days, ERROR at 90 days" in descriptions["version_age"]
        assert "WARN at 3x, ERROR at 10x" in descriptions["storage_amplification"]
        assert "up to 20 of the latest version's files" in descriptions["files_exist"]

    custom = HealthThresholds(small_fragment_rows=500, small_fragments=Level(2, 5))
    (check_def,) = build_table_health_checks(["t"], thresholds=custom)
    spec = next(s for s in check_def.check_specs if s.name == "small_fragments")
    assert "fewer than 500 live rows" in (spec.description or "") and "WARN at 2, ERROR at 5" in (
        spec.description or ""
    )


def test_input_loads_leave_no_observation_on_the_upstream(instance: dg.DagsterInstance, warehouse: str) -> None:
    """A downstream step reading an upstream through the IO manager records the version it read on its
    LOADED_INPUT event (what pinned re-executions read back) and no observation on the upstream asset, whose
    Events list then holds only its materializations."""

    @dg.asset
    def upstream() -> pa.Table:
        return pa.table({"id": [1, 2, 3]})

    @dg.asset
    def downstream(upstream: pa.Table) -> pa.Table:
        return upstream

    resources = {"io_manager": MvccIOManager(root_uri=warehouse)}
    for _ in range(3):
        result = dg.materialize([upstream, downstream], instance=instance, resources=resources)
        assert result.success
        loaded = [e for e in result.all_events if e.event_type == dg.DagsterEventType.LOADED_INPUT]
        assert [e.event_specific_data.metadata["mvcc/version"].value for e in loaded] == [
            mvcc.open_table(f"{warehouse}/upstream").version
        ]
    key = dg.AssetKey("upstream")
    assert not instance.fetch_observations(key, limit=10).records
    assert len(instance.fetch_materializations(key, limit=10).records) == 3
    downstream_only = dg.materialize([downstream, upstream.to_source_asset()], instance=instance, resources=resources)
    assert downstream_only.success and not instance.fetch_observations(key, limit=10).records


def test_metadata_uses_dagster_types(instance: dg.DagsterInstance, warehouse: str) -> None:
    """Sizes under Dagster's `dagster/size_bytes` (an int, the key its UI formats as a size: Dagster 1.13 has
    no bytes type), uris as paths, commit times and version ages as timestamps."""

    @dg.asset
    def sized() -> pa.Table:
        return pa.table({"id": list(range(100))})

    dg.materialize([sized], instance=instance, resources={"io_manager": MvccIOManager(root_uri=warehouse)})
    table = mvcc.open_table(f"{warehouse}/sized")
    event = instance.get_latest_materialization_event(dg.AssetKey("sized"))
    assert event is not None and event.asset_materialization is not None
    meta = event.asset_materialization.metadata
    size = sum(df.file_size_bytes for f in table.get_fragments() for df in f.data_files())
    assert isinstance(meta["dagster/size_bytes"], dg.IntMetadataValue) and meta["dagster/size_bytes"].value == size
    assert "mvcc/bytes" not in meta
    assert isinstance(meta["dagster/uri"], dg.PathMetadataValue) and meta["dagster/uri"].value == table.uri

    table.append(pa.table({"id": [100]}))  # an outside commit, recorded by the version sensor
    sensor = build_version_sensor(["sized"])
    context = dg.build_sensor_context(instance=instance, resources={"mvcc": MvccResource(root_uri=warehouse)})
    (recorded,) = sensor(context).asset_events
    committed = recorded.metadata["mvcc/committed_at"]
    assert isinstance(committed, dg.TimestampMetadataValue)
    assert committed.value == table.checkout(2).timestamp.timestamp()
    assert isinstance(recorded.metadata["dagster/uri"], dg.PathMetadataValue)

    checks = build_table_health_checks(["sized"])
    result = dg.materialize(
        [sized, *checks],
        instance=instance,
        resources={
            "io_manager": MvccIOManager(root_uri=warehouse),
            "mvcc": MvccResource(root_uri=warehouse),
        },
    )
    age = next(e for e in result.get_asset_check_evaluations() if e.check_name == "version_age")
    oldest = age.metadata["oldest"]
    assert isinstance(oldest, dg.TimestampMetadataValue)
    assert oldest.value == table.checkout(1).timestamp.timestamp()


def test_version_sensor_ticks_say_what_they_recorded(instance: dg.DagsterInstance, warehouse: str) -> None:
    """A tick that records versions without requesting runs is shown as skipped by Dagster: its reason (the
    tick list's text) names what it recorded, not "returned an empty result"; a tick with nothing new says so
    per table."""
    uri = f"{warehouse}/feed"
    table = mvcc.write_table(pa.table({"id": [1]}), uri)
    table.append(pa.table({"id": [2]}))
    table.optimize.compact_files()  # 3 ReserveFragments, 4 Rewrite: observations
    sensor = build_version_sensor(["feed", "not_yet"])
    resources = {"mvcc": MvccResource(root_uri=warehouse)}

    first = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, resources=resources))
    assert not first.run_requests and len(first.asset_events) == 4
    assert first.skip_message == ("recorded 2 materializations (feed@1, feed@2) and 2 observations (feed@3, feed@4)")
    second = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, cursor=first.cursor, resources=resources))
    assert not second.asset_events
    assert second.skip_message == "no new version of feed; no table yet for not_yet"
    assert json.loads(second.cursor or "{}") == {uri: 4}


@pytest.mark.slow  # several seconds: the slow tier (README, "Set-up")
@pytest.mark.timeout(600)
def test_catalog_tables_have_checks_and_maintenance(
    instance: dg.DagsterInstance, tmp_path: Path, example: ModuleType
) -> None:
    """The example's catalog tables: their health checks run with the catalog's assets (three days: three small
    fragments fail `small_fragments` at these thresholds), the catalog maintenance job compacts each table as a
    catalog version (an observation on its asset), runs the catalog's retention, and the checks pass."""
    warehouse = str(tmp_path / "wh")
    resources = example.resources(warehouse)
    thresholds = HealthThresholds(
        small_fragments=Level(3, 3), deleted_ratio=Level(0.5, 0.9), storage_amplification=Level(100, 100)
    )
    checks = build_catalog_health_checks(example.CATALOG_TABLES, thresholds=thresholds)
    for day in ("2026-11-01", "2026-11-02", "2026-11-03"):
        result = dg.materialize(
            [*example.CATALOG_ASSETS, *checks], instance=instance, resources=resources, partition_key=day
        )
        assert result.success
    failing = {
        (e.asset_key.to_user_string(), e.severity)
        for e in result.get_asset_check_evaluations()
        if e.check_name == "small_fragments" and not e.passed
    }
    assert failing == {("sales/orders", dg.AssetCheckSeverity.ERROR), ("sales/customers", dg.AssetCheckSeverity.ERROR)}

    root = f"{warehouse}/catalog"
    before = mvcc.Catalog.open(root).latest_version
    job = build_catalog_maintenance_job(example.CATALOG_TABLES, older_than=timedelta(0))
    run = job.execute_in_process(instance=instance, resources={"mvcc_catalog": MvccCatalogResource(root_uri=root)})
    assert run.success
    catalog = mvcc.Catalog.open(root)
    assert catalog.latest_version == before + 2  # one compaction per table
    for name in ("sales.orders", "sales.customers"):
        assert len(catalog.table(name).get_fragments()) == 1
    observed = {o.asset_key.to_user_string(): o for o in run.asset_observations_for_node("compact_tables")}
    assert set(observed) == {"sales/orders", "sales/customers"}
    assert all(o.metadata["mvcc/operation"].value == "Rewrite" for o in observed.values())
    cleanup = next(
        e for e in run.all_events if e.event_type == dg.DagsterEventType.STEP_OUTPUT and e.step_key == "cleanup_catalog"
    )
    assert cleanup.event_specific_data.metadata["catalog_versions_removed"].value  # older_than=0: old versions go
    orders = catalog.table("sales.orders").to_table()
    assert orders.num_rows == 3 * example.ORDERS_PER_DAY

    # Re-writing one day (a deletion vector on the compacted fragment and one new fragment): the checks pass.
    rerun = dg.materialize(
        [*example.CATALOG_ASSETS, *checks], instance=instance, resources=resources, partition_key="2026-11-03"
    )
    assert rerun.success
    evaluations = rerun.get_asset_check_evaluations()
    assert len(evaluations) == 2 * len(CHECKS)
    assert all(e.passed for e in evaluations), [(e.asset_key, e.check_name) for e in evaluations if not e.passed]


def test_catalog_maintenance_bad_input(instance: dg.DagsterInstance, tmp_path: Path) -> None:
    """Bad settings fail when the job is built, naming the job and the setting; a run on a catalog that was
    never written fails naming it, without a retry, and creates nothing."""
    with pytest.raises(ValueError, match="mvcc_catalog_maintenance: older_than must be a non-negative"):
        build_catalog_maintenance_job(["sales/orders"], older_than=timedelta(days=-1))
    with pytest.raises(ValueError, match="mvcc_catalog_maintenance: retain_versions must be a positive int"):
        build_catalog_maintenance_job(["sales/orders"], retain_versions=0)
    root = tmp_path / "nowhere"
    run = build_catalog_maintenance_job(["sales/orders"]).execute_in_process(
        instance=instance, resources={"mvcc_catalog": MvccCatalogResource(root_uri=str(root))}, raise_on_error=False
    )
    assert not run.success
    (failure,) = [e for e in run.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    message = failure.event_specific_data.error.message
    assert f"the catalog at {root}" in message and "not retried" in message
    assert not root.exists()
