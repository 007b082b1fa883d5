"""Branches on disk: the refs under `_refs/branches/` and the store view of one branch's tree.

A branch `b` of the table at `root` keeps its manifests in `root/tree/b/_versions/` and its transaction
files in `root/tree/b/_transactions/` (pylance's layout); its data, deletion and index files live beside
the main branch's in `root/data/`, `root/_deletions/` and `root/_indices/`, so a manifest's relative paths
mean the same file on every branch (docs/guide/branches.md, "Layout"). `BranchStore` is the table's store seen
from a branch: `_versions/...` and `_transactions/...` map into the branch's tree, every other path is the
root's. The ref `_refs/branches/b.json` is written in pylance's JSON shape.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from mvcc_core import names
from mvcc_core.errors import BranchError, BranchExistsError, BranchNotFoundError, ObjectNotFoundError
from mvcc_core.format.naming import MAX_VERSION, TRANSACTIONS_DIR, VERSIONS_DIR
from mvcc_core.io import ObjectMeta, ObjectStore

BRANCHES_DIR = "_refs/branches"
TREE_DIR = "tree"
#: The name pylance reserves for the default branch (a handle on it has `branch` None).
MAIN_NAME = "main"

#: Transaction properties of a publish commit: which branch (name and id) and which of its versions it holds.
PUBLISHED_BRANCH = "mvcc.published_branch"
PUBLISHED_BRANCH_ID = "mvcc.published_branch_id"
PUBLISHED_BRANCH_VERSION = "mvcc.published_branch_version"

_MAPPED_DIRS = (VERSIONS_DIR, TRANSACTIONS_DIR)

log = logging.getLogger("mvcc.branches")

#: A publish's scratch branch: the reserved prefix and 32 hex digits (a name the user rule refuses, of one
#: length whatever the published branch's name).
_SCRATCH_NAME = re.compile(re.escape(names.SCRATCH_BRANCH_PREFIX) + r"[0-9a-f]{32}")
#: The ref key that marks a scratch branch (mvcc's own, beside pylance's keys).
SCRATCH_KEY = "mvccScratch"


def new_scratch_name() -> str:
    """A fresh name for a publish's scratch branch (`SCRATCH_BRANCH_PREFIX` + 32 random hex digits)."""
    return f"{names.SCRATCH_BRANCH_PREFIX}{uuid.uuid4().hex}"


def is_scratch_name(name: object) -> bool:
    """Whether `name` has the shape of a scratch branch's name (its ref must still carry the marker).

    Args:
        name: A branch name as found.

    Returns:
        True for `SCRATCH_BRANCH_PREFIX` followed by 32 lowercase hex digits.
    """
    return isinstance(name, str) and _SCRATCH_NAME.fullmatch(name) is not None


@dataclass(frozen=True)
class ScratchMark:
    """What a scratch branch's ref records in `mvccScratch`: whose publish it serves and until when.

    Attributes:
        branch: The branch being published.
        branch_id: That branch's identifier (its ref's `identifier`).
        lease_until: Until when (seconds since the epoch) the publisher may be using it: before then no other
            publish removes it.
    """

    branch: str
    branch_id: str
    lease_until: int


def validate_branch_name(name: str) -> None:
    """Refuse a name that is no branch name (the rule: `mvcc_core.names.BRANCH`).

    Args:
        name: The branch name.

    Raises:
        BranchError: it is empty, too long, "main", starts with '_' or '.' (mvcc's own names), or holds
            anything but ASCII letters, digits, '_', '-', '.'.
    """
    reason = names.problem(names.BRANCH, name)
    if reason is not None:
        raise BranchError(reason)


def ref_path(name: str) -> str:
    """The ref file of branch `name`, relative to the table root.

    Args:
        name: the branch's name (checked by the caller: `validate_branch_name`)
    """
    return f"{BRANCHES_DIR}/{name}.json"


def tree_prefix(name: str) -> str:
    """The directory of branch `name`'s manifests and transactions, relative to the table root.

    Args:
        name: the branch's name (checked by the caller: `validate_branch_name`)
    """
    return f"{TREE_DIR}/{name}"


@dataclass(frozen=True)
class BranchRef:
    """What `_refs/branches/{name}.json` holds.

    Attributes:
        parent_branch: The branch it was forked from (None: main).
        parent_version: The parent's version it was forked at (also the branch's first version).
        create_at: When it was created (seconds since the epoch).
        manifest_size: Size in bytes of its first manifest.
        identifier: A random id telling this branch from a later one of the same name.
        deleting: Its deletion started and did not finish (it can only be deleted now).
        published: (branch version, parent version) of its last publish: the parent's version that holds
            the branch's changes up to that branch version (None: never published).
        metadata: pylance's free-form metadata.
        scratch: Set on a publish's scratch branch only (`mvccScratch`).
    """

    parent_branch: str | None
    parent_version: int
    create_at: int = field(default_factory=lambda: int(time.time()))
    manifest_size: int = 0
    identifier: str = field(default_factory=lambda: uuid.uuid4().hex)
    deleting: bool = False
    published: tuple[int, int] | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    scratch: ScratchMark | None = None

    @property
    def base(self) -> tuple[int, int]:
        """(branch version, parent version) a publish starts from: the last publish, or the fork."""
        return self.published or (self.parent_version, self.parent_version)

    def encode(self) -> bytes:
        """The ref file's bytes (pylance's keys, plus mvcc's `mvccDeleting` / `mvccPublished`)."""
        document: dict[str, Any] = {
            "parentBranch": self.parent_branch,
            "identifier": {"version_mapping": [[self.parent_version, self.identifier]]},
            "parentVersion": self.parent_version,
            "createAt": self.create_at,
            "manifestSize": self.manifest_size,
            "metadata": dict(self.metadata),
        }
        if self.deleting:
            document["mvccDeleting"] = True
        if self.published is not None:
            document["mvccPublished"] = {"branchVersion": self.published[0], "parentVersion": self.published[1]}
        if self.scratch is not None:
            document[SCRATCH_KEY] = {
                "branch": self.scratch.branch,
                "branchIdentifier": self.scratch.branch_id,
                "leaseUntil": self.scratch.lease_until,
            }
        return json.dumps(document, indent=2).encode()

    @classmethod
    def decode(cls, data: bytes, where: str) -> BranchRef:
        """Parse a ref file.

        Args:
            data: The file's bytes.
            where: The file's location, for the error.

        Returns:
            The ref.

        Raises:
            BranchError: the file is not a ref.
        """
        try:
            doc = json.loads(data)
            parent = doc.get("parentBranch")
            version = doc["parentVersion"]
            mapping = doc.get("identifier", {}).get("version_mapping") or [[version, ""]]
            published = doc.get("mvccPublished")
            mark = doc.get(SCRATCH_KEY)
            ref = cls(
                parent_branch=parent if parent not in (None, MAIN_NAME) else None,
                parent_version=version,
                create_at=int(doc.get("createAt", 0)),
                manifest_size=int(doc.get("manifestSize", 0)),
                identifier=str(mapping[-1][1]),
                deleting=bool(doc.get("mvccDeleting", False)),
                published=(int(published["branchVersion"]), int(published["parentVersion"])) if published else None,
                metadata={str(k): str(v) for k, v in (doc.get("metadata") or {}).items()},
                scratch=(
                    ScratchMark(str(mark["branch"]), str(mark["branchIdentifier"]), int(mark["leaseUntil"]))
                    if mark is not None
                    else None
                ),
            )
        except (ValueError, UnicodeDecodeError, AttributeError, KeyError, TypeError, IndexError) as exc:
            raise BranchError(f"branch ref {where} cannot be read: {exc}") from None
        if not isinstance(ref.parent_version, int) or not 0 <= ref.parent_version <= MAX_VERSION:
            raise BranchError(f"branch ref {where} names parent version {ref.parent_version!r}")
        return ref


def read_ref(store: ObjectStore, name: str) -> BranchRef:
    """The ref of branch `name`.

    Args:
        store: The table's store (the root's or a branch's view).
        name: The branch name.

    Returns:
        Its ref.

    Raises:
        BranchNotFoundError: there is no such branch.
        BranchError: the name is no branch name, or a scratch branch's name whose ref has no scratch marker.
    """
    scratch = is_scratch_name(name)
    if not scratch:
        validate_branch_name(name)
    try:
        data = store.get(ref_path(name))
    except ObjectNotFoundError:
        raise BranchNotFoundError(f"table {store.uri} has no branch {name!r}") from None
    ref = BranchRef.decode(data, f"{store.uri}/{ref_path(name)}")
    if scratch and ref.scratch is None:
        raise BranchError(
            f"{store.uri}/{ref_path(name)} has a name reserved for a publish's scratch branch and no "
            f"{SCRATCH_KEY} marker: it is not a branch"
        )
    return ref


def _listed_name(path: str) -> tuple[str | None, str]:
    """The branch name a file under `_refs/branches/` stands for (None: none) and, when none, why."""
    rel = path[len(BRANCHES_DIR) + 1 :]
    if not rel.endswith(".json"):
        return None, "not a .json file (a temporary file of a write, or another file)"
    name = rel[: -len(".json")]
    if is_scratch_name(name) or names.problem(names.BRANCH, name) is None:
        return name, ""
    return None, f"not a branch name: {names.problem(names.BRANCH, name)}"


def list_refs(store: ObjectStore, *, scratch: bool = False) -> dict[str, BranchRef]:
    """Every branch's ref, by name (a ref deleted while listed is left out).

    Only files named `<branch name>.json` are refs; any other file under `_refs/branches/` (a temporary file
    of a write, a file in a subfolder, a name the branch rule refuses, a scratch name without its marker) is
    skipped and logged at debug (`unrecognized_refs` names them).

    Args:
        store: The table's store.
        scratch: Also list publishes' scratch branches (what retention and deletion must see; a user's view
            leaves them out).

    Returns:
        Name to ref, sorted by name.
    """
    out: dict[str, BranchRef] = {}
    for meta in store.list(BRANCHES_DIR):
        name, why = _listed_name(meta.path)
        if name is None:
            log.debug("%s/%s: skipped: %s", store.uri, meta.path, why)
            continue
        try:
            ref = BranchRef.decode(store.get(meta.path), f"{store.uri}/{meta.path}")
        except ObjectNotFoundError:
            continue
        if is_scratch_name(name):
            if ref.scratch is None:
                log.debug("%s/%s: skipped: a scratch branch's name without the marker", store.uri, meta.path)
                continue
            if not scratch:
                continue
        out[name] = ref
    return dict(sorted(out.items()))


def unrecognized_refs(store: ObjectStore) -> dict[str, str]:
    """The files under `_refs/branches/` that `list_refs` skips, with why (for `mvcc verify`).

    Args:
        store: The table's store.

    Returns:
        Path (relative to the root) to the reason.
    """
    out: dict[str, str] = {}
    for meta in store.list(BRANCHES_DIR):
        name, why = _listed_name(meta.path)
        if name is None:
            out[meta.path] = why
        elif is_scratch_name(name):
            try:
                read_ref(store, name)
            except BranchNotFoundError:
                continue  # deleted while we listed
            except BranchError as exc:
                out[meta.path] = str(exc)
    return out


def create_ref(store: ObjectStore, name: str, ref: BranchRef) -> None:
    """Claim the name `name` for a new branch (put-if-not-exists: exactly one creator wins).

    Args:
        store: The table's store.
        name: The branch name.
        ref: Its ref.

    Raises:
        BranchExistsError: the name is taken.
    """
    if not store.put_if_not_exists(ref_path(name), ref.encode()):
        raise BranchExistsError(f"table {store.uri} has a branch {name!r} already")


def update_ref(store: ObjectStore, name: str, ref: BranchRef, **changes: Any) -> BranchRef:
    """Rewrite branch `name`'s ref with `changes` (an atomic overwrite).

    Args:
        store: The table's store.
        name: The branch name.
        ref: Its current ref.
        **changes: Fields of `BranchRef` to change.

    Returns:
        The new ref.
    """
    new = replace(ref, **changes)
    store.put(ref_path(name), new.encode())
    return new


class BranchStore(ObjectStore):
    """The table's store as branch `branch` sees it: manifests and transactions in its tree, the rest shared.

    Listings return paths as the root store would name them from the branch (`_versions/...`), so code
    written for one store (the commit loop, retention) runs unchanged on a branch.

    Args:
        uri: the table's root (main's), as `ObjectStore` takes it
        storage_options: the store's options, as `ObjectStore` takes them (None: none)
        branch: the branch seen (None: the class's `branch`, set by a subclass); checked by the branch name rule, or a
            reserved scratch name whose ref carries the scratch marker

    Raises:
        BranchError: `branch` breaks the branch name rule, or is a scratch branch's name whose ref has no scratch
            marker (BranchNotFoundError: it has no ref).
    """

    def __init__(self, uri: str, storage_options: dict[str, Any] | None = None, branch: str | None = None) -> None:
        super().__init__(uri, storage_options)
        if branch is not None:
            if not is_scratch_name(branch):
                validate_branch_name(branch)
            self.branch = branch
        self._prefix = tree_prefix(self.branch)
        if is_scratch_name(self.branch):
            read_ref(self, self.branch)  # a reserved name is a branch only with its ref's scratch marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (BranchStore, (*self._init_args, self.branch))

    def __repr__(self) -> str:
        return f"BranchStore({self.uri!r}, branch={self.branch!r})"

    def _clean(self, rel: str) -> str:  # type: ignore[override]
        rel = ObjectStore._clean(rel)
        if rel.split("/", 1)[0] in _MAPPED_DIRS:
            return f"{self._prefix}/{rel}"
        return rel

    def _unmapped(self, meta: ObjectMeta) -> ObjectMeta:
        if meta.path.startswith(f"{self._prefix}/"):
            return replace(meta, path=meta.path[len(self._prefix) + 1 :])
        return meta

    def list(self, prefix_rel: str = "") -> list[ObjectMeta]:
        """See `ObjectStore.list`; a branch's `_versions/` and `_transactions/` are its tree's.

        Args:
            prefix_rel: the directory to list as the branch names it, relative to the root ('' lists everything)
        """
        return [self._unmapped(m) for m in super().list(prefix_rel)]

    def list_first(self, prefix_rel: str = "") -> ObjectMeta | None:
        """See `ObjectStore.list_first`.

        Args:
            prefix_rel: the directory searched as the branch names it, relative to the root ('' searches everything)
        """
        found = super().list_first(prefix_rel)
        return None if found is None else self._unmapped(found)


def branch_of(store: ObjectStore) -> str | None:
    """The branch a store sees (None: main).

    Args:
        store: A table's store.

    Returns:
        The branch name, or None.
    """
    return store.branch if isinstance(store, BranchStore) else None


def branch_store(store: ObjectStore, name: str | None) -> ObjectStore:
    """The table's store seen from branch `name` (None: the root's own), opened with `store`'s options.

    Args:
        store: Any store of the table (root or branch view).
        name: The branch (None: main).

    Returns:
        The store.
    """
    if name is None:
        return store if branch_of(store) is None else store.sibling(store.uri)
    if branch_of(store) == name:
        return store
    return BranchStore(store.uri, store.storage_options, name)
