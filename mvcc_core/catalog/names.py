"""Object names in a catalog: `schema.object`, or `object` in the default schema `main`."""

from __future__ import annotations

DEFAULT_SCHEMA = "main"


def split(name: str) -> tuple[str, str]:
    """`schema.table` (or `table`, in the default schema) as its two parts."""
    if not isinstance(name, str) or not name or name.count(".") > 1 or name.startswith(".") or name.endswith("."):
        raise ValueError(f"a table or view name is 'name' or 'schema.name', got {name!r}")
    if "/" in name:
        raise ValueError(f"a table or view name has no '/', got {name!r}")
    schema, _, table = name.rpartition(".")
    return schema or DEFAULT_SCHEMA, table


def qualified(name: str) -> str:
    """The object's full name, `schema.name`."""
    return ".".join(split(name))


def check_schema_name(name: str) -> str:
    if not isinstance(name, str) or not name or "." in name or "/" in name:
        raise ValueError(f"a schema name is a non-empty string without '.' or '/', got {name!r}")
    return name
