"""Helpers of the Spark tests (imported by name: tests/ is not a package)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


@contextmanager
def conf(spark: Any, key: str, value: str) -> Iterator[None]:
    """Set a session conf for a block, restoring the old value."""
    old = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if old is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, old)
