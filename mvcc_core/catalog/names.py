"""Object names in a catalog: `schema.object`, or `object` in the default schema `main`."""

from __future__ import annotations

DEFAULT_SCHEMA = "main"


def split(name: str) -> tuple[str, str]:
    """`schema.table` (or `table`, in the default schema) as its two parts.

    Args:
        name: a table or view name, `schema.name` or `name`

    Raises:
        ValueError: the name is empty or has more than one `.` or a `/`
    """
    if not isinstance(name, str) or not name or name.count(".") > 1 or name.startswith(".") or name.endswith("."):
        raise ValueError(f"a table or view name is 'name' or 'schema.name', got {name!r}")
    if "/" in name:
        raise ValueError(f"a table or view name has no '/', got {name!r}")
    schema, _, table = name.rpartition(".")
    return schema or DEFAULT_SCHEMA, table


def qualified(name: str) -> str:
    """The object's full name, `schema.name`.

    Args:
        name: a table or view name, `schema.name` or `name`
    """
    return ".".join(split(name))


def check_schema_name(name: str) -> str:
    """`name`, once checked to be a valid schema name.

    Args:
        name: the schema name given

    Raises:
        ValueError: it is empty or has a `.` or `/`
    """
    if not isinstance(name, str) or not name or "." in name or "/" in name:
        raise ValueError(f"a schema name is a non-empty string without '.' or '/', got {name!r}")
    return name
