"""`t.optimize`: pylance's namespace for table maintenance on one handle."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .compaction import CompactionMetrics, CompactionOptions, Executor, compact_files

if TYPE_CHECKING:
    from ..table import Table


class Optimize:
    def __init__(self, table: Table) -> None:
        self._table = table

    def compact_files(
        self,
        target_rows_per_fragment: int = 1_048_576,
        materialize_deletions: bool = True,
        materialize_deletions_threshold: float = 0.1,
        executor: Executor | None = None,
        progress: Callable[[int, int], None] | None = None,
        max_rows_per_task: int | None = None,
        max_bytes_per_task: int | None = None,
        defer_index_remap: bool = False,
    ) -> CompactionMetrics:
        """Rewrite small fragments and fragments with many deletions (ReserveFragments, then one Rewrite).

        The handle moves to the Rewrite's version. `progress(done, total)` is called after each task.
        """
        options = CompactionOptions(
            target_rows_per_fragment=target_rows_per_fragment,
            materialize_deletions=materialize_deletions,
            materialize_deletions_threshold=materialize_deletions_threshold,
            max_rows_per_task=max_rows_per_task,
            max_bytes_per_task=max_bytes_per_task,
            defer_index_remap=defer_index_remap,
        )
        return compact_files(self._table, options, executor=executor, progress=progress)

    def optimize_indices(self) -> int:
        """Bring fragments added or rewritten since an index was built into it (its covered entries are
        kept, only the missing fragments are read; one CreateIndex for all), rebuild indices that rely on
        the fragment reuse index and trim it. Returns how many indices were updated."""
        return self._table._optimize_indices()
