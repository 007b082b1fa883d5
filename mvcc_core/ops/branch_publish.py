"""Publishing a branch: its changes since its base land on its parent in one version (docs/guide/branches.md,
"Publish").

The change is the difference between the branch's base version (its fork, or its last publish) and its
latest version, as one Update on the parent with the parent's base version as read version: the commit loop
then checks it against every commit the parent received since, under the usual conflict rules.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from pyroaring import BitMap64

from mvcc_core._proto import table_pb2 as pb
from mvcc_core._proto import transaction_pb2 as tpb
from mvcc_core.errors import BranchError, BranchNotFoundError, RetryableConflictError, VersionNotFoundError
from mvcc_core.failpoints import failpoint
from mvcc_core.format import branches as branch_format
from mvcc_core.format import operations
from mvcc_core.format.branches import BranchRef, branch_of, read_ref, update_ref
from mvcc_core.format.deletion import read_deletion_vector
from mvcc_core.format.fragments import write_fragments_from_reader
from mvcc_core.format.naming import data_file_path
from mvcc_core.io import ObjectStore
from mvcc_core.read.scan import Scan
from mvcc_core.txn.branches import delete_branch, open_branch
from mvcc_core.txn.commit import DEFAULT_MAX_RETRIES
from mvcc_core.txn.state import TableState
from mvcc_core.txn.transaction import Transaction, check_properties

log = logging.getLogger("mvcc.branches")

# Re-exported: the properties of a publish commit (format/branches.py, where the conflict rules read them).
PUBLISHED_BRANCH, PUBLISHED_BRANCH_ID, PUBLISHED_BRANCH_VERSION = (
    branch_format.PUBLISHED_BRANCH,
    branch_format.PUBLISHED_BRANCH_ID,
    branch_format.PUBLISHED_BRANCH_VERSION,
)


def published_base(target: TableState, name: str, ref: BranchRef, *, after: int | None = None) -> tuple[int, int]:
    """(branch version, parent version) of the branch's last publish (its fork when never published).

    The ref records it after each publish; a publish killed between its commit and that record is found
    in the parent's transactions since (a commit carrying this branch's id), and the ref is repaired.

    Args:
        target: Any version of the parent.
        name: The branch.
        ref: Its ref.
        after: A parent version up to which an earlier call already scanned (its finding is in `ref`, read
            since): only the versions after it are read.

    Returns:
        (branch version, parent version).
    """
    return _scan_published(target, name, ref, after)[0]


def _scan_published(target: TableState, name: str, ref: BranchRef, after: int | None) -> tuple[tuple[int, int], int]:
    """`published_base`, and the parent's latest version it scanned from."""
    base = ref.base
    latest = target.latest_location().version
    for version in range(latest, max(base[1], after or 0), -1):
        try:
            txn = target.committer.load_transaction(target.load(version))
        except VersionNotFoundError:
            break  # retention removed the older ones: a publish there was recorded in the ref, or is lost with them
        props = txn.transaction_properties if txn is not None else {}
        if props.get(PUBLISHED_BRANCH_ID) == ref.identifier:
            found = (int(props[PUBLISHED_BRANCH_VERSION]), version)
            log.warning("%s: branch %r was published at version %d; recording it in its ref", target.uri, name, version)
            update_ref(target.store, name, ref, published=found)
            return found, latest
    return base, latest


def _published(name: str, ref: BranchRef, version: int) -> dict[str, str]:
    """The properties that mark a commit as the publish of branch `name`'s `version`."""
    return {PUBLISHED_BRANCH: name, PUBLISHED_BRANCH_ID: ref.identifier, PUBLISHED_BRANCH_VERSION: str(version)}


def _affected_rows(store: ObjectStore, base: pb.Manifest, removed: list[int], updated: list[pb.DataFragment]) -> bytes:
    """Row addresses of the parent's rows the branch changed: every row of a removed (or column-rewritten)
    fragment, and the rows newly deleted from the others (what the conflict check compares with theirs)."""
    before = {f.id: f for f in base.fragments}
    rows = BitMap64()
    for fid in removed:
        rows.add_range(fid << 32, (fid << 32) + before[fid].physical_rows)
    for frag in updated:
        old = before[frag.id]
        deleted = read_deletion_vector(store, frag, base.base_paths) - read_deletion_vector(store, old, base.base_paths)
        rows |= BitMap64((frag.id << 32) | offset for offset in deleted)
    return rows.serialize()


def _changes(
    target: TableState, base: pb.Manifest, head: TableState
) -> tuple[list[int], list[pb.DataFragment], list[pb.DataFragment], list[str]]:
    """(removed fragment ids, updated fragments, new fragments, files written) from `base` to `head`.

    A fragment the branch added (or whose columns it rewrote) and then deleted rows of is written anew without
    them: its deletion file's name carries its fragment id, which the parent assigns afresh.
    """
    before = {f.id: f for f in base.fragments}
    after = {f.id: f for f in head.manifest.fragments}
    changed = [i for i in sorted(set(before) & set(after)) if after[i] != before[i]]
    # a fragment whose files the branch rewrote (a column rewrite) is replaced: the parent may have rebased
    # other files under the same id meanwhile, so it cannot be carried as an update of that id
    rewritten = [i for i in changed if list(after[i].files) != list(before[i].files)]
    removed = sorted(set(before) - set(after) | set(rewritten))
    updated = [after[i] for i in changed if i not in rewritten]
    new: list[pb.DataFragment] = []
    written: list[str] = []
    try:
        for fid in sorted(set(after) - set(before)) + rewritten:
            frag = after[fid]
            if not frag.HasField("deletion_file"):
                new.append(frag)
                continue
            rows = Scan(head.store, head.manifest, fragments=[frag]).to_table()
            fragments = write_fragments_from_reader(
                target.store, rows.to_reader(), list(head.manifest.fields), head.schema
            )
            written += [data_file_path(d.path) for f in fragments for d in f.files]
            new += fragments
    except BaseException:
        target.store.delete_many(written)
        raise
    return removed, updated, new, target.staged(written)


def fragments_of(manifest: pb.Manifest) -> dict[int, tuple[tuple[str, ...], bytes]]:
    """Each fragment's data files and deletion file by id: what a branch's changes are expressed against.

    Args:
        manifest: a version of the branch or of its parent
    """
    return {
        f.id: (
            tuple(d.path for d in f.files),
            f.deletion_file.SerializeToString() if f.HasField("deletion_file") else b"",
        )
        for f in manifest.fragments
    }


def same_schema(base: pb.Manifest, head: pb.Manifest) -> bool:
    """The same fields (metadata aside: the publish's Update carries metadata changes).

    Args:
        base: the branch's manifest at its last publish (or fork)
        head: the branch's manifest being published
    """

    def bare(fields: list[pb.Field]) -> list[bytes]:
        out = []
        for field in fields:
            copy = pb.Field()
            copy.CopyFrom(field)
            copy.ClearField("metadata")
            out.append(copy.SerializeToString())
        return out

    return bare(list(base.fields)) == bare(list(head.fields))


def _inserted_keys(head: TableState, since: int) -> tpb.Transaction.KeyExistenceFilter | None:
    """The keys the upserts of `head`'s branch after version `since` inserted, as one filter (None: none).

    Carried by the publish's Update, so that a key an upsert on the parent inserted meanwhile is a conflict (as
    two concurrent upserts of one new key are), not a duplicate key. Upserts on different key columns: the
    filter of the first (the others' keys are not checked).
    """
    merged: tpb.Transaction.KeyExistenceFilter | None = None
    for version in range(since + 1, head.version + 1):
        at = head.checkout(version)
        txn = at.committer.load_transaction(at.manifest)
        inserted = (
            txn.operation.inserted_rows if txn is not None and isinstance(txn.operation, operations.Update) else None
        )
        if inserted is None or not inserted.key_hashes:
            continue
        if merged is None:
            merged = tpb.Transaction.KeyExistenceFilter(field_ids=list(inserted.field_ids))
        if list(merged.field_ids) == list(inserted.field_ids):
            merged.key_hashes.extend(inserted.key_hashes)
    return merged


def _map_changes(before: Mapping[str, object], after: Mapping[str, object]) -> tpb.Transaction.UpdateMap | None:
    """The keys set or removed from `before` to `after`, as an UpdateMap (None: no change)."""

    def text(value: object) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    changes: dict[str, str | None] = {k: text(v) for k, v in after.items() if before.get(k) != v}
    changes |= {k: None for k in before if k not in after}
    return operations.update_map(changes) if changes else None


def _metadata_changes(base: pb.Manifest, head: pb.Manifest) -> tpb.Transaction.UpdateConfig | None:
    """The config, table, schema and field metadata the branch changed from `base` to `head`, as one UpdateConfig
    message (None: none changed): what the publish's Update carries to the parent (its other keys stay)."""
    message = tpb.Transaction.UpdateConfig()
    changed = False
    for name, before, after in (
        ("config_updates", base.config, head.config),
        ("table_metadata_updates", base.table_metadata, head.table_metadata),
        ("schema_metadata_updates", base.schema_metadata, head.schema_metadata),
    ):
        update = _map_changes(dict(before), dict(after))
        if update is not None:
            getattr(message, name).CopyFrom(update)
            changed = True
    fields_before = {f.id: dict(f.metadata) for f in base.fields}
    for field in head.fields:
        update = _map_changes(fields_before.get(field.id, {}), dict(field.metadata))
        if update is not None:
            message.field_metadata_updates[field.id].CopyFrom(update)
            changed = True
    return message if changed else None


def row_changes(
    target: TableState, base: pb.Manifest, head: TableState, since: int
) -> tuple[operations.Update, list[str]]:
    """The branch's row changes since `base` (its version `since`) as one Update on the parent, and the files
    it wrote.

    Args:
        target: the parent's state the Update is committed on
        base: the branch's manifest at its last publish (or fork)
        head: the branch's state being published
        since: the branch version `base` is
    """
    removed, updated, new, written = _changes(target, base, head)
    update = operations.Update(
        removed_fragment_ids=removed,
        updated_fragments=updated,
        new_fragments=new,
        affected_rows=_affected_rows(target.store, base, removed, updated),
        inserted_rows=_inserted_keys(head, since),
        metadata_updates=_metadata_changes(base, head.manifest),
    )
    return update, written


def commit_change(
    target: TableState,
    name: str,
    ref: BranchRef,
    published_version: int,
    *,
    at_base: TableState,
    change_base: TableState,
    change_head: TableState,
    commit_message: str | None,
    transaction_properties: Mapping[str, str] | None,
    max_retries: int,
) -> TableState:
    """Commit `change_head`'s row changes since `at_base` (a version of the parent `change_head` forked from or was
    published at) on the parent, as the publish of branch `name`'s version `published_version`.

    Args:
        target: Any version of the parent.
        name: The branch published.
        ref: Its ref (its id goes in the commit's properties).
        published_version: The branch version the commit publishes.
        at_base: The parent's version the change starts from (the commit's read version).
        change_base: The version of `change_head`'s branch whose rows are `at_base`'s (its fork or last publish).
        change_head: The version holding the change (the branch's latest, or a replay's scratch branch).
        commit_message: The commit's message (default: "publish branch {name}").
        transaction_properties: The commit's properties (mvcc adds `mvcc.published_branch*`).
        max_retries: How many lost races are retried.

    Returns:
        The parent's new version.

    Raises:
        RetryableConflictError / IncompatibleConflictError: a commit on the parent since `at_base` conflicts.
    """
    operation: operations.Update | operations.Merge
    if same_schema(change_base.manifest, change_head.manifest):
        operation, written = row_changes(target, change_base.manifest, change_head, change_base.version)
    else:  # a schema change: the parent takes the fragments and schema as they are (a Merge, retried if it moved)
        metadata = _metadata_changes(change_base.manifest, change_head.manifest)
        if metadata is not None:  # the Merge sets the schema metadata itself
            metadata.ClearField("schema_metadata_updates")
        operation = operations.Merge(
            fragments=list(change_head.manifest.fragments),
            schema=list(change_head.manifest.fields),
            schema_metadata=dict(change_head.manifest.schema_metadata),
            metadata_updates=metadata,
        )
        written = []
    txn = Transaction(
        read_version=at_base.version,
        operation=operation,
        message=commit_message if commit_message is not None else f"publish branch {name}",
        transaction_properties=dict(transaction_properties or {}) | _published(name, ref, published_version),
        files=written,
    )
    failpoint("branch.publish.before_commit")
    state = at_base.commit(txn, max_retries=max_retries)
    failpoint("branch.publish.after_commit")
    return state


def publish_base(target: TableState, name: str) -> tuple[tuple[int, int], int]:
    """(branch version, parent version) of branch `name`'s last publish (its fork when never published), after
    checking that `target`'s branch is its parent, and the parent version scanned through: what
    `publish_branch` starts from, and what lets a re-run of the branch (`branch_replay`) read only the parent's
    versions after it (`published_base(..., after=)`) to see whether a concurrent publish landed meanwhile.

    Args:
        target: Any version of the parent branch.
        name: The branch.

    Returns:
        ((branch version, parent version), the parent's latest version scanned).

    Raises:
        BranchNotFoundError: no such branch, or it is being deleted.
        BranchError: the branch was not forked from `target`'s branch.
    """
    return _scan_published(target, name, _checked_ref(target, name), None)


def _checked_ref(target: TableState, name: str) -> BranchRef:
    """Branch `name`'s ref, checked to be a live branch forked from `target`'s branch."""
    ref = read_ref(target.store, name)
    parent = branch_of(target.store)
    if ref.deleting:
        raise BranchNotFoundError(f"branch {name!r} of {target.uri} is being deleted")
    if ref.parent_branch != parent:
        raise BranchError(
            f"branch {name!r} was forked from {ref.parent_branch or 'main'}, not {parent or 'main'}: publish it from "
            "a handle on its parent"
        )
    return ref


def publish_branch(
    target: TableState,
    name: str,
    *,
    base: tuple[int, int] | None = None,
    delete_branch_after: bool = False,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    max_retries: int = DEFAULT_MAX_RETRIES,
) -> TableState:
    """Land branch `name`'s changes since its base on its parent (`target`'s branch) in one version.

    Args:
        target: Any version of the parent branch.
        name: The branch to publish.
        base: Its (branch version, parent version) from `publish_base`, when the caller has it (computed here
            when None).
        delete_branch_after: Delete the branch once published.
        commit_message: The message of the parent's new version (default: "publish branch {name}").
        transaction_properties: Properties of the parent's new version (mvcc adds `mvcc.published_branch*`).
        max_retries: How many times a lost race is retried.

    Returns:
        The parent's state after the publish (its latest, unchanged, when the branch had nothing new).

    Raises:
        BranchNotFoundError: no such branch.
        BranchError: the branch was not forked from `target`'s branch.
        RetryableConflictError: a commit on the parent since the base touched the same rows or inserted the same
            new keys, the branch changed the schema and the parent moved, or the parent's versions since the base
            were removed (the parent is untouched; `Table.publish_branch` then re-runs the branch's writes).
        IncompatibleConflictError: a commit on the parent since the base cannot be reconciled (an overwrite,
            a restore, a schema change); the parent is untouched.
    """
    properties = check_properties(transaction_properties)
    ref = _checked_ref(target, name)
    parent = branch_of(target.store)
    head = open_branch(target, name)
    branch_base, target_base = base if base is not None else published_base(target, name, ref)
    ref = read_ref(target.store, name)
    latest = target.latest()
    if head.version == branch_base:
        log.info("%s: branch %r has nothing new since version %d", target.uri, name, branch_base)
        _finish(latest, name, delete_branch_after)
        return latest
    change_base = open_branch(target, name, branch_base)  # the branch keeps it (`protected_versions`)
    try:
        at_base = target.checkout(target_base)
    except VersionNotFoundError as exc:
        raise _history_gone(target, name, target_base, exc) from exc
    if not same_schema(change_base.manifest, head.manifest) and latest.version != target_base:
        raise RetryableConflictError(  # Lance: a Merge or Project after a concurrent commit is retryable
            f"branch {name!r} changed the schema since version {branch_base} and {parent or 'main'} has moved since "
            f"version {target_base}: its writes must run again on the latest version (docs/guide/branches.md)",
            uri=target.uri,
            read_version=target_base,
        )
    if fragments_of(change_base.manifest) != fragments_of(at_base.manifest):
        # published before while the parent had moved: the parent holds the branch's rows under other fragment
        # ids or deletion files, so the changes since cannot be carried as fragment ids (they would land on the
        # wrong fragments)
        raise RetryableConflictError(
            f"branch {name!r} was last published at {parent or 'main'}'s version {target_base} while it had moved, "
            "so its fragments no longer name the parent's: its writes must run again on the latest version "
            "(docs/guide/branches.md)",
            uri=target.uri,
            read_version=target_base,
        )
    try:
        state = commit_change(
            target,
            name,
            ref,
            head.version,
            at_base=at_base,
            change_base=change_base,
            change_head=head,
            commit_message=commit_message,
            transaction_properties=properties,
            max_retries=max_retries,
        )
    except VersionNotFoundError as exc:  # a version since the base was removed: no check against it
        raise _history_gone(target, name, target_base, exc) from exc
    update_ref(target.store, name, ref, published=(head.version, state.version))
    log.info("%s: published branch %r version %d as version %d", target.uri, name, head.version, state.version)
    _finish(state, name, delete_branch_after)
    return state


def _history_gone(target: TableState, name: str, target_base: int, exc: Exception) -> RetryableConflictError:
    """The parent's versions since the base are (partly) removed by retention: the change cannot be checked
    against them (retryable: `Table.publish_branch` re-runs the branch's writes on the latest version)."""
    return RetryableConflictError(
        f"branch {name!r} of {target.uri} cannot be published as it is: {branch_of(target.store) or 'main'}'s "
        f"versions since {target_base} were removed by retention, so its changes cannot be checked against them "
        f"({exc})",
        uri=target.uri,
        read_version=target_base,
    )


def _finish(state: TableState, name: str, delete: bool) -> None:
    if delete:
        delete_branch(state, name)
