"""A table's health as the provider reports it: the core's advice as XCom data, the health figures, and the
asset event extras that carry both. Everything is read from manifests and one listing of the versions; no data
file is read.

The advice is the core's (`Table.optimize.recommend`, under the table's own policy): what maintenance would pay
now, each piece with its kind, reason, score and figures. The figures are those the Dagster plugin's health checks
measure: small fragments, the deleted share, the bytes every kept version references against the latest's, the
versions kept, and the best advice's score.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import mvcc_core as mvcc

#: The advice kinds a compaction repairs (the core's `MaintenanceAdvice.kind`).
COMPACTION_KINDS = ("compact", "materialize_deletions")
#: Every advice kind, and the step that acts on it.
KINDS = (*COMPACTION_KINDS, "optimize_indices", "retention")

SMALL_FRAGMENTS_EXTRA = "mvcc/small_fragments"
DELETED_SHARE_EXTRA = "mvcc/deleted_share"
STORED_BYTES_EXTRA = "mvcc/stored_bytes"
LIVE_BYTES_EXTRA = "mvcc/live_bytes"
VERSIONS_KEPT_EXTRA = "mvcc/versions_kept"
TOP_ADVICE_SCORE_EXTRA = "mvcc/top_advice_score"
TOP_ADVICE_EXTRA = "mvcc/top_advice"


def advice_of(table: mvcc.Table) -> list[dict[str, Any]]:
    """The core's advice on the table's version, best first, as JSON-ready dicts (empty: nothing would pay).

    Args:
        table: the table at the version to advise on

    Returns:
        One dict per `MaintenanceAdvice`: ``kind``, ``reason``, ``score``, ``bytes_to_rewrite``,
        ``fragments_before``, ``fragments_after``, ``effect``, ``call``.
    """
    return [dataclasses.asdict(a) for a in table.optimize.recommend()]


def kinds_of(advice: Iterable[Mapping[str, Any]]) -> list[str]:
    """The kinds of the advice, best first, each once.

    Args:
        advice: what `advice_of` returned
    """
    out: list[str] = []
    for a in advice:
        if a["kind"] not in out:
            out.append(str(a["kind"]))
    return out


def health_figures(table: mvcc.Table, advice: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The table's health figures at its version (manifests only).

    - ``small_fragments``: fragments with fewer live rows than the compaction target of the table's policy (0 for
      a table of one fragment, which has nothing to merge with);
    - ``fragments``: fragments of the version;
    - ``deleted_share``: deleted rows / physical rows;
    - ``live_bytes``: bytes of the version's data files; ``stored_bytes``: bytes of the data files any kept
      version references (what retention has not removed yet); ``storage_amplification``: their ratio;
    - ``versions_kept``: versions listed;
    - ``top_advice`` / ``top_advice_score``: the best advice's kind and score (None and 0.0 without advice).

    Args:
        table: the table at the version to measure
        advice: the advice on that version when the caller has it (`advice_of`); None to ask the core

    Returns:
        The figures, JSON-ready.
    """
    if advice is None:
        advice = advice_of(table)
    fragments = table.get_fragments()
    target = mvcc.compaction.plan_unreserved(table).options.target_rows_per_fragment
    small = sum(1 for f in fragments if f.count_rows() < target) if len(fragments) > 1 else 0
    physical = sum(f.physical_rows for f in fragments)
    deleted = sum(f.num_deletions for f in fragments)

    def files(fragments: Iterable[Any]) -> dict[str, int]:
        return {df.path: int(df.file_size_bytes) for f in fragments for df in f.data_files()}

    live = files(fragments)
    versions = [v.version for v in table.versions() if v.error is None]
    stored = dict(live)
    for version in versions:
        if version != table.version:
            stored.update(files(table.checkout(version).get_fragments()))
    live_bytes, stored_bytes = sum(live.values()), sum(stored.values())
    top = advice[0] if advice else None
    return {
        "small_fragments": small,
        "fragments": len(fragments),
        "deleted_share": round(deleted / physical, 6) if physical else 0.0,
        "live_bytes": live_bytes,
        "stored_bytes": stored_bytes,
        "storage_amplification": round(stored_bytes / live_bytes, 3) if live_bytes else 1.0,
        "versions_kept": len(versions),
        "top_advice": None if top is None else top["kind"],
        "top_advice_score": 0.0 if top is None else round(float(top["score"]), 6),
    }


def health_extra(figures: Mapping[str, Any]) -> dict[str, Any]:
    """The asset event extras carrying the health figures (keys under ``mvcc/``, beside ``mvcc/version`` and
    ``mvcc/operation``).

    Args:
        figures: what `health_figures` returned
    """
    return {
        SMALL_FRAGMENTS_EXTRA: figures["small_fragments"],
        DELETED_SHARE_EXTRA: figures["deleted_share"],
        STORED_BYTES_EXTRA: figures["stored_bytes"],
        LIVE_BYTES_EXTRA: figures["live_bytes"],
        VERSIONS_KEPT_EXTRA: figures["versions_kept"],
        TOP_ADVICE_SCORE_EXTRA: figures["top_advice_score"],
        TOP_ADVICE_EXTRA: figures["top_advice"],
    }
