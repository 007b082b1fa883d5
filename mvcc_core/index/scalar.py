"""Scalar indices on one column: BTREE (sorted values) and BITMAP (a row-address bitmap per value).

Both are one Parquet file, `_indices/{uuid}/index.parquet`, whose value column carries the indexed
column's physical name (`c{field_id}`). A predicate on the column, translated to physical names as for a
scan, therefore runs on the index file unchanged: a BTREE is sorted, so Parquet statistics narrow a point
or range lookup to a row group or two; a BITMAP holds one row per distinct value with a portable
roaring64 bitmap of its row addresses. The index covers the fragments in its `fragment_bitmap`; rows
deleted after the build are filtered by the scan, fragments added later are scanned directly.
"""

from __future__ import annotations

import uuid as uuid_mod
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyroaring import BitMap, BitMap64

from .. import schema as schema_mod
from .._proto import table_pb2 as pb
from ..errors import SchemaError
from ..naming import INDICES_DIR
from ..storage import ObjectStore

BTREE, BITMAP = "BTREE", "BITMAP"
INDEX_TYPES = (BTREE, BITMAP)
INDEX_FILE = "index.parquet"
ROWS_PER_GROUP = 16_384  # small row groups: a point lookup reads one


def index_dir(index: pb.IndexMetadata) -> str:
    return f"{INDICES_DIR}/{uuid_mod.UUID(bytes=index.uuid.uuid)}"


@dataclass
class BuiltIndex:
    metadata: pb.IndexMetadata
    written: list[str]


def build(
    store: ObjectStore,
    manifest: pb.Manifest,
    column: str,
    index_type: str,
    name: str,
    fragments: list[pb.DataFragment] | None = None,
) -> BuiltIndex:
    """Scan `column` of the fragments (live rows, with addresses) and write the index file."""
    from ..scan import ROW_ADDRESS, Scan

    fields = list(manifest.fields)
    ids = schema_mod.field_ids_by_name(fields)
    if column not in ids:
        raise SchemaError(f"cannot index {column!r}: the table has no such column; columns are {list(ids)}")
    index_type = index_type.upper() if isinstance(index_type, str) else index_type
    if index_type not in INDEX_TYPES:
        raise SchemaError(f"index_type must be one of {INDEX_TYPES}, got {index_type!r}")
    field = next(f for f in fields if f.id == ids[column])
    if not field.arrow_type:
        raise SchemaError(f"cannot index {column!r}: scalar indices need a scalar column, it is {field.logical_type}")
    fragments = list(manifest.fragments if fragments is None else fragments)
    physical = schema_mod.physical_name(field.id)
    data = Scan(store, manifest, columns=[column], with_row_address=True, fragments=fragments).to_table()
    values = data.column(column)
    if index_type == BTREE:
        order = pc.sort_indices(data, sort_keys=[(column, "ascending")])  # nulls last
        table = pa.table({physical: values.take(order), ROW_ADDRESS: data.column(ROW_ADDRESS).take(order)})
    else:
        grouped = data.group_by(column).aggregate([(ROW_ADDRESS, "list")])
        bitmaps = [
            BitMap64(np.asarray(a, dtype=np.uint64)).serialize()
            for a in grouped.column(f"{ROW_ADDRESS}_list").to_pylist()
        ]
        table = pa.table({physical: grouped.column(column), "bitmap": pa.array(bitmaps, pa.binary())})
    index_id = uuid_mod.uuid4()
    metadata = pb.IndexMetadata(
        uuid=pb.UUID(uuid=index_id.bytes),
        fields=[field.id],
        name=name,
        dataset_version=manifest.version,
        fragment_bitmap=BitMap([f.id for f in fragments]).serialize(),
        index_version=1,
        index_type=index_type,
    )
    metadata.created_at.GetCurrentTime()
    path = f"{index_dir(metadata)}/{INDEX_FILE}"
    fs = store.arrow_filesystem()
    try:
        with fs.open_output_stream(store.arrow_path(path)) as sink:
            pq.write_table(table, sink, row_group_size=ROWS_PER_GROUP, compression="zstd", write_statistics=True)
            size = sink.tell()
    except BaseException:
        store.delete_many([path])
        raise
    metadata.files.append(pb.IndexFile(path=INDEX_FILE, size_bytes=size))
    return BuiltIndex(metadata, [path])


def lookup(store: ObjectStore, index: pb.IndexMetadata, expr: pc.Expression) -> np.ndarray:
    """Row addresses (sorted) whose indexed value satisfies `expr` (over the physical column name)."""
    from ..scan import ROW_ADDRESS

    path = store.arrow_path(f"{index_dir(index)}/{INDEX_FILE}")
    size = index.files[0].size_bytes if index.files else None
    fragment = ds.ParquetFileFormat().make_fragment(path, filesystem=store.arrow_filesystem(), file_size=size)
    if index.index_type == BTREE:
        found = fragment.to_table(columns=[ROW_ADDRESS], filter=expr).column(0).to_numpy()
        return np.sort(found.astype(np.uint64))
    bitmaps = fragment.to_table(columns=["bitmap"], filter=expr).column(0).to_pylist()
    out = BitMap64()
    for data in bitmaps:
        out |= BitMap64.deserialize(data)
    return np.array(out.to_array(), dtype=np.uint64) if len(out) else np.array([], dtype=np.uint64)


def covered(index: pb.IndexMetadata) -> set[int]:
    return set(BitMap.deserialize(index.fragment_bitmap)) if index.fragment_bitmap else set()
