"""Base paths: where a data, deletion or index file lives when it is not under the table's own root.

A file with `base_id` lives under the base path of that id (shallow clones point at their source this
way; `t.add_bases` adds named ones, e.g. another bucket). A base that `is_dataset_root` is a table root
(`{base}/data/{file}`, `{base}/_deletions/{file}`); any other base holds data files directly
(`{base}/{file}`). Base stores are opened with the table's storage options and cached per store.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import BasePathError, CorruptManifestError
from mvcc_core.format.naming import data_file_path
from mvcc_core.io import ObjectStore


@dataclass(frozen=True)
class DatasetBasePath:
    """A base path to add with `t.add_bases` (pylance's name): a location data files may be written to."""

    path: str
    name: str | None = None
    is_dataset_root: bool = False

    def to_proto(self) -> pb.BasePath:
        if not isinstance(self.path, str) or not self.path:
            raise BasePathError(f"a base path needs a non-empty path, got {self.path!r}")
        path = self.path if "://" in self.path else os.path.abspath(self.path)  # a local base is absolute
        base = pb.BasePath(id=0, is_dataset_root=self.is_dataset_root, path=path.rstrip("/"))
        if self.name is not None:
            base.name = self.name
        return base


def find_base(base_paths: Iterable[pb.BasePath], ref: str | int) -> pb.BasePath:
    """A base path by name or id; BasePathError listing the known ones otherwise.

    Args:
        base_paths: the base paths to look in (a manifest's `base_paths`)
        ref: the base's name (a string) or its numeric id

    Raises:
        BasePathError: no base has that name or id; the message lists the known ones
    """
    bases = list(base_paths)
    for base in bases:
        if (isinstance(ref, int) and base.id == ref) or (
            isinstance(ref, str) and base.HasField("name") and base.name == ref
        ):
            return base
    known = [f"{b.name if b.HasField('name') else '(unnamed)'} (id {b.id}): {b.path}" for b in bases]
    raise BasePathError(f"no base path {ref!r}; the table has {known or 'none'}")


def base_store(store: ObjectStore, base: pb.BasePath) -> ObjectStore:
    """The store rooted at `base`, opened with `store`'s options (cached on `store`).

    Args:
        store: the table's store, whose options (credentials, endpoint) the new store reuses
        base: the base path to open
    """
    return store.sibling(base.path)


def _base(base_paths: Iterable[pb.BasePath], base_id: int, what: str) -> pb.BasePath:
    for base in base_paths:
        if base.id == base_id:
            return base
    raise CorruptManifestError(f"{what} names base path id {base_id}, which the manifest does not define")


def data_file_location(
    store: ObjectStore, base_paths: Iterable[pb.BasePath], data_file: pb.DataFile
) -> tuple[ObjectStore, str]:
    """(store, path in it) of a data file.

    Args:
        store: the table's own store (its root)
        base_paths: the table's base paths (the manifest's `base_paths`), where files kept outside the table's root live
        data_file: the data file entry of a fragment
    """
    if not data_file.HasField("base_id"):
        return store, data_file_path(data_file.path)
    base = _base(base_paths, data_file.base_id, f"data file {data_file.path}")
    rel = data_file_path(data_file.path) if base.is_dataset_root else data_file.path
    return base_store(store, base), rel


def deletion_store(
    store: ObjectStore, base_paths: Iterable[pb.BasePath], deletion_file: pb.DeletionFile
) -> ObjectStore:
    """The store whose `_deletions/` holds a deletion file (the table's own, or a dataset-root base).

    Args:
        store: the table's own store (its root)
        base_paths: the table's base paths (the manifest's `base_paths`), where files kept outside the table's root live
        deletion_file: the deletion file entry of a fragment
    """
    if not deletion_file.HasField("base_id"):
        return store
    return base_store(store, _base(base_paths, deletion_file.base_id, "a deletion file"))


def remove_data_files(
    store: ObjectStore, base_paths: Iterable[pb.BasePath], fragments: Iterable[pb.DataFragment]
) -> None:
    """Delete the data files of fragments that were written but never committed, wherever they live.

    Args:
        store: the table's own store (its root)
        base_paths: the table's base paths (the manifest's `base_paths`), where files kept outside the table's root live
        fragments: the fragments whose data files are removed (written by a transaction that did not commit)
    """
    by_store: dict[int, tuple[ObjectStore, list[str]]] = {}
    for frag in fragments:
        for data_file in frag.files:
            target, rel = data_file_location(store, list(base_paths), data_file)
            by_store.setdefault(id(target), (target, []))[1].append(rel)
    for target, rels in by_store.values():
        target.delete_many(rels)


def data_file_uris(
    store: ObjectStore, base_paths: Iterable[pb.BasePath], fragments: Iterable[pb.DataFragment]
) -> list[str]:
    """Full URIs of the data files of `fragments`, wherever they live (the table's root or a base path):
    what a staged transaction lists as its files.

    Args:
        store: the table's own store (its root)
        base_paths: the table's base paths (the manifest's `base_paths`), where files kept outside the table's root live
        fragments: the fragments whose data files are listed
    """
    out = []
    for frag in fragments:
        for data_file in frag.files:
            target, rel = data_file_location(store, list(base_paths), data_file)
            out.append(f"{target.uri}/{rel}")
    return out
