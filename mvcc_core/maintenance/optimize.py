"""`t.optimize`: pylance's namespace for table maintenance on one handle (compaction, index optimization)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from mvcc_core.executor import Executor, ThreadExecutor
from mvcc_core.format import fragment_reuse as frag_reuse
from mvcc_core.format import operations
from mvcc_core.format.field_paths import path_names
from mvcc_core.maintenance import policy
from mvcc_core.maintenance.advice import MaintenanceAdvice, recommend
from mvcc_core.maintenance.compaction import CompactionMetrics
from mvcc_core.maintenance.run import compact_files
from mvcc_core.ops.index_build import BITMAP, BTREE, build, covered, update
from mvcc_core.progress import Progress
from mvcc_core.txn.commit import DEFAULT_MAX_RETRIES
from mvcc_core.txn.state import TableState
from mvcc_core.txn.transaction import Transaction, check_properties


class Optimize:
    """Maintenance of the version a handle is on; each call moves the handle to the version it commits.

    Built by `Table.optimize` with the handle's state and the one way to move the handle (`advance`).

    Args:
        state: the version the handle is on
        advance: moves the handle to a newly committed version
    """

    def __init__(self, state: TableState, advance: Callable[[TableState], None]) -> None:
        self._state = state
        self._advance = advance

    def compact_files(
        self,
        *,
        target_rows_per_fragment: int | None = None,
        materialize_deletions: bool = True,
        materialize_deletions_threshold: float | None = None,
        executor: Executor | None = None,
        progress: Progress | None = None,
        max_rows_per_task: int | None = None,
        max_bytes_per_task: int | None = None,
        defer_index_remap: bool = False,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        num_threads: int | None = None,
        target_bytes_per_fragment: int | None = None,
        where: str | None = None,
        max_bytes: int | None = None,
        partial_progress: bool = False,
        max_commits: int | None = None,
        sort_by: Sequence[str] | None = None,
        zorder_by: Sequence[str] | None = None,
    ) -> CompactionMetrics:
        """Rewrite small fragments and fragments with many deletions (ReserveFragments, then one Rewrite).

        An option left at None follows the table's policy (`mvcc.compaction.*` configuration keys), then the
        defaults (1,048,576 rows, threshold 0.1, no byte target, no budget).

        Args:
            target_rows_per_fragment: fragments with fewer live rows are merged with their neighbours.
            materialize_deletions: rewrite fragments whose deleted fraction is above the threshold.
            materialize_deletions_threshold: that fraction, in [0, 1].
            executor: where the rewrite tasks run: anything with `map(fn, tasks)` (a thread or process pool,
                `mvcc_core.spark`'s executor); default: a thread pool in this process.
            progress: `progress(done, total)` after each task.
            max_rows_per_task: the most rows of the fragments one task reads (None: `target_rows_per_fragment`).
            max_bytes_per_task: the most on-disk bytes of the fragments one task reads (None: no bound).
            defer_index_remap: keep indices covering the moved rows through a fragment reuse index.
            num_threads: pylance's option: how many threads of this process run the rewrite tasks (the default
                executor's pool size; not with `executor`).
            commit_message: the message stored with the Rewrite's transaction (None: no message).
            transaction_properties: properties stored with it (a dict of str to str).
            target_bytes_per_fragment: a target in on-disk bytes too: the row target becomes the rows that many
                bytes hold at the table's bytes per row, when fewer.
            where: a SQL filter: only fragments whose statistics say they may hold a matching row are rewritten;
                every other fragment keeps its id and files.
            max_bytes: rewrite about this many on-disk bytes at most (at least one group), the groups with the
                most benefit per byte first; what is left is in the metrics (`deferred_*`) for the next run.
            partial_progress: commit finished groups in up to `max_commits` Rewrites as they complete; a group
                that loses to a concurrent commit is planned again once, then dropped and reported.
            max_commits: with `partial_progress`, the most Rewrites (default 10).
            sort_by: clustering: rewrite every fragment in scope (all, or those `where` selects), not only the
                small ones, globally sorted by these columns, so the new fragments' ranges on the first one do not
                overlap and a filter on it reads few files (None: the table's `mvcc.compaction.sort_by`, if set).
            zorder_by: clustering: rewrite every fragment in scope in z-order of these 2 to 4 columns, so a box
                filter on them reads few files (None: the table's `mvcc.compaction.zorder_by`, if set).

        Returns the metrics (`version` is the last Rewrite's, None when nothing needed rewriting). The handle
        moves to that version. Raises RetryableConflictError (without partial progress) when a concurrent delete or
        update touched a rewritten fragment (the new files are removed), ValueError for a `num_threads` that is
        not a positive int or a policy key that does not parse, PredicateError for a `where` that does not parse.

        Example::

            metrics = t.optimize.compact_files(target_rows_per_fragment=100_000)
            t.optimize.compact_files(where="day = '2026-11-01'", max_bytes=512 * 2**20, partial_progress=True)
            t.optimize.compact_files(sort_by=["user"])
            t.optimize.compact_files(zorder_by=["x", "y"])
        """
        if num_threads is not None:
            if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
                raise ValueError(f"num_threads must be a positive int, got {num_threads!r}")
            if executor is not None:
                raise ValueError("give num_threads or executor, not both (num_threads sizes the default thread pool)")
            executor = ThreadExecutor(num_threads)
        options = policy.compaction_options(
            self._state.manifest.config,
            target_rows_per_fragment=target_rows_per_fragment,
            materialize_deletions=materialize_deletions,
            materialize_deletions_threshold=materialize_deletions_threshold,
            max_rows_per_task=max_rows_per_task,
            max_bytes_per_task=max_bytes_per_task,
            defer_index_remap=defer_index_remap,
            target_bytes_per_fragment=target_bytes_per_fragment,
            where=where,
            max_bytes=max_bytes,
            sort_by=None if sort_by is None else tuple([sort_by] if isinstance(sort_by, str) else sort_by),
            zorder_by=None if zorder_by is None else tuple([zorder_by] if isinstance(zorder_by, str) else zorder_by),
        )
        metrics, state = compact_files(
            self._state,
            options,
            executor=executor,
            progress=progress,
            commit_message=commit_message,
            transaction_properties=transaction_properties,
            partial_progress=partial_progress,
            max_commits=max_commits,
        )
        if metrics.version is not None:
            self._state = state
            self._advance(state)
        return metrics

    def recommend(self) -> list[MaintenanceAdvice]:
        """What maintenance would pay on this version, best first (`MaintenanceAdvice`: kind, reason in words
        with the figures, score, bytes to rewrite, fragments after, expected effect); from the manifest and a
        listing of the versions only, no data read. Empty when nothing would pay.

        Example::

            for advice in t.optimize.recommend():
                print(advice.kind, advice.score, advice.reason)
        """
        return recommend(self._state)

    def optimize_indices(
        self,
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> int:
        """Bring fragments added or rewritten since an index was built into it (its covered entries are
        kept, only the missing fragments are read; one CreateIndex for all), rebuild indices that rely on
        the fragment reuse index and trim it. Returns how many indices were updated.

        Args:
            commit_message: the message stored with the transaction
            transaction_properties: properties stored with the transaction (a dict of str to str)
            max_retries: how many lost commit races to retry
        """
        txn, count = stage_optimize_indices(
            self._state, commit_message=commit_message, transaction_properties=transaction_properties
        )
        if txn is not None:
            self._state = self._state.commit(txn, max_retries=max_retries)
            self._advance(self._state)
        return count


def stage_optimize_indices(
    state: TableState,
    *,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
) -> tuple[Transaction | None, int]:
    """The CreateIndex bringing every index that misses fragments up to date (files written, uncommitted),
    and how many indices it updates; (None, 0) when every index is current.

    Args:
        state: the table version whose indices are brought up to date
        commit_message: the message stored with the transaction
        transaction_properties: properties stored with the transaction (a dict of str to str)
    """
    manifest, store = state.manifest, state.store
    live = {f.id for f in manifest.fragments}
    fri = frag_reuse.find(manifest)
    fri_versions = [v.dataset_version for v in frag_reuse.details_of(fri).versions]
    newest_move = max(fri_versions, default=-1)
    scalar = [i for i in manifest.indices if i.index_type in (BTREE, BITMAP)]
    # stale: missing fragments, or relying on the fragment reuse index to translate moved rows
    stale = [i for i in scalar if live - covered(i) or i.dataset_version < newest_move]
    stale_ids = {i.uuid.uuid for i in stale}
    fields = list(manifest.fields)
    built = []
    try:
        for i in stale:
            if i.dataset_version < newest_move:  # its addresses moved: rebuild
                built.append(build(store, manifest, path_names(fields, i.fields[0]), i.index_type, i.name))
            else:  # merge: read only the fragments it misses
                built.append(update(store, manifest, i))
    except BaseException:
        store.delete_many([p for b in built for p in b.written])
        raise
    new_indices, removed = [b.metadata for b in built], list(stale)
    if fri is not None:  # drop the versions no index needs any more (rebuilt ones are at this version)
        kept = [i.dataset_version for i in scalar if i.uuid.uuid not in stale_ids]
        trimmed = frag_reuse.trimmed(fri, min([*kept, state.version]))
        if trimmed is None or len(frag_reuse.details_of(trimmed).versions) < len(fri_versions):
            removed.append(fri)
            new_indices += [trimmed] if trimmed is not None else []
    if not removed:
        return None, 0
    txn = Transaction(
        read_version=state.version,
        operation=operations.CreateIndex(new_indices=new_indices, removed_indices=removed),
        message=commit_message or "",
        transaction_properties=check_properties(transaction_properties),
        files=state.staged([p for b in built for p in b.written]),
    )
    return txn, len(stale)
