"""Table verification: a table's versions checked against its store (`mvcc verify`, Dagster's `files_exist`)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import MvccError, ObjectNotFoundError, VersionNotFoundError
from mvcc_core.format import fragment_reuse
from mvcc_core.format.deletion import deletion_path, read_deletion_vector
from mvcc_core.format.manifest import location_of, manifest_problems
from mvcc_core.format.referenced_files import ReferencedFile, version_files
from mvcc_core.io import ObjectStore
from mvcc_core.read import index_lookup
from mvcc_core.read.index_lookup import BITMAP, BTREE, address_column, index_file, row_addresses
from mvcc_core.table import Table

__all__ = ["ForeignBase", "VerifyProblem", "VerifyReport", "verify"]

#: What `VerifyProblem.problem` says of a referenced file that is not in the store.
MISSING = "missing"


@dataclass(frozen=True)
class VerifyProblem:
    """One thing wrong with a table.

    Attributes:
        version: The version it was found in (None: not tied to one version, e.g. a tag file).
        kind: "manifest", "transaction", "data", "deletion", "index" or "tag".
        path: The file's full location, or the index's name for an index problem.
        problem: What is wrong, in plain words ("missing" for a referenced file that is not there).
    """

    version: int | None
    kind: str
    path: str
    problem: str


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
        foreign_bases: Base paths outside the table's root, notes rather than problems.
    """

    versions: list[int] = field(default_factory=list)
    files_referenced: int = 0
    files_checked: int = 0
    problems: list[VerifyProblem] = field(default_factory=list)
    foreign_bases: list[ForeignBase] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether no problem was found."""
        return not self.problems

    @property
    def missing(self) -> list[str]:
        """The locations of referenced files that are not in the store."""
        return [p.path for p in self.problems if p.problem == MISSING]

    def add(self, version: int | None, kind: str, path: str, problem: str) -> None:
        """Record a problem.

        Args:
            version: The version it was found in (None: not tied to one version).
            kind: What was checked (see `VerifyProblem.kind`).
            path: The file's location or the index's name.
            problem: What is wrong, in plain words.
        """
        self.problems.append(VerifyProblem(version, kind, path, problem))


def verify(
    table: Table, *, deep: bool = False, all_versions: bool = False, max_files: int | None = None
) -> VerifyReport:
    """Check a table's version(s) against its store.

    Every file a checked version references exists with its recorded size, deletion vectors decode and fit
    their fragments, indices name existing fields and fragment ids, the transaction file reads, and every tag
    file reads. A file shared by many versions is checked once.

    Args:
        table: The table, at the version to check.
        deep: Also read every data and index file (a Parquet file must read and hold the recorded row count).
        all_versions: Check every version kept instead of the table's own; a version whose manifest does not
            load is reported with each invariant it breaks.
        max_files: Check at most this many of the referenced files, chosen at random (a bounded health
            check); None checks them all.

    Returns:
        The report; `report.ok` when nothing is wrong.

    Raises:
        ValueError: `max_files` is negative.
    """
    if max_files is not None and max_files < 0:
        raise ValueError(f"max_files must be >= 0, got {max_files}")
    checker = _Checker(VerifyReport(), deep, max_files)
    if all_versions:
        for info in table.versions():
            checker.report.versions.append(info.version)
            if info.error is not None:
                checker.manifest(table, info.version, info.error)
                continue
            try:
                checker.version(table.checkout(info.version))
            except VersionNotFoundError:
                continue  # removed by a cleanup running beside us
    else:
        checker.report.versions.append(table.version)
        checker.version(table)
    for path, problem in table.tags.read_all().problems.items():
        checker.report.add(None, "tag", path, problem)
    return checker.report


class _Checker:
    """Checks versions of one table against its store, each file once."""

    def __init__(self, report: VerifyReport, deep: bool, max_files: int | None) -> None:
        self.report = report
        self.deep = deep
        self.max_files = max_files
        self.checked: dict[str, str | None] = {}  # file uri -> its problem (None: fine)
        self.referenced: set[str] = set()

    def manifest(self, table: Table, version: int, error: str) -> None:
        """Each broken invariant of a manifest that failed to load, or the load's error when it says more."""
        state = table.state
        try:
            location = location_of(state.store, version, table.manifest_naming)
            found = manifest_problems(state.store, location, state.committer.handler)
        except MvccError:
            found = []
        if not found:
            self.report.add(version, "manifest", table.uri, error)
        for text in found:
            self.report.add(version, "manifest", table.uri, text)

    def version(self, t: Table) -> None:
        manifest = t.manifest
        try:
            t.transaction()
        except MvccError as exc:
            self.report.add(t.version, "transaction", manifest.transaction_file, str(exc))
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
                self.report.add(t.version, ref.kind, ref.uri, self.checked[ref.uri] or "")
        self.report.files_checked = len(self.checked)
        self.indices(t.version, manifest)
        if self.deep:
            for index in manifest.indices:
                if index.index_type in (BTREE, BITMAP) and (
                    problem := _index_rows_problem(t.state.store, manifest, index)
                ):
                    self.report.add(t.version, "index", index.name, problem)

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

    def indices(self, version: int, manifest: pb.Manifest) -> None:
        field_ids = {f.id for f in manifest.fields}
        highest = manifest.max_fragment_id if manifest.HasField("max_fragment_id") else None
        for index in manifest.indices:
            missing = [i for i in index.fields if i not in field_ids]
            if missing:
                self.report.add(version, "index", index.name, f"names field ids {missing} the schema does not have")
            if index.fragment_bitmap and highest is not None:
                try:
                    covered = BitMap.deserialize(index.fragment_bitmap)
                except Exception as exc:  # pyroaring raises plain ValueError/RuntimeError
                    self.report.add(version, "index", index.name, f"fragment bitmap does not decode: {exc}")
                    continue
                never = [f for f in covered if f > highest]
                if never:
                    self.report.add(version, "index", index.name, f"covers fragment ids {never} never assigned")


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
