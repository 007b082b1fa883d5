"""Stable row ids: an id per row that survives updates and compaction (opt-in at table creation).

Design notes: docs/reference/clones_bases_row_ids.md, "Stable row ids, as implemented".
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
    """Whether the table keeps stable row ids (its writer flags say so).

    Args:
        manifest: the table version's manifest
    """
    return bool(manifest.writer_feature_flags & features.FLAG_STABLE_ROW_IDS)


def encode(ids: np.ndarray) -> pb.RowIdSequence:
    """The compact form: a range when the ids are consecutive, else a compressed array.

    Args:
        ids: the row ids of a fragment's physical rows, in offset order
    """
    ids = np.asarray(ids, dtype=np.uint64)
    # Python ints for the span: uint64 subtraction wraps (and warns) when the ids are not increasing
    if len(ids) == 0 or (int(ids[-1]) - int(ids[0]) == len(ids) - 1 and np.all(np.diff(ids.astype(np.int64)) == 1)):
        start = int(ids[0]) if len(ids) else 0
        return pb.RowIdSequence(inline_sequence=struct.pack("<BQQ", _RANGE, start, len(ids)))
    raw = ids.astype("<u8").tobytes()
    packed = pa.compress(raw, codec="zstd", asbytes=True)
    return pb.RowIdSequence(inline_sequence=struct.pack("<BQ", _ARRAY, len(raw)) + packed)


def range_sequence(start: int, count: int) -> pb.RowIdSequence:
    """The sequence of `count` consecutive row ids starting at `start`.

    Args:
        start: the first row id
        count: how many ids (the fragment's physical rows)
    """
    return pb.RowIdSequence(inline_sequence=struct.pack("<BQQ", _RANGE, start, count))


def decode(fragment: pb.DataFragment) -> np.ndarray:
    """The row ids of a fragment's physical rows, in offset order.

    Args:
        fragment: a fragment that carries a row id sequence

    Raises:
        CorruptManifestError: the sequence cannot be decoded or its length differs from the fragment's rows
    """
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
    """Whether the fragment carries its row ids already.

    Args:
        fragment: the fragment's manifest entry
    """
    return fragment.HasField("row_id_sequence") and bool(fragment.row_id_sequence.inline_sequence)


def assign(manifest: pb.Manifest, fragments: list[pb.DataFragment]) -> None:
    """Give fragments without a sequence fresh ids from `next_row_id` (at manifest build time).

    Args:
        manifest: the manifest being built; its `next_row_id` advances by the rows given ids
        fragments: the new fragments; those that already carry a sequence keep it
    """
    if not enabled(manifest):
        return
    for frag in fragments:
        if not has_sequence(frag):
            frag.row_id_sequence.CopyFrom(range_sequence(manifest.next_row_id, frag.physical_rows))
            manifest.next_row_id += frag.physical_rows


def split(ids: np.ndarray, fragments: list[pb.DataFragment]) -> None:
    """Give fragments written in order from rows with `ids` their explicit sequences (moved rows).

    Args:
        ids: the row ids of the rewritten rows, in the order they were written
        fragments: the fragments written from those rows, in order

    Raises:
        ValueError: the fragments hold a different number of rows than `ids`
    """
    offset = 0
    for frag in fragments:
        frag.row_id_sequence.CopyFrom(encode(ids[offset : offset + frag.physical_rows]))
        offset += frag.physical_rows
    if offset != len(ids):
        raise ValueError(f"{len(ids)} row ids for {offset} written rows")
