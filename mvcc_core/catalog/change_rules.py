"""DuckLake's logical conflicts, decided on the changes two catalog versions made.

Design notes: docs/guide/catalog.md, "The change rules, as implemented".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Change:
    """One high-level change of a catalog version (DuckLake's `snapshot_changes` entry)."""

    kind: str
    name: str  # a schema name, or a table's `schema.table`

    def as_dict(self) -> dict[str, str]:
        return {"change": self.kind, "name": self.name}

    @classmethod
    def from_dict(cls, d: dict[str, str]) -> Change:
        """A change as a catalog version's properties record it.

        Args:
            d: `{"change": kind, "name": object}`
        """
        return cls(d["change"], d["name"])

    @property
    def schema(self) -> str:
        return self.name.split(".", 1)[0]


# An overwrite is a delete and an insert (DuckLake has no overwrite of its own).
_DELETES = {"deleted_from_table", "overwrote_table"}
_INSERTS = {"inserted_into_table", "overwrote_table"}
_CREATES = {"created_table", "created_view"}
_DROPS = {"dropped_table", "dropped_view"}
_ALTERS = {"altered_table", "altered_view"}
# Row-level deletes on both sides (a delete, or the deleting half of a merge_insert): DuckLake, which cannot
# see rows, calls every such pair a conflict; the core's resolver sees the rows each deleted, so the pair is
# left to the table's own rules (`CatalogTransaction` rebases it, or refuses it when the rows overlap).
ROW_LEVEL = "deleted_from_table"


@dataclass(frozen=True)
class Rule:
    """One of DuckLake's conflict rules: `ours` conflicts with `theirs` when `applies(ours, theirs)`."""

    code: str  # stable, for code that reacts to one rule (`CatalogConflictError.rule_code`)
    text: str
    ours: frozenset[str]
    theirs: frozenset[str]
    same: Callable[[Change, Change], bool]
    retryable: bool
    refined_by_rows: bool = False  # a pair of row-level deletes is decided by the table's rules instead


def _same_name(a: Change, b: Change) -> bool:
    return a.name == b.name


def _schema_of_ours(ours: Change, theirs: Change) -> bool:
    return ours.schema == theirs.name


def _r(
    code: str,
    text: str,
    ours: set[str],
    theirs: set[str],
    same: Callable[[Change, Change], bool],
    retryable: bool,
    refined_by_rows: bool = False,
) -> Rule:
    return Rule(code, text, frozenset(ours), frozenset(theirs), same, retryable, refined_by_rows)


RULES: tuple[Rule, ...] = (
    # Schemas
    _r(
        "both_create_schema",
        "both snapshots create a schema with the same name",
        {"created_schema"},
        {"created_schema"},
        _same_name,
        False,
    ),
    _r(
        "both_drop_schema",
        "both snapshots drop the same schema",
        {"dropped_schema"},
        {"dropped_schema"},
        _same_name,
        False,
    ),
    _r(
        "drop_schema_with_new_entry",
        "a snapshot tries to drop a schema in which another transaction created an entry",
        {"dropped_schema"},
        _CREATES,
        lambda o, t: t.schema == o.name,
        False,
    ),
    # Tables / views
    _r(
        "both_create_name",
        "both snapshots create a table or view with the same name in the same schema",
        _CREATES,
        _CREATES,
        _same_name,
        False,
    ),
    _r(
        "create_in_dropped_schema",
        "a snapshot tries to create a table or view in a schema that was dropped by another snapshot",
        _CREATES,
        {"dropped_schema"},
        _schema_of_ours,
        False,
    ),
    _r("both_drop_name", "both snapshots drop the same table or view", _DROPS, _DROPS, _same_name, False),
    _r(
        "alter_dropped_or_altered",
        "a snapshot tries to alter a table or view that was dropped or altered by another snapshot",
        _ALTERS,
        _DROPS | _ALTERS,
        _same_name,
        False,
    ),
    # Data
    _r(
        "insert_into_dropped_or_altered",
        "a snapshot tries to insert data into a table that was dropped or altered by another snapshot",
        _INSERTS,
        {"dropped_table", "altered_table"},
        _same_name,
        False,
    ),
    _r(
        "delete_from_dropped_or_altered",
        "a snapshot tries to delete data from a table that was dropped or altered by another snapshot",
        _DELETES,
        {"dropped_table", "altered_table"},
        _same_name,
        False,
    ),
    _r(
        "delete_from_deleted_or_compacted",
        "a snapshot tries to delete data from a table that was deleted from or compacted by another snapshot",
        _DELETES,
        _DELETES | {"compacted_table"},
        _same_name,
        True,
        refined_by_rows=True,
    ),
    # Compaction
    _r(
        "compact_deleted",
        "a snapshot tries to compact a table that was deleted from by another snapshot",
        {"compacted_table"},
        _DELETES,
        _same_name,
        True,
    ),
    _r(
        "compact_dropped",
        "a snapshot tries to compact a table that was dropped by another snapshot",
        {"compacted_table"},
        {"dropped_table"},
        _same_name,
        False,
    ),
)


def find_conflict(ours: Sequence[Change], theirs: Sequence[Change]) -> tuple[Rule, str] | None:
    """The first rule any pair (ours, theirs) breaks, and the object it names; None if none.

    Args:
        ours: the changes of the transaction publishing
        theirs: the changes of a catalog version committed since its snapshot
    """
    for rule in RULES:
        for o in ours:
            if o.kind not in rule.ours:
                continue
            for t in theirs:
                if rule.refined_by_rows and o.kind == t.kind == ROW_LEVEL:
                    continue
                if t.kind in rule.theirs and rule.same(o, t):
                    return rule, o.name
    return None
