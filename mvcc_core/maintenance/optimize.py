"""`t.optimize`: pylance's namespace for table maintenance on one handle."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import operations as ops
from ..commit import DEFAULT_MAX_RETRIES
from ..index import frag_reuse
from ..index.scalar import BITMAP, BTREE, build, covered, update
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
        return optimize_indices(self._table)


def optimize_indices(table: Table, commit_message: str | None = None) -> int:
    """Bring every index that misses fragments up to date, in one CreateIndex; returns how many."""
    manifest, store = table.manifest, table._store
    live = {f.id for f in manifest.fragments}
    fri = frag_reuse.find(manifest)
    fri_versions = [v.dataset_version for v in frag_reuse.details_of(fri).versions]
    newest_move = max(fri_versions, default=-1)
    scalar = [i for i in manifest.indices if i.index_type in (BTREE, BITMAP)]
    # stale: missing fragments, or relying on the fragment reuse index to translate moved rows
    stale = [i for i in scalar if live - covered(i) or i.dataset_version < newest_move]
    stale_ids = {i.uuid.uuid for i in stale}
    by_id = {f.id: f.name for f in manifest.fields}
    built = [
        build(store, manifest, by_id[i.fields[0]], i.index_type, i.name)
        if i.dataset_version < newest_move  # its addresses moved: rebuild
        else update(store, manifest, i)  # merge: read only the fragments it misses
        for i in stale
    ]
    new_indices, removed = [b.metadata for b in built], list(stale)
    if fri is not None:  # drop the versions no index needs any more (rebuilt ones are at this version)
        kept = [i.dataset_version for i in scalar if i.uuid.uuid not in stale_ids]
        trimmed = frag_reuse.trimmed(fri, min([*kept, table.version]))
        if trimmed is None or len(frag_reuse.details_of(trimmed).versions) < len(fri_versions):
            removed.append(fri)
            new_indices += [trimmed] if trimmed is not None else []
    if not removed:
        return 0
    op = ops.CreateIndex(new_indices=new_indices, removed_indices=removed)
    table._commit_written(op, [p for b in built for p in b.written], commit_message, DEFAULT_MAX_RETRIES)
    return len(stale)
