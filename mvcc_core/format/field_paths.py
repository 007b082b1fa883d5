"""Fields by path: `meta.lang` names field `lang` of the struct column `meta` (pylance's dotted paths).

A manifest keeps every field, nested ones too, as a flat list of `Field`s with parent ids; an index on a
nested field names the field's own id. These functions go from a dotted path to the field and back.
"""

from __future__ import annotations

from collections.abc import Sequence

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.format.schema import physical_name

__all__ = ["field_at", "field_path", "path_names", "physical_path"]


def field_at(fields: Sequence[pb.Field], path: str) -> tuple[pb.Field, tuple[str, ...]] | None:
    """The field a column name or dotted path names, and its path; None when there is none.

    A top-level column named exactly `path` wins (a column may have a dot in its name); else the path is
    walked through struct fields, dot by dot.

    Args:
        fields: the manifest's fields
        path: a top-level column name, or `struct.field` (at any depth)

    Returns:
        (the field, the names from the top-level column down to it), or None.
    """
    children: dict[int, list[pb.Field]] = {}
    for f in fields:
        children.setdefault(f.parent_id, []).append(f)
    for top in children.get(-1, []):
        if top.name == path:
            return top, (top.name,)
    found = _walk(children, -1, path.split("."))
    return found


def _walk(
    children: dict[int, list[pb.Field]], parent: int, parts: list[str]
) -> tuple[pb.Field, tuple[str, ...]] | None:
    """The field under `parent` at `parts` (struct children only), trying longer names first (`a.b` as one name)."""
    for f in children.get(parent, []):
        for taken in range(len(parts), 0, -1):
            if f.name != ".".join(parts[:taken]):
                continue
            if taken == len(parts):
                return f, (f.name,)
            if f.logical_type != "struct":
                continue
            below = _walk(children, f.id, parts[taken:])
            if below is not None:
                return below[0], (f.name, *below[1])
    return None


def field_path(fields: Sequence[pb.Field], field_id: int) -> tuple[pb.Field, ...]:
    """The fields from the top-level column down to the field `field_id` (empty when there is no such field).

    Args:
        fields: the manifest's fields
        field_id: the field's id
    """
    by_id = {f.id: f for f in fields}
    out: list[pb.Field] = []
    current = by_id.get(field_id)
    while current is not None:
        out.append(current)
        current = by_id.get(current.parent_id) if current.parent_id != -1 else None
    return tuple(reversed(out))


def path_names(fields: Sequence[pb.Field], field_id: int) -> str:
    """The dotted name of a field (`meta.lang`; a top-level column's own name), or its id as text if unknown.

    Args:
        fields: the manifest's fields
        field_id: the field's id
    """
    path = field_path(fields, field_id)
    return ".".join(f.name for f in path) if path else str(field_id)


def physical_path(fields: Sequence[pb.Field], field_id: int) -> tuple[str, ...]:
    """The data files' names of the fields from the top-level column down to `field_id`.

    Args:
        fields: the manifest's fields
        field_id: the field's id
    """
    return tuple(physical_name(f.id) for f in field_path(fields, field_id))
