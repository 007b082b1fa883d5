"""Every file a version references, in one place: retention, clones and the commit loop share it.

A version needs its data files, its deletion files, its index files and its transaction file. Two views:
`referenced_files` names the table's own files (relative to its root; files under other base paths
belong to another table and are never removed from here), `files_of` locates every file wherever it
lives (what a deep clone copies), and `version_files` (public) adds what the manifest records about each
file, so that a checker (`mvcc verify`) can compare the store with the manifest.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.format.bases import base_store, data_file_location, deletion_store
from mvcc_core.format.deletion import deletion_path
from mvcc_core.format.naming import INDICES_DIR, TRANSACTIONS_DIR, data_file_path
from mvcc_core.io import ObjectStore


def index_directory(index: pb.IndexMetadata) -> str:
    """The directory of an index's files, relative to the table (or base) root.

    Args:
        index: the index's metadata entry in a manifest
    """
    return f"{INDICES_DIR}/{uuid.UUID(bytes=index.uuid.uuid)}"


def referenced_files(manifest: pb.Manifest) -> set[str]:
    """Paths (relative to the table root) of the table's own files a version needs, its manifest aside.

    Args:
        manifest: the version's manifest
    """
    out: set[str] = set()
    for frag in manifest.fragments:
        for data_file in frag.files:
            if not data_file.HasField("base_id"):
                out.add(data_file_path(data_file.path))
        if frag.HasField("deletion_file") and not frag.deletion_file.HasField("base_id"):
            out.add(deletion_path(frag.id, frag.deletion_file))
    for index in manifest.indices:
        if not index.HasField("base_id"):
            for index_file in index.files:
                out.add(f"{index_directory(index)}/{index_file.path}")
    if manifest.transaction_file:
        out.add(f"{TRANSACTIONS_DIR}/{manifest.transaction_file}")
    return out


@dataclass(frozen=True)
class ReferencedFile:
    """One file a version references: where it lives and what the manifest records about it.

    `kind` is "data", "deletion", "index" or "transaction"; `size` is the recorded size in bytes (None
    where the format records none: deletion and transaction files, or a size written as 0 by an old
    writer); `fragment_id` names the fragment of a data or deletion file, `index_name` the index of an
    index file.
    """

    kind: str
    store: ObjectStore
    path: str
    size: int | None = None
    fragment_id: int | None = None
    index_name: str | None = None
    #: where a deep clone puts it, relative to the clone's root (data files of a base land in `data/`)
    clone_path: str = ""

    @property
    def uri(self) -> str:
        """The file's full location (for messages)."""
        return f"{self.store.uri}/{self.path}"


def version_files(store: ObjectStore, manifest: pb.Manifest) -> list[ReferencedFile]:
    """Every file `manifest`'s version references (its manifest aside), wherever it lives, with its
    recorded size, for tools that check a table against its manifests without reading the protobuf
    themselves (and for `files_of`).

    Args:
        store: the table's own store (its root)
        manifest: the version's manifest
    """
    out = []
    packed: set[tuple[str, str]] = set()  # a packed deletion file holds several fragments' vectors: listed once
    for frag in manifest.fragments:
        for data_file in frag.files:
            source, rel = data_file_location(store, manifest.base_paths, data_file)
            size = data_file.file_size_bytes or None
            clone = data_file_path(data_file.path)
            out.append(ReferencedFile("data", source, rel, size, fragment_id=frag.id, clone_path=clone))
        if frag.HasField("deletion_file"):
            rel = deletion_path(frag.id, frag.deletion_file)
            source = deletion_store(store, manifest.base_paths, frag.deletion_file)
            if frag.deletion_file.HasField("content_size"):
                if (source.uri, rel) in packed:
                    continue
                packed.add((source.uri, rel))
            out.append(ReferencedFile("deletion", source, rel, fragment_id=frag.id, clone_path=rel))
    for index in manifest.indices:
        source = store
        if index.HasField("base_id"):
            source = base_store(store, next(b for b in manifest.base_paths if b.id == index.base_id))
        for index_file in index.files:
            rel = f"{index_directory(index)}/{index_file.path}"
            size = index_file.size_bytes or None
            out.append(ReferencedFile("index", source, rel, size, index_name=index.name, clone_path=rel))
    if manifest.transaction_file:
        rel = f"{TRANSACTIONS_DIR}/{manifest.transaction_file}"
        out.append(ReferencedFile("transaction", store, rel, clone_path=rel))
    return out


def files_of(store: ObjectStore, manifest: pb.Manifest) -> list[tuple[ObjectStore, str, str]]:
    """Every data, deletion and index file a version references: (store it lives in, path there, path
    under a deep clone) — what a deep clone copies.

    Args:
        store: the table's own store (its root)
        manifest: the version's manifest
    """
    return [(f.store, f.path, f.clone_path) for f in version_files(store, manifest) if f.kind != "transaction"]
