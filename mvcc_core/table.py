"""Table: the user-facing API (pylance's shapes), and `write_table` / `open_table`.

A `Table` is a handle on one version. Every write commits with the handle's version as read version
and then advances the handle to the version it committed, as pylance does.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from . import operations as ops
from . import schema as schema_mod
from ._proto import table_pb2 as pb
from .bases import DatasetBasePath, find_base, remove_data_files
from .commit import DEFAULT_MAX_RETRIES, CommitCache, Committer
from .conflicts import MEM_WAL_INDEX
from .errors import (
    BasePathError,
    CommitConflictError,
    SchemaError,
    TableExistsError,
    TableNotFoundError,
    TagError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from .external_store import ExternalManifestStore, split_storage_options
from .fragments import DEFAULT_MAX_ROWS_PER_FILE, to_reader, write_fragments_from_reader
from .manifest import (
    ManifestLocation,
    latest_manifest_location,
    list_manifests,
    location_of,
    manifest_timestamp,
    read_manifest,
    table_exists,
)
from .naming import ManifestNaming
from .row_ids import ENABLE_CONFIG_KEY
from .row_ids import enabled as row_ids_enabled
from .scan import DEFAULT_BATCH_SIZE, Scan
from .storage import ObjectStore, open_store
from .tags import Tags
from .transaction import ManifestBuildError, Transaction, read_transaction

if TYPE_CHECKING:
    from .executor import Executor
    from .maintenance.cleanup import CleanupStats
    from .maintenance.optimize import Optimize
    from .merge_insert import MergeInsertBuilder

VersionRef = int | str | datetime


@dataclass(frozen=True)
class VersionInfo:
    version: int
    timestamp: datetime
    operation: str | None
    read_version: int | None
    uuid: str | None
    message: str | None


def _as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Table:
    """A handle on one version of a table."""

    def __init__(
        self,
        store: ObjectStore,
        manifest: pb.Manifest,
        naming: ManifestNaming,
        committer: Committer | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self._store = store
        self._manifest = manifest
        self._naming = naming
        self._committer = committer or Committer(store, CommitCache())
        self._storage_options = storage_options
        self._schema: pa.Schema | None = None

    # ---- identity and metadata ---------------------------------------------------------------

    @property
    def uri(self) -> str:
        return self._store.uri

    @property
    def version(self) -> int:
        return self._manifest.version

    @property
    def manifest(self) -> pb.Manifest:
        return self._manifest

    @property
    def manifest_naming(self) -> ManifestNaming:
        return self._naming

    @property
    def schema(self) -> pa.Schema:
        if self._schema is None:
            self._schema = schema_mod.schema_from_fields(
                list(self._manifest.fields), dict(self._manifest.schema_metadata)
            )
        return self._schema

    @property
    def config(self) -> dict[str, str]:
        return dict(self._manifest.config)

    @property
    def table_metadata(self) -> dict[str, str]:
        return dict(self._manifest.table_metadata)

    @property
    def timestamp(self) -> datetime:
        return manifest_timestamp(self._manifest)

    @property
    def tags(self) -> Tags:
        return Tags(self._store, self._version_exists)

    def latest_version(self) -> int:
        return latest_manifest_location(self._store).version

    def get_fragments(self) -> list[pb.DataFragment]:
        return list(self._manifest.fragments)

    def __repr__(self) -> str:
        return f"Table(uri={self.uri!r}, version={self.version}, rows={self.count_rows()})"

    def __len__(self) -> int:
        return self.count_rows()

    # ---- versions ----------------------------------------------------------------------------

    def _load(self, version: int) -> pb.Manifest:
        cached = self._committer.cache.manifests.get(version)
        if cached is not None:
            return cached
        try:
            manifest = read_manifest(self._store, location_of(self._store, version, self._naming))
        except VersionNotFoundError:
            existing = list_manifests(self._store)
            if existing and 0 < version < existing[0].version:
                raise VersionNotFoundError(
                    f"version {version} of {self.uri} was removed by retention (cleanup_old_versions); the oldest "
                    f"version left is {existing[0].version}"
                ) from None
            raise
        self._committer.cache.manifests[version] = manifest
        return manifest

    def _version_exists(self, version: int) -> bool:
        try:
            self._load(version)
        except VersionNotFoundError:
            return False
        return True

    def _resolve(self, ref: VersionRef) -> int:
        if isinstance(ref, bool):
            raise VersionNotFoundError(f"not a version: {ref!r}")
        if isinstance(ref, int):
            self._load(ref)
            return ref
        if isinstance(ref, str):
            try:
                return self.tags.get_version(ref)
            except TagError as exc:
                raise VersionNotFoundError(str(exc)) from None
        if isinstance(ref, datetime):
            return self._version_asof(ref)
        raise VersionNotFoundError(f"a version is an int, a tag name or a datetime, got {type(ref).__name__}")

    def _version_asof(self, when: datetime) -> int:
        """The newest version committed at or before `when` (binary search: timestamps are monotonic)."""
        when = _as_utc(when)
        locations = list_manifests(self._store)
        lo, hi, found = 0, len(locations) - 1, None
        while lo <= hi:
            mid = (lo + hi) // 2
            if manifest_timestamp(self._load(locations[mid].version)) <= when:
                found, lo = locations[mid].version, mid + 1
            else:
                hi = mid - 1
        if found is None:
            raise VersionNotFoundError(f"table {self.uri} has no version committed at or before {when.isoformat()}")
        return found

    def checkout(self, ref: VersionRef) -> Table:
        """A new handle on `ref`: a version number, a tag name, or a datetime (the version current then)."""
        version = self._resolve(ref)
        return Table(self._store, self._load(version), self._naming, self._committer, self._storage_options)

    def checkout_latest(self) -> Table:
        return self.checkout(self.latest_version())

    def versions(self) -> list[VersionInfo]:
        out = []
        for loc in list_manifests(self._store):
            manifest = self._load(loc.version)
            txn = self._committer.load_transaction(manifest)
            out.append(
                VersionInfo(
                    version=loc.version,
                    timestamp=manifest_timestamp(manifest),
                    operation=txn.operation.name if txn else None,
                    read_version=txn.read_version if txn else None,
                    uuid=txn.uuid if txn else None,
                    message=txn.message if txn else None,
                )
            )
        return out

    # ---- reads -------------------------------------------------------------------------------

    def scanner(
        self,
        columns: Sequence[str] | None = None,
        filter: str | pc.Expression | None = None,  # noqa: A002 - pylance's name
        with_row_address: bool = False,
        batch_size: int = DEFAULT_BATCH_SIZE,
        with_row_id: bool = False,
    ) -> Scan:
        """`with_row_id`: a `_rowid` column (stable ids if the table has them, else the row address)."""
        return Scan(self._store, self._manifest, columns, filter, with_row_address, batch_size, with_row_id=with_row_id)

    def to_table(
        self,
        columns: Sequence[str] | None = None,
        filter: str | pc.Expression | None = None,  # noqa: A002
        with_row_address: bool = False,
        with_row_id: bool = False,
    ) -> pa.Table:
        return self.scanner(columns, filter, with_row_address, with_row_id=with_row_id).to_table()

    def to_batches(
        self,
        columns: Sequence[str] | None = None,
        filter: str | pc.Expression | None = None,  # noqa: A002
        with_row_address: bool = False,
        batch_size: int = DEFAULT_BATCH_SIZE,
        with_row_id: bool = False,
    ) -> Iterator[pa.RecordBatch]:
        return self.scanner(columns, filter, with_row_address, batch_size, with_row_id).to_batches()

    def to_reader(self) -> pa.RecordBatchReader:
        return self.scanner().to_reader()

    def count_rows(self, filter: str | pc.Expression | None = None) -> int:  # noqa: A002
        """Without a filter: from the manifest alone, no data file is opened."""
        return self.scanner(filter=filter, columns=[]).count_rows()

    # ---- writes ------------------------------------------------------------------------------

    def commit(
        self,
        operation: ops.Operation,
        read_version: int | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        commit_message: str | None = None,
    ) -> Table:
        """Low level: commit any operation on top of `read_version` (default: this handle's version)."""
        txn = Transaction(
            read_version=self.version if read_version is None else read_version,
            operation=operation,
            message=commit_message or "",
        )
        manifest, naming = self._committer.commit(
            txn, naming=self._naming, read_manifest_hint=self._manifest, max_retries=max_retries
        )
        self._manifest, self._naming, self._schema = manifest, naming, None
        return self

    def _commit_writing(self, operation: ops.Operation, written: list[pb.DataFragment], **kwargs: Any) -> Table:
        """Commit an operation whose data files were just written; on a definite failure remove them."""
        try:
            return self.commit(operation, **kwargs)
        except (CommitConflictError, TableExistsError, SchemaError):
            _remove_fragments(self._store, written, list(self._manifest.base_paths))
            raise

    def append(
        self,
        data: Any,
        max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
        commit_message: str | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        target_base: str | int | None = None,
    ) -> Table:
        """Add rows as new fragments. `target_base`: the name or id of a base path (see `add_bases`) to
        write the data files to instead of the table's own `data/`."""
        base = find_base(self._manifest.base_paths, target_base) if target_base is not None else None
        reader = to_reader(data, self.schema)
        fragments = write_fragments_from_reader(
            self._store, reader, list(self._manifest.fields), self.schema, max_rows_per_file, base
        )
        return self._commit_writing(
            ops.Append(fragments=fragments), fragments, commit_message=commit_message, max_retries=max_retries
        )

    def add_bases(
        self,
        bases: Sequence[DatasetBasePath],
        commit_message: str | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Table:
        """Register base paths data may be written to (one UpdateBases); ids are assigned at commit.

        A base whose id, name or path clashes with an existing one is refused with BasePathError.
        """
        if not bases:
            raise BasePathError("add_bases needs at least one DatasetBasePath")
        protos = [b.to_proto() if isinstance(b, DatasetBasePath) else DatasetBasePath(**b).to_proto() for b in bases]
        names = [p.name for p in protos if p.HasField("name")]
        paths = [p.path for p in protos]
        if len(set(names)) != len(names) or len(set(paths)) != len(paths):
            raise BasePathError(f"add_bases got the same name or path twice: {[(p.name, p.path) for p in protos]}")
        for proto in protos:
            if proto.path == self._store.uri.rstrip("/"):
                raise BasePathError(f"base path {proto.path!r} is the table's own root")
            for existing in self._manifest.base_paths:
                if existing.path == proto.path or (
                    proto.HasField("name") and existing.HasField("name") and existing.name == proto.name
                ):
                    raise BasePathError(
                        f"base path {proto.path!r} ({proto.name or 'unnamed'}) clashes with existing base "
                        f"{existing.path!r} ({existing.name or 'unnamed'}, id {existing.id})"
                    )
        try:
            return self.commit(
                ops.UpdateBases(new_bases=protos), commit_message=commit_message, max_retries=max_retries
            )
        except ManifestBuildError as exc:  # a concurrent commit added a clashing base
            raise BasePathError(str(exc)) from exc

    def clone(
        self,
        target_uri: str,
        version: VersionRef | None = None,
        shallow: bool = True,
        storage_options: dict[str, Any] | None = None,
        commit_message: str | None = None,
    ) -> Table:
        """A new table at `target_uri` whose history starts at `version` (default: this handle's).

        Shallow (default): no data is copied, the clone's files point at this table through a base path,
        so it breaks if this table's files are removed (reads then raise ObjectNotFoundError). Deep: every
        file is copied and the clone stands alone. Writes to a clone never touch this table.
        """
        from .clone import check_target, deep_copy

        ref = self.version if version is None else self._resolve(version)
        source = self._load(ref)
        options = self._storage_options if storage_options is None else storage_options
        target = open_store(target_uri, options)
        check_target(self._store, target)
        if table_exists(target):
            raise TableExistsError(f"a table already exists at {target.uri}; a clone needs an empty location")
        copied = [] if shallow else deep_copy(self._store, source, target)
        op = ops.Clone(
            is_shallow=shallow,
            ref_name=version if isinstance(version, str) else None,
            ref_version=ref,
            ref_path=self._store.uri,
        )
        committer = Committer(target)
        try:
            manifest, naming = committer.commit(
                Transaction(read_version=0, operation=op, message=commit_message or ""),
                naming=self._naming,
                create=True,
            )
        except (CommitConflictError, TableExistsError):
            target.delete_many(copied)
            raise
        return Table(target, manifest, naming, committer, options)

    def overwrite(
        self,
        data: Any,
        schema: pa.Schema | None = None,
        max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
        commit_message: str | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Table:
        """Replace all rows; the schema may change (field ids of unchanged columns are kept)."""
        reader = to_reader(data, schema)
        new_schema = schema or reader.schema
        fields = _fields_for_overwrite(self._manifest, new_schema)
        fragments = write_fragments_from_reader(self._store, reader, fields, new_schema, max_rows_per_file)
        op = ops.Overwrite(fragments=fragments, schema=fields, schema_metadata=dict(new_schema.metadata or {}))
        return self._commit_writing(op, fragments, commit_message=commit_message, max_retries=max_retries)

    def delete(
        self,
        predicate: str | pc.Expression,
        commit_message: str | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Table:
        """Delete the rows matching `predicate` (SQL or pyarrow Expression) with deletion vectors.

        One Delete transaction; when no row matches, nothing is committed (the handle stays where it is).
        """
        from .delete import plan_delete

        plan = plan_delete(self._store, self._manifest, predicate)
        if plan.operation is None:
            return self
        return self._commit_written(plan.operation, plan.written, commit_message, max_retries)

    def update(
        self,
        values: dict[str, Any],
        where: str | pc.Expression | None = None,
        mode: str | None = None,
        commit_message: str | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        merged_generations: dict[str | uuid.UUID, int] | None = None,
    ) -> dict[str, int]:
        """Set columns to SQL expressions or literals on the rows matching `where` (all rows for None).

        pylance's shape; one Update transaction. `mode`: "rewrite_rows", "rewrite_columns", or None to
        pick the cheaper (see `mvcc_core.update`). `merged_generations` (MemWAL region -> generation) are
        marked merged by the same transaction (a flush of a MemWAL into the table). Returns
        {"num_rows_updated": n}; when no row matches only the generations, if any, are committed.
        """
        from .update import plan_update

        merged = _merged_generations(self._manifest, merged_generations) if merged_generations else []
        plan = plan_update(self._store, self._manifest, values, where, mode=mode)
        if plan.operation is not None:
            plan.operation.merged_generations = merged
            self._commit_written(plan.operation, plan.written, commit_message, max_retries)
        elif merged:
            self.commit(ops.UpdateMemWalState(merged_generations=merged), commit_message=commit_message)
        return {"num_rows_updated": plan.rows_updated}

    def _commit_written(
        self, operation: ops.Operation, written: list[str], commit_message: str | None, max_retries: int
    ) -> Table:
        """Commit an operation whose files were just written; on a definite failure remove them."""
        try:
            return self.commit(operation, commit_message=commit_message, max_retries=max_retries)
        except (CommitConflictError, SchemaError):
            self._store.delete_many(written)  # no manifest references them
            raise

    # ---- schema evolution (pylance's shapes) --------------------------------------------------

    def add_columns(
        self,
        transforms: dict[str, str] | pa.Field | list[pa.Field] | pa.Schema,
        commit_message: str | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Table:
        """New columns from SQL expressions (`{"total": "price * qty"}`) or all-null columns from Arrow
        fields. Every fragment gets one new data file; existing files are not rewritten. One Merge."""
        from .schema_evolution import plan_add_columns

        plan = plan_add_columns(self._store, self._manifest, transforms)
        return self._commit_written(plan.operation, plan.written, commit_message, max_retries)

    def merge(
        self,
        data: Any,
        left_on: str,
        right_on: str | None = None,
        commit_message: str | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Table:
        """Add the columns of `data`, joined on a key column (a left join: no match gives nulls). One Merge."""
        from .schema_evolution import plan_merge

        plan = plan_merge(self._store, self._manifest, data, left_on, right_on)
        return self._commit_written(plan.operation, plan.written, commit_message, max_retries)

    def drop_columns(
        self, columns: str | Sequence[str], commit_message: str | None = None, max_retries: int = DEFAULT_MAX_RETRIES
    ) -> Table:
        """Drop columns or struct fields (`"a.b"`); metadata only. One Project."""
        from .schema_evolution import plan_drop_columns

        return self.commit(
            plan_drop_columns(self._manifest, columns), commit_message=commit_message, max_retries=max_retries
        )

    def alter_columns(self, *alterations: dict[str, Any], commit_message: str | None = None) -> Table:
        """Rename (`{"path": "a", "name": "b"}`) or make nullable (`"nullable": True`); metadata only."""
        from .schema_evolution import plan_alter_columns

        return self.commit(plan_alter_columns(self._manifest, alterations), commit_message=commit_message)

    def replace_column(
        self,
        column: str,
        replacements: dict[int, Any],
        commit_message: str | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Table:
        """Replace a column's values in some fragments ({fragment id: values for every physical row}).

        The new values go into new files; the old ones are tombstoned. One DataReplacement.
        """
        from .schema_evolution import plan_replace_column

        plan = plan_replace_column(self._store, self._manifest, column, replacements)
        return self._commit_written(plan.operation, plan.written, commit_message, max_retries)

    # ---- upserts -----------------------------------------------------------------------------

    def merge_insert(self, on: str | Sequence[str]) -> MergeInsertBuilder:
        """Upsert builder with pylance's shape: `t.merge_insert("id").when_matched_update_all()
        .when_not_matched_insert_all().execute(data)`; one Update transaction."""
        from .merge_insert import MergeInsertBuilder

        return MergeInsertBuilder(self, on)

    # ---- maintenance -------------------------------------------------------------------------

    @property
    def optimize(self) -> Optimize:
        """pylance's `optimize` namespace: `t.optimize.compact_files(...)`."""
        from .maintenance.optimize import Optimize

        return Optimize(self)

    def cleanup_old_versions(
        self,
        older_than: timedelta = timedelta(days=14),
        retain_versions: int | None = None,
        delete_unverified: bool = False,
        error_if_tagged_old_versions: bool = True,
        dry_run: bool = False,
    ) -> CleanupStats:
        """Remove old versions and the files only they use (Lance's semantics; see maintenance/cleanup.py).

        The latest and tagged versions are always kept; unreferenced files younger than 7 days are kept
        unless `delete_unverified`; `dry_run` only reports.
        """
        from .maintenance.cleanup import cleanup_old_versions

        return cleanup_old_versions(
            self, older_than, retain_versions, delete_unverified, error_if_tagged_old_versions, dry_run
        )

    # ---- scalar indices ----------------------------------------------------------------------

    def create_index(
        self,
        column: str,
        index_type: str = "BTREE",
        name: str | None = None,
        replace: bool = True,
        commit_message: str | None = None,
        executor: Executor | None = None,
    ) -> Table:
        """A BTREE or BITMAP index on a scalar column over every fragment (one CreateIndex).

        Filters on the column (`=`, `IN`, ranges, `IS NULL`, ...) then read only the rows it names in the
        fragments it covers. `name` defaults to `{column}_idx`; an existing index of that name is replaced,
        or refused with `replace=False`. With `executor` (`map(fn, tasks)`: a process pool, Spark) the
        column is read by tasks on it; this process sorts and writes the index and commits.
        """
        from .index.scalar import build

        name = name or f"{column}_idx"
        existing = [i for i in self._manifest.indices if i.name == name]
        if existing and not replace:
            raise SchemaError(f"table {self.uri} already has an index named {name!r}; pass replace=True")
        built = build(
            self._store, self._manifest, column, index_type, name, None, executor, self.uri, self._storage_options
        )
        op = ops.CreateIndex(new_indices=[built.metadata], removed_indices=existing)
        return self._commit_written(op, built.written, commit_message, DEFAULT_MAX_RETRIES)

    def drop_index(self, name: str, commit_message: str | None = None) -> Table:
        """Remove an index from the table (its files stay for older versions until retention)."""
        existing = [i for i in self._manifest.indices if i.name == name]
        if not existing:
            names = [i.name for i in self._manifest.indices]
            raise SchemaError(f"table {self.uri} has no index named {name!r}; indices: {names}")
        return self.commit(ops.CreateIndex(removed_indices=existing), commit_message=commit_message)

    # ---- MemWAL state and indices -------------------------------------------------------------

    def mark_generations_merged(
        self,
        generations: dict[str | uuid.UUID, int],
        commit_message: str | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Table:
        """Record that MemWAL regions' generations up to these numbers are merged (one UpdateMemWalState).

        `generations` maps a region id (UUID or its string) to a generation; a region's merged generation
        only moves forward, so a number at or below the recorded one is refused.
        """
        merged = _merged_generations(self._manifest, generations)
        return self.commit(
            ops.UpdateMemWalState(merged_generations=merged), commit_message=commit_message, max_retries=max_retries
        )

    def mem_wal_state(self) -> dict[str, int]:
        """MemWAL regions (UUID string) -> their merged generation, in this version."""
        return {str(uuid.UUID(bytes=r.region_id.uuid)): r.merged_generation for r in self._manifest.mem_wal_regions}

    def list_indices(self) -> list[dict[str, Any]]:
        """The indices of this version (pylance's shape), including the MemWAL index when regions exist."""
        out = []
        for index in self._manifest.indices:
            by_id = {f.id: f.name for f in self._manifest.fields}
            covered = set(BitMap.deserialize(index.fragment_bitmap)) if index.fragment_bitmap else set()
            live = {f.id for f in self._manifest.fragments}
            out.append(
                {
                    "name": index.name,
                    "type": index.index_type,
                    "uuid": str(uuid.UUID(bytes=index.uuid.uuid)),
                    "fields": [by_id.get(i, str(i)) for i in index.fields],
                    "version": index.dataset_version,
                    "fragment_ids": sorted(covered & live),
                    "num_indexed_fragments": len(covered & live),
                    "num_unindexed_fragments": len(live - covered),
                }
            )
        if len(self._manifest.mem_wal_regions):
            out.append({"name": MEM_WAL_INDEX, "type": "MemWal", "fields": [], "regions": self.mem_wal_state()})
        return out

    def restore(self, ref: VersionRef | None = None, commit_message: str | None = None) -> Table:
        """Make `ref` (default: this handle's version) the latest version again; history is kept."""
        version = self.version if ref is None else self._resolve(ref)
        read_version = self.latest_version()
        self._manifest = self._load(read_version)
        return self.commit(ops.Restore(version=version), read_version=read_version, commit_message=commit_message)

    def update_config(
        self,
        upsert: dict[str, str] | None = None,
        delete: Sequence[str] | None = None,
        commit_message: str | None = None,
    ) -> Table:
        return self.commit(ops.UpdateConfig.of(upsert, list(delete or [])), commit_message=commit_message)

    def update_metadata(
        self,
        table_metadata: dict[str, str | None] | None = None,
        schema_metadata: dict[str, str | None] | None = None,
        field_metadata: dict[str, dict[str, str | None]] | None = None,
        commit_message: str | None = None,
    ) -> Table:
        """Change table, schema or field metadata (a None value removes the key). Fields are named by column."""
        by_name = schema_mod.field_ids_by_name(list(self._manifest.fields))
        unknown = [name for name in (field_metadata or {}) if name not in by_name]
        if unknown:
            raise SchemaError(f"table {self.uri} has no column(s) {unknown}; columns are {list(by_name)}")
        op = ops.UpdateConfig.of(
            table_metadata=table_metadata,
            schema_metadata=schema_metadata,
            field_metadata={by_name[n]: md for n, md in (field_metadata or {}).items()},
        )
        return self.commit(op, commit_message=commit_message)


def _merged_generations(manifest: pb.Manifest, generations: dict[str | uuid.UUID, int]) -> list[pb.MergedGeneration]:
    """Validate region ids and generation numbers; a region's merged generation only moves forward."""
    if not generations:
        raise ValueError("give at least one region and generation")
    current = {r.region_id.uuid: r.merged_generation for r in manifest.mem_wal_regions}
    out = []
    for region, generation in generations.items():
        try:
            region_id = region if isinstance(region, uuid.UUID) else uuid.UUID(str(region))
        except ValueError:
            raise ValueError(f"MemWAL region id {region!r} is not a UUID") from None
        if isinstance(generation, bool) or not isinstance(generation, int) or generation < 0:
            raise ValueError(f"MemWAL region {region_id}: generation must be a non-negative int, got {generation!r}")
        if region_id.bytes in current and generation <= current[region_id.bytes]:
            raise ValueError(
                f"MemWAL region {region_id} has merged generation {current[region_id.bytes]} already; "
                f"{generation} would not move it forward"
            )
        out.append(pb.MergedGeneration(region_id=pb.UUID(uuid=region_id.bytes), generation=generation))
    return out


def _fields_for_overwrite(current: pb.Manifest | None, schema: pa.Schema) -> list[pb.Field]:
    if current is not None and len(current.fields):
        old = schema_mod.schema_from_fields(list(current.fields), dict(current.schema_metadata))
        if old.remove_metadata().equals(schema.remove_metadata()) and all(
            old.field(i).equals(schema.field(i), check_metadata=True) for i in range(len(schema))
        ):
            return list(current.fields)
        fields, _ = schema_mod.fields_from_schema(schema, next_field_id=max(current.max_field_id, 0) + 1)
        return fields
    fields, _ = schema_mod.fields_from_schema(schema)
    return fields


def _remove_fragments(
    store: ObjectStore, fragments: list[pb.DataFragment], base_paths: Sequence[pb.BasePath] = ()
) -> None:
    remove_data_files(store, base_paths, fragments)


# ---- module-level entry points ---------------------------------------------------------------


def open_table(
    uri: str,
    version: VersionRef | None = None,
    asof: datetime | None = None,
    storage_options: dict[str, Any] | None = None,
    external_store: str | ExternalManifestStore | None = None,
) -> Table:
    """Open the latest version, or `version` (number or tag), or the version current at `asof`.

    Only the manifest asked for is read: an older version opens even when a newer manifest is damaged.
    `external_store` (or storage option "external_store"): an ExternalManifestStore or a URI such as
    "sqlite:///path/db"; the latest version then comes from it, and commits go through it.
    """
    if version is not None and asof is not None:
        raise ValueError("give either version or asof, not both")
    external, storage_options = split_storage_options(storage_options, external_store)
    store = open_store(uri, storage_options)
    committer = Committer(store, external_store=external)
    location: ManifestLocation = latest_manifest_location(store)
    if version is None and asof is None:
        manifest = read_manifest(store, location)
        committer.cache.manifests[manifest.version] = manifest
        return Table(store, manifest, location.naming, committer, storage_options)
    handle = Table(store, pb.Manifest(), location.naming, committer, storage_options)
    return handle.checkout(version if version is not None else asof)


def write_table(
    data: Any,
    uri: str,
    mode: str = "create",
    storage_options: dict[str, Any] | None = None,
    manifest_naming: str | ManifestNaming = "v2",
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    commit_message: str | None = None,
    schema: pa.Schema | None = None,
    max_retries: int = DEFAULT_MAX_RETRIES,
    external_store: str | ExternalManifestStore | None = None,
    enable_stable_row_ids: bool = False,
) -> Table:
    """Create a table, or append to / overwrite an existing one (pylance's `write_dataset`).

    With `external_store` (see `open_table`) the object store needs no conditional writes.
    `enable_stable_row_ids` (at creation only): every row gets an id that survives updates and
    compaction (`with_row_id=True` in scans); sets the `stable_row_ids` reader and writer flags.
    """
    if mode not in ("create", "append", "overwrite"):
        raise ValueError(f"mode must be 'create', 'append' or 'overwrite', got {mode!r}")
    naming = ManifestNaming.parse(manifest_naming)
    external, storage_options = split_storage_options(storage_options, external_store)
    store = open_store(uri, storage_options)
    try:
        existing = open_table(uri, storage_options=storage_options, external_store=external)
    except TableNotFoundError:
        existing = None
    if existing is not None:
        if enable_stable_row_ids and not row_ids_enabled(existing.manifest):
            raise UnsupportedFeatureError(
                f"stable row ids can only be enabled when a table is created; {uri} exists without them"
            )
        if mode == "create":
            raise TableExistsError(
                f"a table already exists at {uri} (version {existing.version}); use mode='append' or 'overwrite'"
            )
        if mode == "append":
            return existing.append(data, max_rows_per_file, commit_message, max_retries)
        return existing.overwrite(data, schema, max_rows_per_file, commit_message, max_retries)
    reader = to_reader(data, schema)
    table_schema = schema or reader.schema
    fields, _ = schema_mod.fields_from_schema(table_schema)
    fragments = write_fragments_from_reader(store, reader, fields, table_schema, max_rows_per_file)
    op = ops.Overwrite(
        fragments=fragments,
        schema=fields,
        schema_metadata=dict(table_schema.metadata or {}),
        config_upsert_values={ENABLE_CONFIG_KEY: "true"} if enable_stable_row_ids else {},
    )
    committer = Committer(store, external_store=external)
    txn = Transaction(read_version=0, operation=op, message=commit_message or "")
    try:
        manifest, naming = committer.commit(txn, naming=naming, create=(mode != "overwrite"), max_retries=max_retries)
    except (CommitConflictError, TableExistsError):
        # Definite failures: no manifest references these files. (Never on an ambiguous storage error.)
        _remove_fragments(store, fragments)
        raise
    return Table(store, manifest, naming, committer, storage_options)


def write_fragments(
    data: Any,
    uri: str,
    schema: pa.Schema | None = None,
    storage_options: dict[str, Any] | None = None,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    external_store: str | ExternalManifestStore | None = None,
) -> list[pb.DataFragment]:
    """Write data files for a later commit (distributed writers): fragments without ids, no new version.

    For an existing table the data must fit its schema; for a new table the field ids are those
    `fields_from_schema(schema)` assigns, so an Overwrite built from the same schema matches.
    """
    external, storage_options = split_storage_options(storage_options, external_store)
    store = open_store(uri, storage_options)
    try:
        table = open_table(uri, storage_options=storage_options, external_store=external)
        fields, table_schema = list(table.manifest.fields), table.schema
    except TableNotFoundError:
        reader = to_reader(data, schema)
        table_schema = schema or reader.schema
        fields, _ = schema_mod.fields_from_schema(table_schema)
        return write_fragments_from_reader(store, reader, fields, table_schema, max_rows_per_file)
    return write_fragments_from_reader(store, to_reader(data, table_schema), fields, table_schema, max_rows_per_file)


def transaction_of(table: Table, version: int) -> Transaction | None:
    """The transaction that produced `version` (None for manifests without one)."""
    manifest = table._load(version)
    return read_transaction(table._store, manifest.transaction_file) if manifest.transaction_file else None
