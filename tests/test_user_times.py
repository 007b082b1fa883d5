"""Times typed by users: a string that is no tag and reads as an ISO 8601 time names the version current then
(`checkout`, `restore`, `open_table(version=)`); a tag of that name wins; otherwise the error says how to pass a
time."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone

import pyarrow as pa
import pytest

import mvcc_core as mvcc


def table(uri: str) -> mvcc.Table:
    t = mvcc.write_table(pa.table({"id": [1, 2]}), uri)
    t.append(pa.table({"id": [3]}))
    t.append(pa.table({"id": [4]}))
    return t


def test_checkout_and_restore_take_an_iso_time_with_a_zone(tmp_path) -> None:
    t = table(str(tmp_path / "t"))
    second = t.checkout(2).timestamp
    plus_one = second.astimezone(timezone(timedelta(hours=1))).isoformat()
    assert "+01:00" in plus_one
    assert t.checkout(plus_one).version == 2
    assert t.checkout(second.replace(tzinfo=None).isoformat()).version == 2  # naive: UTC
    assert mvcc.open_table(str(tmp_path / "t"), version=plus_one).version == 2
    restored = t.restore(plus_one)
    assert restored.version == 4 and restored.count_rows() == 3


def test_a_tag_spelled_like_a_time_wins(tmp_path) -> None:
    t = table(str(tmp_path / "t"))
    t.tags.create("2099-01-01", 1)
    assert t.checkout("2099-01-01").version == 1  # the tag, not the latest version before 2099
    assert t.checkout(datetime(2099, 1, 1, tzinfo=UTC)).version == 3
    assert t.checkout("2099-01-02").version == 3  # no tag of that name: the time


def test_neither_tag_nor_time_says_how_to_pass_a_time(tmp_path) -> None:
    t = table(str(tmp_path / "t"))
    with pytest.raises(mvcc.VersionNotFoundError, match=r"no tag 'nightly'; to name a time .*12:00:00\+01:00"):
        t.checkout("nightly")
    with pytest.raises(mvcc.VersionNotFoundError, match=r"no tag '2026-13-01', and '2026-13-01' is not a valid time"):
        t.checkout("2026-13-01")
    with pytest.raises(mvcc.VersionNotFoundError, match="is not a valid time: a time is an ISO 8601 date"):
        t.restore("2026-11-01 noon")
    with pytest.raises(mvcc.VersionNotFoundError, match="to name a time instead"):
        t.restore("last-tuesday")
    with pytest.raises(mvcc.VersionNotFoundError, match="no version committed at or before 2000-01-01T00:00:00"):
        t.checkout("2000-01-01T01:00:00+01:00")
    assert mvcc.open_table(str(tmp_path / "t")).version == 3  # nothing written


def test_pendulum_is_imported_only_to_read_a_time(tmp_path) -> None:
    table(str(tmp_path / "t"))
    code = (
        "import sys, mvcc_core as m; t = m.open_table(sys.argv[1]); t.checkout(2);"
        "assert 'pendulum' not in sys.modules; t.checkout('2099-01-01'); assert 'pendulum' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "t")], check=True, timeout=60)
