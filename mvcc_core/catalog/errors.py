"""The catalog's errors, fitted into the core's error contract.

A catalog conflict is a `CommitConflictError`, and each concrete one is also the core's
`RetryableConflictError` or `IncompatibleConflictError`, so code that already decides on the core's two
types (the Dagster plugin's one conflict mapping) handles catalog transactions without a new branch.
"""

from __future__ import annotations

from typing import TypeVar

from mvcc_core.errors import (
    CommitConflictError,
    CorruptManifestError,
    IncompatibleConflictError,
    MvccError,
    RetryableConflictError,
)

#: Rule codes that are not one of DuckLake's lines (those are `conflicts.RULES[i].code`).
TABLE_RULES = "table_rules"  # the table's own (Lance) conflict rules, checked on a moved table
TABLE_GONE = "table_gone"  # the table this transaction changes was dropped (or dropped and re-created)
WRITTEN_OUTSIDE = "written_outside_catalog"  # a catalog table got a version that no catalog version publishes
RETRY_BUDGET = "publish_retry_budget"  # lost the race for the next catalog version too many times
BRANCH_PUBLISHED = "branch_published"  # a concurrent publish_branch of the same branch landed first
BRANCH_NOT_REPLAYABLE = "branch_write_not_replayable"  # a publish could not run a branch write again on main

_Conflict = TypeVar("_Conflict", bound="CatalogConflictError")


class CatalogError(MvccError):
    """A refused catalog operation: an unknown or existing object, a bad name."""


class CatalogConflictError(CommitConflictError):
    """A concurrent catalog version made this transaction's publish impossible.

    `object_name` is the object both touched, `expected_version` / `actual_version` the catalog versions
    (or, for a table written outside the catalog, the table versions) this transaction expected and found,
    `rule` the DuckLake logical conflict that fired in DuckLake's words, `rule_code` the same as a stable
    identifier for code that reacts to one rule (`RULE_CODES`).

    Args:
        message: what happened, in words
        object_name: the object both transactions touched
        expected_version: the catalog (or table) version this transaction expected
        actual_version: the one it found
        rule: the logical conflict, in DuckLake's words
        rule_code: the same as a stable identifier (`RULE_CODES`)
        **kwargs: the fields of `CommitConflictError`
    """

    def __init__(
        self,
        message: str,
        *,
        object_name: str,
        expected_version: int | None,
        actual_version: int | None,
        rule: str,
        rule_code: str,
        **kwargs: object,
    ) -> None:
        """A conflict on `object_name` found by the DuckLake rule `rule`."""
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.object_name = object_name
        self.expected_version = expected_version
        self.actual_version = actual_version
        self.rule = rule
        self.rule_code = rule_code

    @classmethod
    def with_catalog_version(
        cls: type[_Conflict],
        message: str,
        *,
        root: str,
        object_name: str,
        read_version: int,
        version: int,
        rule: str,
        rule_code: str,
        conflicting: bool = True,
    ) -> _Conflict:
        """A conflict of a transaction that read catalog version `read_version` with catalog version `version`.

        Args:
            message: what happened, in words
            root: the catalog's root (the error's `uri`)
            object_name: the object both transactions touched
            read_version: the catalog version the transaction read (also its `expected_version`)
            version: the catalog version it found (`actual_version`)
            rule: the logical conflict, in DuckLake's words
            rule_code: the same as a stable identifier (`RULE_CODES`)
            conflicting: whether `version` is the one that made the change (its `conflicting_versions`); False
                when it is only the newest version, where the change was found

        Returns:
            The error, of the class it is called on.
        """
        return cls(
            message,
            object_name=object_name,
            expected_version=read_version,
            actual_version=version,
            rule=rule,
            rule_code=rule_code,
            uri=root,
            read_version=read_version,
            conflicting_versions=[version] if conflicting else [],
        )


class RetryableCatalogConflictError(CatalogConflictError, RetryableConflictError):
    """Run the transaction again on the new catalog version; it will mean what it meant."""


class IncompatibleCatalogConflictError(CatalogConflictError, IncompatibleConflictError):
    """The other transaction changed what this one is about (dropped its table, created the same name)."""


class CatalogFormatError(CatalogError):
    """The catalog's on-disk format is newer than this code: reading works, writing needs a newer mvcc."""


class CatalogEntryError(CatalogError, CorruptManifestError):
    """A `__manifest` row that breaks an invariant of the catalog: a table path or staged manifest that would
    leave the catalog's root (or the table's directory). Nothing is opened, written or deleted through it."""
