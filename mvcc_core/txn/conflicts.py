"""The conflict resolver: what happens to our transaction when another one landed first.

The rules are data: `RULES[(ours, theirs)]` is written from the "Compatibility" paragraphs of the
specification, read from the perspective of the operation being committed ("ours"). A pair
that is absent is compatible. A rule may carry a condition (overlapping fragments, same config key,
...); when the condition does not hold the pair is compatible.

A pair may hold several rules, tried in order (the first whose condition holds decides). REBASE is
carried out by `rebase.py`: row-level changes (a Delete or Update after a Delete/Update of the same
fragments) when the affected rows differ, and the fragment reuse index (a singleton) when two
transactions write it. See docs/reference/conflicts.md.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, replace

from mvcc_core._proto import table_pb2 as pb
from mvcc_core._proto import transaction_pb2 as tpb
from mvcc_core.format import fragment_reuse as frag_reuse
from mvcc_core.format import operations
from mvcc_core.format.branches import PUBLISHED_BRANCH_ID
from mvcc_core.format.naming import FRAG_REUSE_INDEX, MEM_WAL_INDEX, SINGLETON_INDICES  # noqa: F401 - re-exported
from mvcc_core.txn.transaction import Transaction

#: A Rewrite's transaction property saying its new fragments hold the live rows of its old fragments in their
#: order (compaction sets it): the old (fragment, offset) -> new (fragment, offset) mapping is then known.
REWRITE_ROW_ORDER = "mvcc/rewrite_row_order"


class Outcome(enum.Enum):
    COMPATIBLE = "compatible"
    REBASE = "rebase"
    RETRYABLE = "retryable"
    INCOMPATIBLE = "incompatible"


@dataclass(frozen=True)
class ConflictContext:
    """Facts about the table the conditions need.

    `rows_match(fragments, predicate)`: whether any row of the other transaction's new fragments matches
    a SQL predicate (reads data, so the commit loop provides it); None: assume they do (the safe answer).
    """

    stable_row_ids: bool = False
    rows_match: Callable[[list[pb.DataFragment], str], bool] | None = None
    #: ours is a Rewrite that declares it kept the row order (`REWRITE_ROW_ORDER`; set by `resolve`)
    rewrite_keeps_row_order: bool = False


Condition = Callable[[operations.Operation, operations.Operation, ConflictContext], bool]


@dataclass(frozen=True)
class Rule:
    outcome: Outcome
    condition: Condition | None = None
    when: str = "always"


# ---- what an operation touches ---------------------------------------------------------------


def touched_fragments(op: operations.Operation) -> set[int]:
    """Ids of existing fragments an operation modifies or removes.

    Args:
        op: a transaction's operation
    """
    if isinstance(op, operations.Delete):
        return {f.id for f in op.updated_fragments} | set(op.deleted_fragment_ids)
    if isinstance(op, operations.Update):
        return {f.id for f in op.updated_fragments} | set(op.removed_fragment_ids)
    if isinstance(op, operations.Rewrite):
        ids = {f.id for f in op.old_fragments}
        for group in op.groups:
            ids |= {f.id for f in group.old_fragments}
        return ids
    if isinstance(op, operations.DataReplacement):
        return {r.fragment_id for r in op.replacements}
    if isinstance(op, operations.Merge):
        return {f.id for f in op.fragments}
    if isinstance(op, operations.CreateIndex):
        return indexed_fragments(op)
    return set()


def inserted_keys_overlap(ours: operations.Operation, theirs: operations.Operation) -> bool:
    """Key hashes both upserts inserted (same key columns): the same new key must not land twice.

    Args:
        ours: our transaction's operation
        theirs: the concurrent transaction's operation
    """
    if not (isinstance(ours, operations.Update) and isinstance(theirs, operations.Update)):
        return False
    a, b = ours.inserted_rows, theirs.inserted_rows
    if a is None or b is None or list(a.field_ids) != list(b.field_ids):
        return False
    return not set(a.key_hashes).isdisjoint(b.key_hashes)


def indexed_fragments(op: operations.CreateIndex) -> set[int]:
    """Ids of the fragments the new indices of a CreateIndex cover.

    Args:
        op: the CreateIndex
    """
    from pyroaring import BitMap

    ids: set[int] = set()
    for index in op.new_indices:
        if index.fragment_bitmap:
            ids |= set(BitMap.deserialize(index.fragment_bitmap))
    return ids


def inserted_fragments(op: operations.Operation) -> list[pb.DataFragment]:
    """The new fragments an operation adds next to the existing ones (an Append's, an Update's).

    Args:
        op: a transaction's operation
    """
    if isinstance(op, operations.Append):
        return list(op.fragments)
    if isinstance(op, operations.Update):
        return list(op.new_fragments)
    return []


def _inserts_replaced_rows(ours: operations.Operation, theirs: operations.Operation, ctx: ConflictContext) -> bool:
    """Ours replaced the rows matching a predicate (a partition-scoped overwrite) and theirs inserted rows
    matching it: those would survive next to ours."""
    predicate = ours.replace_predicate if isinstance(ours, operations.Update) else ""
    new = inserted_fragments(theirs)
    if not predicate or not new:
        return False
    return ctx.rows_match is None or ctx.rows_match(new, predicate)


def _overlap(ours: operations.Operation, theirs: operations.Operation, ctx: ConflictContext) -> bool:
    return bool(touched_fragments(ours) & touched_fragments(theirs))


def _rewrite_absorbs_deletions(ours: operations.Operation, theirs: operations.Operation, ctx: ConflictContext) -> bool:
    """Ours a Rewrite whose row mapping is known (stable row ids, or it kept the row order), theirs a Delete or a
    REWRITE_ROWS Update of some of its old fragments: the deletions are carried onto the new fragments
    (`rebase.py`). A REWRITE_COLUMNS Update changed values the rewrite copied: not absorbable."""
    if not _overlap(ours, theirs, ctx) or not (ctx.stable_row_ids or ctx.rewrite_keeps_row_order):
        return False
    if isinstance(theirs, operations.Update) and theirs.update_mode == tpb.Transaction.REWRITE_COLUMNS:
        return False
    return isinstance(ours, operations.Rewrite) and bool(ours.groups) and not (ours.old_fragments or ours.new_fragments)


def _same_config_key(ours: operations.Operation, theirs: operations.Operation, ctx: ConflictContext) -> bool:
    def keys(op: operations.Operation) -> set[str]:
        if isinstance(op, operations.UpdateConfig):
            return op.config_keys()
        if isinstance(op, operations.Overwrite):
            return set(op.config_upsert_values)
        if (
            isinstance(op, operations.Update | operations.Merge) and op.metadata_updates is not None
        ):  # a branch publish's config
            return operations.UpdateConfig.from_proto(op.metadata_updates).config_keys()
        return set()

    return bool(keys(ours) & keys(theirs))


def _rewrite_breaks_index(ours: operations.Operation, theirs: operations.Operation, ctx: ConflictContext) -> bool:
    rewrite = ours if isinstance(ours, operations.Rewrite) else theirs
    return _overlap(ours, theirs, ctx) and not ctx.stable_row_ids and not frag_reuse.carried_by(rewrite)


def _rewrite_vs_rewrite(ours: operations.Operation, theirs: operations.Operation, ctx: ConflictContext) -> bool:
    return _overlap(ours, theirs, ctx) or (frag_reuse.carried_by(ours) and frag_reuse.carried_by(theirs))


def _rewrite_rebases_fri(ours: operations.Operation, theirs: operations.Operation, ctx: ConflictContext) -> bool:
    return frag_reuse.carried_by(ours) and frag_reuse.trimmed_by(theirs)


def _trim_rebases_over_rewrite(ours: operations.Operation, theirs: operations.Operation, ctx: ConflictContext) -> bool:
    return frag_reuse.trimmed_by(ours) and frag_reuse.carried_by(theirs)


def _trim_rebases_over_index(ours: operations.Operation, theirs: operations.Operation, ctx: ConflictContext) -> bool:
    return (
        frag_reuse.trimmed_by(ours)
        and isinstance(theirs, operations.CreateIndex)
        and any(i.name not in SINGLETON_INDICES for i in theirs.new_indices)
    )


def _index_reads_trimmed_versions(
    ours: operations.Operation, theirs: operations.Operation, ctx: ConflictContext
) -> bool:
    """Ours adds an index built before a compaction whose reuse version theirs trimmed: its row addresses
    could no longer be translated to where the rows moved."""
    if not frag_reuse.trimmed_by(theirs) or not isinstance(ours, operations.CreateIndex):
        return False
    trimmed = frag_reuse.removed_versions(
        next((i for i in theirs.removed_indices if i.name == FRAG_REUSE_INDEX), None),
        next((i for i in theirs.new_indices if i.name == FRAG_REUSE_INDEX), None),
    )
    built = [i.dataset_version for i in ours.new_indices if i.name not in SINGLETON_INDICES]
    return any(v > d for v in trimmed for d in built)


def _replaced_fields(op: operations.Operation) -> set[int]:
    if isinstance(op, operations.DataReplacement):
        return {fid for r in op.replacements for fid in r.new_file.fields}
    return set()


def _indexed_fields(op: operations.Operation) -> set[int]:
    if isinstance(op, operations.CreateIndex):
        return {fid for i in op.new_indices for fid in i.fields}
    return set()


def _rewrites_indexed_columns(ours: operations.Operation, theirs: operations.Operation, ctx: ConflictContext) -> bool:
    """A REWRITE_COLUMNS Update of an indexed field in fragments the new index covers: built from the old
    values, the index would claim those fragments with stale values."""
    assert isinstance(ours, operations.CreateIndex) and isinstance(theirs, operations.Update)
    if theirs.update_mode != tpb.Transaction.REWRITE_COLUMNS:
        return False
    if not set(theirs.fields_modified) & _indexed_fields(ours):
        return False
    return bool(indexed_fragments(ours) & {f.id for f in theirs.updated_fragments})


def _replaces_indexed_field(ours: operations.Operation, theirs: operations.Operation, ctx: ConflictContext) -> bool:
    return bool((_replaced_fields(ours) | _replaced_fields(theirs)) & (_indexed_fields(ours) | _indexed_fields(theirs)))


def _replacement_overlap(ours: operations.Operation, theirs: operations.Operation, ctx: ConflictContext) -> bool:
    return _overlap(ours, theirs, ctx) and _replaces_indexed_field(ours, theirs, ctx)


def _same_field_and_overlap(ours: operations.Operation, theirs: operations.Operation, ctx: ConflictContext) -> bool:
    return _overlap(ours, theirs, ctx) and bool(_replaced_fields(ours) & _replaced_fields(theirs))


def _same_singleton_index(ours: operations.Operation, theirs: operations.Operation, ctx: ConflictContext) -> bool:
    def singletons(op: operations.Operation) -> set[str]:
        indices = [*getattr(op, "new_indices", []), *getattr(op, "removed_indices", [])]
        return {i.name for i in indices if i.name in SINGLETON_INDICES}

    return bool(singletons(ours) & singletons(theirs))


def _same_base(ours: operations.Operation, theirs: operations.Operation, ctx: ConflictContext) -> bool:
    assert isinstance(ours, operations.UpdateBases) and isinstance(theirs, operations.UpdateBases)
    for a in ours.new_bases:
        for b in theirs.new_bases:
            same_id = a.id != 0 and a.id == b.id  # id 0: assigned when the manifest is built
            if same_id or a.path == b.path or (a.HasField("name") and b.HasField("name") and a.name == b.name):
                return True
    return False


def _same_region(ours: operations.Operation, theirs: operations.Operation, ctx: ConflictContext) -> bool:
    def regions(op: operations.Operation) -> set[bytes]:
        return {g.region_id.uuid for g in getattr(op, "merged_generations", [])}

    return bool(regions(ours) & regions(theirs))


# ---- the table ------------------------------------------------------------------------------

A, D, OW, CI, RW, M, P, RS, RF, CL, U, UC, DR, MW, UB = (
    "Append",
    "Delete",
    "Overwrite",
    "CreateIndex",
    "Rewrite",
    "Merge",
    "Project",
    "Restore",
    "ReserveFragments",
    "Clone",
    "Update",
    "UpdateConfig",
    "DataReplacement",
    "UpdateMemWalState",
    "UpdateBases",
)
ALL_NAMES = (A, D, OW, CI, RW, M, P, RS, RF, CL, U, UC, DR, MW, UB)

INCOMPATIBLE = Rule(Outcome.INCOMPATIBLE)
RETRYABLE = Rule(Outcome.RETRYABLE)
OVERLAP_RETRY = Rule(Outcome.RETRYABLE, _overlap, "overlapping fragments")
OVERLAP_REBASE = Rule(Outcome.REBASE, _overlap, "overlapping fragments (same rows: retryable)")

# Checked before the table: two upserts that inserted the same new key (whatever their fragments).
# A partition-scoped overwrite (replaceWhere) after a commit that inserted rows matching its predicate.
REPLACED_ROWS_INSERTED = Rule(
    Outcome.RETRYABLE,
    _inserts_replaced_rows,
    "ours is a partition-scoped overwrite and theirs inserted rows matching its predicate",
)
ABSORB_DELETIONS = Rule(
    Outcome.REBASE,
    _rewrite_absorbs_deletions,
    "overlapping fragments, theirs deletes rows (a Delete or REWRITE_ROWS Update) and ours knows where they moved "
    "(stable row ids or row order kept)",
)
SAME_CONFIG_KEY = Rule(Outcome.RETRYABLE, _same_config_key, "same config key")
SAME_INSERTED_KEYS = Rule(Outcome.RETRYABLE, None, "both inserted the same new key(s) (upserts)")
# Not in the specification (it has no branches): two publishes of one branch would land its rows twice.
SAME_BRANCH_PUBLISHED = Rule(
    Outcome.RETRYABLE, None, "both publish the same branch (ours re-reads what the branch has left to publish)"
)

RULES: dict[tuple[str, str], Rule | tuple[Rule, ...]] = {
    # Append: conflicts with Overwrite, Restore, UpdateMemWalState.
    (A, OW): INCOMPATIBLE,
    (A, RS): INCOMPATIBLE,
    (A, MW): INCOMPATIBLE,
    # Delete
    (D, OW): INCOMPATIBLE,
    (D, RS): INCOMPATIBLE,
    (D, MW): INCOMPATIBLE,
    (D, M): OVERLAP_RETRY,
    (D, RW): OVERLAP_RETRY,
    (D, DR): OVERLAP_RETRY,
    (D, D): OVERLAP_REBASE,
    (D, U): OVERLAP_REBASE,
    # Overwrite: retryable with UpdateConfig on the same key, Overwrite, UpdateMemWalState.
    (OW, UC): Rule(Outcome.RETRYABLE, _same_config_key, "same config key"),
    (OW, OW): RETRYABLE,
    (OW, MW): RETRYABLE,
    # CreateIndex
    (CI, OW): INCOMPATIBLE,
    (CI, RS): INCOMPATIBLE,
    (CI, MW): INCOMPATIBLE,
    (CI, RW): (
        # Not in the specification (silent): ours replacing the fragment reuse index would drop the
        # version their Rewrite added, so ours re-applies its trim to the latest index.
        Rule(
            Outcome.REBASE,
            _trim_rebases_over_rewrite,
            "ours writes the fragment reuse index and theirs carries one",
        ),
        Rule(
            Outcome.RETRYABLE,
            _rewrite_breaks_index,
            "overlapping fragments, no stable row ids, no fragment reuse index",
        ),
    ),
    (CI, DR): Rule(Outcome.RETRYABLE, _replacement_overlap, "overlapping fragments and the replaced column is indexed"),
    (CI, CI): (
        # Not in the specification (silent): an index committed meanwhile may have been built before a
        # compaction the trim saw as done, so the trim is re-decided on the latest indices (`rebase.py`);
        # the other way round, an index whose reuse versions were trimmed away must be built again.
        Rule(
            Outcome.RETRYABLE,
            _index_reads_trimmed_versions,
            "ours adds an index built before a compaction whose fragment reuse version theirs trimmed",
        ),
        Rule(Outcome.REBASE, _same_singleton_index, "both modify the same singleton index"),
        Rule(Outcome.REBASE, _trim_rebases_over_index, "ours trims the fragment reuse index and theirs adds an index"),
    ),
    # Not in the specification, whose argument assumes updates move rows (REWRITE_ROWS): a REWRITE_COLUMNS
    # update rewrites the indexed values in place.
    (CI, U): Rule(
        Outcome.RETRYABLE,
        _rewrites_indexed_columns,
        "a REWRITE_COLUMNS update of the indexed column in covered fragments",
    ),
    # Rewrite
    (RW, OW): INCOMPATIBLE,
    (RW, RS): INCOMPATIBLE,
    (RW, M): RETRYABLE,
    (RW, DR): OVERLAP_RETRY,
    # Not in the specification (it makes both retryable): a compaction racing a steady delete stream would
    # never land. The rows a Rewrite moved are known (stable row ids, or the order it kept), so the concurrent
    # deletions are carried onto its new fragments, as the deferred remapping does for indices.
    (RW, D): (ABSORB_DELETIONS, OVERLAP_RETRY),
    (RW, U): (ABSORB_DELETIONS, OVERLAP_RETRY),
    (RW, RW): Rule(
        Outcome.RETRYABLE, _rewrite_vs_rewrite, "overlapping fragments or both carry a fragment reuse index"
    ),
    (RW, CI): (
        Rule(
            Outcome.REBASE,
            _rewrite_rebases_fri,
            "theirs writes the fragment reuse index and ours carries one",
        ),
        Rule(
            Outcome.RETRYABLE,
            _rewrite_breaks_index,
            "overlapping fragments, no fragment reuse index, no stable row ids",
        ),
    ),
    # Merge
    (M, OW): INCOMPATIBLE,
    (M, RS): INCOMPATIBLE,
    (M, MW): INCOMPATIBLE,
    (M, P): INCOMPATIBLE,
    (M, U): RETRYABLE,
    (M, A): RETRYABLE,
    (M, D): RETRYABLE,
    (M, M): RETRYABLE,
    (M, RW): RETRYABLE,
    (M, DR): RETRYABLE,
    # Project
    (P, OW): INCOMPATIBLE,
    (P, RS): INCOMPATIBLE,
    (P, MW): INCOMPATIBLE,
    (P, P): RETRYABLE,
    (P, M): RETRYABLE,
    # Restore trumps everything but UpdateMemWalState.
    (RS, MW): INCOMPATIBLE,
    # ReserveFragments only changes max_fragment_id.
    (RF, OW): INCOMPATIBLE,
    (RF, RS): INCOMPATIBLE,
    # Update
    (U, OW): INCOMPATIBLE,
    (U, RS): INCOMPATIBLE,
    (U, RW): OVERLAP_RETRY,
    (U, DR): OVERLAP_RETRY,
    (U, M): RETRYABLE,
    (U, D): OVERLAP_REBASE,
    (U, U): (REPLACED_ROWS_INSERTED, SAME_CONFIG_KEY, OVERLAP_REBASE),
    # Not in the specification: an Update carrying config (mvcc's branch publish) against a change of the same key.
    (U, UC): SAME_CONFIG_KEY,
    (UC, U): SAME_CONFIG_KEY,
    (UC, M): SAME_CONFIG_KEY,
    (M, UC): SAME_CONFIG_KEY,
    (U, A): REPLACED_ROWS_INSERTED,
    # UpdateConfig. The specification says these "conflict"; a concurrent Overwrite replaced the table
    # (incompatible) while a concurrent change of the same key can be re-applied (retryable).
    (UC, OW): INCOMPATIBLE,
    (UC, UC): Rule(Outcome.RETRYABLE, _same_config_key, "same config key"),
    # DataReplacement
    (DR, OW): INCOMPATIBLE,
    (DR, RS): INCOMPATIBLE,
    (DR, MW): INCOMPATIBLE,
    (DR, DR): Rule(Outcome.RETRYABLE, _same_field_and_overlap, "same field and overlapping fragments"),
    (DR, CI): Rule(Outcome.RETRYABLE, _replaces_indexed_field, "the replaced field is indexed"),
    (DR, RW): OVERLAP_RETRY,
    (DR, U): OVERLAP_RETRY,
    (DR, M): RETRYABLE,
    # UpdateMemWalState: the specification is silent; the safe choices (docs/reference/conflicts.md).
    (MW, OW): INCOMPATIBLE,
    (MW, RS): INCOMPATIBLE,
    (MW, MW): Rule(Outcome.RETRYABLE, _same_region, "same MemWAL region"),
    (MW, U): Rule(Outcome.RETRYABLE, _same_region, "same MemWAL region"),
    # UpdateBases conflicts only with UpdateBases on the same id, name or path.
    (UB, UB): Rule(Outcome.INCOMPATIBLE, _same_base, "same base id, name or path"),
}
# Clone can only be a table's first operation: anything committed since its read version means the
# table exists already.
RULES.update({(CL, theirs): INCOMPATIBLE for theirs in ALL_NAMES})


def rules_for(ours: str, theirs: str) -> tuple[Rule, ...]:
    """The rules of a pair, in the order they are tried (the first whose condition holds decides).

    Args:
        ours: our operation's name
        theirs: the concurrent operation's name
    """
    rules = RULES.get((ours, theirs), Rule(Outcome.COMPATIBLE))
    return rules if isinstance(rules, tuple) else (rules,)


def resolve(ours: Transaction, theirs: Transaction, ctx: ConflictContext | None = None) -> tuple[Outcome, Rule]:
    """The outcome of committing `ours` after `theirs` landed (theirs was committed since ours' read version).

    Args:
        ours: the transaction being committed
        theirs: a transaction committed since ours' read version
        ctx: facts the rules may need beyond the two transactions (None: defaults)

    Returns:
        The outcome and the rule that decided it.
    """
    ctx = ctx or ConflictContext()
    if isinstance(ours.operation, operations.Rewrite) and (
        ours.transaction_properties.get(REWRITE_ROW_ORDER) == "kept" or ours.operation.row_sources is not None
    ):  # the mapping is known: the row order kept, or an explicit row map (a clustering compaction's)
        ctx = replace(ctx, rewrite_keeps_row_order=True)
    if inserted_keys_overlap(ours.operation, theirs.operation):
        return Outcome.RETRYABLE, SAME_INSERTED_KEYS
    published = ours.transaction_properties.get(PUBLISHED_BRANCH_ID)
    if published is not None and theirs.transaction_properties.get(PUBLISHED_BRANCH_ID) == published:
        return Outcome.RETRYABLE, SAME_BRANCH_PUBLISHED
    rules = rules_for(ours.operation.name, theirs.operation.name)
    for rule in rules:
        if rule.condition is None or rule.condition(ours.operation, theirs.operation, ctx):
            return rule.outcome, rule
    return Outcome.COMPATIBLE, rules[-1]


def render_markdown() -> str:
    """docs/reference/conflicts.md, generated from RULES so the documentation cannot drift from the code."""
    lines = [
        "# Conflict rules",
        "",
        "Generated from `mvcc_core/txn/conflicts.py` (`RULES`) by `python -m mvcc_core.txn.conflicts`; a test fails",
        "when this file is stale. Rows are the operation being committed (*ours*), columns the operation",
        "committed since our read version (*theirs*), as in the specification's Compatibility sections.",
        "",
        "Outcomes: `ok` compatible; `rebase` ours is transformed and committed; `retry` RetryableConflictError;",
        "`FAIL` IncompatibleConflictError. A `*` marks a condition: when it does not hold the pair is compatible.",
        "",
        "A `rebase` between row-level changes (ours a Delete or a REWRITE_ROWS Update, theirs a Delete or Update)",
        "is carried out when the affected row addresses differ: each shared fragment takes the latest files and the",
        "union of both deletion vectors, written as a new transaction file; the same rows are a retryable conflict",
        "naming up to five row addresses. A REWRITE_COLUMNS update keeps its column files (they cover every row of",
        "the fragment at fixed offsets) on top of the latest fragment, unless both rewrote the same field (retryable).",
        "",
        "A `rebase` on the fragment reuse index (the singleton `__lance_frag_reuse`, written by compactions that defer",
        "index remapping and trimmed by `optimize_indices`) takes the latest index and re-applies only our change: a",
        "Rewrite adds its version, a trim removes the versions it removed. CreateIndex of `__lance_mem_wal` is",
        "refused (MemWAL state is committed with UpdateMemWalState), so that singleton never needs merging.",
        "",
        "A `rebase` of a *Rewrite* (compaction) over a *Delete* or REWRITE_ROWS *Update* of rows it moved (not in",
        "the specification, which makes the pair retryable: a table with a steady delete stream would never compact)",
        "deletes each row deleted since the Rewrite's read again where the Rewrite moved it: by row id with stable",
        "row ids, else by the row order a Rewrite declares it kept (transaction property",
        f"`{REWRITE_ROW_ORDER}: kept`, set by compaction; the live rows of a group's old fragments, in order, are the",
        "live rows of its new fragments), else by the row map a clustering compaction (sorted or z-ordered, rows",
        f"permuted: `{REWRITE_ROW_ORDER}: permuted`) keeps with its Rewrite in memory. The rebased group records",
        "its old fragments as they are now (a fragment deleted whole is left out) and its new fragments carry the",
        "deletions, so a second rebase maps correctly",
        "again. A Rewrite without a known mapping, a REWRITE_COLUMNS Update, a shared fragment whose data files",
        "changed, or a row the mapping cannot place stays retryable (`mvcc_core/txn/rewrite_rebase.py`).",
        "A cell `a/b` lists the pair's rules in the order they are tried.",
        "",
        "| ours \\ theirs | " + " | ".join(ALL_NAMES) + " |",
        "|---|" + "---|" * len(ALL_NAMES),
    ]
    short = {
        Outcome.COMPATIBLE: "ok",
        Outcome.REBASE: "rebase",
        Outcome.RETRYABLE: "retry",
        Outcome.INCOMPATIBLE: "FAIL",
    }
    for ours in ALL_NAMES:
        cells = []
        for theirs in ALL_NAMES:
            rules = rules_for(ours, theirs)
            cells.append("/".join(short[r.outcome] + ("*" if r.condition else "") for r in rules))
        lines.append(f"| **{ours}** | " + " | ".join(cells) + " |")
    lines += ["", "## Conditions", ""]
    for ours, theirs in RULES:
        for rule in rules_for(ours, theirs):
            if rule.condition is not None:
                lines.append(f"- {ours} after {theirs}: {short[rule.outcome]} only when {rule.when}.")
    lines += [
        "",
        "## Choices where the specification is silent",
        "",
        "- *UpdateConfig* after *Overwrite* is incompatible, after *UpdateConfig* on the same key retryable: the",
        '  specification says both "conflict"; re-applying a key change on the new version gives the intended',
        "  result, while a replaced table does not.",
        "- *UpdateMemWalState* has no compatibility section: it fails after Overwrite or Restore and is retryable",
        "  after another UpdateMemWalState, or an Update that merged generations, of the same region.",
        "- *Clone* can only be a table's first operation: anything committed since its read version fails it.",
        "- *UpdateBases* clashing on id, name or path fails: retrying would clash again.",
        "- *CreateIndex* writing the fragment reuse index (a trim) after a *Rewrite* that carries one rebases: the",
        "  specification makes the pair compatible, but replacing the index would drop the Rewrite's version.",
        "- *DataReplacement* after CreateIndex (replaced field indexed), Rewrite or Update (overlapping fragments)",
        "  or Merge is retryable although its own section lists only DataReplacement: the other sections list",
        "  DataReplacement against them, and we keep such pairs symmetric (the safe choice).",
        "- *CreateIndex* after a REWRITE_COLUMNS *Update* of the indexed column in fragments the index covers is",
        "  retryable: the index was built from the values the update replaced in place (the specification's",
        "  reasoning for updates assumes rows move to new fragments, as REWRITE_ROWS does).",
        "- tests/test_conflict_matrix.py checks every pair through real commits against expectations transcribed",
        "  from the specification, with these deviations listed next to their reasons.",
        "- A committed version whose transaction file cannot be read is treated as a retryable conflict.",
        "- An *Update* or *Merge* carrying config changes (`metadata_updates`, mvcc's extension for a branch publish,",
        "  docs/guide/branches.md) is retryable against an *UpdateConfig* or another such *Update* of the same",
        "  config key, as two UpdateConfigs are (the specification makes Merge and UpdateConfig compatible: they",
        "  never shared a key before).",
        "- A partition-scoped overwrite (`overwrite(data, where=...)`, Spark's `replaceWhere`) is an *Update* that",
        "  records its predicate (`replace_predicate`, an mvcc extension of the message). After an *Append*, or an",
        "  *Update* that added new fragments, it is retryable when any of their new rows matches the predicate (the",
        "  commit loop reads only those fragments, pruned by statistics): those rows would survive next to ours, so",
        "  two writers of one partition would leave duplicates. Rows of other partitions do not conflict (Delta's",
        "  replaceWhere, which fails on a concurrent append to the partitions it read, behaves alike).",
        "- *Racing first writes*: an `append` or `overwrite` of a table that does not exist yet (`write_table`,",
        "  `create_table_from_fragments(mode=...)`, Spark writes, the Dagster IO manager) commits version 1, an",
        "  Overwrite with read version 0, with put-if-not-exists. A writer that another one beats to version 1 is",
        "  not refused (as in Lance and Delta, where such a write creates the table or joins it): it is rebased onto",
        "  the winner's latest version as what it meant there (an *Append* of its fragments, the partition overwrite",
        "  of its `where=`, or an *Overwrite* committed as the next version) and checked under the rules above",
        "  against anything committed after that. Its data files are reused, so an append or partition overwrite",
        "  needs the winner's schema exactly (names, order, types, nullability; else SchemaError, its files",
        "  removed). `mode='create'` keeps raising TableExistsError: a new table is what the caller asked for",
        "  (`created_concurrently` is then True, and Dagster's mapping retries the step: the next attempt sees it).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    import pathlib

    target = pathlib.Path(__file__).resolve().parents[2] / "docs" / "reference" / "conflicts.md"
    target.write_text(render_markdown())
    print(target)
