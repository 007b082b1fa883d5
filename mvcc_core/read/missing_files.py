"""The errors of reading a table's files, in the table's words: a missing file names the table (and a shallow
clone's source), any other failure of the store is a StorageError."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from mvcc_core.errors import ObjectNotFoundError, StorageError
from mvcc_core.io import ObjectStore
from mvcc_core.io.parquet import is_not_found


@contextlib.contextmanager
def missing_files(store: ObjectStore) -> Iterator[None]:
    """A data file that is gone (a shallow clone's source cleaned up, a file removed by hand) is an
    ObjectNotFoundError naming it, not a bare OSError from deep inside pyarrow; any other failure of the store
    while reading is a StorageError naming the table.

    Args:
        store: the store of the table being read
    """
    try:
        yield
    except OSError as exc:
        if not is_not_found(exc):
            raise StorageError(f"reading a file of table {store.uri} failed: {exc}") from exc
        raise ObjectNotFoundError(
            f"a file of table {store.uri} is missing ({exc}); if the table is a shallow clone, its source may have "
            "been cleaned up or removed"
        ) from exc
