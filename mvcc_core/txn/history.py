"""A table's history: its versions listed, and a version named by number, tag or time resolved."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mvcc_core.errors import BranchNotFoundError, CorruptManifestError, CorruptTagError, TagError, VersionNotFoundError
from mvcc_core.format.branches import branch_of
from mvcc_core.format.manifest import list_manifests, manifest_timestamp
from mvcc_core.format.tags import Tags
from mvcc_core.times import HOW_TO_PASS_A_TIME, looks_like_time, parse_time
from mvcc_core.txn.branches import open_branch
from mvcc_core.txn.state import TableState

#: A version as users name it: its number, a tag, or a time (the version current then).
VersionRef = int | str | datetime


@dataclass(frozen=True)
class VersionInfo(Mapping[str, Any]):
    """One version of a table, as `Table.versions()` lists it.

    Readable by attribute (`v.version`) and, as pylance's version dicts, by key (`v["version"]`,
    `v["timestamp"]`, `v["metadata"]`; `metadata` is the transaction's `transaction_properties`). A
    version whose manifest or transaction cannot be read is listed with `error` saying why, not skipped.
    """

    version: int
    timestamp: datetime | None
    operation: str | None
    read_version: int | None
    uuid: str | None
    message: str | None
    transaction_properties: dict[str, str] = field(default_factory=dict)
    error: str | None = None

    @property
    def metadata(self) -> dict[str, str]:
        """pylance's name: the transaction's `transaction_properties`."""
        return self.transaction_properties

    _KEYS = (
        "version",
        "timestamp",
        "metadata",
        "operation",
        "read_version",
        "uuid",
        "message",
        "transaction_properties",
        "error",
    )

    def __getitem__(self, key: str) -> Any:
        if key not in self._KEYS:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._KEYS)

    def __len__(self) -> int:
        return len(self._KEYS)


def as_utc(value: datetime) -> datetime:
    """`value` in UTC (a naive datetime is taken as UTC).

    Args:
        value: The time.

    Returns:
        The same instant, timezone UTC.
    """
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def tags_of(state: TableState) -> Tags:
    """The tags of `state`'s table.

    Args:
        state: Any version of the table.

    Returns:
        Its tags namespace (a tag may only name a version that exists).
    """
    return Tags(
        state.store,
        lambda version: version_exists(state, version),
        branch=branch_of(state.store),
        branch_version_exists=lambda branch, version: _branch_version_exists(state, branch, version),
    )


def _branch_version_exists(state: TableState, branch: str | None, version: int) -> bool:
    try:
        open_branch(state, branch, version)
    except (VersionNotFoundError, BranchNotFoundError):
        return False
    return True


def version_exists(state: TableState, version: int) -> bool:
    """Whether `version` of `state`'s table exists.

    Args:
        state: Any version of the table.
        version: The version number.

    Returns:
        True when its manifest is there.
    """
    try:
        state.load(version)
    except VersionNotFoundError:
        return False
    return True


def resolve(state: TableState, ref: VersionRef) -> int:
    """The version number `ref` names.

    Args:
        state: Any version of the table.
        ref: A version number, a tag name, or a datetime (the newest version committed at or before it).

    Returns:
        The version number.

    Raises:
        VersionNotFoundError: no such version, tag, or version at that time.
        CorruptTagError: the tag's file does not read.
    """
    if isinstance(ref, bool):
        raise VersionNotFoundError(f"not a version: {ref!r}")
    if isinstance(ref, int):
        state.load(ref)
        return ref
    if isinstance(ref, str):
        named = tag_or_time(state, ref)
        if isinstance(named, datetime):
            return version_asof(state, named)
        try:
            branch, version = tags_of(state).get_reference(ref)
        except CorruptTagError:
            raise
        except TagError as exc:
            raise VersionNotFoundError(not_tag_nor_time(exc)) from None
        if branch != branch_of(state.store):
            raise VersionNotFoundError(
                f"tag {ref!r} names version {version} of {f'branch {branch!r}' if branch else 'main'}, not of this "
                f"handle's branch; open it with checkout_version({ref!r}) or checkout_version(({branch!r}, {version}))"
            )
        return version
    if isinstance(ref, datetime):
        return version_asof(state, ref)
    raise VersionNotFoundError(f"a version is an int, a tag name or a datetime, got {type(ref).__name__}")


def tag_or_time(state: TableState, ref: str) -> str | datetime:
    """What a string reference names: the tag of that name when there is one, else the time it spells (ISO
    8601, UTC when it names no zone: `mvcc_core.times.parse_time`), else the string itself (a tag name, whose
    lookup then says there is no such tag).

    Args:
        state: Any version of the table.
        ref: The reference as the user typed it.

    Returns:
        `ref` (a tag, or no time) or the time it spells.

    Raises:
        VersionNotFoundError: `ref` is no tag and starts like a time but is none (`2026-13-01`).
    """
    if not looks_like_time(ref):
        return ref
    try:
        tags_of(state).get_reference(ref)
        return ref
    except CorruptTagError:
        return ref  # a tag of that name exists, damaged: its lookup raises
    except TagError:
        pass
    try:
        return parse_time(ref)
    except ValueError as exc:
        raise VersionNotFoundError(f"table {state.uri} has no tag {ref!r}, and {exc}") from None


def not_tag_nor_time(exc: TagError) -> str:
    """The message of a string reference that names no tag and is no time: the tag error, then how to pass a
    time.

    Args:
        exc: The tag lookup's error.
    """
    return f"{exc}; to name a time instead, pass a datetime or an ISO 8601 string ({HOW_TO_PASS_A_TIME})"


def version_asof(state: TableState, when: datetime) -> int:
    """The newest version committed at or before `when` (binary search: timestamps are monotonic).

    Args:
        state: Any version of the table.
        when: The time (naive: UTC).

    Returns:
        The version number.

    Raises:
        VersionNotFoundError: no version was committed by then.
    """
    when = as_utc(when)
    locations = list_manifests(state.store, state.committer.handler)
    lo, hi, found = 0, len(locations) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        if manifest_timestamp(state.load(locations[mid].version)) <= when:
            found, lo = locations[mid].version, mid + 1
        else:
            hi = mid - 1
    if found is None:
        raise VersionNotFoundError(f"table {state.uri} has no version committed at or before {when.isoformat()}")
    return found


def list_versions(state: TableState, *, limit: int | None = None) -> list[VersionInfo]:
    """Every version of `state`'s table, oldest first (see `Table.versions`).

    Args:
        state: Any version of the table.
        limit: Only the newest `limit` versions (still oldest first).

    Returns:
        One `VersionInfo` a version; a corrupt one has `error` set.

    Raises:
        ValueError: `limit` is not a non-negative int.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be a non-negative int, got {limit!r}")
    out = []
    committer = state.committer
    locations = list_manifests(state.store, committer.handler)
    if limit is not None:
        locations = locations[len(locations) - limit :] if limit else []
    for loc in locations:
        try:
            manifest = state.load(loc.version)
        except CorruptManifestError as exc:
            out.append(VersionInfo(loc.version, None, None, None, None, None, error=str(exc)))
            continue
        error = None
        try:
            txn = committer.load_transaction(manifest)
        except CorruptManifestError as exc:
            txn, error = None, str(exc)
        out.append(
            VersionInfo(
                version=loc.version,
                timestamp=manifest_timestamp(manifest),
                operation=txn.operation.name if txn else None,
                read_version=txn.read_version if txn else None,
                uuid=txn.uuid if txn else None,
                message=txn.message if txn else None,
                transaction_properties=dict(txn.transaction_properties) if txn else {},
                error=error,
            )
        )
    return out
