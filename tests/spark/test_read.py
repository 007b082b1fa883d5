"""Reads through `spark.read.format("mvcc")`: types, versions, time travel, pushdown, partitions."""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pytest

import mvcc_core

from spark_helpers import PUSHDOWN, ROOT, conf


def spark_rows(df: Any) -> pa.Table:
    return df.toArrow()


def sorted_by(table: pa.Table, key: str) -> pa.Table:
    return table.sort_by(key)


def test_workers_import_this_checkout(spark: Any) -> None:
    def where(_: Any) -> list[str]:
        import mvcc_core as m

        return [os.path.dirname(m.__file__)]

    found = spark.sparkContext.parallelize([0], 1).flatMap(where).collect()
    assert found == [str(ROOT / "mvcc_core")]


def test_static_registration(static_registration: bool) -> None:
    assert static_registration, "pyspark_mvcc on PYTHONPATH should register 'mvcc' without register()"


def test_read_equals_to_table(spark: Any, tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    t = mvcc_core.write_table(pa.table({"id": list(range(10)), "s": [f"v{i}" for i in range(10)]}), uri)
    got = spark_rows(spark.read.format("mvcc").load(uri))
    assert sorted_by(got, "id").equals(t.to_table())
