"""`CompactionOptions`: what a compaction rewrites, the bounds on one task, its scope, its budget and its layout."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: How many columns a z-order interleaves (Delta and Iceberg advise a few; more dilutes each column's bits).
ZORDER_MIN_COLUMNS = 2
ZORDER_MAX_COLUMNS = 4


@dataclass(frozen=True)
class CompactionOptions:
    """pylance's options, plus bounds on one task, a scope (`where`) and a budget (`max_bytes`).

    Attributes:
        target_rows_per_fragment: Fragments with fewer live rows are merged with their neighbours.
        materialize_deletions: Rewrite fragments whose deleted fraction is above the threshold.
        materialize_deletions_threshold: That fraction, in [0, 1].
        max_rows_per_task: The most rows of the fragments one task reads (None: `target_rows_per_fragment`).
        max_bytes_per_task: The most on-disk bytes of the fragments one task reads (None: no bound).
        defer_index_remap: Lance's name: keep indices covering the moved rows through a fragment reuse index
            instead of dropping the rewritten fragments from them (`mvcc_core/format/fragment_reuse.py`).
        target_bytes_per_fragment: A target in on-disk bytes as well: the row target becomes the smaller of
            `target_rows_per_fragment` and the rows that many bytes hold at the table's bytes per row.
        where: A SQL filter: only fragments whose statistics say they may hold a matching row are rewritten.
        max_bytes: Rewrite about this many on-disk bytes of input at most (at least one group), the groups with
            the most benefit per byte first; the rest is left for the next run.
        sort_by: Clustering: rewrite every fragment in scope (not only the small ones) globally sorted by these
            columns (ascending, nulls last), so the new fragments' ranges on the first column do not overlap.
        zorder_by: Clustering: rewrite every fragment in scope in z-order of these 2 to 4 columns (the bits of
            each column's dense rank interleaved), so a box filter on them touches few fragments.
    """

    target_rows_per_fragment: int = 1_048_576
    materialize_deletions: bool = True
    materialize_deletions_threshold: float = 0.1
    max_rows_per_task: int | None = None
    max_bytes_per_task: int | None = None
    defer_index_remap: bool = False
    target_bytes_per_fragment: int | None = None
    where: str | None = None
    max_bytes: int | None = None
    sort_by: tuple[str, ...] | None = None
    zorder_by: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        for name in ("sort_by", "zorder_by"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _columns(name, value))
        if self.sort_by is not None and self.zorder_by is not None:
            raise ValueError("give sort_by or zorder_by, not both (a compaction writes one layout)")
        if self.zorder_by is not None and not ZORDER_MIN_COLUMNS <= len(self.zorder_by) <= ZORDER_MAX_COLUMNS:
            raise ValueError(
                f"zorder_by takes {ZORDER_MIN_COLUMNS} to {ZORDER_MAX_COLUMNS} columns, got {len(self.zorder_by)} "
                f"({', '.join(self.zorder_by)}); to order by one column use sort_by"
            )
        if self.clustering is not None and self.defer_index_remap:
            raise ValueError(
                "defer_index_remap keeps the row order, which sort_by and zorder_by change: give one or the other"
            )
        _positive("target_rows_per_fragment", self.target_rows_per_fragment)
        if (
            isinstance(self.materialize_deletions_threshold, bool)
            or not isinstance(self.materialize_deletions_threshold, int | float)
            or not 0.0 <= self.materialize_deletions_threshold <= 1.0
        ):
            raise ValueError(
                f"materialize_deletions_threshold is a fraction in [0, 1], got {self.materialize_deletions_threshold}"
            )
        for name in ("max_rows_per_task", "max_bytes_per_task", "target_bytes_per_fragment", "max_bytes"):
            value = getattr(self, name)
            if value is not None:
                _positive(name, value)
        if self.where is not None and (not isinstance(self.where, str) or not self.where.strip()):
            raise ValueError(f"where must be a SQL filter such as \"day = '2026-11-01'\", got {self.where!r}")

    @property
    def clustering(self) -> tuple[str, tuple[str, ...]] | None:
        """("sort", columns) or ("zorder", columns) when the compaction clusters, else None."""
        if self.sort_by is not None:
            return "sort", self.sort_by
        if self.zorder_by is not None:
            return "zorder", self.zorder_by
        return None


def _columns(name: str, value: object) -> tuple[str, ...]:
    """Column names as a tuple: a sequence of non-empty strings, each once (a plain string is one column)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Sequence) or not value or not all(isinstance(c, str) and c.strip() for c in value):
        raise ValueError(f'{name} must be a list of column names such as ["user", "ts"], got {value!r}')
    columns = tuple(c.strip() for c in value)
    if len(set(columns)) != len(columns):
        raise ValueError(f"{name} names a column more than once: {', '.join(columns)}")
    return columns


def _positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
