"""Clones: a new table whose history starts at one version of another.

A shallow clone copies no data: its first manifest is the source version's, with a base path for the
source root and every inherited file pointing at it. New writes land under the clone's own root, so
the source is never touched. It depends on the source's files: if retention on the source removes them,
or the source is deleted, reads of the clone fail with ObjectNotFoundError naming the missing file.
A deep clone copies every file the version references (store-native copy within one store) to the same
relative path under the clone and has no base paths: it stands alone.
"""

from __future__ import annotations

import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import ObjectNotFoundError, TableExistsError, UnsafePathError
from mvcc_core.format.invariants import path_problem
from mvcc_core.format.referenced_files import files_of
from mvcc_core.io import ObjectStore


def _same_object(src: ObjectStore, src_rel: str, dst: ObjectStore, dst_rel: str) -> bool:
    """Do the two locations name one object (the same key, or one file on a local disk)?"""
    if src.scheme != dst.scheme:
        return False
    if src.scheme == "file":
        return os.path.realpath(src.full_path(src_rel)) == os.path.realpath(dst.full_path(dst_rel))
    return src.shares_client(dst) and src.full_path(src_rel) == dst.full_path(dst_rel)


def check_copy(src: ObjectStore, src_rel: str, dst: ObjectStore, dst_rel: str) -> None:
    """Raise UnsafePathError unless `dst_rel` is a plain path under `dst`'s root naming another object than
    the source.

    Args:
        src: the store the object is in
        src_rel: its path there
        dst: the store to copy it to
        dst_rel: its path there
    """
    problem = path_problem(dst_rel)
    if problem is not None:
        raise UnsafePathError(f"a clone would write {dst_rel!r} outside its root {dst.uri}: {problem}")
    if _same_object(src, src_rel, dst, dst_rel):
        raise UnsafePathError(
            f"a clone would copy {src.uri}/{src_rel} onto itself ({dst.uri}/{dst_rel} is the same file)"
        )


def copy_object(src: ObjectStore, src_rel: str, dst: ObjectStore, dst_rel: str) -> None:
    """Copy one object; server-side when both stores are one S3 client, a file copy on local disks.

    Args:
        src: the store the object is in
        src_rel: its path there
        dst: the store to copy it to
        dst_rel: its path there (a plain relative path under `dst`'s root)
    """
    check_copy(src, src_rel, dst, dst_rel)
    if src.scheme == dst.scheme == "s3":
        dst.copy_from(src, src_rel, dst_rel)  # CopyObject when both are one client, else a read and a put
    elif src.scheme == dst.scheme == "file":
        target = dst.full_path(dst_rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            shutil.copyfile(src.full_path(src_rel), target)
        except FileNotFoundError:
            raise ObjectNotFoundError(f"a clone cannot copy {src.uri}/{src_rel}: it does not exist") from None
    else:
        dst.put(dst_rel, src.get(src_rel))


def deep_copy(store: ObjectStore, manifest: pb.Manifest, target: ObjectStore) -> list[str]:
    """Copy a version's files under `target` (threads: copies are independent); returns what was copied.

    Every target path is checked before anything is copied (a plain path under `target`, never the source
    file itself). On failure the files this call created are removed again, and only those.

    Args:
        store: the source table's store
        manifest: the version to copy
        target: the clone's (empty) store
    """
    files = files_of(store, manifest)
    for source, rel, clone_rel in files:
        check_copy(source, rel, target, clone_rel)
    created: list[str] = []
    lock = threading.Lock()

    def copy(entry: tuple[ObjectStore, str, str]) -> None:
        copy_object(entry[0], entry[1], target, entry[2])
        with lock:
            created.append(entry[2])

    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(copy, files))
    except BaseException:
        target.delete_many(created)
        raise
    return [f[2] for f in files]


def check_target(source: ObjectStore, target: ObjectStore) -> None:
    """Refuse a clone onto its own source (the same uri, or one directory on a local disk).

    Args:
        source: the source table's store
        target: the clone's store
    """
    same = source.uri.rstrip("/") == target.uri.rstrip("/")
    if source.scheme == target.scheme == "file":
        same = same or os.path.realpath(source.full_path("")) == os.path.realpath(target.full_path(""))
    if same:
        raise TableExistsError(f"cannot clone {source.uri} onto itself")
