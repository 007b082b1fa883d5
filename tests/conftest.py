"""Shared fixtures: table locations on a local disk, in memory and on a real S3-compatible HTTP server.

The S3 server is moto in server mode, started once per session as a separate process on 127.0.0.1, so
that S3 tests exercise the real HTTP path (s3fs, botocore, pyarrow's S3 client, conditional PUT) and
several OS processes can share one bucket. It runs through `tests/moto_server.py`, which handles moto's
write requests one at a time: moto's own conditional PUT (and DynamoDB conditional put) is a check and a
write on separate steps of a threaded server, so concurrent requests could both win (see that file and the
storage section of docs/reference/format.md).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from moto_process import moto_server

TIERS = ("fast", "slow", "all")


def pytest_addoption(parser: pytest.Parser) -> None:
    """`--tier`: which tests run. The fast tier is what a plain `pytest` runs (a few minutes on two cores); the
    slow tier holds the tests marked `slow` (several processes, stress runs on S3, Spark Connect, Dagster's
    multiprocess executor and daemon); `.ci/run` runs both."""
    parser.addoption(
        "--tier",
        choices=TIERS,
        default="fast",
        help="fast (default: every test not marked slow), slow (only the slow ones) or all",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselects the tests outside the chosen tier (they are reported as deselected, not skipped)."""
    tier = config.getoption("--tier")
    if tier == "all":
        return
    keep, drop = [], []
    for item in items:
        is_slow = item.get_closest_marker("slow") is not None
        (keep if is_slow == (tier == "slow") else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_report_header(config: pytest.Config) -> str:
    tier = config.getoption("--tier")
    others = {"fast": "`--tier slow` runs the slow tests, `--tier all` every test", "slow": "", "all": ""}[tier]
    return f"mvcc test tier: {tier}" + (f" ({others})" if others else "")


S3_BUCKET = "mvcc-test"
S3_KEY = "testing"
S3_REGION = "us-east-1"


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """Endpoint url of a moto S3 server (writes serialized, `tests/moto_server.py`) for the whole session."""
    with moto_server() as url:
        yield url


@pytest.fixture(scope="session")
def s3_client(s3_server: str) -> Any:
    """A plain boto3 client on the session's server, for looking at what mvcc wrote."""
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=s3_server,
        aws_access_key_id=S3_KEY,
        aws_secret_access_key=S3_KEY,
        region_name=S3_REGION,
    )


@pytest.fixture(scope="session")
def s3_bucket(s3_client: Any) -> str:
    """The test bucket, created once on the session's server."""
    s3_client.create_bucket(Bucket=S3_BUCKET)
    return S3_BUCKET


@pytest.fixture
def s3_options(s3_server: str) -> dict[str, Any]:
    """Lance-style storage options for the session's S3 server."""
    return {
        "aws_access_key_id": S3_KEY,
        "aws_secret_access_key": S3_KEY,
        "aws_endpoint": s3_server,
        "aws_region": S3_REGION,
    }


@pytest.fixture
def s3_uri(s3_bucket: str) -> str:
    """A fresh, empty table location on the S3 server."""
    return f"s3://{s3_bucket}/{uuid.uuid4().hex}"


@pytest.fixture
def tmp_uri(tmp_path: Path) -> str:
    """A fresh local table location (a plain path string)."""
    return str(tmp_path / "table")


@pytest.fixture
def memory_uri() -> Iterator[str]:
    """A fresh memory:// table location, emptied afterwards (the memory filesystem is process-wide)."""
    uri = f"memory://mvcc-{uuid.uuid4().hex}"
    yield uri
    from fsspec.implementations.memory import MemoryFileSystem

    with contextlib.suppress(FileNotFoundError):
        MemoryFileSystem().rm(MemoryFileSystem._strip_protocol(uri), recursive=True)


@pytest.fixture(params=["local", "memory", pytest.param("s3", marks=pytest.mark.s3)])
def any_uri(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any] | None]:
    """(uri, storage_options) for each backend; the S3 server starts only if an s3 case runs."""
    if request.param == "local":
        return request.getfixturevalue("tmp_uri"), None
    if request.param == "memory":
        return request.getfixturevalue("memory_uri"), None
    return request.getfixturevalue("s3_uri"), request.getfixturevalue("s3_options")
