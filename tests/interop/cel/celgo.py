"""Build (once, cached) the Go program that evaluates selectors with Kubernetes' own CEL code.

The binary lives under ~/.cache/kubedevice/, keyed by a hash of go.mod, go.sum and the Go
sources, so edits rebuild it and unchanged trees reuse it across test and benchmark runs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

MODULE = Path(__file__).resolve().parent


def source_key() -> str:
    digest = hashlib.sha256()
    for path in sorted([MODULE / "go.mod", MODULE / "go.sum", *MODULE.glob("*.go")]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def go_binary() -> Path | None:
    """Path of the built program, or None when no Go toolchain is installed."""
    go = shutil.which("go")
    if go is None:
        return None
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kubedevice"
    binary = cache / f"celdiff-{source_key()}"
    if binary.exists():
        return binary
    cache.mkdir(parents=True, exist_ok=True)
    partial = binary.with_suffix(f".{os.getpid()}.tmp")
    subprocess.run([go, "build", "-o", str(partial), "."], cwd=MODULE, check=True, timeout=1800,
                   capture_output=True, text=True)
    partial.replace(binary)
    return binary
