"""The figures `mvcc advise --format openmetrics` exports per table, from the manifest and one listing of the
table's files (no data file is read), and their OpenMetrics text for a Prometheus textfile collector
(docs/guide/cli.md, "advise").

`prometheus_client` writes the text (escaping of label values, HELP/TYPE lines, `# EOF`); it is imported only
when that format is asked for.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from dataclasses import dataclass

if typing.TYPE_CHECKING:  # the table code is imported when a table is read, not with the `mvcc` command
    from mvcc_core.maintenance.advice import MaintenanceAdvice
    from mvcc_core.maintenance.handles import TableLike

__all__ = ["TableFigures", "advice_kinds", "figures_of", "openmetrics"]


def advice_kinds() -> tuple[str, ...]:
    """Every kind of advice: each gets a score gauge, 0 when it is not advised (an alert then sees 0, not no
    data)."""
    from mvcc_core.maintenance.advice import AdviceKind

    return typing.get_args(AdviceKind)


@dataclass(frozen=True)
class TableFigures:
    """One table's figures, from its latest manifest and a listing of its files.

    Attributes:
        version: The version described.
        fragments: Its fragments.
        small_fragments: Fragments with fewer live rows than compaction's row target under the table's policy.
        rows: Live rows.
        deleted_rows: Rows its deletion files delete (still stored and read by a scan).
        live_bytes: The data files' bytes in proportion to each fragment's live rows.
        stored_bytes: Every file under the table's root (all versions, indices, metadata, unreferenced files).
        versions: Manifests listed in `_versions/` (what retention has kept).
        scores: The advice score per kind (0.0 for a kind not advised).
    """

    version: int
    fragments: int
    small_fragments: int
    rows: int
    deleted_rows: int
    live_bytes: int
    stored_bytes: int
    versions: int
    scores: dict[str, float]

    @property
    def deleted_share(self) -> float:
        """Deleted rows over stored (physical) rows, in [0, 1]."""
        return self.deleted_rows / max(self.rows + self.deleted_rows, 1)

    @property
    def stored_over_live(self) -> float:
        """Stored bytes over live bytes (0.0 for a table without live bytes)."""
        return self.stored_bytes / self.live_bytes if self.live_bytes else 0.0


def figures_of(table: TableLike, advice: Sequence[MaintenanceAdvice]) -> TableFigures:
    """The figures of `table`'s version, with `advice` (its `recommend()`) as the scores.

    Args:
        table: a `Table` or a `TableState`
        advice: the table's advice

    Raises:
        ValueError: a compaction key of the table's policy does not parse
    """
    from mvcc_core.format.deletion import live_rows
    from mvcc_core.format.naming import VERSIONS_DIR, parse_manifest_name
    from mvcc_core.maintenance import planner
    from mvcc_core.maintenance import policy as core_policy
    from mvcc_core.maintenance.handles import state_of

    state = state_of(table)
    manifest = state.manifest
    target = planner.target_rows(manifest, core_policy.compaction_options(manifest.config))
    live = [live_rows(f) for f in manifest.fragments]
    live_bytes = 0.0
    for frag, n in zip(manifest.fragments, live, strict=True):
        size = sum(df.file_size_bytes for df in frag.files)
        live_bytes += size * n / frag.physical_rows if frag.physical_rows else 0
    stored = versions = 0
    for meta in state.store.list(""):
        stored += meta.size or 0
        folder, _, name = meta.path.rpartition("/")
        if folder == VERSIONS_DIR and parse_manifest_name(name) is not None:  # main's own: not a branch's
            versions += 1
    totals = state.row_totals
    scores = dict.fromkeys(advice_kinds(), 0.0)
    for a in advice:
        scores[a.kind] = max(scores[a.kind], a.score)
    return TableFigures(
        version=state.version,
        fragments=len(manifest.fragments),
        small_fragments=sum(1 for n in live if n < target),
        rows=totals.live_rows,
        deleted_rows=totals.deleted_rows,
        live_bytes=round(live_bytes),
        stored_bytes=stored,
        versions=versions,
        scores=scores,
    )


#: (metric name, help, the figure) for the per-table gauges.
_GAUGES: tuple[tuple[str, str, typing.Callable[[TableFigures], float]], ...] = (
    ("mvcc_table_version", "The latest version of the table", lambda f: f.version),
    ("mvcc_table_fragments", "Fragments of the latest version", lambda f: f.fragments),
    (
        "mvcc_table_small_fragments",
        "Fragments with fewer live rows than compaction's row target (the table's policy)",
        lambda f: f.small_fragments,
    ),
    ("mvcc_table_rows", "Live rows of the latest version", lambda f: f.rows),
    (
        "mvcc_table_deleted_rows_ratio",
        "Deleted rows over stored rows: the share a full scan reads and drops",
        lambda f: f.deleted_share,
    ),
    ("mvcc_table_live_bytes", "Data file bytes in proportion to live rows", lambda f: f.live_bytes),
    ("mvcc_table_stored_bytes", "Bytes of every file under the table's root", lambda f: f.stored_bytes),
    ("mvcc_table_stored_over_live_ratio", "Stored bytes over live bytes", lambda f: f.stored_over_live),
    ("mvcc_table_versions", "Versions kept (manifests in _versions/)", lambda f: f.versions),
)


def openmetrics(tables: Sequence[tuple[str, TableFigures | None]]) -> str:
    """The OpenMetrics text of `tables`: `mvcc_table_up` for each (0 for one that could not be read, which then
    has no other sample), its figures and `mvcc_advice_score` per kind.

    Args:
        tables: (uri, its figures, or None when it could not be opened or read)
    """
    from prometheus_client import CollectorRegistry, Gauge
    from prometheus_client.openmetrics.exposition import generate_latest

    registry = CollectorRegistry(auto_describe=False)
    up = Gauge("mvcc_table_up", "1 if the table could be opened and advised on, else 0", ["table"], registry=registry)
    gauges = [(Gauge(name, text, ["table"], registry=registry), figure) for name, text, figure in _GAUGES]
    score = Gauge(
        "mvcc_advice_score",
        "The share of the table's cost the kind of maintenance removes, in [0, 1] (mvcc advise)",
        ["table", "kind"],
        registry=registry,
    )
    for uri, found in tables:
        up.labels(table=uri).set(0 if found is None else 1)
        if found is None:
            continue
        for gauge, figure in gauges:
            gauge.labels(table=uri).set(figure(found))
        for kind in advice_kinds():
            score.labels(table=uri, kind=kind).set(found.scores[kind])
    return generate_latest(registry).decode()
