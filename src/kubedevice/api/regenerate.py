"""Regenerate the Python protobuf/gRPC modules from ``api.proto``.

Run ``python -m kubedevice.api.regenerate`` after editing the proto. The output is
deterministic for the pinned ``grpcio-tools`` (see ``pyproject.toml``), so a test can
regenerate into a temporary directory and compare byte for byte.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

API_DIR = Path(__file__).resolve().parent
GENERATED = ("api_pb2.py", "api_pb2.pyi", "api_pb2_grpc.py")


def generate(out_dir: Path) -> None:
    """Run protoc on ``api.proto`` into ``out_dir``, with package-relative imports."""
    from grpc_tools import protoc  # noqa: PLC0415 - a development dependency, needed only here

    args = [
        "protoc",
        f"--proto_path={API_DIR}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        str(API_DIR / "api.proto"),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed on api.proto")
    grpc_module = out_dir / "api_pb2_grpc.py"
    text = grpc_module.read_text()
    # protoc writes a top-level import; inside a package it must be relative.
    grpc_module.write_text(text.replace("import api_pb2 as api__pb2", "from . import api_pb2 as api__pb2"))


def stale_files() -> list[str]:
    """Names of committed generated files that differ from a fresh generation."""
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        return [n for n in GENERATED if (Path(tmp) / n).read_bytes() != (API_DIR / n).read_bytes()]


def main() -> int:
    generate(API_DIR)
    print("regenerated", ", ".join(GENERATED))
    return 0


if __name__ == "__main__":
    sys.exit(main())
