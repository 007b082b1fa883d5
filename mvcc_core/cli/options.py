"""The `mvcc` command's arguments and exit codes: durations, storage options (version references: `refs`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import click

import mvcc_core as mvcc
from mvcc_core.durations import age_problem, parse_duration

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INCOMPATIBLE_CONFLICT = 3
EXIT_RETRYABLE_CONFLICT = 75
#: The reader of stdout went away (`mvcc scan URI | head`): 128 + SIGPIPE, what git and a shell tool killed by it
#: report; nothing is printed.
EXIT_BROKEN_PIPE = 141

#: AWS_* environment variables -> the core's storage option names (mvcc_core/io/), for s3:// uris.
#: The first variable set wins for each option; `--storage-option` wins over all of them.
AWS_ENV_OPTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("aws_access_key_id", ("AWS_ACCESS_KEY_ID",)),
    ("aws_secret_access_key", ("AWS_SECRET_ACCESS_KEY",)),
    ("aws_session_token", ("AWS_SESSION_TOKEN",)),
    ("aws_endpoint", ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")),
    ("aws_region", ("AWS_REGION", "AWS_DEFAULT_REGION")),
    ("profile", ("AWS_PROFILE",)),
)

#: `mvcc show --small-rows`'s default: compaction's default `target_rows_per_fragment`, written out so that
#: `mvcc --version` and `--help` need not import the compaction code (tests/test_cli.py checks they agree).
SMALL_ROWS = 1_048_576


def exit_code_for(exc: BaseException) -> int:
    """The documented exit code of an exception the command did not handle itself (by type only).

    Args:
        exc: the exception the command raised
    """
    if isinstance(exc, mvcc.RetryableConflictError):
        return EXIT_RETRYABLE_CONFLICT
    if isinstance(exc, mvcc.IncompatibleConflictError):
        return EXIT_INCOMPATIBLE_CONFLICT
    return EXIT_ERROR


def storage_options_for(uri: str, options: Sequence[str], env: dict[str, str] | None = None) -> dict[str, str] | None:
    """The storage options of `uri`: the AWS_* variables (s3:// only), overridden by `--storage-option k=v`.

    Args:
        uri: the table's uri
        options: the `--storage-option k=v` values
        env: the environment to read the AWS_* variables from (None: the process's)

    Raises:
        click.BadParameter: an option is not `key=value`
    """
    env = dict(os.environ) if env is None else env
    out: dict[str, str] = {}
    if uri.startswith(("s3://", "s3a://")):
        for option, names in AWS_ENV_OPTIONS:
            value = next((env[n] for n in names if env.get(n)), None)
            if value:
                out[option] = value
    for item in options:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--storage-option")
        out[key.strip()] = value
    return out or None


def storage_option_flag(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The repeatable `--storage-option KEY=VALUE` every command takes.

    Args:
        fn: the command's callback

    Returns:
        The callback with the option added.
    """
    return click.option(
        "--storage-option",
        "-o",
        "storage_option",
        multiple=True,
        metavar="KEY=VALUE",
        help="A storage option (repeatable), e.g. -o aws_region=eu-west-1 or -o external_store=sqlite:///m.db. "
        "AWS_* variables are read for s3:// uris.",
    )(fn)


def uri_and_storage(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The URI argument and the repeatable `--storage-option` every table command takes.

    Args:
        fn: the command's callback
    """
    return click.argument("uri")(storage_option_flag(fn))


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`--json`: machine-readable output instead of tables.

    Args:
        fn: the command's callback
    """
    return click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")(fn)


def publish_options(message_help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The NAME argument, `--delete-branch`, `--message` and `--json` of the two branch publish commands.

    Args:
        message_help: the help of `--message`, naming the version the publish makes

    Returns:
        A decorator adding all four to a command's callback.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn = json_option(fn)
        fn = click.option("--message", "-m", help=message_help)(fn)
        fn = click.option("--delete-branch", is_flag=True, help="Delete the branch once published.")(fn)
        return click.argument("name")(fn)

    return decorate


def open_table(uri: str, storage_option: Sequence[str]) -> mvcc.Table:
    """The latest version of the table at `uri` (a version reference: `mvcc_core.cli.refs.open_ref`).

    Args:
        uri: the table's uri
        storage_option: the `--storage-option k=v` values
    """
    return mvcc.open_table(uri, storage_options=storage_options_for(uri, storage_option))


# ---- retention and restore -----------------------------------------------------------------------------


class DurationType(click.ParamType):
    """An age as an operator types it (`7d`, `12h`, `1w2d`): `parse_duration`, and no longer than the time since
    the year 1; a usage error naming the flag otherwise."""

    name = "DURATION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> timedelta:
        """The duration as `parse_duration` reads it (`7d`, `12h`, `1d12h`); a usage error otherwise.

        Args:
            value: the option's value as typed (or already converted)
            param: the option being converted, for the error
            ctx: the command's context, for the error
        """
        if isinstance(value, timedelta):
            return value
        try:
            age = parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        if (problem := age_problem(age)) is not None:
            flag = param.opts[0] if param is not None and param.opts else "the duration"
            raise click.UsageError(f"{flag} {value}: {problem}", ctx)
        return age
