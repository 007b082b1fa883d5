"""The `mvcc` command line (docs/guide/cli.md): `commands` holds the commands, `options` their arguments and exit
codes, `output` how they print. The names below are the package's own: the console script, its exit codes and
the parsers of its arguments."""

from mvcc_core.cli.commands import cli, main
from mvcc_core.cli.options import (
    EXIT_BROKEN_PIPE,
    EXIT_ERROR,
    EXIT_INCOMPATIBLE_CONFLICT,
    EXIT_OK,
    EXIT_RETRYABLE_CONFLICT,
    EXIT_USAGE,
    exit_code_for,
    parse_duration,
    storage_options_for,
)
from mvcc_core.cli.output import format_duration, progress_bar

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_ERROR",
    "EXIT_INCOMPATIBLE_CONFLICT",
    "EXIT_OK",
    "EXIT_RETRYABLE_CONFLICT",
    "EXIT_USAGE",
    "cli",
    "exit_code_for",
    "format_duration",
    "main",
    "parse_duration",
    "progress_bar",
    "storage_options_for",
]
