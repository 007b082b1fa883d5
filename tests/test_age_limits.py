"""Ages longer than the time since the year 1 (`1000000d`): refused with the argument's name, in Python and on
the command line, before anything is read or deleted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

import mvcc_core as mvcc
from mvcc_core import cli
from mvcc_core.durations import parse_duration


def test_age_problem_names_the_limit() -> None:
    from mvcc_core.durations import age_problem

    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert age_problem(timedelta(days=3650), now) is None and age_problem(timedelta(0), now) is None
    assert "before the year 1" in (age_problem(timedelta(days=1_000_000), now) or "")
    assert "negative" in (age_problem(timedelta(days=-1), now) or "")
    assert age_problem(now - datetime.min.replace(tzinfo=UTC), now) is None  # exactly back to the year 1


def test_cleanup_refuses_an_age_before_the_year_1(tmp_path: Path) -> None:
    t = mvcc.write_table(pa.table({"id": [1]}), str(tmp_path / "t"))
    t.append(pa.table({"id": [2]}))
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(ValueError, match=r"^older_than=datetime.timedelta\(days=1000000\) reaches back before"):
        t.cleanup_old_versions(older_than=timedelta(days=1_000_000))
    with pytest.raises(ValueError, match="older_than"):
        t.cleanup_old_versions(older_than=parse_duration("999999999d"), dry_run=True)
    result = CliRunner().invoke(cli.cli, ["cleanup", str(tmp_path / "t"), "--older-than", "1000000d", "--apply"])
    assert result.exit_code == 2 and result.stdout == "", result.output
    assert "Error: --older-than 1000000d: reaches back before the year 1" in result.stderr
    assert "Traceback" not in result.stderr and "OverflowError" not in result.stderr
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing deleted
    assert t.cleanup_old_versions(older_than=timedelta(days=3650)).removed_versions == ()
