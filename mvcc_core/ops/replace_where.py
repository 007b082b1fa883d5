"""Partition-scoped overwrites: replace exactly the rows matching a predicate, in one commit.

Design notes: docs/guide/row_level_changes.md, "replace_where, as implemented".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mvcc_core._proto import table_pb2 as pb
from mvcc_core._proto import transaction_pb2 as tpb
from mvcc_core.errors import PredicateError
from mvcc_core.format import operations
from mvcc_core.format.schema import manifest_schema
from mvcc_core.io import ObjectStore
from mvcc_core.ops.delete import delete_addresses, find_rows
from mvcc_core.read.bound_filter import BoundFilter
from mvcc_core.read.scan import ROW_ADDRESS, Scan


def check_rows(where: str, schema: pa.Schema) -> Callable[[pa.RecordBatch], None]:
    """A check that every row of a batch matches `where` (NULL counts as not matching); it raises
    PredicateError naming the predicate and the first row that does not. Binding happens here, so a
    predicate that does not parse fails before anything is written.

    Args:
        where: the SQL predicate every written row must match
        schema: the table's schema

    Raises:
        PredicateError: the predicate is empty or does not bind to the schema
    """
    if not isinstance(where, str) or not where.strip():
        raise PredicateError(f"a partition-scoped overwrite needs a SQL predicate, got {where!r}")
    expr = BoundFilter.bind(where, schema).arrow

    def check(batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        table = pa.Table.from_batches([batch])
        import pyarrow.dataset as ds  # imported on first use: it imports pandas

        matched = ds.dataset(table).to_table(columns={"m": expr}).column("m")
        bad = np.flatnonzero(~pc.fill_null(matched, False).to_numpy(zero_copy_only=False).astype(bool))
        if len(bad):
            row = table.slice(int(bad[0]), 1).to_pylist()[0]
            raise PredicateError(
                f"overwrite where {where!r}: {len(bad)} of {batch.num_rows} new rows do not match the predicate, "
                f"e.g. {row}; nothing was written (every row of a partition-scoped overwrite must match it)"
            )

    return check


def replace_operation(
    store: ObjectStore, manifest: pb.Manifest, fragments: Sequence[pb.DataFragment], where: str
) -> tuple[operations.Update, list[str], int]:
    """The Update replacing the rows of `manifest` matching `where` by `fragments`, the deletion files it
    wrote (relative to the table root), and how many rows it replaces.

    Args:
        store: the table's store
        manifest: the version being overwritten
        fragments: the new fragments, already written
        where: the SQL predicate of the rows replaced
    """
    check_rows(where, manifest_schema(manifest))  # the predicate binds to this version's schema
    matched = find_rows(store, manifest, where, [])
    addresses = matched.column(ROW_ADDRESS).to_numpy()
    deleted = delete_addresses(store, manifest, addresses) if len(addresses) else None
    op = operations.Update(
        removed_fragment_ids=deleted.removed_fragment_ids if deleted else [],
        updated_fragments=deleted.updated_fragments if deleted else [],
        new_fragments=list(fragments),
        update_mode=tpb.Transaction.REWRITE_ROWS,
        affected_rows=deleted.affected_rows if deleted else b"",
        replace_predicate=where,
    )
    return op, (deleted.written if deleted else []), len(addresses)


def rows_match(store: ObjectStore, manifest: pb.Manifest, fragments: Sequence[pb.DataFragment], where: str) -> bool:
    """Whether any row of `fragments` (new fragments of `manifest`'s version) matches `where`.

    Args:
        store: the table's store
        manifest: the version the fragments belong to
        fragments: new fragments of that version
        where: the SQL predicate
    """
    if not fragments:
        return False
    try:
        return Scan(store, manifest, columns=[], filter=where, fragments=list(fragments)).count_rows() > 0
    except PredicateError:
        return True  # the schema changed under the predicate: assume the rows match (the safe answer)
