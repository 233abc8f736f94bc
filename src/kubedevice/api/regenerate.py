"""Regenerate the Python protobuf/gRPC modules from the ``.proto`` files here.

``api.proto`` is the device plugin API; the ``dra_*``, ``pluginregistration_v1`` and
``podresources_v1`` protos are the kubelet's DRA, resource health, plugin-watcher and
PodResources APIs. Run
``python -m kubedevice.api.regenerate`` after editing a proto. The output is
deterministic for the pinned ``grpcio-tools`` (see ``pyproject.toml``), so a test can
regenerate into a temporary directory and compare byte for byte.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

API_DIR = Path(__file__).resolve().parent
PROTOS = (
    "api",
    "dra_v1",
    "dra_v1beta1",
    "dra_health_v1alpha1",
    "dra_health_v1",
    "pluginregistration_v1",
    "podresources_v1",
)
GENERATED = tuple(f"{stem}{suffix}" for stem in PROTOS for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py"))


def generate(out_dir: Path) -> None:
    """Run protoc on every proto into ``out_dir``, with package-relative imports."""
    for stem in PROTOS:
        _generate_one(stem, out_dir)


def _generate_one(stem: str, out_dir: Path) -> None:
    from grpc_tools import protoc  # noqa: PLC0415 - a development dependency, needed only here

    args = [
        "protoc",
        f"--proto_path={API_DIR}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        str(API_DIR / f"{stem}.proto"),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {stem}.proto")
    grpc_module = out_dir / f"{stem}_pb2_grpc.py"
    text = grpc_module.read_text()
    # protoc writes a top-level import; inside a package it must be relative.
    alias = stem.replace("_", "__") + "__pb2"
    grpc_module.write_text(text.replace(f"import {stem}_pb2 as {alias}", f"from . import {stem}_pb2 as {alias}"))


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
