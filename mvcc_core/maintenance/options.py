"""`CompactionOptions`: what a compaction rewrites, the bounds on one task, its scope and its budget."""

from __future__ import annotations

from dataclasses import dataclass


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

    def __post_init__(self) -> None:
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


def _positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
