"""Object names in a catalog: `schema.object`, or `object` in the default schema `main`.

One rule per kind of name, `mvcc_core.names` (`CATALOG_SCHEMA`, `CATALOG_TABLE`, `CATALOG_BRANCH`), applied where
a name is created (create schema, table or view, rename, branch create: `split`, `check_schema_name`,
`check_branch_name`) and where a `__manifest` row is read back (`row_name_problem`, used by `entries.py`), so a
name the catalog accepts is one every reader accepts, and a row no writer could have made is recognised.
"""

from __future__ import annotations

from mvcc_core import names
from mvcc_core.errors import BranchError, InvalidNameError

DEFAULT_SCHEMA = "main"

__all__ = ["DEFAULT_SCHEMA", "check_branch_name", "check_schema_name", "qualified", "row_name_problem", "split"]


def _split_problem(name: object) -> tuple[str | None, tuple[str, str] | None]:
    """(the reason `name` is not `schema.name` or `name`, None) or (None, its two parts)."""
    if not isinstance(name, str) or not name:
        return f"a table or view name is 'name' or 'schema.name', got {name!r}", None
    schema, dot, table = name.partition(".")
    if not dot:
        schema, table = DEFAULT_SCHEMA, name
    for kind, part in ((names.CATALOG_SCHEMA, schema), (names.CATALOG_TABLE, table)):
        reason = names.problem(kind, part)
        if reason is not None:
            shown = name if len(name) <= 60 else f"{name[:40]}... ({len(name)} characters)"
            return f"{reason} (in {shown!r}: a table or view name is 'name' or 'schema.name')", None
    return None, (schema, table)


def split(name: str) -> tuple[str, str]:
    """`schema.table` (or `table`, in the default schema) as its two parts, each checked against its rule
    (`names.CATALOG_SCHEMA`, `names.CATALOG_TABLE`: ASCII letters, digits, '_' and '-', starting with a letter
    or digit, at most 128 characters; so no '/', '\\', '..', control character, DEL or look-alike letter).

    Args:
        name: A table or view name, `schema.name` or `name`.

    Returns:
        (schema, name).

    Raises:
        InvalidNameError: (a ValueError) the name breaks the rule; the message says how.
    """
    reason, parts = _split_problem(name)
    if parts is None:
        raise InvalidNameError(reason)
    return parts


def qualified(name: str) -> str:
    """The object's full name, `schema.name`.

    Args:
        name: A table or view name, `schema.name` or `name`.

    Returns:
        `schema.name`.

    Raises:
        InvalidNameError: the name breaks the rule (`split`).
    """
    return ".".join(split(name))


def check_schema_name(name: str) -> str:
    """`name`, once checked to be a valid schema name (`names.CATALOG_SCHEMA`).

    Args:
        name: The schema name given.

    Returns:
        The name.

    Raises:
        InvalidNameError: (a ValueError) it breaks the rule.
    """
    return names.check(names.CATALOG_SCHEMA, name)


def check_branch_name(name: str) -> str:
    """`name`, once checked to be a valid catalog branch name (`names.CATALOG_BRANCH`; each table's fork takes
    the same name, so it is also a valid table branch name).

    Args:
        name: The catalog branch name given.

    Returns:
        The name.

    Raises:
        BranchError: it breaks the rule (the error every branch name gets).
    """
    for kind in (names.BRANCH, names.CATALOG_BRANCH):  # the table rule first: its words are the CLI's
        reason = names.problem(kind, name)
        if reason is not None:
            raise BranchError(reason)
    return name


def row_name_problem(object_type: str, name: object) -> str | None:
    """Why the name of a `__manifest` row of kind `object_type` is one no writer of this catalog makes; None
    when it is good. A schema row (or its tombstone) holds a schema name, a table or view row the full name
    `schema.name`; a row of a kind this code does not know is not judged (a newer format's).

    Args:
        object_type: The row's kind (`schema`, `table`, `view`, or one of their tombstones).
        name: The row's name as stored.

    Returns:
        The reason, or None.
    """
    kind = object_type.removesuffix("_tombstone")
    if kind == "schema":
        return names.problem(names.CATALOG_SCHEMA, name)
    if kind in ("table", "view"):
        if not isinstance(name, str) or name.count(".") != 1:
            return f"a {kind} row's name is 'schema.name', got {name!r}"
        return _split_problem(name)[0]
    return None
