"""Manifest naming schemes, the framed file format, and the conflict rule table."""

from __future__ import annotations

from pathlib import Path

import pytest

from mvcc_core.format import framing
from mvcc_core.format import operations as ops
from mvcc_core.format.naming import ManifestNaming, manifest_name, parse_manifest_name
from mvcc_core.txn import conflicts
from mvcc_core.txn.transaction import Transaction


def test_manifest_names_follow_the_specification() -> None:
    assert manifest_name(1, ManifestNaming.V2) == "18446744073709551614.manifest"
    assert manifest_name(1, ManifestNaming.V1) == "1.manifest"
    assert manifest_name(12, ManifestNaming.V1) == "12.manifest"
    for v in (1, 2, 9, 10, 99, 1000, 2**40):
        for scheme in ManifestNaming:
            assert parse_manifest_name(manifest_name(v, scheme)) == (v, scheme)
    # newer versions sort first under V2
    names = [manifest_name(v, ManifestNaming.V2) for v in range(1, 1200)]
    assert sorted(names)[0] == manifest_name(1199, ManifestNaming.V2)
    for junk in ("_tmp-abc-1.manifest", "1.manifest-uuid", "x.manifest", "01.manifest", "1.txn"):
        assert parse_manifest_name(junk) is None
    with pytest.raises(ValueError):
        ManifestNaming.parse("v3")


def test_frame_detects_truncation_and_corruption() -> None:
    data = framing.frame(b"hello world")
    assert framing.unframe(data) == b"hello world"
    for bad in (data[:-1], data[:5], b"", data[:3] + b"X" + data[4:]):
        with pytest.raises(framing.FramingError):
            framing.unframe(bad)


def test_every_operation_round_trips_through_protobuf() -> None:
    for cls in ops.ALL_OPERATIONS:
        txn = Transaction(read_version=7, operation=cls(), message="m")
        back = Transaction.decode(txn.encode(), "x")
        assert type(back.operation) is cls and back.read_version == 7 and back.uuid == txn.uuid
        assert back.message == "m"
    cfg = ops.UpdateConfig.of({"a": "1"}, ["b"])
    back = Transaction.decode(Transaction(1, cfg).encode(), "x").operation
    assert back.config_keys() == {"a", "b"}


def _outcome(ours: ops.Operation, theirs: ops.Operation) -> conflicts.Outcome:
    return conflicts.resolve(Transaction(1, ours), Transaction(1, theirs))[0]


def test_rules_for_the_operations_of_the_foundation() -> None:
    o = conflicts.Outcome
    append, overwrite, restore = ops.Append(), ops.Overwrite(), ops.Restore(version=1)
    reserve, config = ops.ReserveFragments(num_fragments=1), ops.UpdateConfig.of({"k": "v"})
    assert _outcome(append, append) is o.COMPATIBLE
    assert _outcome(append, overwrite) is o.INCOMPATIBLE
    assert _outcome(append, restore) is o.INCOMPATIBLE
    assert _outcome(append, ops.UpdateMemWalState()) is o.INCOMPATIBLE
    assert _outcome(append, reserve) is o.COMPATIBLE
    assert _outcome(append, config) is o.COMPATIBLE
    assert _outcome(overwrite, append) is o.COMPATIBLE
    assert _outcome(overwrite, overwrite) is o.RETRYABLE
    assert _outcome(ops.Overwrite(config_upsert_values={"k": "x"}), config) is o.RETRYABLE
    assert _outcome(overwrite, config) is o.COMPATIBLE
    assert _outcome(restore, overwrite) is o.COMPATIBLE
    assert _outcome(restore, ops.UpdateMemWalState()) is o.INCOMPATIBLE
    assert _outcome(reserve, overwrite) is o.INCOMPATIBLE
    assert _outcome(reserve, restore) is o.INCOMPATIBLE
    assert _outcome(reserve, reserve) is o.COMPATIBLE
    assert _outcome(config, overwrite) is o.INCOMPATIBLE
    assert _outcome(config, ops.UpdateConfig.of({"other": "v"})) is o.COMPATIBLE
    assert _outcome(config, ops.UpdateConfig.of(delete=["k"])) is o.RETRYABLE


def test_conflicts_doc_is_current() -> None:
    doc = Path(__file__).resolve().parent.parent / "docs" / "reference" / "conflicts.md"
    assert doc.read_text() == conflicts.render_markdown(), "run python -m mvcc_core.txn.conflicts"
