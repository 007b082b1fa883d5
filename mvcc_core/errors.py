"""The error contract of mvcc (DESIGN.md "Errors").

Callers decide on the type, never on the message: a `RetryableConflictError` may be retried on a
fresh version, an `IncompatibleConflictError` must not be, and every other `MvccError` is bad input
or a broken table.
"""

from __future__ import annotations

from collections.abc import Sequence


class MvccError(Exception):
    """Base class of every error mvcc raises on purpose."""


class CommitConflictError(MvccError):
    """A concurrent commit interfered with ours.

    Carries the version ours was built on, the versions it collided with and both operation names,
    so that orchestration can report them without parsing the message.
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
        return self.conflicting_versions[-1] if self.conflicting_versions else None


class RetryableConflictError(CommitConflictError):
    """Re-read the table and run the operation again; the result will be what was intended."""


class IncompatibleConflictError(CommitConflictError):
    """A concurrent commit made this operation meaningless; do not retry automatically."""


class TableNotFoundError(MvccError):
    """No table (no manifest) at the given location."""


class TableExistsError(MvccError):
    """A table already exists where a new one was to be created."""


class VersionNotFoundError(MvccError):
    """The requested version, tag or timestamp names no version of the table."""


class SchemaError(MvccError):
    """Data whose schema does not fit the table's, or a schema mvcc cannot store."""


class PredicateError(MvccError):
    """A filter that cannot be parsed or does not fit the table's schema."""


class CorruptManifestError(MvccError):
    """A manifest or transaction file that cannot be decoded."""


class UnsupportedFeatureError(MvccError):
    """The table uses feature flags this version of mvcc does not know."""


class StorageError(MvccError):
    """The object store failed or cannot do what was asked."""


class CommitNotSupportedError(StorageError):
    """The object store offers neither put-if-not-exists nor rename-if-not-exists."""


class TagError(MvccError):
    """A bad tag name, a missing tag, or a tag that already exists."""


class ObjectNotFoundError(StorageError, FileNotFoundError):
    """An object that was expected in the store is not there."""


class BasePathError(MvccError):
    """A base path that is unknown, or clashes with an existing one by id, name or path."""
