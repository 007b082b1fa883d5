"""Transactions, their files under `_transactions/`, and applying an operation to a manifest.

`build_manifest(previous, transaction, ...)` is the single place where the next version's manifest
is derived: the commit loop calls it with the latest committed manifest after conflict resolution.
"""

from __future__ import annotations

import time
import uuid as uuid_mod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from google.protobuf.message import DecodeError
from pyroaring import BitMap

from mvcc_core._proto import table_pb2 as pb
from mvcc_core._proto import transaction_pb2 as tpb
from mvcc_core.errors import CorruptManifestError, InvalidOperationError, UnsupportedFeatureError
from mvcc_core.format import features, framing, operations, row_ids
from mvcc_core.format import fragment_reuse as frag_reuse
from mvcc_core.format.fragments import field_subtree, tombstone
from mvcc_core.format.manifest import WRITER_LIBRARY, writer_version
from mvcc_core.format.naming import MEM_WAL_INDEX, SINGLETON_INDICES, transaction_path
from mvcc_core.io import ObjectStore


@dataclass
class Transaction:
    """One change to a table, built on `read_version` (Lance's Transaction); committed by `Table.commit`.

    A staged transaction (from `append_uncommitted`, `merge_insert(...).execute_uncommitted`, ...) has
    already written its files, listed in `files` as full URIs; they stay invisible until it is committed.
    `abort()` removes them; a commit that fails definitely (a conflict, a refused operation) removes them
    itself. `transaction_properties` (str -> str) are stored with the transaction and shown by
    `Table.versions()` (e.g. which Dagster run wrote a version).

    Example::

        txn = t.append_uncommitted(data, transaction_properties={"run": "42"})
        t.commit(txn)  # or txn.abort()
    """

    read_version: int
    operation: operations.Operation
    uuid: str = field(default_factory=lambda: str(uuid_mod.uuid4()))
    message: str = ""
    transaction_properties: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list, compare=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.read_version, bool) or not isinstance(self.read_version, int) or self.read_version < 0:
            raise ValueError(f"read_version must be a non-negative int, got {self.read_version!r}")
        if not isinstance(self.operation, operations.Operation):
            raise TypeError(f"operation must be an mvcc operation, got {type(self.operation).__name__}")
        self.transaction_properties = check_properties(self.transaction_properties)

    def abort(self, storage_options: dict[str, Any] | None = None) -> None:
        """Remove the files written for this transaction; it must not be committed afterwards.

        Args:
            storage_options: options to open the stores the files live in
        """
        remove_files(self.files, storage_options)
        self.files = []

    @property
    def file_path(self) -> str:
        """Where this transaction's file goes, relative to the table root."""
        return transaction_path(self.read_version, self.uuid)

    def to_proto(self) -> tpb.Transaction:
        """The `mvcc.Transaction` protobuf of the transaction file."""
        txn = tpb.Transaction(
            read_version=self.read_version,
            uuid=self.uuid,
            tag=self.message,
            transaction_properties=self.transaction_properties,
        )
        getattr(txn, self.operation.proto_field).CopyFrom(self.operation.to_proto())
        return txn

    @classmethod
    def from_proto(cls, txn: tpb.Transaction) -> Transaction:
        """The transaction a decoded transaction message describes.

        Args:
            txn: the decoded message
        """
        return cls(
            read_version=txn.read_version,
            operation=operations.operation_from_proto(txn),
            uuid=txn.uuid,
            message=txn.tag,
            transaction_properties=dict(txn.transaction_properties),
        )

    def encode(self) -> bytes:
        """The transaction file's bytes (the protobuf in mvcc's checksummed frame)."""
        return framing.frame(self.to_proto().SerializeToString(deterministic=True))

    @classmethod
    def decode(cls, data: bytes, where: str) -> Transaction:
        """The transaction stored in a transaction file's bytes.

        Args:
            data: the file's bytes
            where: the file's location, for the error

        Raises:
            CorruptManifestError: the file is torn or not a transaction
        """
        try:
            return cls.from_proto(tpb.Transaction.FromString(framing.unframe(data)))
        except (framing.FramingError, DecodeError, ValueError) as exc:
            raise CorruptManifestError(f"transaction file {where} is corrupt: {exc}") from exc


def check_properties(properties: Mapping[str, str] | None) -> dict[str, str]:
    """`transaction_properties` as a plain dict of strings (TypeError names the first bad entry).

    Args:
        properties: the transaction properties the caller passed (None: none)
    """
    if properties is None:
        return {}
    if not isinstance(properties, Mapping):
        raise TypeError(f"transaction_properties must be a dict of str to str, got {type(properties).__name__}")
    for key, value in properties.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"transaction_properties must map str to str; got {key!r}: {value!r}")
    return dict(properties)


def remove_files(
    files: Iterable[str], storage_options: dict[str, Any] | None = None, near: ObjectStore | None = None
) -> None:
    """Delete files given as full URIs (a staged transaction's), grouped by directory; `near`: a store whose
    root holds most of them (the table's), used as is.

    Args:
        files: full URIs of the files
        storage_options: options to open the stores they live in
        near: a store whose root holds most of them (the table's), used as is
    """
    by_dir: dict[str, list[str]] = {}
    own: list[str] = []
    prefix = f"{near.uri}/" if near is not None else None
    for path in files:
        if prefix is not None and path.startswith(prefix):
            own.append(path[len(prefix) :])
        else:
            parent, _, name = path.rpartition("/")
            by_dir.setdefault(parent, []).append(name)
    if own and near is not None:
        near.delete_many(own)
    for parent, names in by_dir.items():
        store = near.sibling(parent) if near is not None else ObjectStore(parent, storage_options)
        store.delete_many(names)


def write_transaction(store: ObjectStore, txn: Transaction) -> str:
    """Write the transaction file of one commit attempt and return its name (relative to `_transactions/`).

    Args:
        store: the table's store
        txn: the transaction of this commit attempt
    """
    store.put(txn.file_path, txn.encode())
    return txn.file_path.rsplit("/", 1)[-1]


def read_transaction(store: ObjectStore, name: str) -> Transaction:
    """The transaction stored in a transaction file.

    Args:
        store: the table's store
        name: the file's name under `_transactions/` (or its path relative to the root)

    Raises:
        CorruptManifestError: the file is torn or not a transaction
    """
    path = name if "/" in name else f"_transactions/{name}"
    return Transaction.decode(store.get(path), f"{store.uri}/{path}")


# --------------------------------------------------------------------------------------------------
# Building the next manifest


def _assign_ids(fragments: list[pb.DataFragment], manifest: pb.Manifest) -> list[pb.DataFragment]:
    """Copy `fragments`, giving each the next fragment id; ids are assigned at manifest construction."""
    out = []
    next_id = (manifest.max_fragment_id + 1) if manifest.HasField("max_fragment_id") else 0
    for frag in fragments:
        new = pb.DataFragment()
        new.CopyFrom(frag)
        new.id = next_id
        next_id += 1
        out.append(new)
    if out:
        manifest.max_fragment_id = next_id - 1
    return out


def _replace_fragments(manifest: pb.Manifest, updated: list[pb.DataFragment], removed: set[int]) -> None:
    by_id = {f.id: f for f in updated}
    known = {f.id for f in manifest.fragments}
    missing = (set(by_id) | removed) - known
    if missing:
        raise InvalidOperationError(f"fragments {sorted(missing)} are not in version {manifest.version}")
    kept = []
    for frag in manifest.fragments:
        if frag.id in removed:
            continue
        kept.append(by_id.get(frag.id, frag))
    del manifest.fragments[:]
    manifest.fragments.extend(kept)


def _deletion_flag(manifest: pb.Manifest) -> None:
    if any(f.HasField("deletion_file") for f in manifest.fragments):
        manifest.reader_feature_flags |= features.FLAG_DELETION_FILES
        manifest.writer_feature_flags |= features.FLAG_DELETION_FILES
    # set while some fragment's vector lives in a packed file, cleared after the last one is gone (so that
    # older readers can read the table again)
    packed = features.FLAG_PACKED_DELETION_FILES
    if any(f.HasField("deletion_file") and f.deletion_file.HasField("content_size") for f in manifest.fragments):
        manifest.reader_feature_flags |= packed
        manifest.writer_feature_flags |= packed
    else:
        manifest.reader_feature_flags &= ~packed
        manifest.writer_feature_flags &= ~packed


def _max_field_id(fields: list[pb.Field]) -> int:
    return max((f.id for f in fields), default=-1)


def _new_fragments(m: pb.Manifest, fragments: list[pb.DataFragment]) -> list[pb.DataFragment]:
    """Fragments entering the table: fragment ids, and row ids when the table has stable row ids."""
    out = _assign_ids(fragments, m)
    row_ids.assign(m, out)
    return out


def _apply_append(m: pb.Manifest, op: operations.Append, ctx: BuildContext) -> None:
    m.fragments.extend(_new_fragments(m, op.fragments))


def _set_fields(m: pb.Manifest, schema: list[pb.Field]) -> None:
    """Replace the manifest's fields with `schema` (an Overwrite's, a Merge's or a Project's), raising
    `max_field_id`. An index on a field the new schema lacks (a dropped column or struct field, a column whose
    type change gave it a new field) is dropped with it, as pylance drops it."""
    del m.fields[:]
    m.fields.extend(schema)
    m.max_field_id = max(m.max_field_id, _max_field_id(schema))
    ids = {f.id for f in schema}
    kept = [i for i in m.indices if all(field_id in ids for field_id in i.fields)]
    if len(kept) != len(m.indices):
        del m.indices[:]
        m.indices.extend(kept)


def _apply_overwrite(m: pb.Manifest, op: operations.Overwrite, ctx: BuildContext) -> None:
    if m.version == 1 and op.config_upsert_values.get(row_ids.ENABLE_CONFIG_KEY) == "true":
        m.reader_feature_flags |= features.FLAG_STABLE_ROW_IDS  # only at creation: existing rows have no ids
        m.writer_feature_flags |= features.FLAG_STABLE_ROW_IDS
    del m.fragments[:]
    m.fragments.extend(_new_fragments(m, op.fragments))
    _set_fields(m, op.schema)
    m.schema_metadata.clear()
    m.schema_metadata.update(op.schema_metadata)
    m.config.update(op.config_upsert_values)
    del m.indices[:]  # the indexed data is gone
    if op.initial_bases:
        m.base_paths.extend(op.initial_bases)


def _apply_restore(m: pb.Manifest, op: operations.Restore, ctx: BuildContext) -> None:
    old = ctx.load_version(op.version)
    max_frag = m.max_fragment_id if m.HasField("max_fragment_id") else None
    next_row_id = m.next_row_id
    m.CopyFrom(old)
    # Fragment ids and row ids are never reused, even after going back in history.
    if max_frag is not None:
        m.max_fragment_id = max(max_frag, m.max_fragment_id)
    m.next_row_id = max(next_row_id, m.next_row_id)


def _apply_reserve(m: pb.Manifest, op: operations.ReserveFragments, ctx: BuildContext) -> None:
    if op.num_fragments <= 0:
        raise InvalidOperationError(f"ReserveFragments needs a positive number of fragments, got {op.num_fragments}")
    start = (m.max_fragment_id + 1) if m.HasField("max_fragment_id") else 0
    m.max_fragment_id = start + op.num_fragments - 1


def _apply_update_config(m: pb.Manifest, op: operations.UpdateConfig, ctx: BuildContext) -> None:
    config = dict(m.config)
    config.update(op.upsert_values)
    for key in op.delete_keys:
        config.pop(key, None)
    operations.apply_update_map(config, op.config_updates)
    m.config.clear()
    m.config.update(config)

    table_md = dict(m.table_metadata)
    operations.apply_update_map(table_md, op.table_metadata_updates)
    m.table_metadata.clear()
    m.table_metadata.update(table_md)

    schema_md = dict(m.schema_metadata)
    schema_md.update({k: v.encode() for k, v in op.schema_metadata.items()})
    operations.apply_update_map(schema_md, op.schema_metadata_updates, encode=str.encode)
    m.schema_metadata.clear()
    m.schema_metadata.update(schema_md)

    fields_by_id = {f.id: f for f in m.fields}
    field_updates = dict(op.field_metadata_updates)
    for fid, upd in op.field_metadata.items():
        field_updates.setdefault(fid, operations.update_map(dict(upd.metadata)))
    for fid, updates in field_updates.items():
        if fid not in fields_by_id:
            raise InvalidOperationError(f"field id {fid} is not in the schema of version {m.version}")
        md = dict(fields_by_id[fid].metadata)
        operations.apply_update_map(md, updates, encode=str.encode)
        fields_by_id[fid].metadata.clear()
        fields_by_id[fid].metadata.update(md)


def _apply_delete(m: pb.Manifest, op: operations.Delete, ctx: BuildContext) -> None:
    _replace_fragments(m, op.updated_fragments, set(op.deleted_fragment_ids))
    _deletion_flag(m)


def _unindex(m: pb.Manifest, field_ids: set[int], fragment_ids: set[int]) -> None:
    """Indices on `field_ids` stop covering fragments whose data for those fields was rewritten in place."""
    from pyroaring import BitMap

    if not field_ids or not fragment_ids:
        return
    field_ids = {f.id for f in field_subtree(list(m.fields), field_ids)} | field_ids  # a struct's fields too
    for index in m.indices:
        if set(index.fields) & field_ids and index.fragment_bitmap:
            bitmap = BitMap.deserialize(index.fragment_bitmap) - BitMap(fragment_ids)
            index.fragment_bitmap = bitmap.serialize()


def _finish_rewrite(m: pb.Manifest, metadata_updates: tpb.Transaction.UpdateConfig | None, ctx: BuildContext) -> None:
    """The end of an Update or a Merge: the deletion-files flag, then the config and metadata changes of a
    branch publish (an mvcc extension) when the operation carries them."""
    _deletion_flag(m)
    if metadata_updates is not None:
        _apply_update_config(m, operations.UpdateConfig.from_proto(metadata_updates), ctx)


def _apply_update(m: pb.Manifest, op: operations.Update, ctx: BuildContext) -> None:
    if op.update_mode == tpb.Transaction.REWRITE_COLUMNS:
        _unindex(m, set(op.fields_modified), {f.id for f in op.updated_fragments})
    _replace_fragments(m, op.updated_fragments, set(op.removed_fragment_ids))
    m.fragments.extend(_new_fragments(m, op.new_fragments))
    _merge_generations(m, op.merged_generations)
    _finish_rewrite(m, op.metadata_updates, ctx)


def _apply_merge(m: pb.Manifest, op: operations.Merge, ctx: BuildContext) -> None:
    del m.fragments[:]
    m.fragments.extend(op.fragments)
    if op.fragments:
        m.max_fragment_id = max([m.max_fragment_id, *(f.id for f in op.fragments)])
    _set_fields(m, op.schema)
    m.schema_metadata.clear()
    m.schema_metadata.update(op.schema_metadata)
    _finish_rewrite(m, op.metadata_updates, ctx)


def _apply_project(m: pb.Manifest, op: operations.Project, ctx: BuildContext) -> None:
    _set_fields(m, op.schema)


def _apply_create_index(m: pb.Manifest, op: operations.CreateIndex, ctx: BuildContext) -> None:
    if any(i.name == MEM_WAL_INDEX for i in op.new_indices):
        raise InvalidOperationError(
            f"CreateIndex of {MEM_WAL_INDEX!r}: MemWAL state is committed with UpdateMemWalState "
            "(t.mark_generations_merged), not as an index"
        )
    removed = {i.uuid.uuid for i in op.removed_indices} | {
        i.uuid.uuid for i in m.indices if i.name == frag_reuse.FRAG_REUSE_INDEX and _names_fri(op)
    }
    new_names = {i.name for i in op.new_indices}
    kept = [i for i in m.indices if i.uuid.uuid not in removed and i.name not in new_names]
    fri = next((i for i in list(m.indices) if i.name == frag_reuse.FRAG_REUSE_INDEX), None)
    added = []
    for index in op.new_indices:
        index = _copy(index)
        if fri is not None and index.name != frag_reuse.FRAG_REUSE_INDEX:
            # built before a compaction that deferred index remapping: cover the rows where they moved
            _follow_rewrites(index, frag_reuse.details_of(fri), since=index.dataset_version)
        added.append(index)
    del m.indices[:]
    m.indices.extend(kept + added)


def _names_fri(op: operations.CreateIndex) -> bool:
    return any(i.name == frag_reuse.FRAG_REUSE_INDEX for i in [*op.new_indices, *op.removed_indices])


def _copy(index: pb.IndexMetadata) -> pb.IndexMetadata:
    out = pb.IndexMetadata()
    out.CopyFrom(index)
    return out


def _follow_rewrites(index: pb.IndexMetadata, details: pb.FragReuseIndexDetails, since: int) -> None:
    """Move an index's fragment coverage through the reuse index's versions newer than `since`."""
    bitmap = BitMap.deserialize(index.fragment_bitmap) if index.fragment_bitmap else BitMap()
    for version in details.versions:
        if version.dataset_version > since:
            for group in version.groups:
                bitmap = frag_reuse.remap_fragment_bitmap(bitmap, group)
    index.fragment_bitmap = bitmap.serialize()


def _apply_rewrite(m: pb.Manifest, op: operations.Rewrite, ctx: BuildContext) -> None:
    groups = list(op.groups)
    if op.old_fragments or op.new_fragments:
        groups.append(
            tpb.Transaction.Rewrite.RewriteGroup(old_fragments=op.old_fragments, new_fragments=op.new_fragments)
        )
    current = {f.id for f in m.fragments}
    out: list[pb.DataFragment] = []
    replaced: dict[int, list[pb.DataFragment]] = {}
    for group in groups:
        old_ids = [f.id for f in group.old_fragments]
        missing = [i for i in old_ids if i not in current]
        if missing:
            raise InvalidOperationError(f"Rewrite replaces fragments {missing} that are not in version {m.version}")
        if old_ids:
            replaced[old_ids[0]] = list(group.new_fragments)
            for i in old_ids[1:]:
                replaced[i] = []
    for frag in m.fragments:
        if frag.id in replaced:
            out.extend(replaced[frag.id])
        else:
            out.append(frag)
    del m.fragments[:]
    m.fragments.extend(out)
    new_ids = [f.id for g in groups for f in g.new_fragments]
    if new_ids:
        m.max_fragment_id = max([m.max_fragment_id, *new_ids])
    if op.frag_reuse_index is not None:
        # Deferred index remapping: indices keep covering the moved rows, readers translate addresses.
        fri = frag_reuse.stamp(op.frag_reuse_index, m.version)
        others = [i for i in m.indices if i.name != frag_reuse.FRAG_REUSE_INDEX]
        for index in others:
            if index.name not in SINGLETON_INDICES:
                version = frag_reuse.details_of(fri).versions[-1]
                _follow_rewrites(index, pb.FragReuseIndexDetails(versions=[version]), since=-1)
        del m.indices[:]
        m.indices.extend([*others, fri])
    rewritten = {r.old_id.uuid: r for r in op.rewritten_indices}
    for index in m.indices:
        r = rewritten.get(index.uuid.uuid)
        if r is not None:
            index.uuid.CopyFrom(r.new_id)
            index.index_version = r.new_index_version
            del index.files[:]
            index.files.extend(r.new_index_files)
    _deletion_flag(m)


def _apply_data_replacement(m: pb.Manifest, op: operations.DataReplacement, ctx: BuildContext) -> None:
    by_id = {f.id: f for f in m.fragments}
    for group in op.replacements:
        frag = by_id.get(group.fragment_id)
        if frag is None:
            raise InvalidOperationError(
                f"DataReplacement names fragment {group.fragment_id}, not in version {m.version}"
            )
        tombstone(frag, set(group.new_file.fields))
        frag.files.append(group.new_file)
        _unindex(m, set(group.new_file.fields), {frag.id})


def _apply_update_bases(m: pb.Manifest, op: operations.UpdateBases, ctx: BuildContext) -> None:
    for new in op.new_bases:
        base = pb.BasePath()
        base.CopyFrom(new)
        if base.id == 0:  # unassigned: the next free id, so concurrent additions need not agree on ids
            base.id = max((b.id for b in m.base_paths), default=0) + 1
        for existing in m.base_paths:
            if base.id == existing.id or base.path.rstrip("/") == existing.path.rstrip("/"):
                raise InvalidOperationError(
                    f"base path {base.path!r} (id {base.id}) clashes with base {existing.path!r} (id {existing.id})"
                )
            if base.HasField("name") and existing.HasField("name") and base.name == existing.name:
                raise InvalidOperationError(f"a base path named {base.name!r} exists already ({existing.path!r})")
        m.base_paths.append(base)
    m.reader_feature_flags |= features.FLAG_BASE_PATHS
    m.writer_feature_flags |= features.FLAG_BASE_PATHS


def _apply_clone(m: pb.Manifest, op: operations.Clone, ctx: BuildContext) -> None:
    """The clone's first manifest: the source version's, its files referenced (shallow) or copied (deep)."""
    if ctx.load_reference is None:
        raise InvalidOperationError("a Clone needs the source table to be readable")
    source = ctx.load_reference(op.ref_path, op.ref_version)
    m.CopyFrom(source)
    if not op.is_shallow:  # the client copied every file to the same relative path under the clone
        for frag in m.fragments:
            for data_file in frag.files:
                data_file.ClearField("base_id")
            if frag.HasField("deletion_file"):
                frag.deletion_file.ClearField("base_id")
        for index in m.indices:
            index.ClearField("base_id")
        del m.base_paths[:]
        m.reader_feature_flags &= ~features.FLAG_BASE_PATHS
        m.writer_feature_flags &= ~features.FLAG_BASE_PATHS
        return
    base_id = max((b.id for b in m.base_paths), default=0) + 1
    m.base_paths.append(pb.BasePath(id=base_id, is_dataset_root=True, path=op.ref_path))
    for frag in m.fragments:
        for data_file in frag.files:
            if not data_file.HasField("base_id"):
                data_file.base_id = base_id
        if frag.HasField("deletion_file") and not frag.deletion_file.HasField("base_id"):
            frag.deletion_file.base_id = base_id
    for index in m.indices:
        if not index.HasField("base_id"):
            index.base_id = base_id
    m.reader_feature_flags |= features.FLAG_BASE_PATHS
    m.writer_feature_flags |= features.FLAG_BASE_PATHS


def _apply_mem_wal(m: pb.Manifest, op: operations.UpdateMemWalState, ctx: BuildContext) -> None:
    if not op.merged_generations:
        raise InvalidOperationError("UpdateMemWalState needs at least one merged generation")
    _merge_generations(m, op.merged_generations)


def _merge_generations(m: pb.Manifest, generations: list[pb.MergedGeneration]) -> None:
    """MemWAL state: each region's merged generation only moves forward."""
    regions = {r.region_id.uuid: r for r in m.mem_wal_regions}
    for gen in generations:
        region = regions.get(gen.region_id.uuid)
        if region is None:
            region = m.mem_wal_regions.add()
            region.region_id.CopyFrom(gen.region_id)
            regions[gen.region_id.uuid] = region
        region.merged_generation = max(region.merged_generation, gen.generation)


@dataclass
class BuildContext:
    """What applying an operation may need beyond the previous manifest."""

    load_version: Callable[[int], pb.Manifest]
    # (table uri, version) -> that table's manifest: the source of a Clone
    load_reference: Callable[[str, int], pb.Manifest] | None = None


_Op = TypeVar("_Op", bound=operations.Operation)
# an apply function, for the operation type it is registered under (`_applier` checks the pair)
_Apply = Callable[[pb.Manifest, Any, BuildContext], None]


def _applier(kind: type[_Op], apply: Callable[[pb.Manifest, _Op, BuildContext], None]) -> tuple[type[_Op], _Apply]:
    """An entry of `_APPLY`: `apply` builds the manifest of an operation of type `kind`."""
    return kind, apply


_APPLIERS = (
    _applier(operations.Append, _apply_append),
    _applier(operations.Overwrite, _apply_overwrite),
    _applier(operations.Restore, _apply_restore),
    _applier(operations.ReserveFragments, _apply_reserve),
    _applier(operations.UpdateConfig, _apply_update_config),
    _applier(operations.Delete, _apply_delete),
    _applier(operations.Update, _apply_update),
    _applier(operations.Merge, _apply_merge),
    _applier(operations.Project, _apply_project),
    _applier(operations.CreateIndex, _apply_create_index),
    _applier(operations.Rewrite, _apply_rewrite),
    _applier(operations.DataReplacement, _apply_data_replacement),
    _applier(operations.UpdateBases, _apply_update_bases),
    _applier(operations.UpdateMemWalState, _apply_mem_wal),
    _applier(operations.Clone, _apply_clone),
)
_APPLY: dict[type[operations.Operation], _Apply] = dict(_APPLIERS)


def build_manifest(
    previous: pb.Manifest | None,
    txn: Transaction,
    *,
    version: int,
    transaction_file: str,
    ctx: BuildContext,
) -> pb.Manifest:
    """The manifest of `version`: `previous` (the latest committed) with `txn`'s operation applied.

    Args:
        previous: the latest committed manifest (None: a new table)
        txn: the transaction committed
        version: the new version's number
        transaction_file: the name of the transaction's file
        ctx: what applying an operation needs beyond the manifest
    """
    op = txn.operation
    if previous is None and not isinstance(op, operations.Overwrite | operations.Clone):
        raise InvalidOperationError(f"a new table must start with Overwrite or Clone, not {op.name}")
    if previous is not None and isinstance(op, operations.Clone):
        raise InvalidOperationError(f"a Clone creates a table; version {previous.version} exists already")
    apply = _APPLY.get(type(op))
    if apply is None:
        raise UnsupportedFeatureError(f"committing a {op.name} operation is not supported yet")
    m = pb.Manifest()
    if previous is not None:
        features.check_writer_flags(previous.writer_feature_flags, f"version {previous.version}")
        m.CopyFrom(previous)
    m.version = version
    apply(m, op, ctx)
    m.version = version
    m.timestamp.FromNanoseconds(time.time_ns())
    m.writer_version.library = WRITER_LIBRARY
    m.writer_version.version = writer_version()
    m.transaction_file = transaction_file
    return m
