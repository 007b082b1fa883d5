"""Which version of a table is new since a baseline, read from the table's history only (no data file).

Shared by `MvccVersionSensor` (on a worker) and `MvccVersionTrigger` (in the triggerer).
"""

from __future__ import annotations

import mvcc_core as mvcc

# Commits that do not change what a reader sees: maintenance (compaction, indices, ids, config, bases).
MAINTENANCE_OPERATIONS = frozenset(
    op.name
    for op in (
        mvcc.operations.ReserveFragments,
        mvcc.operations.Rewrite,
        mvcc.operations.CreateIndex,
        mvcc.operations.UpdateConfig,
        mvcc.operations.UpdateBases,
        mvcc.operations.UpdateMemWalState,
    )
)


def newer_version(table: mvcc.Table, after_version: int, *, skip_maintenance: bool = False) -> tuple[int | None, int]:
    """The newest version after `after_version`, and the baseline to compare with next time.

    Without `skip_maintenance` this is one request (the latest version's name). With it, the transactions
    of the new versions are read (small files) and versions made by maintenance are passed over.

    Args:
        table: Any handle of the table.
        after_version: The version already seen.
        skip_maintenance: Pass over versions whose operation does not change data (`MAINTENANCE_OPERATIONS`).

    Returns:
        ``(version or None, baseline)``: the newest new version that counts (None: none yet), and the version
        the next call may start from (maintenance versions already passed over).
    """
    latest = table.latest_version
    if latest <= after_version:
        return None, after_version
    if not skip_maintenance:
        return latest, latest
    handle = table.checkout(latest)
    for version in range(latest, after_version, -1):
        txn = handle.transaction(version)
        if txn is None or txn.operation.name not in MAINTENANCE_OPERATIONS:
            return version, latest
    return None, latest


def new_versions(
    table: mvcc.Table, after_version: int, *, skip_maintenance: bool = False
) -> tuple[list[mvcc.VersionInfo], int]:
    """Every version after `after_version`, oldest first, and the latest version (the next call's baseline).

    One request (the latest version's name) when nothing is new; otherwise one listing of the new versions
    (their manifests and transactions, no data file).

    Args:
        table: Any handle of the table.
        after_version: The version already seen.
        skip_maintenance: Leave out versions whose operation does not change data (`MAINTENANCE_OPERATIONS`).

    Returns:
        ``(versions, latest)``: the new versions (those cleaned up before they were seen are not listed), and the
        table's latest version. A latest version below `after_version` (the table was dropped and created
        again) gives no versions and that lower latest version: the caller starts again from 0.
    """
    latest = table.latest_version
    if latest <= after_version:
        return [], latest
    listed = table.checkout(latest).versions(limit=latest - after_version)
    found = [v for v in listed if v.version > after_version]
    if skip_maintenance:
        found = [v for v in found if v.operation not in MAINTENANCE_OPERATIONS]
    return found, latest
