"""Regenerate the protobuf modules in this package from ../../protos.

Run `python -m mvcc_core._proto.generate` after editing a .proto file and commit the result.
The protoc used is the one bundled with grpcio-tools (pinned in pyproject's `dev` extra), so the
generated code matches the protobuf runtime that dagster allows (below 7).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PROTO_FILES = ("table.proto", "transaction.proto")
PACKAGE_DIR = Path(__file__).resolve().parent
PROTOS_DIR = PACKAGE_DIR.parent.parent / "protos"


def generate(out_dir: Path = PACKAGE_DIR) -> list[Path]:
    """Compile the protos into `out_dir` and return the generated files."""
    import grpc_tools
    from grpc_tools import protoc

    include = str(Path(grpc_tools.__file__).parent / "_proto")
    args = ["protoc", f"-I{PROTOS_DIR}", f"-I{include}", f"--python_out={out_dir}"]
    args += [str(PROTOS_DIR / name) for name in PROTO_FILES]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {PROTO_FILES}")
    written = []
    for name in PROTO_FILES:
        path = out_dir / name.replace(".proto", "_pb2.py")
        # protoc emits absolute imports between generated modules; make them package-relative.
        text = re.sub(r"^import (\w+_pb2) as", r"from . import \1 as", path.read_text(), flags=re.M)
        path.write_text(text)
        written.append(path)
    return written


if __name__ == "__main__":
    for p in generate(Path(sys.argv[1]) if len(sys.argv) > 1 else PACKAGE_DIR):
        print(p)
