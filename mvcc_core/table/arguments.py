"""The checks of arguments that the facade's modules share."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

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


def pylance_update_values(
    values: dict[str, Any] | None,
    updates: dict[str, Any] | None,
    conflict_retries: int | None,
    retry_timeout: timedelta | None,
) -> dict[str, Any]:
    """The update's values from `values` or pylance's `updates=`, with pylance's retry options checked.

    Args:
        values: the new values as mvcc names them (column -> SQL expression or literal), or None
        updates: the same under pylance's keyword, or None (exactly one of the two is given)
        conflict_retries: pylance's retry count, checked for type (None: not given)
        retry_timeout: pylance's retry timeout, checked for type (None: not given)
    """
    if (values is None) == (updates is None):
        raise TypeError("update needs the new values: give `values` (or pylance's `updates=`), exactly once")
    if conflict_retries is not None and (isinstance(conflict_retries, bool) or not isinstance(conflict_retries, int)):
        raise TypeError(f"conflict_retries must be an int, got {type(conflict_retries).__name__}")
    if retry_timeout is not None and not isinstance(retry_timeout, timedelta):
        raise TypeError(f"retry_timeout must be a timedelta, got {type(retry_timeout).__name__}")
    if values is not None:
        return values
    assert updates is not None  # exactly one of the two is given (checked above)
    return updates
