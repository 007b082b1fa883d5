"""Regenerate the protobuf modules in this package, and their type stubs, from ../../protos.

Run `python -m mvcc_core._proto.generate` after editing a .proto file and commit the result.
The protoc used is the one bundled with grpcio-tools (pinned in pyproject's `dev` extra), so the
generated code matches the protobuf runtime that dagster allows (below 7). The `.pyi` stubs beside
each `_pb2.py` come from mypy-protobuf's protoc plugin (`protoc-gen-mypy`, also in `dev`).
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

PROTO_FILES = ("table.proto", "transaction.proto")
PACKAGE_DIR = Path(__file__).resolve().parent
PROTOS_DIR = PACKAGE_DIR.parent.parent / "protos"


def _mypy_plugin() -> str:
    """The path of mypy-protobuf's protoc plugin: beside this interpreter, else on PATH."""
    beside = Path(sys.executable).parent / "protoc-gen-mypy"
    found = str(beside) if beside.exists() else shutil.which("protoc-gen-mypy")
    if found is None:
        raise RuntimeError("protoc-gen-mypy not found; install mypy-protobuf (pip install -e '.[dev]')")
    return found


def generate(out_dir: Path = PACKAGE_DIR) -> list[Path]:
    """Compile the protos into `out_dir` and return the generated files.

    Args:
        out_dir: the directory the `_pb2.py` modules and their `_pb2.pyi` stubs are written to.
    """
    import grpc_tools
    from grpc_tools import protoc

    include = str(Path(grpc_tools.__file__).parent / "_proto")
    args = ["protoc", f"-I{PROTOS_DIR}", f"-I{include}", f"--python_out={out_dir}"]
    args += [f"--plugin=protoc-gen-mypy={_mypy_plugin()}", f"--mypy_out={out_dir}"]
    args += [str(PROTOS_DIR / name) for name in PROTO_FILES]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {PROTO_FILES}")
    written = []
    for name in PROTO_FILES:
        for suffix in ("_pb2.py", "_pb2.pyi"):
            path = out_dir / name.replace(".proto", suffix)
            # protoc emits absolute imports between generated modules; make them package-relative.
            text = re.sub(r"^import (\w+_pb2) as", r"from . import \1 as", path.read_text(), flags=re.M)
            path.write_text(text)
            written.append(path)
    return written


if __name__ == "__main__":
    for p in generate(Path(sys.argv[1]) if len(sys.argv) > 1 else PACKAGE_DIR):
        print(p)
