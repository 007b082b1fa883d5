"""`recommend`: what maintenance would pay on a table now, from its manifest (and a listing of its versions for
retention) alone; no data file is read.

Each piece of advice names a kind of maintenance, says why in words with the figures, and scores it in [0, 1]:
the share of the table's cost it removes (fragments opened per scan, deleted rows read and thrown away, rows
scanned without the index, versions kept past the policy). The planner's own groups give the compaction
figures, so the advice says what `compact_files()` with the same policy would do. Rules: docs/operations/
maintenance.md, "Advice".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from mvcc_core.format.deletion import live_rows
from mvcc_core.format.naming import VERSIONS_DIR, parse_manifest_name
from mvcc_core.maintenance import planner, policy
from mvcc_core.maintenance.handles import TableLike, state_of
from mvcc_core.read.index_lookup import covered
from mvcc_core.txn.state import TableState

__all__ = ["AdviceKind", "MaintenanceAdvice", "recommend"]

AdviceKind = Literal["compact", "materialize_deletions", "optimize_indices", "retention"]
_SCALAR = ("BTREE", "BITMAP")


@dataclass(frozen=True)
class MaintenanceAdvice:
    """One piece of maintenance worth doing, with its figures (`Table.optimize.recommend`).

    Attributes:
        kind: "compact" (merge small fragments), "materialize_deletions" (rewrite fragments to drop deleted rows
            or fold their files), "optimize_indices" (bring indices over fragments they miss) or "retention"
            (remove old versions).
        reason: Why, in words with the figures.
        score: The share of the table's cost it removes, in [0, 1] (higher first).
        bytes_to_rewrite: On-disk bytes the maintenance reads to rewrite (0 for retention).
        fragments_before: Fragments of the table now.
        fragments_after: Fragments after it (the same for the kinds that do not merge).
        effect: The expected effect, in words.
        call: What to run.
    """

    kind: AdviceKind
    reason: str
    score: float
    bytes_to_rewrite: int
    fragments_before: int
    fragments_after: int
    effect: str
    call: str


def _count(n: int, word: str) -> str:
    """`1 group`, `3 groups`: a count and its noun, plural unless the count is 1."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _mib(size: int) -> str:
    """A size in words: bytes, KiB, MiB or GiB."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{size} B"


def recommend(table: TableLike, *, now: datetime | None = None) -> list[MaintenanceAdvice]:
    """What maintenance would pay on the table's version, best first; empty when nothing would.

    Args:
        table: a `Table` or a `TableState`
        now: the time retention ages are measured at (default: now)

    Raises:
        ValueError: a maintenance key set on the table does not parse
    """
    state = state_of(table)
    manifest = state.manifest
    options = policy.compaction_options(manifest.config)
    fragments = len(manifest.fragments)
    advice: list[MaintenanceAdvice] = []
    found = planner.groups(manifest, options)
    budgeted = planner.within_budget(found, options.max_bytes)
    budget = (
        f"; the budget of {_mib(options.max_bytes)} per run takes {len(budgeted.chosen)} of them"
        if options.max_bytes is not None and budgeted.deferred
        else ""
    )
    merging = [g for g in found if g.fragments_removed > 0]
    if merging:
        removed = sum(g.fragments_removed for g in merging)
        size = sum(g.bytes for g in merging)
        rows_target = planner.target_rows(manifest, options)
        small = sum(len(g.fragments) for g in merging)
        advice.append(
            MaintenanceAdvice(
                kind="compact",
                reason=(
                    f"{small} of {fragments} fragments are below the target of {rows_target:,} rows (or have "
                    f"several files); {_count(len(merging), 'group')} of adjacent ones would become "
                    f"{_count(small - removed, 'fragment')}, reading {_mib(size)}{budget}"
                ),
                score=removed / max(fragments, 1),
                bytes_to_rewrite=size,
                fragments_before=fragments,
                fragments_after=fragments - removed,
                effect=f"{fragments} -> {fragments - removed} fragments: {removed} fewer files to open per full scan",
                call="t.optimize.compact_files()",
            )
        )
    lone = [g for g in found if g.fragments_removed <= 0]
    if lone:
        deleted = sum(g.deleted_rows for g in lone)
        physical = sum(f.physical_rows for f in manifest.fragments)
        size = sum(g.bytes for g in lone)
        advice.append(
            MaintenanceAdvice(
                kind="materialize_deletions",
                reason=(
                    f"{_count(len(lone), 'fragment')} {'has' if len(lone) == 1 else 'have'} more than "
                    f"{options.materialize_deletions_threshold:.0%} of their "
                    f"rows deleted (or several files): {deleted:,} deleted rows are read and dropped by every "
                    f"scan; rewriting them reads {_mib(size)}{budget}"
                ),
                score=min(
                    1.0, deleted / max(physical, 1) + sum(max(g.files_removed, 0) for g in lone) / max(fragments, 1)
                ),
                bytes_to_rewrite=size,
                fragments_before=fragments,
                fragments_after=fragments - sum(g.fragments_removed for g in lone),
                effect=(
                    f"{deleted:,} fewer rows read per full scan ({deleted / max(physical, 1):.1%} of them); the trade: "
                    f"the rewritten files are stored beside the old ones (up to {_mib(size)} more) until retention "
                    "removes the versions that use the old files"
                ),
                call="t.optimize.compact_files()",
            )
        )
    advice += _index_advice(state)
    advice += _retention_advice(state, now)
    return sorted(advice, key=lambda a: -a.score)


def _index_advice(state: TableState) -> list[MaintenanceAdvice]:
    manifest = state.manifest
    rows = {f.id: live_rows(f) for f in manifest.fragments}
    total = sum(rows.values())
    worst: tuple[int, str] = (0, "")
    stale = 0
    for index in manifest.indices:
        if index.index_type not in _SCALAR:
            continue
        cover = covered(index)
        missing = sum(n for frag_id, n in rows.items() if frag_id not in cover)
        if missing:
            stale += 1
            worst = max(worst, (missing, index.name))
    if not stale:
        return []
    fragments = len(manifest.fragments)
    return [
        MaintenanceAdvice(
            kind="optimize_indices",
            reason=(
                f"{stale} scalar index(es) miss fragments; {worst[1]!r} misses {worst[0]:,} of {total:,} live rows, "
                "which filtered scans read without it"
            ),
            score=worst[0] / max(total, 1),
            bytes_to_rewrite=0,
            fragments_before=fragments,
            fragments_after=fragments,
            effect=f"filters on the indexed columns use the index for every row (now {worst[0]:,} rows are scanned)",
            call="t.optimize.optimize_indices()",
        )
    ]


def _retention_advice(state: TableState, now: datetime | None) -> list[MaintenanceAdvice]:
    """Versions retention would remove, from one listing of the manifests (dated by their files)."""
    older_than, retain = policy.retention_settings(state.manifest.config, None, None)
    cutoff = (now or datetime.now(UTC)) - older_than
    listed = []
    for meta in state.store.list(VERSIONS_DIR):
        parsed = parse_manifest_name(meta.path)
        if parsed is not None:
            listed.append((parsed[0], meta.last_modified))
    listed.sort()
    if len(listed) < 2:
        return []
    keep = max(retain or 1, 1)
    removable = [v for v, when in listed[:-keep] if when is not None and when < cutoff]
    if not removable:
        return []
    fragments = len(state.manifest.fragments)
    return [
        MaintenanceAdvice(
            kind="retention",
            reason=(
                f"{len(removable)} of {len(listed)} versions are older than {older_than} "
                f"(retain_versions {retain or 'not set'}); tagged versions are kept whatever their age"
            ),
            score=len(removable) / len(listed),
            bytes_to_rewrite=0,
            fragments_before=fragments,
            fragments_after=fragments,
            effect=f"up to {len(removable)} manifests and the files only they reference removed",
            call="t.cleanup_old_versions()",
        )
    ]
