"""Materializations are table versions: the data-changing rule and the metadata of a materialization.

The rule is written once, here (`DATA_CHANGING_OPERATIONS`, `data_version`); why:
docs/integrations/dagster/io_manager.md
("Materializations are versions").
"""

from __future__ import annotations

from typing import Any

import dagster as dg
import pyarrow as pa

import mvcc_core as mvcc

from ._dagster_internals import TableMetadataSet

DATA_CHANGING_OPERATIONS: frozenset[str] = frozenset(
    {
        mvcc.operations.Append.name,
        mvcc.operations.Overwrite.name,
        mvcc.operations.Update.name,
        mvcc.operations.Delete.name,
        mvcc.operations.Merge.name,
        mvcc.operations.DataReplacement.name,
        mvcc.operations.Restore.name,
        mvcc.operations.Clone.name,
        mvcc.operations.Project.name,
    }
)
MAINTENANCE_OPERATIONS: frozenset[str] = frozenset(
    {
        mvcc.operations.Rewrite.name,
        mvcc.operations.CreateIndex.name,
        mvcc.operations.ReserveFragments.name,
        mvcc.operations.UpdateConfig.name,
        mvcc.operations.UpdateBases.name,
        mvcc.operations.UpdateMemWalState.name,
    }
)


def is_data_changing(operation: str | None) -> bool:
    """Whether a commit of `operation` changes what a reader sees (unknown or unreadable: yes).

    Args:
        operation: The operation's name (None: unreadable).

    Returns:
        Whether it changes the data.
    """
    return operation not in MAINTENANCE_OPERATIONS


def data_version(table: mvcc.Table) -> int:
    """The version of the latest data-changing commit at or before `table.version` (see the rule above).

    Walks back from the handle's version reading each version's operation name (`Table.transaction(v)`, the
    name `Table.versions()` lists), so the usual case, a data-changing head, reads one transaction and a
    long history costs nothing. A version removed by retention ends the walk at the oldest version kept; an
    unreadable one counts as data-changing.

    Args:
        table: The table at the materialized version.

    Returns:
        The version.
    """
    version = table.version
    while version >= 1:
        try:
            txn = table.transaction(version)
        except mvcc.VersionNotFoundError:
            return min(version + 1, table.version)
        except mvcc.errors.CorruptManifestError:
            return version
        if is_data_changing(txn.operation.name if txn is not None else None):
            return version
        version -= 1
    return table.version


def arrow_type_name(t: pa.DataType) -> str:
    """A column type as Dagster's column schema shows it (Arrow's own spelling).

    Args:
        t: The Arrow type.

    Returns:
        Its name.
    """
    return str(t)


def column_schema(schema: pa.Schema) -> dg.TableSchema:
    """The table's schema as Dagster's `TableSchema` (`dagster/column_schema`).

    Args:
        schema: The Arrow schema.

    Returns:
        The table schema.
    """
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                name=f.name,
                type=arrow_type_name(f.type),
                constraints=dg.TableColumnConstraints(nullable=f.nullable),
            )
            for f in schema
        ]
    )


#: The size of the table's data files. Dagster 1.13 has no bytes metadata type: an int under this standard key
#: is what its UI formats as a size (the asset overview shows it as "1.2 MB"; an event lists the int).
SIZE_BYTES = "dagster/size_bytes"


def uri_value(uri: str) -> dg.MetadataValue:
    """A table's uri as Dagster metadata: a link for http(s), a path (copyable) for local paths and object
    store uris (a browser cannot open ``s3://``).

    Args:
        uri: The table's uri.

    Returns:
        The metadata value.
    """
    if uri.startswith(("http://", "https://")):
        return dg.MetadataValue.url(uri)
    return dg.MetadataValue.path(uri)


def data_bytes(fragments: Any) -> int:
    """Bytes of the data files of `fragments` (a version's `Table.get_fragments()`, read from its manifest).

    Args:
        fragments: The fragments.

    Returns:
        Bytes.
    """
    return sum(int(df.file_size_bytes) for f in fragments for df in f.data_files())


def table_metadata(
    table: mvcc.Table,
    *,
    table_name: str,
    read_version: int | None,
    partition_filter: str | None = None,
) -> dict[str, Any]:
    """The metadata of a materialization that is version `table.version` of `table`.

    Dagster's standard keys (`dagster/row_count`, `dagster/partition_row_count` when `partition_filter` is
    given, `dagster/column_schema`, `dagster/table_name`, `dagster/uri` as a path, `dagster/size_bytes`: the
    data files' bytes) and mvcc's (`mvcc/version`, `mvcc/read_version`, `mvcc/operation`, `mvcc/fragments`,
    `mvcc/deleted_rows`, `mvcc/data_version`). Counts come from the manifest; the partition count scans the
    partition's rows.

    Args:
        table: The table at the materialized version.
        table_name: The ``dagster/table_name``.
        read_version: The version the commit read (None: from the transaction).
        partition_filter: The partition's predicate (for ``dagster/partition_row_count``).

    Returns:
        The metadata.
    """
    fragments = table.get_fragments()
    deleted = sum(f.num_deletions for f in fragments)
    txn = table.transaction()
    standard = TableMetadataSet(
        row_count=table.count_rows(),
        partition_row_count=table.count_rows(filter=partition_filter) if partition_filter else None,
        column_schema=column_schema(table.schema),
        table_name=table_name,
    )
    return {
        **standard,
        "dagster/uri": uri_value(table.uri),
        SIZE_BYTES: data_bytes(fragments),
        "mvcc/version": table.version,
        "mvcc/read_version": read_version if read_version is not None else (txn.read_version if txn else None),
        "mvcc/operation": txn.operation.name if txn else "",
        "mvcc/fragments": len(fragments),
        "mvcc/deleted_rows": deleted,
        "mvcc/data_version": data_version(table),
    }


def materialize_result(
    table: mvcc.Table,
    *,
    table_name: str,
    read_version: int | None = None,
    partition_filter: str | None = None,
    asset_key: dg.AssetKey | str | None = None,
) -> dg.MaterializeResult:
    """For assets that write themselves: the `MaterializeResult` of a commit, with the metadata above and
    `data_version` = the latest data-changing version.

    Args:
        table: The table at the committed version.
        table_name: The ``dagster/table_name``.
        read_version: The version the commit read (None: from the transaction).
        partition_filter: The partition's predicate.
        asset_key: The asset (a multi-asset's output names it).

    Returns:
        The result.
    """
    meta = table_metadata(table, table_name=table_name, read_version=read_version, partition_filter=partition_filter)
    key = dg.AssetKey.from_user_string(asset_key) if isinstance(asset_key, str) else asset_key
    return dg.MaterializeResult(
        asset_key=key, metadata=meta, data_version=dg.DataVersion(str(meta["mvcc/data_version"]))
    )
