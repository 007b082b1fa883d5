"""Branches: forking a version into a branch, opening, listing and deleting branches, and the files they share.

Layout and rules: docs/guide/branches.md. A branch is a history of its own (`tree/{name}/_versions/`) whose first
version is a copy of the parent's version it forked from (same number); its data files are shared with the
parent, never copied.
"""

from __future__ import annotations

import logging
import uuid as uuid_mod
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import (
    BranchError,
    BranchNotFoundError,
    CommitNotSupportedError,
    CorruptManifestError,
    TableNotFoundError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from mvcc_core.failpoints import failpoint
from mvcc_core.format import operations
from mvcc_core.format.branches import (
    BranchRef,
    ScratchMark,
    branch_of,
    branch_store,
    create_ref,
    is_scratch_name,
    list_refs,
    read_ref,
    ref_path,
    tree_prefix,
    update_ref,
    validate_branch_name,
)
from mvcc_core.format.manifest import (
    PUT_IF_NOT_EXISTS,
    CommitHandler,
    encode_manifest,
    list_manifests,
    read_manifest,
    write_latest_hint,
    write_manifest,
)
from mvcc_core.format.naming import TRANSACTIONS_DIR, VERSIONS_DIR, ManifestNaming
from mvcc_core.format.referenced_files import referenced_files
from mvcc_core.io import ObjectStore
from mvcc_core.txn.commit import Committer
from mvcc_core.txn.state import TableState
from mvcc_core.txn.transaction import Transaction, write_transaction

log = logging.getLogger("mvcc.branches")


@dataclass(frozen=True)
class BranchInfo:
    """One branch as `t.branches.list()` gives it (pylance's fields; readable by attribute and by key).

    Attributes:
        parent_branch: The branch it forked from (None: main).
        parent_version: The parent's version it forked at.
        create_at: When it was created (seconds since the epoch).
        manifest_size: Size in bytes of its first manifest.
        metadata: Free-form metadata of the ref (pylance's).
    """

    parent_branch: str | None
    parent_version: int
    create_at: int
    manifest_size: int
    metadata: dict[str, str]

    def __getitem__(self, key: str) -> Any:
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def keys(self) -> list[str]:
        """The field names (so `dict(info)` works as with pylance's dicts)."""
        return list(self.__dataclass_fields__)

    @classmethod
    def of(cls, ref: BranchRef) -> BranchInfo:
        """The info of a ref.

        Args:
            ref: the branch's ref file as read from `_refs/branches/{name}.json`
        """
        return cls(ref.parent_branch, ref.parent_version, ref.create_at, ref.manifest_size, dict(ref.metadata))


class BranchTreeCommits(CommitHandler):
    """The commits of a branch of a table whose main commits through an external manifest store: the branch's
    tree commits with the object store's own put-if-not-exists (the external store keys its entries by the
    table's root, which is main's), and `root` is main's handler (docs/guide/branches.md, "Layout").

    Args:
        root: main's handler.
    """

    def __init__(self, root: CommitHandler) -> None:
        self.root = root


def tree_handler(handler: CommitHandler, name: str | None) -> CommitHandler:
    """The commit handler of tree `name` (None: main) of a table one of whose trees commits through `handler`.

    Args:
        handler: The handler of any tree of the table.
        name: The tree.

    Returns:
        main's handler for main; the object store's put-if-not-exists for a branch.
    """
    root = handler.root if isinstance(handler, BranchTreeCommits) else handler
    if name is None or root is PUT_IF_NOT_EXISTS:
        return root
    return BranchTreeCommits(root)


def _check_plain_commits(state: TableState) -> None:
    """A branch commits with the object store's put-if-not-exists, also when main uses an external store."""
    if state.committer.handler is PUT_IF_NOT_EXISTS:
        return
    try:
        state.store.check_commit_supported()
    except CommitNotSupportedError as exc:
        raise UnsupportedFeatureError(
            f"branches of {state.uri} are not supported: the table commits through an external manifest store and "
            f"a branch commits with the object store's own put-if-not-exists, which it lacks ({exc})"
        ) from exc


def _fork(parent: pb.Manifest, name: str, ref: BranchRef, root_uri: str) -> tuple[pb.Manifest, Transaction]:
    """The branch's first manifest (the parent's version, same number) and the Clone transaction recording it.

    Deterministic in (parent, name, ref): a creation interrupted before its manifest is completed identically
    by whoever opens the branch next.
    """
    txn = Transaction(
        read_version=ref.parent_version,
        operation=operations.Clone(
            is_shallow=True,
            ref_name=ref.parent_branch,
            ref_version=ref.parent_version,
            ref_path=root_uri,
            branch_name=name,
        ),
        uuid=str(uuid_mod.UUID(hex=ref.identifier)),
        message=f"create branch {name}",
    )
    manifest = pb.Manifest()
    manifest.CopyFrom(parent)
    manifest.transaction_file = txn.file_path.rsplit("/", 1)[-1]
    manifest.timestamp.FromSeconds(ref.create_at)
    return manifest, txn


def _write_fork(store: ObjectStore, name: str, ref: BranchRef, parent: pb.Manifest, naming: ManifestNaming) -> None:
    """Write the branch's transaction file and first manifest (a lost put-if-not-exists: already written)."""
    tree = branch_store(store, name)
    manifest, txn = _fork(parent, name, ref, store.uri)
    write_transaction(tree, txn)
    failpoint("branch.create.before_manifest")
    if write_manifest(tree, manifest, naming):
        write_latest_hint(tree, manifest.version, naming)


def create_branch(
    source: TableState, name: str, *, scratch: ScratchMark | None = None, metadata: Mapping[str, str] | None = None
) -> TableState:
    """Fork `source`'s version into the new branch `name` (a child of `source`'s branch).

    The name is claimed first (the ref, put-if-not-exists), then the branch's first manifest is written; a
    creation killed in between is completed by the next open of the branch (`open_branch`).

    Args:
        source: The version to fork (of main or of a branch).
        name: The new branch's name.
        scratch: A publish's scratch branch: its marker (`name` is then a `new_scratch_name()`).
        metadata: The ref's free-form metadata (pylance's); a catalog marks its forks there.

    Returns:
        The branch at its first version (the same number as `source`'s).

    Raises:
        BranchExistsError: the name is taken.
        BranchError: the name is bad.
        UnsupportedFeatureError: the table commits through an external manifest store and the object store
            has no put-if-not-exists of its own.
    """
    if scratch is None or not is_scratch_name(name):
        validate_branch_name(name)
    _check_plain_commits(source)
    ref = BranchRef(
        parent_branch=branch_of(source.store),
        parent_version=source.version,
        scratch=scratch,
        metadata=dict(metadata or {}),
    )
    manifest, _ = _fork(source.manifest, name, ref, source.uri)
    ref = replace(ref, manifest_size=len(encode_manifest(manifest)))
    create_ref(source.store, name, ref)
    # the name is ours now: anything left in its tree is a deleted branch's (a writer that committed after
    # the deletion; docs/guide/branches.md, "Known gap") and must not become part of this branch's history
    root = branch_store(source.store, None)
    root.delete_many(m.path for m in root.list(tree_prefix(name)))
    failpoint("branch.create.after_ref")
    _write_fork(source.store, name, ref, source.manifest, source.naming)
    return open_branch(source, name)


def discard_unclaimed_tree(state: TableState, name: str) -> None:
    """Remove what a branch's tree holds when no ref claims the name (a fork written after its ref was removed).

    Args:
        state: Any version of the table.
        name: The branch name whose tree to remove; nothing is removed while a ref of that name exists.
    """
    try:
        read_ref(state.store, name)
    except BranchNotFoundError:
        root = branch_store(state.store, None)
        root.delete_many(m.path for m in root.list(tree_prefix(name)))


def open_branch(state: TableState, name: str | None, version: int | None = None) -> TableState:
    """Branch `name` of `state`'s table (None: main) at `version` (None: its latest).

    Args:
        state: Any version of the table (any branch).
        name: The branch.
        version: The version of that branch.

    Returns:
        Its state.

    Raises:
        BranchNotFoundError: no such branch, or it is being deleted.
        VersionNotFoundError: the branch has no such version.
    """
    store = branch_store(state.store, name)
    if store is state.store:
        return state.latest() if version is None else state.checkout(version)
    if name is not None:
        _check_plain_commits(state)
        ref = read_ref(store, name)
        if ref.deleting:
            raise BranchNotFoundError(f"branch {name!r} of {state.uri} is being deleted; delete it again to finish")
    committer = Committer(store, handler=tree_handler(state.committer.handler, name))
    unread = TableState(store, pb.Manifest(), state.naming, committer)
    try:
        return unread.latest() if version is None else unread.checkout(version)
    except (TableNotFoundError, VersionNotFoundError):
        if name is None or list_manifests(store, committer.handler):
            raise
    # the ref exists but the first manifest does not: a creation that was interrupted; complete it
    parent_chain(state.store, name)  # BranchError on a cycle (the parent would be opened without end)
    log.warning("%s: completing the interrupted creation of branch %r", state.uri, name)
    parent = open_branch(state, ref.parent_branch, ref.parent_version)
    _write_fork(store, name, ref, parent.manifest, parent.naming)
    return unread.latest() if version is None else unread.checkout(version)


def parent_chain(store: ObjectStore, name: str) -> list[str]:
    """Branch `name` and its ancestors, nearest first (main not included).

    Args:
        store: The table's store.
        name: The branch.

    Returns:
        The names.

    Raises:
        BranchError: the refs' parents loop (a ref names itself, or an ancestor names a descendant).
    """
    refs = list_refs(store, scratch=True)
    chain = [name]
    parent = refs[name].parent_branch if name in refs else None
    while parent is not None:
        if parent in chain:
            loop = [*chain[chain.index(parent) :], parent]
            raise BranchError(
                f"the branch refs of {store.uri} form a cycle: {' -> '.join(loop)} (each names the next as its "
                "parent); delete one of them"
            )
        chain.append(parent)
        parent = refs[parent].parent_branch if parent in refs else None
    return chain


def fork_pins(state: TableState) -> set[int]:
    """Versions of `state`'s tree that a child branch forked and has no first manifest for yet (a creation
    killed after its ref): retention keeps them, or the branch could never be completed and opened.

    Args:
        state: A version of the tree.

    Returns:
        The versions.
    """
    own = branch_of(state.store)
    pins = set()
    for name, ref in list_refs(state.store, scratch=True).items():
        if ref.parent_branch != own or ref.deleting:
            continue
        tree = branch_store(state.store, None)
        if not tree.list(f"{tree_prefix(name)}/{VERSIONS_DIR}"):
            pins.add(ref.parent_version)
    return pins


def list_branches(state: TableState) -> dict[str, BranchRef]:
    """Every live branch of `state`'s table (one being deleted, and publishes' scratch branches, left out), by
    name.

    Args:
        state: Any version of the table.

    Returns:
        Name to ref.
    """
    return {name: ref for name, ref in list_refs(state.store).items() if not ref.deleting}


def _tree_manifests(store: ObjectStore, state: TableState, name: str | None) -> list[pb.Manifest]:
    """Every manifest of one tree; CorruptManifestError if one cannot be read (its files are then unknown)."""
    try:
        tree = branch_store(store, name)
    except BranchNotFoundError:
        return []  # a scratch branch deleted while listed: its files went first
    handler = tree_handler(state.committer.handler, name)
    out = []
    for location in list_manifests(tree, handler):
        try:
            out.append(read_manifest(tree, location, handler))
        except CorruptManifestError as exc:
            where = f"branch {name!r}" if name else "main"
            raise CorruptManifestError(
                f"cannot tell which files {where} of {state.uri} uses: {exc}; restore or delete it first"
            ) from exc
    return out


def referenced_elsewhere(state: TableState, *, exclude: str | None = None) -> set[str]:
    """Files (relative to the root) every version of every other tree references: what retention and branch
    deletion on `state`'s tree must keep. Transaction files are per tree and left out.

    Args:
        state: A version of the tree whose files are being removed.
        exclude: A branch to leave out too (the one being deleted).

    Returns:
        The paths.

    Raises:
        CorruptManifestError: another tree has a manifest that cannot be read (nothing may be removed then).
    """
    own = branch_of(state.store)
    trees: list[str | None] = [None, *list_refs(state.store, scratch=True)]
    needed: set[str] = set()
    for tree in trees:
        if tree == own or (tree is not None and tree == exclude):
            continue
        for manifest in _tree_manifests(state.store, state, tree):
            needed |= {p for p in referenced_files(manifest) if not p.startswith(f"{TRANSACTIONS_DIR}/")}
    return needed


def protected_versions(state: TableState) -> set[int]:
    """Versions of `state`'s tree retention must keep for branches: on a branch, every version from its
    publish base on (a publish diffs and re-runs them). A parent keeps none of its versions for its child
    branches, only the files their versions reference (`referenced_elsewhere`): a publish whose base the
    parent's retention removed re-runs the branch's writes on the parent's latest version (docs/guide/branches.md).

    Args:
        state: A version of the tree.

    Returns:
        The lowest protected version as a one-element set (empty: none protected).
    """
    own = branch_of(state.store)
    if own is None:
        return set()
    ref = list_refs(state.store, scratch=True).get(own)
    return {ref.base[0]} if ref is not None else set()


def _ancestors(refs: dict[str, BranchRef], name: str) -> set[str]:
    """The ancestors of `name` (stopping at a loop): a branch in a cycle with `name` does not block its deletion."""
    seen: set[str] = set()
    parent = refs[name].parent_branch if name in refs else None
    while parent is not None and parent not in seen:
        seen.add(parent)
        parent = refs[parent].parent_branch if parent in refs else None
    return seen


def delete_branch(state: TableState, name: str) -> None:
    """Delete branch `name`: its ref, its manifests and transactions, and the data, deletion and index files
    only it references (files main or another branch references stay).

    The ref is marked deleting first, so a deletion killed half-way leaves a branch that can only be deleted
    (again, which finishes it), never one that opens with part of its history.

    Args:
        state: Any version of the table.
        name: The branch.

    Raises:
        BranchNotFoundError: no such branch.
        BranchError: another branch forks from it (delete that one first).
        CorruptManifestError: a manifest of the table cannot be read (nothing is removed then).
    """
    ref = read_ref(state.store, name)
    refs = list_refs(state.store, scratch=True)
    children = sorted(
        child for child, r in refs.items() if r.parent_branch == name and name not in _ancestors(refs, name)
    )
    if children:
        raise BranchError(
            f"branch {name!r} of {state.uri} cannot be deleted: branches {children} fork from it; delete them first"
        )
    if not ref.deleting:
        update_ref(state.store, name, ref, deleting=True)
    failpoint("branch.delete.after_mark")
    own: set[str] = set()
    for manifest in _tree_manifests(state.store, state, name):
        own |= {p for p in referenced_files(manifest) if not p.startswith(f"{TRANSACTIONS_DIR}/")}
    root = branch_store(state.store, None)
    doomed = sorted(own - referenced_elsewhere(replace(state, store=branch_store(state.store, name)), exclude=name))
    root.delete_many(doomed)
    failpoint("branch.delete.after_files")
    root.delete_many(m.path for m in root.list(tree_prefix(name)))
    failpoint("branch.delete.before_ref")
    root.delete_many([ref_path(name)])
    log.info("%s: deleted branch %r and %d files only it used", state.uri, name, len(doomed))
