"""Table verification: a table's versions checked against its store (`mvcc verify`, Dagster's `files_exist`)."""

from __future__ import annotations

import random
import sys
import types
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap

from mvcc_core import names
from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import MvccError, ObjectNotFoundError, VersionNotFoundError
from mvcc_core.format import fragment_reuse
from mvcc_core.format.branches import BRANCHES_DIR, MAIN_NAME, BranchRef, branch_store, read_ref
from mvcc_core.format.deletion import deletion_path, read_deletion_vector
from mvcc_core.format.manifest import list_manifests, location_of, manifest_problems
from mvcc_core.format.naming import TAGS_DIR
from mvcc_core.format.referenced_files import ReferencedFile, version_files
from mvcc_core.format.tags import decode_tag, decode_tag_branch
from mvcc_core.io import TEMP_PREFIX, ObjectStore
from mvcc_core.read import index_lookup
from mvcc_core.read.index_lookup import BITMAP, BTREE, address_column, index_file, row_addresses
from mvcc_core.table import Table
from mvcc_core.txn.branches import tree_handler

__all__ = ["ForeignBase", "VerifyProblem", "VerifyReport", "verify"]

#: What `VerifyProblem.problem` says of a referenced file that is not in the store.
MISSING = "missing"


@dataclass(frozen=True)
class VerifyProblem:
    """One thing wrong with a table.

    Attributes:
        version: The version it was found in (None: not tied to one version, e.g. a tag file).
        kind: "manifest", "transaction", "data", "deletion", "index", "tag", "branch" (a branch's ref) or "ref"
            (a file under `_refs/` that is neither a tag nor a branch ref).
        path: The file's full location, or the index's name for an index problem.
        problem: What is wrong, in plain words ("missing" for a referenced file that is not there).
        branch: The branch whose version it was found in (None: main, or not tied to a branch).
    """

    version: int | None
    kind: str
    path: str
    problem: str
    branch: str | None = None


@dataclass
class ForeignBase:
    """A base path outside the table's root (a shallow clone's source): read from, never written or cleaned.

    Attributes:
        path: The base's location.
        id: The base's id in the manifest.
        name: The base's name, if it has one.
        versions: The checked versions that declare it.
        files: The most files one of those versions reads from it.
    """

    path: str
    id: int
    name: str | None
    versions: list[int] = field(default_factory=list)
    files: int = 0


@dataclass
class VerifyReport:
    """What `verify` checked and found.

    Attributes:
        versions: The versions checked.
        files_referenced: How many distinct files the checked versions reference.
        files_checked: How many of them were checked (fewer than referenced when `max_files` sampled them).
        problems: Every problem found, in the order found.
        warnings: What is odd but not damage (a temporary file left by a killed write, a branch whose deletion
            did not finish), in the same shape; they do not make the report fail.
        foreign_bases: Base paths outside the table's root, notes rather than problems.
        branches: The versions checked of each branch (besides `versions`, those of the handle's own branch).
        scratch_branches: The scratch branches of publishes found (`_mvcc-publish-...`): a publish's working
            space, removed when it ends; not checked further.
    """

    versions: list[int] = field(default_factory=list)
    files_referenced: int = 0
    files_checked: int = 0
    problems: list[VerifyProblem] = field(default_factory=list)
    warnings: list[VerifyProblem] = field(default_factory=list)
    foreign_bases: list[ForeignBase] = field(default_factory=list)
    branches: dict[str, list[int]] = field(default_factory=dict)
    scratch_branches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether no problem was found."""
        return not self.problems

    @property
    def missing(self) -> list[str]:
        """The locations of referenced files that are not in the store."""
        return [p.path for p in self.problems if p.problem == MISSING]

    def add(self, version: int | None, kind: str, path: str, problem: str, branch: str | None = None) -> None:
        """Record a problem.

        Args:
            version: The version it was found in (None: not tied to one version).
            kind: What was checked (see `VerifyProblem.kind`).
            path: The file's location or the index's name.
            problem: What is wrong, in plain words.
            branch: The branch of that version (None: main or none).
        """
        self.problems.append(VerifyProblem(version, kind, path, problem, branch))

    def warn(self, kind: str, path: str, problem: str, branch: str | None = None) -> None:
        """Record a warning (see `warnings`).

        Args:
            kind: What was checked (see `VerifyProblem.kind`).
            path: The file's location.
            problem: What is odd, in plain words.
            branch: The branch it concerns (None: none).
        """
        self.warnings.append(VerifyProblem(None, kind, path, problem, branch))


def verify(
    table: Table,
    *,
    deep: bool = False,
    all_versions: bool = False,
    max_files: int | None = None,
    branch: str | None = None,
) -> VerifyReport:
    """Check a table's version(s), its branches and its tags against its store.

    Every file a checked version references exists with its recorded size, deletion vectors decode and fit
    their fragments, indices name existing fields and fragment ids, the transaction file reads. Every file
    under `_refs/` is checked: each branch ref decodes, its parent branch exists (no cycle) and has the version
    it forked at, and its branch's latest version (every version with `all_versions`) is checked like the
    table's own; each tag file decodes and names an existing version; anything else there is a problem (a
    temporary file of a killed write a warning). A file shared by many versions is checked once.

    Args:
        table: The table, at the version to check.
        deep: Also read every data and index file (a Parquet file must read and hold the recorded row count).
        all_versions: Check every version kept instead of the table's own (and of each branch); a version whose
            manifest does not load is reported with each invariant it breaks.
        max_files: Check at most this many of the referenced files, chosen at random (a bounded health
            check); None checks them all.
        branch: Check only this branch (its ref and ancestry, the tags naming it, its versions), not the
            table's own version nor the other branches.

    Returns:
        The report; `report.ok` when nothing is wrong.

    Raises:
        ValueError: `max_files` is negative.
        BranchNotFoundError: `branch` names no branch ref.
    """
    if max_files is not None and max_files < 0:
        raise ValueError(f"max_files must be >= 0, got {max_files}")
    checker = _Checker(VerifyReport(), deep, max_files, all_versions)
    refs = _RefsCheck(table, checker)
    if branch is not None and branch != MAIN_NAME:
        refs.only(branch)
        return checker.report
    if all_versions:
        checker.every_version(table, checker.report.versions)
    else:
        checker.report.versions.append(table.version)
        checker.version(table)
    refs.everything(skip=table.branch)
    return checker.report


def _where(store: ObjectStore, path: str) -> str:
    return f"{store.uri.rstrip('/')}/{path}"


class _RefsCheck:
    """The files under `_refs/`: branch refs and their branches' versions, tags, and nothing else."""

    def __init__(self, table: Table, checker: _Checker) -> None:
        self.table = table
        self.checker = checker
        self.report = checker.report
        self.store = branch_store(table.state.store, None)  # the root's view: `_refs/` is the table's
        self.refs: dict[str, BranchRef] = {}  # the branch refs that decode, by branch name
        self.broken: set[str] = set()  # branch names whose ref does not decode
        self.listed: dict[str | None, set[int]] = {}  # each branch's versions, once listed

    def everything(self, skip: str | None) -> None:
        """Every file under `_refs/`, every branch's versions (but `skip`'s: the handle's own), every tag."""
        tag_files = []
        for meta in self.store.list("_refs"):
            if meta.path.startswith(BRANCHES_DIR + "/"):
                self.branch_file(meta.path)
            elif meta.path.startswith(TAGS_DIR + "/"):
                tag_files.append(meta.path)
            elif not self.temporary(meta.path, "ref"):
                self.report.add(None, "ref", _where(self.store, meta.path), "not a file mvcc writes under _refs/")
        for name in self.refs:
            self.ancestry(name)
        for name in self.refs:
            if name != skip:
                self.branch_versions(name)
        for path in tag_files:
            self.tag_file(path, None)

    def only(self, name: str) -> None:
        """Branch `name`: its ref, its ancestry's refs, its versions, and the tags naming it."""
        names.check(names.BRANCH, name)
        read_ref(self.store, name)  # BranchNotFoundError when there is none
        for meta in self.store.list(BRANCHES_DIR):
            self.branch_file(meta.path, report_other=False)
        self.ancestry(name)
        if name in self.refs:
            self.branch_versions(name)
        for meta in self.store.list(TAGS_DIR):
            if meta.path.endswith(".json") and not self.temporary(meta.path, "tag", report=False):
                self.tag_file(meta.path, name)

    def temporary(self, path: str, kind: str, report: bool = True) -> bool:
        """Whether `path` is a temporary file (`_tmp-...`); a warning, or a problem when it ends like a final
        name (`.json`), because readers that list the folder take it for a ref or a tag."""
        file = path.rsplit("/", 1)[-1]
        if not file.startswith(TEMP_PREFIX):
            return False
        if report and file.endswith(".json"):
            self.report.add(
                None,
                kind,
                _where(self.store, path),
                "a temporary file shaped like a final name (it ends in .json): listings take it for one; "
                "delete it once no write is running",
            )
        elif report:
            self.report.warn(kind, _where(self.store, path), "a temporary file left by a write that did not finish")
        return True

    def branch_file(self, path: str, report_other: bool = True) -> None:
        """One file under `_refs/branches/`: a branch's ref that must decode, a scratch branch, or a problem."""
        where = _where(self.store, path)
        rest = path[len(BRANCHES_DIR) + 1 :]
        if self.temporary(path, "branch", report=report_other):
            return
        name = rest[: -len(".json")] if rest.endswith(".json") else None
        if name is not None and name.startswith(names.SCRATCH_BRANCH_PREFIX) and "/" not in name:
            try:
                ref = BranchRef.decode(self.store.get(path), where)
            except ObjectNotFoundError:
                return  # the publish ended while we listed
            except MvccError as exc:
                self.report.add(None, "branch", where, f"scratch branch ref does not decode: {exc}", name)
                return
            if ref.scratch is None:  # a reserved name without the marker is no scratch branch: listings skip it
                self.report.add(None, "branch", where, "a scratch branch's name without the scratch marker", name)
                return
            self.report.scratch_branches.append(name)
            return
        if name is None or names.problem(names.BRANCH, name) is not None:
            if report_other:
                self.report.add(None, "branch", where, "not a branch ref (a branch ref is _refs/branches/NAME.json)")
            return
        try:
            self.refs[name] = BranchRef.decode(self.store.get(path), where)
        except ObjectNotFoundError:
            return  # deleted while we listed
        except MvccError as exc:
            self.broken.add(name)
            self.report.add(None, "branch", where, str(exc), name)

    def ancestry(self, name: str) -> None:
        """Branch `name`'s parents up to main: each exists, none twice (a cycle), each has the fork version."""
        seen = [name]
        current = name
        while True:
            ref = self.refs.get(current)
            if ref is None:
                return  # reported where its ref was read
            where = _where(self.store, f"{BRANCHES_DIR}/{current}.json")
            parent = ref.parent_branch
            if ref.deleting:
                if current == name:
                    self.report.warn("branch", where, "its deletion did not finish; run mvcc branches delete", name)
                return
            if parent is not None and parent in seen:
                chain = " -> ".join([*seen, parent])
                if current == name or parent == name:
                    self.report.add(None, "branch", where, f"its parents form a cycle: {chain}", name)
                return
            if parent is not None and parent not in self.refs:
                if current == name:
                    why = "its ref does not decode" if parent in self.broken else "there is no such branch"
                    self.report.add(None, "branch", where, f"parent branch {parent!r} does not exist ({why})", name)
                return
            if current == name and ref.parent_version > self.latest_version(parent):
                self.report.add(
                    None,
                    "branch",
                    where,
                    f"forked at version {ref.parent_version} of {parent or 'main'}, which has no such version (its "
                    f"latest is {self.latest_version(parent)})",
                    name,
                )
            if parent is None:
                return
            seen.append(parent)
            current = parent

    def versions_of(self, branch: str | None) -> set[int]:
        """The versions `branch` (None: main) has manifests for, listed once (read-only: nothing is completed)."""
        if branch not in self.listed:
            store = branch_store(self.store, branch)
            handler = tree_handler(self.table.state.committer.handler, branch)
            self.listed[branch] = {loc.version for loc in list_manifests(store, handler)}
        return self.listed[branch]

    def has_version(self, branch: str | None, version: int) -> bool:
        """Whether `branch` (None: main) has a manifest for `version`."""
        store = branch_store(self.store, branch)
        if store.exists(location_of(store, version, self.table.manifest_naming).path):
            return True
        return version in self.versions_of(branch)  # another naming, or an external store's newest version

    def latest_version(self, branch: str | None) -> int:
        """The newest version of `branch` (None: main); 0 when it has none. A fork version below it may be gone:
        retention removes a parent's old versions and keeps only the files its branches use."""
        return max(self.versions_of(branch), default=0)

    def branch_versions(self, name: str) -> None:
        """Branch `name`'s latest version (every version, with `all_versions`) checked like the table's."""
        ref = self.refs[name]
        if ref.deleting:
            return
        where = _where(self.store, f"{BRANCHES_DIR}/{name}.json")
        store = branch_store(self.store, name)
        if not list_manifests(store, tree_handler(self.table.state.committer.handler, name)):
            self.report.add(
                None,
                "branch",
                where,
                "its tree has no manifest (a creation that did not finish); open the branch "
                "to complete it, or delete it",
                name,
            )
            return
        try:
            head = self.table.checkout((name, None))
        except MvccError as exc:
            self.report.add(None, "manifest", where, f"the branch's latest version does not open: {exc}", name)
            return
        checked = self.report.branches.setdefault(name, [])
        if self.checker.all_versions:
            self.checker.every_version(head, checked, name)
        else:
            checked.append(head.version)
            self.checker.version(head, name)

    def tag_file(self, path: str, only_branch: str | None) -> None:
        """One file under `_refs/tags/`: it decodes and names an existing version of an existing branch."""
        where = _where(self.store, path)
        if self.temporary(path, "tag", report=only_branch is None):
            return
        name = path[len(TAGS_DIR) + 1 : -len(".json")] if path.endswith(".json") else None
        if name is None or names.problem(names.TAG, name) is not None:
            self.report.add(None, "tag", where, "not a tag file (a tag is _refs/tags/NAME.json)")
            return
        try:
            data = self.store.get(path)
            version = decode_tag(data, where)
            branch = decode_tag_branch(data)
        except ObjectNotFoundError:
            return  # deleted while we listed
        except (MvccError, ValueError, AttributeError) as exc:
            if only_branch is None:
                self.report.add(None, "tag", where, str(exc))
            return
        if only_branch is not None and branch != only_branch:
            return
        if branch is not None and branch not in self.refs:
            self.report.add(
                version, "tag", where, f"tag {name!r} names branch {branch!r}, which does not exist", branch
            )
        elif not self.has_version(branch, version):
            self.report.add(
                version,
                "tag",
                where,
                f"tag {name!r} names version {version} of {branch or 'main'}, which does not exist",
                branch,
            )


class _Checker:
    """Checks versions of one table against its store, each file once."""

    def __init__(self, report: VerifyReport, deep: bool, max_files: int | None, all_versions: bool = False) -> None:
        self.report = report
        self.deep = deep
        self.all_versions = all_versions
        self.max_files = max_files
        self.checked: dict[str, str | None] = {}  # file uri -> its problem (None: fine)
        self.referenced: set[str] = set()

    def every_version(self, table: Table, checked: list[int], branch: str | None = None) -> None:
        """Every version of `table`'s branch, each listed in `checked`."""
        for info in table.versions():
            checked.append(info.version)
            if info.error is not None:
                self.manifest(table, info.version, info.error, branch)
                continue
            try:
                self.version(table.checkout(info.version), branch)
            except VersionNotFoundError:
                continue  # removed by a cleanup running beside us

    def manifest(self, table: Table, version: int, error: str, branch: str | None = None) -> None:
        """Each broken invariant of a manifest that failed to load, or the load's error when it says more."""
        state = table.state
        try:
            location = location_of(state.store, version, table.manifest_naming)
            found = manifest_problems(state.store, location, state.committer.handler)
        except MvccError:
            found = []
        if not found:
            self.report.add(version, "manifest", table.uri, error, branch)
        for text in found:
            self.report.add(version, "manifest", table.uri, text, branch)

    def version(self, t: Table, branch: str | None = None) -> None:
        manifest = t.manifest
        try:
            t.transaction()
        except MvccError as exc:
            self.report.add(t.version, "transaction", manifest.transaction_file, str(exc), branch)
        fragments = {f.id: f for f in manifest.fragments}
        files = version_files(t.state.store, manifest)
        self.foreign_bases(t, files)
        self.referenced.update(ref.uri for ref in files)
        self.report.files_referenced = len(self.referenced)
        if self.max_files is not None:
            unchecked = [ref for ref in files if ref.uri not in self.checked]
            room = max(self.max_files - len(self.checked), 0)
            files = random.sample(unchecked, min(room, len(unchecked)))
        for ref in files:
            if ref.uri not in self.checked:
                self.checked[ref.uri] = self.file(ref, fragments, manifest)
            if self.checked[ref.uri] is not None:
                self.report.add(t.version, ref.kind, ref.uri, self.checked[ref.uri] or "", branch)
        self.report.files_checked = len(self.checked)
        self.indices(t.version, manifest, branch)
        if self.deep:
            for index in manifest.indices:
                if index.index_type in (BTREE, BITMAP) and (
                    problem := _index_rows_problem(t.state.store, manifest, index)
                ):
                    self.report.add(t.version, "index", index.name, problem, branch)

    def foreign_bases(self, t: Table, files: list[ReferencedFile]) -> None:
        """Note each base path of `t`'s version outside the table's root, and how many of the version's files
        live there: reads through it are what a shallow clone means, not a problem; nothing writes there."""
        root = t.state.store.uri.rstrip("/") + "/"
        for base in t.manifest.base_paths:
            prefix = base.path.rstrip("/") + "/"
            if prefix.startswith(root):
                continue
            entry = next((b for b in self.report.foreign_bases if b.path == base.path), None)
            if entry is None:
                entry = ForeignBase(base.path, base.id, base.name if base.HasField("name") else None)
                self.report.foreign_bases.append(entry)
            entry.versions.append(t.version)
            entry.files = max(entry.files, sum(ref.uri.startswith(prefix) for ref in files))

    def file(self, ref: ReferencedFile, fragments: dict[int, pb.DataFragment], manifest: pb.Manifest) -> str | None:
        try:
            meta = ref.store.head(ref.path)
        except ObjectNotFoundError:
            return MISSING
        if ref.size is not None and meta.size != ref.size:
            return f"size {meta.size} bytes, the manifest records {ref.size}"
        fragment = fragments.get(ref.fragment_id) if ref.fragment_id is not None else None
        try:
            if ref.kind == "deletion" and fragment is not None:
                sharing = [fragment]
                if fragment.deletion_file.HasField("content_size"):  # a packed file: every vector in it
                    sharing = [f for f in fragments.values() if f.deletion_file.HasField("content_size")
                               and deletion_path(f.id, f.deletion_file) == ref.path]  # fmt: skip
                return "; ".join(p for f in sharing if (p := _deletion_problem(ref, f, manifest))) or None
            if self.deep and ref.kind in ("data", "index"):
                return _parquet_problem(ref, fragment)
        except MvccError as exc:
            return str(exc)
        return None

    def indices(self, version: int, manifest: pb.Manifest, branch: str | None = None) -> None:
        field_ids = {f.id for f in manifest.fields}
        highest = manifest.max_fragment_id if manifest.HasField("max_fragment_id") else None
        for index in manifest.indices:
            missing = [i for i in index.fields if i not in field_ids]
            if missing:
                self.report.add(
                    version, "index", index.name, f"names field ids {missing} the schema does not have", branch
                )
            if index.fragment_bitmap and highest is not None:
                try:
                    covered = BitMap.deserialize(index.fragment_bitmap)
                except Exception as exc:  # pyroaring raises plain ValueError/RuntimeError
                    self.report.add(version, "index", index.name, f"fragment bitmap does not decode: {exc}", branch)
                    continue
                never = [f for f in covered if f > highest]
                if never:
                    self.report.add(version, "index", index.name, f"covers fragment ids {never} never assigned", branch)


def _index_rows_problem(store: ObjectStore, manifest: pb.Manifest, index: pb.IndexMetadata) -> str | None:
    """A scalar index covering a fragment with fewer row addresses there (translated through the fragment
    reuse index) than the fragment's live rows: lookups would miss rows. Rebuild it (`create_index`)."""
    payload = address_column(index)
    try:
        column = pq.read_table(pa.BufferReader(store.get(index_file(index))), columns=[payload]).column(payload)
    except (OSError, ValueError, MvccError):
        return None  # a missing or unreadable index file is reported with the file checks
    addresses = row_addresses(index, column)
    moved = fragment_reuse.address_map(manifest, index)
    if moved:
        addresses = moved.translate(addresses)
    ids, counts = np.unique(addresses >> np.uint64(32), return_counts=True)
    held = dict(zip(ids.tolist(), counts.tolist(), strict=True))
    indexed = index_lookup.covered(index)
    short = [
        f.id
        for f in manifest.fragments
        if f.id in indexed and held.get(f.id, 0) < f.physical_rows - f.deletion_file.num_deleted_rows
    ]
    if not short:
        return None
    shown = ", ".join(map(str, short[:5])) + (" ..." if len(short) > 5 else "")
    return (
        f"covers fragment(s) {shown} but holds fewer row addresses than their live rows (built before a "
        "compaction it cannot follow): lookups miss rows; rebuild it with create_index(..., replace=True)"
    )


def _deletion_problem(ref: ReferencedFile, fragment: pb.DataFragment, manifest: pb.Manifest) -> str | None:
    deleted = read_deletion_vector(ref.store, fragment, manifest.base_paths)
    recorded = fragment.deletion_file.num_deleted_rows
    if recorded and len(deleted) != recorded:
        return f"deletion vector holds {len(deleted)} rows, the manifest records {recorded}"
    if len(deleted) and deleted.max() >= fragment.physical_rows:
        return f"deletion vector names row {deleted.max()} of a fragment of {fragment.physical_rows} rows"
    return None


def _parquet_problem(ref: ReferencedFile, fragment: pb.DataFragment | None) -> str | None:
    try:
        rows = pq.read_table(pa.BufferReader(ref.store.get(ref.path))).num_rows
    except (OSError, ValueError) as exc:  # ArrowInvalid is a ValueError
        return f"unreadable: {exc}"
    if fragment is not None and rows != fragment.physical_rows:
        return f"{rows} rows, the manifest records {fragment.physical_rows}"
    return None


class _CallableModule(types.ModuleType):
    """This module, callable as the function `verify` was when the package root exported it as `mvcc_core.verify`
    (the name is the module's now); for one more release, with a DeprecationWarning."""

    def __call__(self, *args: Any, **kwargs: Any) -> VerifyReport:
        warnings.warn(
            "mvcc_core.verify(...) is deprecated: call mvcc_core.verify.verify (`from mvcc_core.verify import verify`)",
            DeprecationWarning,
            stacklevel=2,
        )
        return verify(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
