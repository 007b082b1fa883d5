"""Stable row ids: an id per row that survives updates and compaction (opt-in at table creation).

A table created with `enable_stable_row_ids=True` carries the `stable_row_ids` reader and writer flag.
Every fragment then has a row id sequence, the id of the row at each physical offset (deleted rows
included). New rows get ids from the manifest's `next_row_id` when the manifest is built (so concurrent
writers never hand out the same id); rows that move (REWRITE_ROWS updates, compaction) carry their old
ids in an explicit sequence written by the client. Without the flag `_rowid` is the row address, as in
Lance.

Encoding of `RowIdSequence.inline_sequence`: one tag byte, then
  0: a range, two little-endian u64: start, count;
  1: an array, zstd-compressed little-endian u64 ids (8-byte length prefix of the raw size).
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import CorruptManifestError
from mvcc_core.format import features

ROW_ID = "_rowid"
ENABLE_CONFIG_KEY = "mvcc.enable_stable_row_ids"
_RANGE, _ARRAY = 0, 1


def enabled(manifest: pb.Manifest) -> bool:
    return bool(manifest.writer_feature_flags & features.FLAG_STABLE_ROW_IDS)


def encode(ids: np.ndarray) -> pb.RowIdSequence:
    """The compact form: a range when the ids are consecutive, else a compressed array."""
    ids = np.asarray(ids, dtype=np.uint64)
    if len(ids) == 0 or (ids[-1] - ids[0] == len(ids) - 1 and np.all(np.diff(ids.astype(np.int64)) == 1)):
        start = int(ids[0]) if len(ids) else 0
        return pb.RowIdSequence(inline_sequence=struct.pack("<BQQ", _RANGE, start, len(ids)))
    raw = ids.astype("<u8").tobytes()
    packed = pa.compress(raw, codec="zstd", asbytes=True)
    return pb.RowIdSequence(inline_sequence=struct.pack("<BQ", _ARRAY, len(raw)) + packed)


def range_sequence(start: int, count: int) -> pb.RowIdSequence:
    return pb.RowIdSequence(inline_sequence=struct.pack("<BQQ", _RANGE, start, count))


def decode(fragment: pb.DataFragment) -> np.ndarray:
    """The row ids of a fragment's physical rows, in offset order."""
    data = fragment.row_id_sequence.inline_sequence
    try:
        if data[:1] == bytes([_RANGE]):
            _, start, count = struct.unpack("<BQQ", data)
            ids = np.arange(start, start + count, dtype=np.uint64)
        elif data[:1] == bytes([_ARRAY]):
            (size,) = struct.unpack("<Q", data[1:9])
            ids = np.frombuffer(pa.decompress(data[9:], decompressed_size=size, codec="zstd", asbytes=True), "<u8")
        else:
            raise ValueError(f"unknown sequence tag {data[:1]!r}")
    except (struct.error, ValueError, pa.ArrowException) as exc:
        raise CorruptManifestError(f"fragment {fragment.id}: row id sequence is corrupt: {exc}") from exc
    if len(ids) != fragment.physical_rows:
        raise CorruptManifestError(
            f"fragment {fragment.id}: row id sequence has {len(ids)} ids for {fragment.physical_rows} rows"
        )
    return ids.astype(np.uint64)


def has_sequence(fragment: pb.DataFragment) -> bool:
    return fragment.HasField("row_id_sequence") and bool(fragment.row_id_sequence.inline_sequence)


def assign(manifest: pb.Manifest, fragments: list[pb.DataFragment]) -> None:
    """Give fragments without a sequence fresh ids from `next_row_id` (at manifest build time)."""
    if not enabled(manifest):
        return
    for frag in fragments:
        if not has_sequence(frag):
            frag.row_id_sequence.CopyFrom(range_sequence(manifest.next_row_id, frag.physical_rows))
            manifest.next_row_id += frag.physical_rows


def split(ids: np.ndarray, fragments: list[pb.DataFragment]) -> None:
    """Give fragments written in order from rows with `ids` their explicit sequences (moved rows)."""
    offset = 0
    for frag in fragments:
        frag.row_id_sequence.CopyFrom(encode(ids[offset : offset + frag.physical_rows]))
        offset += frag.physical_rows
    if offset != len(ids):
        raise ValueError(f"{len(ids)} row ids for {offset} written rows")
