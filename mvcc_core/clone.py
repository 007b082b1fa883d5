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
from concurrent.futures import ThreadPoolExecutor

from ._proto import table_pb2 as pb
from .errors import TableExistsError
from .files import files_of
from .storage import ObjectStore


def copy_object(src: ObjectStore, src_rel: str, dst: ObjectStore, dst_rel: str) -> None:
    """Copy one object; server-side when both stores are one S3 client, a file copy on local disks."""
    if src.scheme == dst.scheme == "s3" and src.fs is dst.fs:
        dst.fs.cp_file(src.full_path(src_rel), dst.full_path(dst_rel))
    elif src.scheme == dst.scheme == "file":
        target = dst.full_path(dst_rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(src.full_path(src_rel), target)
    else:
        dst.put(dst_rel, src.get(src_rel))


def deep_copy(store: ObjectStore, manifest: pb.Manifest, target: ObjectStore) -> list[str]:
    """Copy a version's files under `target` (threads: copies are independent); returns what was copied.

    On failure everything copied so far is removed again.
    """
    files = files_of(store, manifest)
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda f: copy_object(f[0], f[1], target, f[2]), files))
    except BaseException:
        target.delete_many([f[2] for f in files])
        raise
    return [f[2] for f in files]


def check_target(source: ObjectStore, target: ObjectStore) -> None:
    if source.uri.rstrip("/") == target.uri.rstrip("/"):
        raise TableExistsError(f"cannot clone {source.uri} onto itself")
