"""The manifest files that passed their checks in this process, and each one's row totals.

Reading a version decodes its manifest and checks every invariant of every fragment (`invariants.py`): a few
milliseconds for a thousand fragments, paid again on each open of the same version. A manifest file is never
rewritten in place, but a table can be dropped and made again under the same names, and a hostile store can
serve anything: so what passed is known by the file's location, size and a digest of its bytes, never by its
name alone. A file seen before with the same bytes skips the check; any other bytes are checked in full. The
row totals (rows, deleted rows) are kept with it, so counting a version's rows sums nothing.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass

from mvcc_core._proto import table_pb2 as pb

#: How many manifest files are remembered (the newest used last; a long-lived process reads without end).
KEPT = 1024

FileKey = tuple[str, int, bytes]


@dataclass(frozen=True)
class RowTotals:
    """A version's row counts, from its manifest alone.

    Args:
        rows: the physical rows of its fragments, deleted ones included
        deleted_rows: the rows its deletion files delete
    """

    rows: int
    deleted_rows: int

    @property
    def live_rows(self) -> int:
        """The rows a scan without a filter returns."""
        return self.rows - self.deleted_rows


def row_totals(manifest: pb.Manifest) -> RowTotals:
    """Sum the rows and deleted rows of `manifest`'s fragments.

    Args:
        manifest: a decoded manifest
    """
    rows = deleted = 0
    for fragment in manifest.fragments:
        rows += fragment.physical_rows
        if fragment.HasField("deletion_file"):
            deleted += fragment.deletion_file.num_deleted_rows
    return RowTotals(rows, deleted)


def file_key(where: str, data: bytes) -> FileKey:
    """What identifies one manifest file's bytes: its location, size and a 128-bit digest of them.

    Args:
        where: the file's location (the store's uri and the path)
        data: the file's bytes, as read
    """
    return where, len(data), hashlib.blake2b(data, digest_size=16).digest()


_passed: OrderedDict[FileKey, RowTotals] = OrderedDict()
_lock = threading.Lock()


def passed(key: FileKey) -> RowTotals | None:
    """The row totals of the file `key` if its manifest passed the checks in this process, else None.

    Args:
        key: the file's `file_key`
    """
    with _lock:
        totals = _passed.get(key)
        if totals is not None:
            _passed.move_to_end(key)
        return totals


def remember(key: FileKey, totals: RowTotals) -> None:
    """Note that the manifest in the file `key` passed the checks.

    Args:
        key: the file's `file_key`
        totals: its manifest's row totals
    """
    with _lock:
        _passed[key] = totals
        _passed.move_to_end(key)
        while len(_passed) > KEPT:
            _passed.popitem(last=False)


def forget() -> None:
    """Forget every file (the next read of each checks it again)."""
    with _lock:
        _passed.clear()
