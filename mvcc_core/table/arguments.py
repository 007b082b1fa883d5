"""The checks of arguments that the facade's modules share."""

from __future__ import annotations

import os

#: A table's location: a path or a URI (memory://, s3://).
Uri = str | os.PathLike[str]


def _uri(uri: Uri) -> str:
    """A table uri from a string or a `pathlib.Path` (pylance accepts both)."""
    if isinstance(uri, os.PathLike):
        return os.fspath(uri)
    if not isinstance(uri, str):
        raise TypeError(f"a table uri is a str or a path, got {type(uri).__name__}")
    return uri


def _check_retries(max_retries: int) -> int:
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ValueError(f"max_retries must be a non-negative int, got {max_retries!r}")
    return max_retries
