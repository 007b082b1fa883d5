"""The 15 operations of the Lance transaction specification, as dataclasses that mirror the protobuf.

Each dataclass has exactly the fields of its message in `protos/transaction.proto`; fragments, fields
and other nested messages stay protobuf objects. Conversion is generic over the message descriptor,
so adding a field to the proto and to the dataclass is all a new field needs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from google.protobuf.descriptor import FieldDescriptor

from mvcc_core._proto import table_pb2 as pb
from mvcc_core._proto import transaction_pb2 as tpb


def _is_repeated(fd: FieldDescriptor) -> bool:
    return fd.is_repeated


def _is_map(fd: FieldDescriptor) -> bool:
    return (
        fd.type == FieldDescriptor.TYPE_MESSAGE
        and fd.message_type.has_options
        and fd.message_type.GetOptions().map_entry
    )


# The arm of `Transaction.operation` that holds each operation, by its message's name
_PROTO_FIELDS = {f.message_type.name: f.name for f in tpb.Transaction.DESCRIPTOR.oneofs_by_name["operation"].fields}


@dataclass
class Operation:
    """Base of all operations; `name` is the specification's name of the operation (the class's name, as the
    message's) and `proto_field` the arm of `Transaction.operation` that holds it, both set per subclass."""

    name: ClassVar[str]
    proto_field: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.name = cls.__name__
        cls.proto_field = _PROTO_FIELDS[cls.__name__]

    def to_proto(self) -> Any:
        msg = getattr(tpb.Transaction, self.__class__.__name__)()
        for fd in msg.DESCRIPTOR.fields:
            value = getattr(self, fd.name)
            if _is_map(fd):
                target = getattr(msg, fd.name)
                for k, v in value.items():
                    if fd.message_type.fields_by_name["value"].type == FieldDescriptor.TYPE_MESSAGE:
                        target[k].CopyFrom(v)
                    else:
                        target[k] = v
            elif _is_repeated(fd):
                getattr(msg, fd.name).extend(value)
            elif value is None:
                continue
            elif fd.type == FieldDescriptor.TYPE_MESSAGE:
                getattr(msg, fd.name).CopyFrom(value)
            else:
                setattr(msg, fd.name, value)
        return msg

    @classmethod
    def from_proto(cls, msg: Any) -> Self:
        """The operation a transaction file's message describes.

        Args:
            msg: the operation's protobuf message (one arm of `Transaction.operation`)
        """
        kwargs: dict[str, Any] = {}
        for fd in msg.DESCRIPTOR.fields:
            value = getattr(msg, fd.name)
            if _is_map(fd):
                kwargs[fd.name] = dict(value)
            elif _is_repeated(fd):
                kwargs[fd.name] = list(value)
            elif fd.has_presence and not msg.HasField(fd.name):
                kwargs[fd.name] = None
            else:
                kwargs[fd.name] = value
        return cls(**kwargs)


def _list() -> Any:
    return field(default_factory=list)


def _dict() -> Any:
    return field(default_factory=dict)


@dataclass
class Append(Operation):
    fragments: list[pb.DataFragment] = _list()


@dataclass
class Delete(Operation):
    updated_fragments: list[pb.DataFragment] = _list()
    deleted_fragment_ids: list[int] = _list()
    predicate: str = ""
    affected_rows: bytes = b""


@dataclass
class Overwrite(Operation):
    fragments: list[pb.DataFragment] = _list()
    schema: list[pb.Field] = _list()
    schema_metadata: dict[str, bytes] = _dict()
    config_upsert_values: dict[str, str] = _dict()
    initial_bases: list[pb.BasePath] = _list()


@dataclass
class CreateIndex(Operation):
    new_indices: list[pb.IndexMetadata] = _list()
    removed_indices: list[pb.IndexMetadata] = _list()


@dataclass
class Rewrite(Operation):
    old_fragments: list[pb.DataFragment] = _list()
    new_fragments: list[pb.DataFragment] = _list()
    groups: list[tpb.Transaction.Rewrite.RewriteGroup] = _list()
    rewritten_indices: list[tpb.Transaction.Rewrite.RewrittenIndex] = _list()
    frag_reuse_index: pb.IndexMetadata | None = None
    #: In memory only (not in the transaction file): per group, the old row address (fragment id << 32 | offset)
    #: of each physical row of its new fragments, in order, as uint64 bytes; set by a clustering compaction, whose
    #: rows are permuted, so that a rebase can carry concurrent deletions (`txn/rewrite_rebase.py`).
    row_sources: list[bytes] | None = None


@dataclass
class Merge(Operation):
    fragments: list[pb.DataFragment] = _list()
    schema: list[pb.Field] = _list()
    schema_metadata: dict[str, bytes] = _dict()
    metadata_updates: tpb.Transaction.UpdateConfig | None = None


@dataclass
class Project(Operation):
    schema: list[pb.Field] = _list()


@dataclass
class Restore(Operation):
    version: int = 0


@dataclass
class ReserveFragments(Operation):
    num_fragments: int = 0


@dataclass
class Clone(Operation):
    is_shallow: bool = True
    ref_name: str | None = None
    ref_version: int = 0
    ref_path: str = ""
    branch_name: str | None = None


@dataclass
class Update(Operation):
    removed_fragment_ids: list[int] = _list()
    updated_fragments: list[pb.DataFragment] = _list()
    new_fragments: list[pb.DataFragment] = _list()
    fields_modified: list[int] = _list()
    merged_generations: list[pb.MergedGeneration] = _list()
    fields_for_preserving_frag_bitmap: list[int] = _list()
    update_mode: int = tpb.Transaction.REWRITE_ROWS
    inserted_rows: tpb.Transaction.KeyExistenceFilter | None = None
    affected_rows: bytes = b""
    replace_predicate: str = ""
    metadata_updates: tpb.Transaction.UpdateConfig | None = None


@dataclass
class UpdateConfig(Operation):
    """Changes config, table metadata, schema metadata or field metadata.

    Build it with `UpdateConfig.of(...)` from plain dicts; the message fields are the
    specification's `UpdateMap`s.
    """

    config_updates: tpb.Transaction.UpdateMap | None = None
    table_metadata_updates: tpb.Transaction.UpdateMap | None = None
    schema_metadata_updates: tpb.Transaction.UpdateMap | None = None
    field_metadata_updates: dict[int, tpb.Transaction.UpdateMap] = _dict()
    upsert_values: dict[str, str] = _dict()
    delete_keys: list[str] = _list()
    schema_metadata: dict[str, str] = _dict()
    field_metadata: dict[int, Any] = _dict()

    @classmethod
    def of(
        cls,
        upsert: dict[str, str | None] | None = None,
        delete: list[str] | None = None,
        *,
        table_metadata: dict[str, str | None] | None = None,
        schema_metadata: dict[str, str | None] | None = None,
        field_metadata: dict[int, dict[str, str | None]] | None = None,
        replace: bool = False,
    ) -> UpdateConfig:
        """Config upserts/deletes plus metadata updates (a None value deletes the key).

        Args:
            upsert: table config keys to set, with their values
            delete: table config keys to remove
            table_metadata: table metadata to set (a None value removes the key)
            schema_metadata: schema metadata to set (a None value removes the key)
            field_metadata: per field id, field metadata to set (a None value removes the key)
            replace: True: the config becomes exactly `upsert` (every other key is removed)
        """
        config: dict[str, str | None] = dict(upsert or {})
        for key in delete or []:
            config[key] = None
        return cls(
            config_updates=update_map(config, replace=replace) if config or replace else None,
            table_metadata_updates=update_map(table_metadata) if table_metadata else None,
            schema_metadata_updates=update_map(schema_metadata) if schema_metadata else None,
            field_metadata_updates={fid: update_map(m) for fid, m in (field_metadata or {}).items()},
        )

    def config_keys(self) -> set[str]:
        """Config keys this operation touches (for conflict detection)."""
        keys = set(self.upsert_values) | set(self.delete_keys)
        if self.config_updates is not None:
            keys |= {e.key for e in self.config_updates.update_entries}
        return keys


def update_map(values: dict[str, str | None], replace: bool = False) -> tpb.Transaction.UpdateMap:
    """The protobuf form of a map update.

    Args:
        values: keys to set, with their values (None removes the key)
        replace: True: the map becomes exactly `values`
    """
    entries = []
    for key, value in values.items():
        entry = tpb.Transaction.UpdateMapEntry(key=key)
        if value is not None:
            entry.value = str(value)
        entries.append(entry)
    return tpb.Transaction.UpdateMap(update_entries=entries, replace=replace)


def apply_update_map(target: dict[str, Any], updates: tpb.Transaction.UpdateMap | None, encode: Any = str) -> None:
    """Apply a transaction's map update to a dict, in place.

    Args:
        target: the map to change
        updates: the update (None: nothing changes)
        encode: turns a stored string value into the map's value type
    """
    if updates is None:
        return
    if updates.replace:
        target.clear()
    for entry in updates.update_entries:
        if entry.HasField("value"):
            target[entry.key] = encode(entry.value)
        else:
            target.pop(entry.key, None)


@dataclass
class DataReplacement(Operation):
    replacements: list[tpb.Transaction.DataReplacementGroup] = _list()


@dataclass
class UpdateMemWalState(Operation):
    merged_generations: list[pb.MergedGeneration] = _list()


@dataclass
class UpdateBases(Operation):
    new_bases: list[pb.BasePath] = _list()


ALL_OPERATIONS: tuple[type[Operation], ...] = (
    Append,
    Delete,
    Overwrite,
    CreateIndex,
    Rewrite,
    Merge,
    Project,
    Restore,
    ReserveFragments,
    Clone,
    Update,
    UpdateConfig,
    DataReplacement,
    UpdateMemWalState,
    UpdateBases,
)
BY_PROTO_FIELD = {op.proto_field: op for op in ALL_OPERATIONS}
BY_NAME = {op.name: op for op in ALL_OPERATIONS}


def operation_from_proto(txn: tpb.Transaction) -> Operation:
    """The operation of a decoded transaction.

    Args:
        txn: the decoded transaction

    Raises:
        ValueError: the transaction names no operation
    """
    which = txn.WhichOneof("operation")
    if which is None:
        raise ValueError("transaction has no operation")
    return BY_PROTO_FIELD[which].from_proto(getattr(txn, which))


def operation_fields(op: Operation) -> list[str]:
    """The names of an operation's fields, in declaration order.

    Args:
        op: the operation
    """
    return [f.name for f in dataclasses.fields(op)]
