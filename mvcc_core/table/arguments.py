"""The checks of arguments that the facade's modules share."""

from __future__ import annotations

import os

#: A table's location: a path or a URI (memory://, s3://).
Uri = str | os.PathLike[str]

#: What names a version across branches: a version of the handle's branch, a tag, or (branch, version)
#: (branch None or "main": main; version None: the branch's latest).
BranchReference = int | str | tuple[str | None, int | None]


def as_uri(uri: Uri) -> str:
    """A table uri from a string or a `pathlib.Path` (pylance accepts both).

    Args:
        uri: the table's location as the caller gave it

    Raises:
        TypeError: it is neither a str nor a path
    """
    if isinstance(uri, os.PathLike):
        return os.fspath(uri)
    if not isinstance(uri, str):
        raise TypeError(f"a table uri is a str or a path, got {type(uri).__name__}")
    return uri


def check_retries(max_retries: int) -> int:
    """`max_retries`, once checked to be a non-negative int.

    Args:
        max_retries: the caller's retry count

    Raises:
        ValueError: it is not a non-negative int
    """
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ValueError(f"max_retries must be a non-negative int, got {max_retries!r}")
    return max_retries
