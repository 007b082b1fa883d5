"""Helpers of the Spark tests (imported by name: tests/ is not a package)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


def conf(spark: Any, key: str, value: str) -> AbstractContextManager[None]:
    """Set a session conf for a block, restoring the old value (`mvcc_core.spark.native.session_conf`; imported
    here, not at the top, so that conftest's `importorskip("pyspark")` still skips without pyspark)."""
    from mvcc_core.spark.native import session_conf

    return session_conf(spark, key, value)


def same(a: Any, b: Any) -> bool:
    """Equal Arrow tables, NaN equal to NaN (`Table.equals` says NaN != NaN); schemas must be equal too."""
    return a.schema.equals(b.schema) and repr(a.to_pylist()) == repr(b.to_pylist())
