"""The catalog's own listing of branch refs (`_refs/branches/` of `__manifest` and of each table): what
`Catalog.branches`, `delete_branch`, `create_branch` and the fork reconciler in `Catalog.cleanup` read.

A ref write on a local disk goes through a temporary file (`_tmp-<uuid>-<name>`) hard-linked to its name; a
process killed inside it leaves that file behind, possibly torn. The listing never reads such a file as a ref:
a file whose name is not `<branch name>.json` for a name the branch rule (`names.BRANCH`) accepts is skipped,
and a temporary one is removed by cleanup (`sweep`) once older than the core's unverified window (or at once
with `delete_unverified`, when no writer runs). Anything else it does not recognise, and a ref file that
cannot be read, is skipped and left alone (logged): it may be another writer's, and nothing is destroyed on a
guess. Docs: docs/guide/catalog.md, "Names, and rows a reader does not recognise".
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from mvcc_core import names
from mvcc_core.errors import BranchError, ObjectNotFoundError, StorageError
from mvcc_core.format.branches import BRANCHES_DIR, BranchRef
from mvcc_core.io import ObjectStore, is_temporary
from mvcc_core.maintenance.cleanup import UNVERIFIED_WINDOW

log = logging.getLogger("mvcc.catalog")

_SUFFIX = ".json"


def ref_name(listed: str) -> str | None:
    """The branch a listed ref file is the ref of (`_refs/branches/dev.json` -> 'dev'); None when the file is
    no ref: a temporary file, another folder's, or a name the branch rule refuses.

    Args:
        listed: A path listed under `_refs/branches/`, relative to the table.

    Returns:
        The branch name, or None.
    """
    file = listed[len(BRANCHES_DIR) + 1 :] if listed.startswith(BRANCHES_DIR + "/") else ""
    if not file.endswith(_SUFFIX) or is_temporary(file):
        return None
    name = file[: -len(_SUFFIX)]
    return name if names.problem(names.BRANCH, name) is None else None


def branch_refs(
    store: ObjectStore,
    *,
    sweep: bool = False,
    delete_unverified: bool = False,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> dict[str, BranchRef]:
    """Every branch ref of the table (or `__manifest`) at `store`'s root, by name, sorted; files that are no
    ref are skipped (see the module docstring), and with `sweep` stale temporary files are removed.

    Args:
        store: The table's root store.
        sweep: Remove temporary files older than the unverified window (cleanup only; never on a dry run).
        delete_unverified: With `sweep`, remove every temporary file at once (only when no writer runs).
        now: The clock (tests).

    Returns:
        Name to ref.
    """
    stale_before = now() - UNVERIFIED_WINDOW
    out: dict[str, BranchRef] = {}
    for meta in store.list(BRANCHES_DIR):
        name = ref_name(meta.path)
        if name is None:
            stamp = meta.last_modified
            stale = delete_unverified or (stamp is not None and stamp < stale_before)
            if sweep and stale and is_temporary(meta.path):
                log.warning("%s: removing %s, a ref write's temporary file left behind", store.uri, meta.path)
                try:
                    store.delete_many([meta.path])
                except StorageError as exc:
                    log.warning("%s: %s stays (%s)", store.uri, meta.path, exc)
            else:
                log.info("%s: %s is no branch ref; skipped", store.uri, meta.path)
            continue
        try:
            out[name] = BranchRef.decode(store.get(meta.path), f"{store.uri}/{meta.path}")
        except ObjectNotFoundError:
            continue  # deleted while listed
        except BranchError as exc:
            log.error("%s: %s skipped and left alone (%s)", store.uri, meta.path, exc)
    return dict(sorted(out.items()))


def sweep_refs(store: ObjectStore, *, delete_unverified: bool, dry_run: bool) -> None:
    """Remove the stale temporary files of `store`'s ref folder (`branch_refs` with `sweep`), before the core's
    own maintenance of that table lists its refs.

    Args:
        store: The table's (or `__manifest`'s) root store.
        delete_unverified: Remove every temporary file at once (only when no writer runs).
        dry_run: Remove nothing.
    """
    if not dry_run:
        branch_refs(store, sweep=True, delete_unverified=delete_unverified)
