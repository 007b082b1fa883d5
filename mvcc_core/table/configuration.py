"""The table's configuration, metadata, base paths and MemWAL state (a mixin of `Table`)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Self

from mvcc_core._proto import table_pb2 as pb
from mvcc_core.errors import (
    BasePathError,
    InvalidOperationError,
    SchemaError,
)
from mvcc_core.format import operations
from mvcc_core.format import schema as schema_mod
from mvcc_core.format.bases import DatasetBasePath
from mvcc_core.maintenance.policy import check_config
from mvcc_core.table.host import TableHost
from mvcc_core.txn.commit import DEFAULT_MAX_RETRIES


class ConfigurationMethods(TableHost):
    """The table's configuration, metadata, base paths and MemWAL state (mixed into `Table`)."""

    def add_bases(
        self,
        bases: Sequence[DatasetBasePath],
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Self:
        """Register base paths data may be written to (one UpdateBases); ids are assigned at commit.

        A base whose id, name or path clashes with an existing one is refused with BasePathError.

        Args:
            bases: the base paths to register (`DatasetBasePath`: path, name, whether it is a dataset root)
            commit_message: the message stored with the transaction (None: no message)
            transaction_properties: properties stored with the transaction (a dict of str to str)
            max_retries: how many lost commit races to retry before giving up
        """
        if not bases:
            raise BasePathError("add_bases needs at least one DatasetBasePath")
        protos = [b.to_proto() if isinstance(b, DatasetBasePath) else DatasetBasePath(**b).to_proto() for b in bases]
        names = [p.name for p in protos if p.HasField("name")]
        paths = [p.path for p in protos]
        if len(set(names)) != len(names) or len(set(paths)) != len(paths):
            raise BasePathError(f"add_bases got the same name or path twice: {[(p.name, p.path) for p in protos]}")
        for proto in protos:
            if proto.path == self.uri.rstrip("/"):
                raise BasePathError(f"base path {proto.path!r} is the table's own root")
            for existing in self.manifest.base_paths:
                if existing.path == proto.path or (
                    proto.HasField("name") and existing.HasField("name") and existing.name == proto.name
                ):
                    raise BasePathError(
                        f"base path {proto.path!r} ({proto.name or 'unnamed'}) clashes with existing base "
                        f"{existing.path!r} ({existing.name or 'unnamed'}, id {existing.id})"
                    )
        try:
            return self.commit(
                operations.UpdateBases(new_bases=protos),
                commit_message=commit_message,
                transaction_properties=transaction_properties,
                max_retries=max_retries,
            )
        except InvalidOperationError as exc:  # a concurrent commit added a clashing base
            raise BasePathError(str(exc)) from exc

    def update_config(
        self,
        upsert: dict[str, str | None] | None = None,
        delete: Sequence[str] | None = None,
        *,
        replace: bool = False,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Self:
        """Set (`upsert`; a None value removes the key, as in pylance) and remove (`delete`) table configuration
        keys (one UpdateConfig).

        Args:
            upsert: Keys to set; a None value removes the key.
            delete: Keys to remove.
            replace: Remove every key not in `upsert` (pylance's `replace=True`).
            commit_message: the message stored with the transaction (None: no message)
            transaction_properties: properties stored with the transaction (a dict of str to str)
            max_retries: how many lost commit races to retry before giving up

        Returns:
            This handle, moved to the new version.

        Raises:
            ValueError: a maintenance policy key (`mvcc.compaction.*`, `mvcc.retention.*`) with a value that does
                not parse, an unknown key under those prefixes, a clustering key naming a column the table does not
                have, or both clustering keys set (nothing is committed; the message names the key).
        """
        check_config(
            upsert, self.schema, self.manifest.config, list(delete or []) if not replace else list(self.manifest.config)
        )
        if replace:
            upsert = _replaced(list(self.manifest.config), dict(upsert or {}), True)
        return self.commit(
            operations.UpdateConfig.of(upsert, list(delete or [])),
            commit_message=commit_message,
            transaction_properties=transaction_properties,
            max_retries=max_retries,
        )

    def delete_config_keys(self, keys: Sequence[str], *, max_retries: int = DEFAULT_MAX_RETRIES) -> Self:
        """pylance's `delete_config_keys`: remove these configuration keys (one UpdateConfig).

        Args:
            keys: The keys to remove.
            max_retries: How many times a lost race is retried.

        Returns:
            This handle, moved to the new version.
        """
        return self.update_config(delete=list(keys), max_retries=max_retries)

    def update_schema_metadata(self, values: dict[str, str | None], *, replace: bool = False) -> Self:
        """pylance's `update_schema_metadata`: set schema metadata keys (None removes one).

        Args:
            values: The keys to set.
            replace: Remove every key not in `values` first.

        Returns:
            This handle, moved to the new version.
        """
        current = [k.decode() for k in (self.schema.metadata or {})]
        return self.update_metadata(schema_metadata=_replaced(current, values, replace))

    def update_field_metadata(self, values: dict[str, dict[str, str | None]], *, replace: bool = False) -> Self:
        """pylance's `update_field_metadata`: set metadata keys of fields named by column (None removes one).

        Args:
            values: Column name -> the keys to set.
            replace: Remove every other key of those fields first.

        Returns:
            This handle, moved to the new version.
        """
        fields = {}
        for name, keys in values.items():
            existing = self.schema.field(name).metadata if name in self.schema.names else None
            fields[name] = _replaced([k.decode() for k in (existing or {})], keys, replace)
        return self.update_metadata(field_metadata=fields)

    def update_metadata(
        self,
        table_metadata: dict[str, str | None] | None = None,
        schema_metadata: dict[str, str | None] | None = None,
        field_metadata: dict[str, dict[str, str | None]] | None = None,
        *,
        replace: bool = False,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Self:
        """Change table, schema or field metadata (a None value removes the key). Fields are named by column.

        Args:
            table_metadata: Table metadata keys to set (pylance's `update_metadata(values)`).
            schema_metadata: Schema metadata keys to set.
            field_metadata: Column name -> field metadata keys to set.
            replace: Remove every table metadata key not in `table_metadata` (pylance's `replace=True`).
            commit_message: the message stored with the transaction (None: no message)
            transaction_properties: properties stored with the transaction (a dict of str to str)
            max_retries: how many lost commit races to retry before giving up

        Returns:
            This handle, moved to the new version.

        Raises:
            SchemaError: `field_metadata` names a column the table does not have.
        """
        if replace:
            table_metadata = _replaced(list(self.manifest.table_metadata), table_metadata or {}, True)
        by_name = schema_mod.field_ids_by_name(list(self.manifest.fields))
        unknown = [name for name in (field_metadata or {}) if name not in by_name]
        if unknown:
            raise SchemaError(f"table {self.uri} has no column(s) {unknown}; columns are {list(by_name)}")
        op = operations.UpdateConfig.of(
            table_metadata=table_metadata,
            schema_metadata=schema_metadata,
            field_metadata={by_name[n]: md for n, md in (field_metadata or {}).items()},
        )
        return self.commit(
            op, commit_message=commit_message, transaction_properties=transaction_properties, max_retries=max_retries
        )

    def mark_generations_merged(
        self,
        generations: dict[str | uuid.UUID, int],
        *,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> Self:
        """Record that MemWAL regions' generations up to these numbers are merged (one UpdateMemWalState).

        `generations` maps a region id (UUID or its string) to a generation; a region's merged generation
        only moves forward, so a number at or below the recorded one is refused.

        Args:
            generations: MemWAL region id (UUID or its string) -> the generation merged up to
            commit_message: the message stored with the transaction (None: no message)
            transaction_properties: properties stored with the transaction (a dict of str to str)
            max_retries: how many lost commit races to retry before giving up
        """
        merged = checked_merged_generations(self.manifest, generations)
        return self.commit(
            operations.UpdateMemWalState(merged_generations=merged),
            commit_message=commit_message,
            transaction_properties=transaction_properties,
            max_retries=max_retries,
        )

    def mem_wal_state(self) -> dict[str, int]:
        """MemWAL regions (UUID string) -> their merged generation, in this version."""
        return {str(uuid.UUID(bytes=r.region_id.uuid)): r.merged_generation for r in self.manifest.mem_wal_regions}


def _replaced(current: Sequence[str], values: dict[str, str | None], replace: bool) -> dict[str, str | None]:
    """`values`, plus a removal of every key of `current` it lacks when `replace`."""
    removed: dict[str, str | None] = {k: None for k in current if k not in values} if replace else {}
    return {**removed, **values}


def checked_merged_generations(
    manifest: pb.Manifest, generations: dict[str | uuid.UUID, int]
) -> list[pb.MergedGeneration]:
    """Validate region ids and generation numbers; a region's merged generation only moves forward.

    Args:
        manifest: the version the generations are marked merged on
        generations: MemWAL region id (UUID or its string) -> the generation merged up to

    Raises:
        ValueError: no region, a region id that is no UUID, or a generation that is negative or not newer
    """
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
