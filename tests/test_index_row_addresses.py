"""`index_lookup.row_addresses`: the one decoder of an index file's address column (lookup and verify use it)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyroaring import BitMap64

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.read.index_lookup import BITMAP, BTREE, address_column, row_addresses


def test_a_btree_column_is_its_addresses_sorted() -> None:
    index = pb.IndexMetadata(index_type=BTREE)
    addresses = [(1 << 32) + 5, 3, (2 << 32), 7]
    column = pa.chunked_array([pa.array(addresses[:2], pa.uint64()), pa.array(addresses[2:], pa.uint64())])
    out = row_addresses(index, column)
    assert address_column(index) == "_rowaddr"
    assert out.dtype == np.uint64 and out.tolist() == sorted(addresses)


def test_a_bitmap_column_is_the_union_of_its_bitmaps() -> None:
    index = pb.IndexMetadata(index_type=BITMAP)
    parts = [BitMap64([(1 << 32) + 2, 9]), BitMap64([9, 4]), BitMap64()]
    out = row_addresses(index, pa.array([b.serialize() for b in parts], pa.binary()))
    assert address_column(index) == "bitmap"
    assert out.dtype == np.uint64 and out.tolist() == [4, 9, (1 << 32) + 2]
    assert row_addresses(index, pa.array([], pa.binary())).tolist() == []
