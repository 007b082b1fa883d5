"""NaN counts of a data file's float columns, recorded in its Parquet footer: Parquet's min/max statistics leave
NaN out, so without a count a reader cannot tell whether a file holds NaN rows (docs/reference/format.md, "NaN
counts")."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc

# The footer's key-value metadata key: a JSON object, physical column name -> NaN rows in the file, for every
# top-level float32 / float64 column. Files written before it have no such key (their NaN counts are unknown).
NAN_COUNTS_KEY = "mvcc:nan_counts"


def float_columns(schema: pa.Schema) -> list[str]:
    """The top-level float32 / float64 columns of `schema`, whose NaN rows a writer counts.

    Args:
        schema: the schema the data file is written with (physical names)
    """
    return [f.name for f in schema if pa.types.is_float32(f.type) or pa.types.is_float64(f.type)]


def count_nans(table: pa.Table, columns: list[str], counts: dict[str, int]) -> None:
    """Add the NaN rows of `columns` of `table` to `counts`.

    Args:
        table: rows about to be written
        columns: its float columns (`float_columns`)
        counts: running counts per column, updated in place
    """
    for name in columns:
        found = pc.sum(pc.is_nan(table.column(name))).as_py() or 0
        counts[name] = counts.get(name, 0) + found


def footer_entry(counts: dict[str, int]) -> dict[str, str]:
    """The footer key-value metadata recording `counts`.

    Args:
        counts: NaN rows per float column of the whole file
    """
    return {NAN_COUNTS_KEY: json.dumps(counts, separators=(",", ":"), sort_keys=True)}


def with_nan_counts(table: pa.Table) -> pa.Table:
    """`table` with its NaN counts in its schema's metadata, which `pyarrow.parquet.write_table` puts in the
    footer (for writers of a whole table at once; `FragmentWriter` adds the entry when it closes a file).

    Args:
        table: the whole content of a data file, physical names
    """
    columns = float_columns(table.schema)
    if not columns:
        return table
    counts: dict[str, int] = {}
    count_nans(table, columns, counts)
    return table.replace_schema_metadata({**(table.schema.metadata or {}), **footer_entry(counts)})
