"""`mvcc advise URI... --format text|json|openmetrics`: the OpenMetrics text parsed back with prometheus_client's
parsers and compared with the API's answers and the files on disk; a table that cannot be read is
`mvcc_table_up 0`, named on stderr, and the others still print (exit 1)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner, Result
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

import mvcc_core as mvcc
from mvcc_core import cli


def run(*args: Any) -> Result:
    return CliRunner().invoke(cli.cli, [str(a) for a in args], catch_exceptions=False)


def busy(uri: str) -> mvcc.Table:
    """Small fragments, deletions, an index that misses fragments, eight versions."""
    t = mvcc.write_table(pa.table({"id": list(range(100)), "k": ["a"] * 100}), uri)
    t.create_index("id")
    for i in range(4):
        t.append(pa.table({"id": [100 + i], "k": ["b"]}))
    t.delete("id < 30")
    return t


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(metric, sorted labels): value}, through the Prometheus text parser (what a textfile collector reads)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: dict, name: str, uri: str, **labels: str) -> float:
    return found[(name, tuple(sorted({"table": uri, **labels}.items())))]


def disk_bytes(root: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(root) for f in files)


def test_openmetrics_figures_are_the_apis(tmp_path: Path) -> None:
    one, two = str(tmp_path / "one"), str(tmp_path / 'we"ird\\name')  # a label value that needs escaping
    a = busy(one)
    b = mvcc.write_table(pa.table({"id": list(range(10))}), two)
    result = run("advise", one, two, "--format", "openmetrics")
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("# EOF\n")
    assert list(openmetrics_families(result.stdout))  # valid OpenMetrics, not only the older text format
    found = samples(result.stdout)
    for uri, t in ((one, a), (two, b)):
        fragments = t.get_fragments()
        physical = sum(f.physical_rows for f in fragments)
        deleted = sum(f.num_deletions for f in fragments)
        live_bytes = sum(
            sum(df.file_size_bytes for df in f.data_files()) * f.count_rows() / f.physical_rows for f in fragments
        )
        assert value(found, "mvcc_table_up", uri) == 1
        assert value(found, "mvcc_table_version", uri) == t.version
        assert value(found, "mvcc_table_fragments", uri) == len(fragments)
        assert value(found, "mvcc_table_small_fragments", uri) == len(fragments)  # all below 1,048,576 rows
        assert value(found, "mvcc_table_rows", uri) == t.count_rows()
        assert value(found, "mvcc_table_deleted_rows_ratio", uri) == pytest.approx(deleted / physical)
        assert value(found, "mvcc_table_live_bytes", uri) == round(live_bytes)
        assert value(found, "mvcc_table_stored_bytes", uri) == disk_bytes(uri)
        ratio = disk_bytes(uri) / round(live_bytes)
        assert value(found, "mvcc_table_stored_over_live_ratio", uri) == pytest.approx(ratio)
        assert value(found, "mvcc_table_versions", uri) == len(t.versions())
        advised = {x.kind: x.score for x in t.optimize.recommend()}
        for kind in ("compact", "materialize_deletions", "optimize_indices", "retention"):
            assert value(found, "mvcc_advice_score", uri, kind=kind) == pytest.approx(advised.get(kind, 0.0)), kind
    assert value(found, "mvcc_table_deleted_rows_ratio", one) == pytest.approx(30 / 104)
    assert value(found, "mvcc_advice_score", one, kind="optimize_indices") > 0
    assert value(found, "mvcc_advice_score", two, kind="compact") == 0


def test_small_fragments_follow_the_tables_target(tmp_uri: str) -> None:
    t = busy(tmp_uri)
    t.update_config({"mvcc.compaction.target_rows_per_fragment": "50"})
    found = samples(run("advise", tmp_uri, "--format", "openmetrics").stdout)
    small = sum(1 for f in t.get_fragments() if f.count_rows() < 50)
    assert value(found, "mvcc_table_small_fragments", tmp_uri) == small == 4  # the 100-row one (70 live) is not


def test_a_table_that_cannot_be_read_is_down_and_the_others_print(tmp_path: Path) -> None:
    good, missing = str(tmp_path / "good"), str(tmp_path / "missing")
    busy(good)
    result = run("advise", missing, good, "--format", "openmetrics")
    assert result.exit_code == 1
    assert f"mvcc: error: {missing}: no table at {missing}" in result.stderr
    found = samples(result.stdout)
    assert value(found, "mvcc_table_up", missing) == 0 and value(found, "mvcc_table_up", good) == 1
    assert not [k for k in found if dict(k[1]).get("table") == missing and k[0] != "mvcc_table_up"]
    assert value(found, "mvcc_table_fragments", good) == 5
    # a policy value written around update_config's check: advice cannot be given, so the table is down too
    bad = str(tmp_path / "bad")
    mvcc.write_table(pa.table({"id": [1]}), bad).commit(
        mvcc.operations.UpdateConfig.of({"mvcc.compaction.max_bytes": "lots"}, [])
    )
    down = run("advise", bad, good, "--format", "openmetrics")
    assert down.exit_code == 1 and "'mvcc.compaction.max_bytes' = 'lots'" in down.stderr
    assert value(samples(down.stdout), "mvcc_table_up", bad) == 0
    text = run("advise", good, missing)
    assert text.exit_code == 1 and f"maintenance advice of {good}" in text.stdout and missing in text.stderr
    listed = run("advise", good, missing, "--json")
    assert listed.exit_code == 1
    answers = json.loads(listed.stdout)
    assert [x["uri"] for x in answers] == [good, missing]
    assert "no table" in answers[1]["error"] and answers[0]["figures"]["fragments"] == 5


def test_json_alias_and_format_json_agree(tmp_uri: str) -> None:
    t = busy(tmp_uri)
    alias, named = run("advise", tmp_uri, "--json"), run("advise", tmp_uri, "--format", "json")
    assert alias.exit_code == named.exit_code == 0 and json.loads(alias.stdout) == json.loads(named.stdout)
    one = json.loads(alias.stdout)
    assert one["version"] == t.version and [a["kind"] for a in one["advice"]] == [
        a.kind for a in t.optimize.recommend()
    ]
    assert one["figures"]["versions"] == len(t.versions())
    both = run("advise", tmp_uri, "--json", "--format", "openmetrics")
    assert both.exit_code == 2 and "not both" in both.stderr


@pytest.mark.s3
def test_openmetrics_on_s3(s3_uri: str, s3_options: dict[str, Any]) -> None:
    t = mvcc.write_table(pa.table({"id": [1, 2]}), s3_uri, storage_options=s3_options)
    t.append(pa.table({"id": [3]}))
    opts = [a for k, v in s3_options.items() for a in ("-o", f"{k}={v}")]
    result = run("advise", s3_uri, *opts, "--format", "openmetrics")
    assert result.exit_code == 0, result.output
    found = samples(result.stdout)
    assert value(found, "mvcc_table_versions", s3_uri) == 2 and value(found, "mvcc_table_fragments", s3_uri) == 2
    listing = sum(m.size for m in t.state.store.list(""))
    assert value(found, "mvcc_table_stored_bytes", s3_uri) == listing > 0
