"""The error contract of mvcc: every exception mvcc raises on purpose is defined here.

Callers decide on the type, never on the message: a `RetryableConflictError` may be retried on a
fresh version, an `IncompatibleConflictError` must not be, and every other `MvccError` is a refused
operation or a broken table. Bad arguments (a wrong type, a value out of range) raise the built-in
`ValueError` / `TypeError` before anything is written (docs/design/architecture.md, "Errors").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

__all__ = [
    "BasePathError",
    "BranchError",
    "BranchExistsError",
    "BranchNotFoundError",
    "BranchNotReplayableError",
    "CatalogConflictError",
    "CatalogEntryError",
    "CatalogError",
    "CatalogFormatError",
    "CommitConflictError",
    "CommitNotSupportedError",
    "CompactionError",
    "CorruptManifestError",
    "CorruptTagError",
    "DataFileMismatchError",
    "ExternalStoreError",
    "ExternalStoreMismatchError",
    "ExternalStoreSyncError",
    "ExternalStoreUnavailableError",
    "FailpointError",
    "IncompatibleCatalogConflictError",
    "IncompatibleConflictError",
    "IndexExistsError",
    "IndexNotFoundError",
    "InvalidNameError",
    "InvalidOperationError",
    "ManifestInvariantError",
    "MvccError",
    "ObjectNotFoundError",
    "PredicateError",
    "RetryableCatalogConflictError",
    "RetryableConflictError",
    "SchemaError",
    "StorageError",
    "TableExistsError",
    "TableNotFoundError",
    "TagError",
    "TagVersionNotFoundError",
    "UnsafePathError",
    "UnsupportedFeatureError",
    "VersionNotFoundError",
]


class MvccError(Exception):
    """Base class of every error mvcc raises on purpose."""


class CommitConflictError(MvccError):
    """A concurrent commit interfered with ours.

    Carries the version ours was built on, the versions it collided with and both operation names,
    so that orchestration can report them without parsing the message.

    Args:
        message: what happened, in the user's words
        uri: the table's uri
        read_version: the version ours was built on
        conflicting_versions: the versions it collided with
        operation: our operation's name
        conflicting_operation: the other commit's operation name
        row_addresses: rows both changed, where known (up to a few)
    """

    def __init__(
        self,
        message: str,
        *,
        uri: str = "",
        read_version: int | None = None,
        conflicting_versions: Sequence[int] = (),
        operation: str | None = None,
        conflicting_operation: str | None = None,
        row_addresses: Sequence[int] = (),
    ) -> None:
        super().__init__(message)
        self.uri = uri
        self.read_version = read_version
        self.conflicting_versions = list(conflicting_versions)
        self.operation = operation
        self.conflicting_operation = conflicting_operation
        self.row_addresses = list(row_addresses)

    @property
    def conflicting_version(self) -> int | None:
        """The newest version ours collided with (None when unknown, e.g. retries exhausted)."""
        return self.conflicting_versions[-1] if self.conflicting_versions else None


class RetryableConflictError(CommitConflictError):
    """Re-read the table and run the operation again; the result will be what was intended."""


class IncompatibleConflictError(CommitConflictError):
    """A concurrent commit made this operation meaningless; do not retry automatically."""


class BranchNotReplayableError(IncompatibleConflictError):
    """A branch publish met a commit on the parent that changed the same rows, and the branch's writes cannot run
    again on the parent's newer rows (an overwrite, a pyarrow-Expression filter, a write through the low-level
    API, a type change: docs/guide/branches.md). Publishing again gives the same answer: delete the branch and redo its
    writes on a new one (an orchestrator that writes the branch itself, as write-audit-publish does, may retry).
    """


class TableNotFoundError(MvccError, ValueError):
    """No table (no manifest) at the given location (a ValueError, as pylance's "Dataset ... was not found")."""


class TableExistsError(MvccError):
    """A table already exists where a new one was to be created.

    `created_concurrently`: the table was not there when the write looked, and another writer created it
    while this one was writing (its commit of version 1 lost the put-if-not-exists). Running the caller again
    sees the table, so orchestration may retry it; a table that was there already is refused for good.

    Args:
        message: what happened, in the user's words
        uri: where the table is
        version: its latest version, where known
        created_concurrently: the table was not there when the write looked and another writer created it
            meanwhile (a retry sees it); False: it was there already
    """

    def __init__(
        self, message: str, *, uri: str = "", version: int | None = None, created_concurrently: bool = False
    ) -> None:
        super().__init__(message)
        self.uri = uri
        self.version = version
        self.created_concurrently = created_concurrently


class VersionNotFoundError(MvccError):
    """The requested version, tag or timestamp names no version of the table."""


class SchemaError(MvccError, ValueError):
    """Data whose schema does not fit the table's, or a schema mvcc cannot store (a ValueError, as pylance's
    refusals of bad schemas; pylance's append of a different schema is an OSError, see
    docs/reference/pylance_compat.md)."""


class PredicateError(MvccError, ValueError):
    """A filter that cannot be parsed or does not fit the table's schema (a ValueError, as pylance's)."""


class CorruptManifestError(MvccError):
    """A manifest or transaction file that cannot be decoded.

    `intact_version`: when the corrupt manifest is a table's latest, the newest older version that decodes
    (the one to restore; None when none does or when the error is about another file).

    Args:
        message: what happened, in the user's words
        intact_version: when the corrupt manifest is a table's latest, the newest older version that decodes
            (None when none does or when the error is about another file)
    """

    def __init__(self, message: str, *, intact_version: int | None = None) -> None:
        super().__init__(message)
        self.intact_version = intact_version


class ManifestInvariantError(CorruptManifestError):
    """A manifest that decodes but breaks an invariant of the format (a file path outside the table's root,
    a duplicate or too large fragment id, inconsistent counts; `format/invariants.py`).

    `field` names the manifest field (e.g. ``fragments[2].files[0].path``), `value` its value.

    Args:
        message: what happened, in the user's words
        field: the manifest field that breaks the invariant (e.g. ``fragments[2].files[0].path``; '' when none
            is named)
        value: that field's value (None when none is named)
        intact_version: when the manifest is a table's latest, the newest older version that passes the checks
            (None when none does or when the manifest is not the latest)
    """

    def __init__(
        self, message: str, *, field: str = "", value: object = None, intact_version: int | None = None
    ) -> None:
        super().__init__(message, intact_version=intact_version)
        self.field = field
        self.value = value


class DataFileMismatchError(CorruptManifestError):
    """A data file that does not match what the manifest says of it: another row count than the fragment's
    `physical_rows`, a column the manifest says it holds missing or of another kind of type, or no Parquet file
    at all (`data_file_checks.py`).

    `path` names the data file, `column` the column (None when the problem is not a column's).

    Args:
        message: what happened, in the user's words
        path: the data file's path ('' when unknown)
        column: the column that does not match (None when the problem is not a column's)
    """

    def __init__(self, message: str, *, path: str = "", column: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.column = column


class UnsafePathError(MvccError):
    """A path that would leave the root it is relative to (a `..` segment, a backslash), refused by the
    object store before any read, write, copy or delete; or a clone whose source and target are one file."""


class InvalidNameError(MvccError, ValueError):
    """A name that breaks its kind's rule (`mvcc_core.names`): a branch, tag, catalog schema, table or branch
    name, a table's path under a root, a Dagster asset key part. Each kind's own error (`BranchError`, `TagError`,
    ...) carries the same message where its callers expect that one."""


class UnsupportedFeatureError(MvccError):
    """The table uses feature flags this version of mvcc does not know."""


class StorageError(MvccError):
    """The object store failed or cannot do what was asked."""


class CommitNotSupportedError(StorageError):
    """The object store offers neither put-if-not-exists nor rename-if-not-exists."""


class TagError(MvccError, ValueError):
    """A bad tag name, a missing tag, a tag that already exists, or tags naming versions a cleanup would remove
    (a ValueError, as pylance's).

    `tags`: in the last case, each tag in the way and its version (empty otherwise), so that a caller can
    word the way out in its own terms (the CLI names its flags) without parsing the message.

    Args:
        message: what happened, in the user's words
        tags: for tags in a cleanup's way, each such tag and its version (empty otherwise)
    """

    def __init__(self, message: str, *, tags: Mapping[str, int] | None = None) -> None:
        super().__init__(message)
        self.tags = dict(tags or {})


class TagVersionNotFoundError(TagError, VersionNotFoundError):
    """A tag would name a version the table does not have (a VersionNotFoundError, and a ValueError as pylance's)."""


class CorruptTagError(TagError):
    """A tag file that cannot be read: not JSON, no "version", or a version that is no version number.

    `path` names the tag file, `value` what it holds where the version should be.

    Args:
        message: what happened, in the user's words
        path: the tag file's path ('' when unknown)
        value: what the file holds where the version should be (None when nothing is there)
    """

    def __init__(self, message: str, *, path: str = "", value: object = None) -> None:
        super().__init__(message)
        self.path = path
        self.value = value


class BranchError(MvccError):
    """A bad branch name, or a branch operation that cannot be done (deleting a branch other branches fork
    from, publishing a branch into a branch it was not forked from)."""


class BranchExistsError(BranchError):
    """`create_branch` of a name that is taken (a live branch, or one whose deletion was interrupted)."""


class BranchNotFoundError(BranchError):
    """No branch of that name (or it is being deleted)."""


class ObjectNotFoundError(StorageError, FileNotFoundError):
    """An object that was expected in the store is not there."""


class BasePathError(MvccError):
    """A base path that is unknown, or clashes with an existing one by id, name or path."""


class InvalidOperationError(MvccError):
    """An operation that cannot be applied to the table's current state (it names fragments, fields or
    indices that do not exist, or breaks a rule of the format); nothing was committed."""


class IndexNotFoundError(InvalidOperationError):
    """No index of the given name exists in the table's version."""


class IndexExistsError(InvalidOperationError):
    """An index of the given name exists already and replacing it was not allowed."""


class CompactionError(InvalidOperationError):
    """Compaction results that cannot be committed together (none, or built from different versions), or a
    task that produced more fragments than it reserved ids for."""


class ExternalStoreError(MvccError):
    """The external manifest store refused or failed an operation."""


class ExternalStoreUnavailableError(ExternalStoreError, StorageError):
    """The external manifest store cannot be reached or opened (network, timeouts, a missing table)."""


class ExternalStoreMismatchError(ExternalStoreError):
    """A store entry that does not belong to this table: its path lies outside the table or names another version."""


class ExternalStoreSyncError(ExternalStoreError):
    """A staged manifest could not be finalized (missing file, failed copy or update); the read is refused."""


class FailpointError(MvccError):
    """Raised by a failpoint armed with "raise": a simulated crash at a named point (tests only).

    Args:
        name: the failpoint that triggered
    """

    def __init__(self, name: str) -> None:
        super().__init__(f"failpoint {name!r} triggered")
        self.name = name


_Conflict = TypeVar("_Conflict", bound="CatalogConflictError")


class CatalogError(MvccError):
    """A refused catalog operation: an unknown or existing object, a bad name."""


class CatalogConflictError(CommitConflictError):
    """A concurrent catalog version made this transaction's publish impossible.

    `object_name` is the object both touched, `expected_version` / `actual_version` the catalog versions
    (or, for a table written outside the catalog, the table versions) this transaction expected and found,
    `rule` the DuckLake logical conflict that fired, in words, `rule_code` the same as a stable identifier for
    code that reacts to one rule (`mvcc_core.catalog.change_rules.RULES[i].code`, or one of the codes in
    `mvcc_core.catalog.errors`).

    Args:
        message: what happened, in words
        object_name: the object both transactions touched
        expected_version: the catalog (or table) version this transaction expected
        actual_version: the one it found
        rule: the logical conflict, in words
        rule_code: the same as a stable identifier
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
            rule: the logical conflict, in words
            rule_code: the same as a stable identifier
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


def is_definite_failure(exc: BaseException) -> bool:
    """True when `exc` proves that no version references the files a failed write staged.

    Conflicts, refused operations, bad data and a broken table state are decided before (or instead of)
    a manifest is published, so the staged files can be removed at once. A storage or external-store
    error (a reply that may have been lost after the manifest was stored), a simulated crash, an interrupt
    or an unexpected exception leaves the files in place: retention removes them once no version references them.

    Args:
        exc: the exception a commit or write raised
    """
    return isinstance(exc, MvccError) and not isinstance(exc, StorageError | ExternalStoreError | FailpointError)
