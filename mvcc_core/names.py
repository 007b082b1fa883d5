"""The rules for every name that becomes part of a path: one rule per kind of name, used where the name is
created and where it is read back (docs/guide/branches.md, "Names").

A name is checked as a whole string (`re.fullmatch`, so a trailing newline is refused, unlike `$`), in ASCII
only (a unicode look-alike of a letter is refused), against its kind's length limit. Names that start with
`_` or `.` belong to mvcc itself: temporary files (`_tmp-...`), a publish's scratch branches
(`_mvcc-publish-...`), a table's own folders (`_versions`, `_refs`, ...). A user's name can therefore never be
mistaken for one of them, nor one of them for a user's name.

`problem(kind, name)` answers in words (None: the name is good); `check(kind, name)` raises
`InvalidNameError`. Each kind's own module wraps them in the error its callers expect (`BranchError`,
`TagError`, ...), so the rule itself lives here once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mvcc_core.errors import InvalidNameError

__all__ = [
    "ASSET_KEY_PART",
    "BRANCH",
    "CATALOG_BRANCH",
    "CATALOG_SCHEMA",
    "CATALOG_TABLE",
    "SCRATCH_BRANCH_PREFIX",
    "TABLE_PATH",
    "TAG",
    "NameKind",
    "check",
    "check_table_path",
    "problem",
    "table_path_problem",
]

#: Every name of mvcc's own making starts with one of these; no user name may.
RESERVED_FIRST_CHARACTERS = "_."
#: The prefix of a publish's scratch branches (see `mvcc_core.format.branches`): refused as a user's name.
SCRATCH_BRANCH_PREFIX = "_mvcc-publish-"
#: The folders inside a table: a table path's segment after the first may not be one of them, or a table
#: would be created inside the folders of the table named by the segments before it.
TABLE_FOLDERS = frozenset({"data", "tree", "_versions", "_transactions", "_deletions", "_indices", "_refs"})


@dataclass(frozen=True)
class NameKind:
    """One kind of name and its rule.

    Attributes:
        label: What the user calls it, for messages ("branch name").
        pattern: The characters allowed, matched against the whole name.
        allowed: The same rule in words, for messages.
        max_length: The longest name allowed.
        reserved: Exact names refused (e.g. "main" for a branch).
        dots: Whether '.' may appear (never as a first or last character, never as '..').
    """

    label: str
    pattern: re.Pattern[str]
    allowed: str
    max_length: int
    reserved: frozenset[str] = frozenset()
    dots: bool = True


_DOTTED = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_DOTTED_WORDS = "ASCII letters, digits, '_', '-' and '.', starting with a letter or digit, without '..'"
_PLAIN_WORDS = "ASCII letters, digits, '_' and '-', starting with a letter or digit"

BRANCH = NameKind("branch name", _DOTTED, _DOTTED_WORDS, 200, frozenset({"main"}))
TAG = NameKind("tag name", _DOTTED, _DOTTED_WORDS, 200)
CATALOG_SCHEMA = NameKind("schema name", _PLAIN, _PLAIN_WORDS, 128, dots=False)
CATALOG_TABLE = NameKind("table name", _PLAIN, _PLAIN_WORDS, 128, dots=False)
CATALOG_BRANCH = NameKind("catalog branch name", _DOTTED, _DOTTED_WORDS, 200, frozenset({"main"}))
#: One segment of a table's path under a root (a Dagster asset key part, an Airflow hook's table name).
TABLE_PATH = NameKind("table name segment", _DOTTED, _DOTTED_WORDS, 200)
ASSET_KEY_PART = NameKind("asset key part", _DOTTED, _DOTTED_WORDS, 200)


def problem(kind: NameKind, name: object) -> str | None:
    """What is wrong with `name` as a `kind` name, in words; None when it is a good one.

    Args:
        kind: The kind of name (`BRANCH`, `TAG`, ...).
        name: The name as given.

    Returns:
        The reason it is refused, or None.
    """
    if not isinstance(name, str) or not name:
        return f"a {kind.label} must be a non-empty string, got {name!r}"
    shown = repr(name) if len(name) <= 60 else f"{name[:40]!r}... ({len(name)} characters)"
    if len(name) > kind.max_length:
        return f"{kind.label} {shown} is longer than {kind.max_length} characters"
    if name in kind.reserved:
        what = "is the default branch" if name == "main" else "is reserved"
        return f"{shown} {what}; give the {kind.label.removesuffix(' name')} another name"
    if name[0] in RESERVED_FIRST_CHARACTERS:
        return f"invalid {kind.label} {shown}: names starting with '_' or '.' are reserved for mvcc's own files"
    bad_dots = ".." in name or name.endswith(".") if kind.dots else False
    if bad_dots or not kind.pattern.fullmatch(name):
        return f"invalid {kind.label} {shown}: use {kind.allowed}"
    return None


def check(kind: NameKind, name: object) -> str:
    """`name`, once checked to be a good `kind` name.

    Args:
        kind: The kind of name (`BRANCH`, `TAG`, ...).
        name: The name as given.

    Returns:
        The name.

    Raises:
        InvalidNameError: it is not one (the message says why, in the kind's own words).
    """
    reason = problem(kind, name)
    if reason is not None:
        raise InvalidNameError(reason)
    assert isinstance(name, str)
    return name


def table_path_problem(name: object, kind: NameKind = TABLE_PATH) -> str | None:
    """What is wrong with `name` as a table's path under a root ('events' or 'sales/orders'); None when good.

    Each '/'-separated segment follows `kind`'s rule (so no '..', '.', empty segment, '\\' or control
    character), and no segment after the first is one of a table's own folders.

    Args:
        name: The path as given.
        kind: The rule for one segment (`TABLE_PATH`, or `ASSET_KEY_PART` for a Dagster asset key).

    Returns:
        The reason it is refused, or None.
    """
    if not isinstance(name, str) or not name:
        return f"a table name must be a non-empty string, got {name!r}"
    segments = name.split("/")
    for position, segment in enumerate(segments):
        reason = problem(kind, segment)
        if reason is not None:
            return f"table name {name!r}: {reason}"
        if position and segment in TABLE_FOLDERS:
            return (
                f"table name {name!r}: segment {segment!r} is a folder inside a table "
                f"({'/'.join(segments[:position])!r} may be one); choose another name"
            )
    return None


def check_table_path(name: object, kind: NameKind = TABLE_PATH) -> str:
    """`name`, once checked to be a table path that stays under its root (see `table_path_problem`).

    Args:
        name: The path as given.
        kind: The rule for one segment.

    Returns:
        The name.

    Raises:
        InvalidNameError: it is not one.
    """
    reason = table_path_problem(name, kind)
    if reason is not None:
        raise InvalidNameError(reason)
    assert isinstance(name, str)
    return name
