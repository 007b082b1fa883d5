"""Retention on S3 (a real moto server, through `benchmarks/latency_proxy.py`, which counts every request): each
directory is listed once, each manifest read once, the deletions go in batches; the rows of every kept version
read the same after. A cleanup process killed at a random moment, or at a failpoint, leaves every version still
listed readable, and a rerun finishes the job."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout root: `benchmarks` is a package
import mvcc_core as mvcc  # noqa: E402
from benchmarks.latency_proxy import LatencyProxy  # noqa: E402
from mvcc_core.failpoints import DEFAULT_EXIT_CODE, ENV_VAR  # noqa: E402
from mvcc_core.format.manifest import list_manifests  # noqa: E402
from mvcc_core.format.referenced_files import referenced_files  # noqa: E402

pytestmark = pytest.mark.s3

ROOT = Path(__file__).resolve().parents[1]
KEEP = 3
COMPACT_EVERY = 10


def _rows(start: int, n: int = 5) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "name": [f"r{i}" for i in range(n)]})


def _build(uri: str, opts: dict[str, Any], versions: int) -> mvcc.Table:
    """`versions` versions: appends, every COMPACT_EVERY-th a compaction (whose inputs only old versions name)."""
    t = mvcc.write_table(_rows(0), uri, storage_options=opts)
    appended = 5
    while t.version < versions:
        if (t.version + 1) % COMPACT_EVERY == 0:
            t.optimize.compact_files()
        else:
            t.append(_rows(appended))
            appended += 5
    return t


def _contents(uri: str, opts: dict[str, Any], versions: list[int]) -> dict[int, list[dict[str, Any]]]:
    return {
        v: mvcc.open_table(uri, version=v, storage_options=opts).to_table().sort_by("id").to_pylist() for v in versions
    }


def _version_numbers(uri: str, opts: dict[str, Any]) -> list[int]:
    return [v["version"] for v in mvcc.open_table(uri, storage_options=opts).versions()]


def _keys(s3_client: Any, uri: str) -> set[str]:
    bucket, prefix = uri.removeprefix("s3://").split("/", 1)
    out: set[str] = set()
    for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        out.update(o["Key"][len(prefix) + 1 :] for o in page.get("Contents", []))
    return out


def _referenced(uri: str, opts: dict[str, Any]) -> set[str]:
    """Every file the table's versions need: their manifests and what each references."""
    out: set[str] = set()
    for loc in list_manifests(mvcc.open_table(uri, storage_options=opts).state.store):
        out.add(loc.path)
        out |= referenced_files(mvcc.open_table(uri, version=loc.version, storage_options=opts).state.manifest)
    return out


@pytest.fixture
def proxy(s3_server: str) -> Iterator[LatencyProxy]:
    with LatencyProxy(s3_server) as p:
        yield p


@pytest.fixture
def via_proxy(s3_options: dict[str, Any], proxy: LatencyProxy) -> dict[str, Any]:
    return {**s3_options, "aws_endpoint": proxy.url}


@pytest.mark.parametrize("versions", [25, pytest.param(120, marks=pytest.mark.slow)])
def test_requests_are_bounded_and_kept_versions_read_the_same(
    s3_uri: str, s3_options: dict[str, Any], via_proxy: dict[str, Any], proxy: LatencyProxy, versions: int
) -> None:
    _build(s3_uri, s3_options, versions)
    all_versions = _version_numbers(s3_uri, s3_options)
    kept = all_versions[-KEEP:]
    before = _contents(s3_uri, s3_options, kept)
    t = mvcc.open_table(s3_uri, storage_options=via_proxy)
    proxy.reset()
    stats = t.cleanup_old_versions(older_than=timedelta(0), retain_versions=KEEP)
    counts = proxy.counts()
    assert stats.old_versions == len(all_versions) - KEEP
    assert stats.data_files_removed > 0  # the compactions' inputs went too
    # one listing of each of _versions/, data/, _deletions/, _transactions/, _indices/ and _refs/ (no tag, no
    # branch: nothing more of _refs/ is read), one LIST for versions committed meanwhile; none of it grows with
    # the number of versions (below 1,000 keys a directory)
    assert counts.get("LIST", 0) <= 7, counts
    assert counts.get("GET manifest", 0) == len(all_versions), counts  # each manifest read once
    # fewer than 1,000 files: one DeleteObjects for the old manifests, then one for the files only they named
    assert counts.get("POST delete-batch", 0) <= 2, counts
    assert counts["total"] <= len(all_versions) + 9, counts
    assert counts["in flight"] > 1, counts  # the reads overlap
    assert _version_numbers(s3_uri, s3_options) == kept
    assert _contents(s3_uri, s3_options, kept) == before


def test_a_tag_still_protects_its_version_on_s3(
    s3_uri: str, s3_options: dict[str, Any], via_proxy: dict[str, Any], proxy: LatencyProxy
) -> None:
    t = _build(s3_uri, s3_options, 30)
    t.tags.create("keep-me", 4)
    before = _contents(s3_uri, s3_options, [4, t.version])
    handle = mvcc.open_table(s3_uri, storage_options=via_proxy)
    proxy.reset()
    stats = handle.cleanup_old_versions(older_than=timedelta(0), error_if_tagged_old_versions=False)
    assert 4 not in stats.removed_versions
    assert _version_numbers(s3_uri, s3_options) == [4, t.version]
    assert _contents(s3_uri, s3_options, [4, t.version]) == before
    counts = proxy.counts()
    assert counts.get("LIST", 0) <= 8, counts  # the tags' directory listed once more
    assert counts.get("GET manifest", 0) == t.version, counts  # the policy is the handle's: no manifest read twice


_CHILD = """
import json, sys
from datetime import timedelta
import mvcc_core as mvcc
from mvcc_core.maintenance import cleanup
uri, opts, chunk = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
cleanup.DELETE_CHUNK = chunk  # many small batches: the process dies between two of them
print("start", flush=True)
mvcc.open_table(uri, storage_options=opts).cleanup_old_versions(older_than=timedelta(0), retain_versions=KEEP)
print("done", flush=True)
""".replace("KEEP", str(KEEP))


def _child(uri: str, opts: dict[str, Any], chunk: int, points: str = "") -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env[ENV_VAR] = points
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, uri, json.dumps(opts), str(chunk)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _check_whole_then_rerun(uri: str, opts: dict[str, Any], s3_client: Any, kept: dict[int, list]) -> None:
    """Every version still listed opens and reads; the kept ones as before; a rerun leaves only the kept versions,
    and (past the window, here with delete_unverified) nothing no kept version needs."""
    listed = _version_numbers(uri, opts)
    assert set(kept) <= set(listed), (sorted(kept), listed)
    for v in listed:  # whole or gone: a version still listed reads
        mvcc.open_table(uri, version=v, storage_options=opts).to_table()
    assert _contents(uri, opts, sorted(kept)) == kept
    stats = mvcc.open_table(uri, storage_options=opts).cleanup_old_versions(
        older_than=timedelta(0), retain_versions=KEEP
    )
    assert stats.old_versions == len(listed) - KEEP
    assert _version_numbers(uri, opts) == sorted(kept)
    assert _contents(uri, opts, sorted(kept)) == kept
    mvcc.open_table(uri, storage_options=opts).cleanup_old_versions(
        older_than=timedelta(0), retain_versions=KEEP, delete_unverified=True
    )
    assert _keys(s3_client, uri) == _referenced(uri, opts)
    assert _contents(uri, opts, sorted(kept)) == kept


@pytest.mark.slow
@pytest.mark.parametrize(("point", "chunk"), [("cleanup.after_manifests", 1000), ("cleanup.after_delete_batch", 2)])
def test_cleanup_killed_at_a_failpoint_leaves_versions_whole(
    s3_uri: str, s3_options: dict[str, Any], s3_client: Any, point: str, chunk: int
) -> None:
    _build(s3_uri, s3_options, 40)
    versions = _version_numbers(s3_uri, s3_options)
    kept = _contents(s3_uri, s3_options, versions[-KEEP:])
    child = _child(s3_uri, s3_options, chunk, f"{point}=exit")
    out, err = child.communicate(timeout=120)
    assert child.returncode == DEFAULT_EXIT_CODE, (out, err)
    left = _version_numbers(s3_uri, s3_options)
    if point == "cleanup.after_manifests":
        assert left == versions[-KEEP:]  # every old manifest went first, none of the files yet
    else:
        assert len(left) > KEEP  # 19 batches of 2 old manifests, 8 at once: the first done, not all
    _check_whole_then_rerun(s3_uri, s3_options, s3_client, kept)


@pytest.mark.slow
def test_cleanup_killed_at_random_moments_leaves_versions_whole(
    s3_bucket: str, s3_options: dict[str, Any], s3_client: Any, proxy: LatencyProxy
) -> None:
    seed = int(os.environ.get("MVCC_TEST_SEED", time.time_ns() % 1_000_000))
    rng = random.Random(seed)
    proxy.delay_ms = 5  # each request held: the deletions take long enough to be interrupted
    via = {**s3_options, "aws_endpoint": proxy.url}
    for attempt in range(3):
        uri = f"s3://{s3_bucket}/killed-{seed}-{attempt}"
        _build(uri, s3_options, 40)
        versions = _version_numbers(uri, s3_options)
        kept = _contents(uri, s3_options, versions[-KEEP:])
        child = _child(uri, via, 3)
        assert child.stdout is not None and child.stdout.readline().strip() == "start"
        time.sleep(rng.uniform(0.0, 1.5))
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
        _check_whole_then_rerun(uri, s3_options, s3_client, kept)


def test_manifest_reads_are_streamed_with_a_bounded_read_ahead() -> None:
    """20,000 versions are never all in memory: at most 2 * READ_WORKERS manifests are read ahead of the one
    being judged, and they arrive in version order."""
    import threading

    from mvcc_core.format.manifest import ManifestLocation
    from mvcc_core.format.naming import ManifestNaming
    from mvcc_core.io import open_store
    from mvcc_core.maintenance import cleanup

    store = open_store(f"memory://streamed-{time.time_ns()}")
    lock = threading.Lock()
    started = [0]

    def read(loc: ManifestLocation) -> str:
        with lock:
            started[0] += 1
        return f"v{loc.version}"

    locations = (ManifestLocation(v, ManifestNaming.V2, f"_versions/{v}.manifest") for v in range(1, 20_001))
    consumed, most_ahead = 0, 0
    for loc, result in cleanup._manifests(store, locations, read):
        consumed += 1
        assert result == f"v{loc.version}" and loc.version == consumed
        with lock:
            most_ahead = max(most_ahead, started[0] - consumed)
    assert consumed == 20_000
    assert most_ahead <= 2 * cleanup.READ_WORKERS
