"""S3 credentials that are missing or refused fail in the user's words, on a moto server that checks them.

The session's shared server accepts any key; this module starts its own with authentication on
(`INITIAL_NO_AUTH_ACTION_COUNT=0`), so an unknown access key is refused as real S3 refuses it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner
from moto_process import moto_server

import mvcc_core as mvcc
from mvcc_core import cli

pytestmark = pytest.mark.s3

HINT = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"


@pytest.fixture(scope="module")
def checking_server() -> Iterator[str]:
    """Endpoint url of a moto S3 server that checks each request's credentials."""
    with moto_server({"INITIAL_NO_AUTH_ACTION_COUNT": "0"}) as url:
        yield url


def test_an_unknown_access_key_is_named_with_what_to_set(checking_server: str) -> None:
    options = {"aws_endpoint": checking_server, "aws_access_key_id": "nobody", "aws_secret_access_key": "x"}
    with pytest.raises(mvcc.errors.StorageError) as caught:
        mvcc.open_table("s3://bucket/table", storage_options=options)
    message = str(caught.value)
    assert message.startswith(
        "cannot list s3://bucket/table/_versions/: S3 refused the credentials (InvalidAccessKeyId)"
    )
    assert HINT in message and "list_first" not in message
    with pytest.raises(mvcc.errors.StorageError, match=r"S3 refused the credentials \(InvalidAccessKeyId\)"):
        mvcc.write_table(pa.table({"id": [1]}), "s3://bucket/table", storage_options=options)


def test_missing_credentials_are_named_with_what_to_set(
    checking_server: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(mvcc.errors.StorageError) as caught:
        mvcc.open_table("s3://bucket/missing-keys", storage_options={"aws_endpoint": checking_server})
    assert str(caught.value) == (
        "cannot list s3://bucket/missing-keys/_versions/: no AWS credentials were found: "
        f"{HINT} (or AWS_PROFILE), or give the storage options aws_access_key_id and aws_secret_access_key"
    )


def test_the_cli_says_the_same_in_one_line(checking_server: str) -> None:
    result = CliRunner().invoke(
        cli.cli,
        ["show", "s3://bucket/table", "-o", f"endpoint_url={checking_server}"]
        + ["-o", "aws_access_key_id=nobody", "-o", "aws_secret_access_key=x"],
    )
    assert result.exit_code == 1
    assert "S3 refused the credentials (InvalidAccessKeyId)" in result.output and "Traceback" not in result.output
