"""The committed protobuf code and its type stubs must be what protoc generates from protos/ today."""

from pathlib import Path

from mvcc_core._proto import generate


def test_generated_code_is_current(tmp_path: Path) -> None:
    written = generate.generate(tmp_path)
    assert written, "protoc produced nothing"
    assert {path.suffix for path in written} == {".py", ".pyi"}, "protoc wrote no modules or no stubs"
    for path in written:
        committed = generate.PACKAGE_DIR / path.name
        assert committed.exists(), f"{path.name} is not committed; run python -m mvcc_core._proto.generate"
        assert committed.read_text() == path.read_text(), (
            f"{path.name} is stale; run python -m mvcc_core._proto.generate and commit the result"
        )


def test_runtime_accepts_generated_code() -> None:
    import google.protobuf

    from mvcc_core._proto import table_pb2, transaction_pb2

    major = int(google.protobuf.__version__.split(".")[0])
    assert major < 7, "dagster pins protobuf below 7"
    ops = [f.name for f in transaction_pb2.Transaction.DESCRIPTOR.oneofs_by_name["operation"].fields]
    assert len(ops) == 15
    assert table_pb2.Manifest.DESCRIPTOR.fields_by_name["transaction_file"]
