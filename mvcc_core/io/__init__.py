"""Object stores, one module per backend (`memory`, `local`, `s3`) behind `ObjectStore`, and Parquet reads
(`parquet`: footers and row groups; `read_ahead`: the reader pool)."""

from mvcc_core.io.backend import TEMP_PREFIX, ObjectMeta, is_temporary
from mvcc_core.io.store import ObjectStore, open_store

__all__ = ["TEMP_PREFIX", "ObjectMeta", "ObjectStore", "is_temporary", "open_store"]
