"""Other versions of the table: checkouts, the version list, transactions and restore (a mixin of `Table`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Self

from mvcc_core.errors import (
    CorruptManifestError,
    CorruptTagError,
    TagError,
    VersionNotFoundError,
)
from mvcc_core.format import operations
from mvcc_core.table.host import TableHost
from mvcc_core.txn import history
from mvcc_core.txn.commit import DEFAULT_MAX_RETRIES
from mvcc_core.txn.history import VersionInfo, VersionRef
from mvcc_core.txn.transaction import Transaction

log = logging.getLogger("mvcc.table")


class VersionMethods(TableHost):
    """Other versions of the table: checkouts, the version list, transactions and restore (mixed into `Table`)."""

    def _resolve(self, ref: VersionRef) -> int:
        return history.resolve(self._state, ref)

    def checkout(self, ref: VersionRef | tuple[str | None, int | None]) -> Self:
        """A new handle on `ref`: a version number, a tag name (of any branch), a datetime (the version current
        then), or pylance's (branch, version) (version None: the branch's latest).

        A string is a tag when a tag of that name exists; else, when it is an ISO 8601 time
        (`2026-11-01T12:00:00+01:00`; no zone: UTC), the version current then.

        Args:
            ref: a version number, a tag name, a datetime, or (branch, version)
        """
        if isinstance(ref, str):
            ref = history.tag_or_time(self._state, ref)  # a tag wins; else an ISO 8601 time is one
        if isinstance(ref, str):
            try:
                return type(self)(self._reference_state(ref))  # the branch mixin (table/branches.py)
            except CorruptTagError:
                raise
            except VersionNotFoundError as exc:
                if not isinstance(exc.__context__, TagError):  # no such tag (not: its version is gone)
                    raise
                raise VersionNotFoundError(history.not_tag_nor_time(exc.__context__)) from None
        if isinstance(ref, tuple):
            return type(self)(self._reference_state(ref))  # the branch mixin (table/branches.py)
        return type(self)(self._state.checkout(self._resolve(ref)))

    def checkout_version(self, version: VersionRef | tuple[str | None, int | None]) -> Self:
        """pylance's name for `checkout`.

        Args:
            version: a version number, a tag name, a datetime, or (branch, version), as :meth:`checkout` takes
        """
        return self.checkout(version)

    def checkout_latest(self) -> Self:
        """A new handle on the newest version."""
        return type(self)(self._state.latest())

    def versions(self, *, limit: int | None = None) -> list[VersionInfo]:
        """Every version, oldest first, with its operation, message and transaction properties.

        A version whose manifest or transaction file is corrupt is listed with `error` set (and None for
        what could not be read) instead of failing the whole listing. `limit`: only the newest `limit`
        versions (still oldest first); one listing, and only their manifests and transactions are read,
        so a long history costs nothing (the `mvcc versions --limit` command).

        Args:
            limit: only the newest `limit` versions (None: all)
        """
        return history.list_versions(self._state, limit=limit)

    def trim_version_cache(self, keep: int) -> None:
        """Keep only the newest `keep` manifests and transactions this handle has read (and its checkouts
        share): a handle kept open for long (a sensor's, from tick to tick) otherwise keeps every version it
        ever read in memory. Nothing on storage changes; a trimmed version is read again when asked for.

        Args:
            keep: how many of the newest manifests and transactions to keep (at least 1)

        Raises:
            ValueError: `keep` is below 1.
        """
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ValueError(f"trim_version_cache: keep must be a positive int, got {keep!r}")
        self._state.committer.trim_cache(keep)

    def transaction(self, version: int | None = None) -> Transaction | None:
        """The transaction that produced `version` (default: this handle's), None if it has no readable file.

        Args:
            version: the version (None: this handle's)
        """
        manifest = self.manifest if version is None else self._state.load(version)
        return self._state.committer.load_transaction(manifest)

    def get_transactions(self, recent_transactions: int = 10) -> list[Transaction | None]:
        """pylance's `get_transactions`: the transactions of the newest versions up to this handle's,
        newest first (None where a version has no readable transaction).

        Args:
            recent_transactions: how many of the newest versions up to this handle's
        """
        out: list[Transaction | None] = []
        for version in range(self.version, max(0, self.version - recent_transactions), -1):
            try:
                out.append(self.transaction(version))
            except (VersionNotFoundError, CorruptManifestError):
                out.append(None)
        return out

    def restore(
        self,
        ref: VersionRef | None = None,
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Self:
        """Make `ref` (default: this handle's version) the latest version again; history is kept.

        Restore works past a corrupt latest manifest: the new version is committed after it, and the
        corrupt one stays in the history (where `versions()` reports it) until retention removes it.

        Args:
            ref: the version to restore: a number, a tag name or a datetime (None: this handle's)
            commit_message: the message stored with the transaction (None: no message)
            transaction_properties: properties stored with the transaction (a dict of str to str)
            max_retries: how many lost commit races to retry before giving up
        """
        version = self.version if ref is None else self._resolve(ref)
        latest = self._state.latest_location()
        try:
            self._advance(self._state.checkout(latest.version))
        except CorruptManifestError as exc:
            log.warning(
                "restoring %s to version %s past corrupt latest version %s: %s", self.uri, version, latest.version, exc
            )
        return self.commit(
            operations.Restore(version=version),
            read_version=latest.version,
            commit_message=commit_message,
            transaction_properties=transaction_properties,
            max_retries=max_retries,
        )
