"""Removing a benchmark's files without charging a later measurement for the removal.

On this machine's ext4 a file creation skips every inode freed in the last minutes (`recently_deleted` in
the inode allocator: `perf record` puts 60% of a creation's kernel time there right after a 200-file
directory was removed), so a creation costs 0.1-1 ms for minutes after a large removal instead of ~20 us.
An operation that creates a few hundred small files (deletion vectors, a catalog publish) then measures the
benchmark's own clean-up, not itself. Under `benchmarks/run.py` (which sets `MVCC_BENCH_TRASH`) files are
moved aside by one rename and removed after the last module; a module run by hand removes them at once.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

TRASH_ENV = "MVCC_BENCH_TRASH"


def discard(path: str | Path) -> None:
    """Remove `path` (a directory or file), or move it to the run's trash when there is one."""
    trash = os.environ.get(TRASH_ENV)
    if not os.path.lexists(path):
        return
    if trash:
        os.makedirs(trash, exist_ok=True)
        os.rename(path, os.path.join(trash, uuid.uuid4().hex))
    elif os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        os.unlink(path)
