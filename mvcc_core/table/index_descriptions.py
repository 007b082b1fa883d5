"""pylance's views of a version's indices: `list_indices()` entries and `describe_indices()` descriptions."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pyroaring import BitMap

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.format.deletion import live_rows
from mvcc_core.format.field_paths import path_names

# mvcc's index type (what `create_index` takes and the manifest stores) -> the name pylance reports
DISPLAY_NAMES = {"BTREE": "BTree", "BITMAP": "Bitmap"}


def display_name(index_type: str) -> str:
    """The name pylance reports for an index type ("BTREE" -> "BTree"); other types unchanged.

    Args:
        index_type: the type as the manifest stores it
    """
    return DISPLAY_NAMES.get(index_type, index_type)


@dataclass(frozen=True)
class IndexSegmentDescription:
    """One index entry of the manifest (pylance's segment: the index built once, or an optimize's delta)."""

    uuid: str
    fragment_ids: set[int]
    index_version: int
    dataset_version_at_last_update: int
    size_bytes: int
    created_at: datetime | None
    base_id: int | None


@dataclass(frozen=True)
class IndexDescription:
    """pylance's `IndexDescription`: one index (all its segments) of a version."""

    name: str
    index_type: str
    type_url: str
    num_rows_indexed: int
    fields: list[int]
    field_names: list[str]
    segments: list[IndexSegmentDescription]
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def total_size_bytes(self) -> int:
        """The size of every segment's files."""
        return sum(s.size_bytes for s in self.segments)


def covered_fragments(index: pb.IndexMetadata, live: set[int]) -> set[int]:
    """The live fragments an index entry covers.

    Args:
        index: the manifest's index entry
        live: the ids of the version's fragments
    """
    return set(BitMap.deserialize(index.fragment_bitmap)) & live if index.fragment_bitmap else set()


def describe(manifest: pb.Manifest) -> list[IndexDescription]:
    """pylance's `describe_indices()` of a version: one description per index name, in manifest order.

    Args:
        manifest: the version's manifest

    Returns:
        The descriptions (the MemWAL index, which is no column index, is left out).
    """
    fields = list(manifest.fields)
    rows = {f.id: live_rows(f) for f in manifest.fragments}
    grouped: dict[str, list[pb.IndexMetadata]] = {}
    for index in manifest.indices:
        if index.index_type in DISPLAY_NAMES:
            grouped.setdefault(index.name, []).append(index)
    out = []
    for name, entries in grouped.items():
        segments = [_segment(index, set(rows)) for index in entries]
        covered = set().union(*(s.fragment_ids for s in segments))
        kind = display_name(entries[0].index_type)
        out.append(
            IndexDescription(
                name=name,
                index_type=kind,
                type_url=f"/lance.table.{kind}IndexDetails",
                num_rows_indexed=sum(rows[i] for i in covered),
                fields=list(entries[0].fields),
                field_names=[path_names(fields, i) for i in entries[0].fields],  # `meta.lang` for a struct field
                segments=segments,
            )
        )
    return out


def _segment(index: pb.IndexMetadata, live: set[int]) -> IndexSegmentDescription:
    created = None
    if index.HasField("created_at"):
        stamp = index.created_at.seconds + index.created_at.nanos / 1e9
        created = datetime.fromtimestamp(stamp, UTC)
    return IndexSegmentDescription(
        uuid=str(uuid.UUID(bytes=index.uuid.uuid)),
        fragment_ids=covered_fragments(index, live),
        index_version=index.index_version,
        dataset_version_at_last_update=index.dataset_version,
        size_bytes=sum(f.size_bytes for f in index.files),
        created_at=created,
        base_id=index.base_id if index.HasField("base_id") else None,
    )
