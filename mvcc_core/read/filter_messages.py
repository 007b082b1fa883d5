"""The words of filter errors that need no SQL parser: an error's first line, a literal's hint, an unknown
column with its close matches, and the errors Arrow signals a bad expression with.

Kept apart from `sql_source` (which builds on sqlglot) so that scans, writes and the CLI import them without
loading the SQL parser; it is loaded when a SQL string is first translated.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

import pyarrow as pa

# Arrow signals a bad kernel, cast or field reference with one of these; pa.scalar() overflows with the other.
ARROW_ERRORS = (pa.ArrowException, OverflowError)

_COLUMNS_LISTED = 30


def first_line(error: BaseException) -> str:
    """The first line of an error's message (its type's name when it has none).

    Args:
        error: the error
    """
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def literal_hint(error: BaseException) -> str:
    """What a failed parse of a string literal adds for a reader: this module's own explanations (a time of
    day, TRUE or FALSE), not Arrow's restatement of the failure.

    Args:
        error: the error of a string literal's cast
    """
    detail = first_line(error)
    if detail.startswith(("Failed to parse", "The string", "Invalid", "Unsupported")):
        return ""
    return f" ({detail})"


def unknown_column_problem(name: str, names: Sequence[str]) -> str:
    """ "unknown column 'idd'; did you mean 'id'?" with the close matches (difflib), then the columns there are.

    Args:
        name: the column name as the user wrote it
        names: the columns there are
    """
    # the same name in another case is the one meant; else difflib's closest names
    close = [n for n in names if n.lower() == name.lower() and n != name]
    close = close or difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    shown = ", ".join(names[:_COLUMNS_LISTED])
    if len(names) > _COLUMNS_LISTED:
        shown += f", ... ({len(names) - _COLUMNS_LISTED} more)"
    hint = ""
    if close:
        case = " names are case-sensitive" if close[0].lower() == name.lower() else ""
        hint = f" (did you mean {' or '.join(repr(n) for n in close)}?{case})"
    return f"unknown column {name!r}{hint}; available columns: {shown}"
