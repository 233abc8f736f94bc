"""Build the Go programs that tests and benchmarks compare against, once, into a shared cache.

Every Go module here pins its versions in go.mod/go.sum; a binary is cached under
``$XDG_CACHE_HOME/kubedevice`` (default ``~/.cache``) keyed by a hash of that module's sources,
so an edit rebuilds it and an unchanged tree reuses it across test and benchmark runs. A build
is written in a private temporary directory and renamed into place, so an interrupted build leaves nothing
that a later run would take for finished.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from kubedevice.errors import KubedeviceError

BUILD_TIMEOUT = 3600.0
"""Seconds, a bound on a hang only: a cold build of Kubernetes code takes about 10 minutes on two
idle cores, and the default release's whole Kubernetes ran past twice the former 1,800 s on two
cores loaded 20 to 1 (a CI run beside other builds, 2026-11-28), failing that run's every e2e test."""
_STDERR_TAIL = 4000


class BuildError(KubedeviceError, RuntimeError):
    """A Go build failed; the message carries the tail of Go's own stderr."""


def cache_dir() -> Path:
    """Where built binaries are kept, shared by every checkout of the project on this machine."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kubedevice"


def source_key(module_dir: Path) -> str:
    """Hash of go.mod, go.sum (absent when only the standard library is used) and every .go file below."""
    digest = hashlib.sha256()
    sums = [module_dir / "go.sum"] if (module_dir / "go.sum").exists() else []
    for path in sorted([module_dir / "go.mod", *sums, *module_dir.rglob("*.go")]):
        digest.update(str(path.relative_to(module_dir)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def build(module_dir: Path, package: str, name: str, timeout: float = BUILD_TIMEOUT) -> Path | None:
    """The cached binary of ``package`` (``.``, ``./cmd/x`` or an import path) of ``module_dir``.

    None when no Go toolchain is installed, so callers can skip rather than fail.
    """
    go = shutil.which("go")
    if go is None:
        return None
    binary = cache_dir() / f"{name}-{source_key(module_dir)}"
    if not binary.exists():
        with _staged(binary) as staging:
            _run([go, "build", "-o", str(staging / binary.name), package], module_dir, {}, timeout)
    return binary


def install(
    package: str, version: str, name: str, env: Mapping[str, str], timeout: float = BUILD_TIMEOUT
) -> Path | None:
    """``go install package@version`` into the cache, for a tool pinned by version rather than by a module here.

    The binary is ``<cache>/<name>-<version>/<name>``; ``env`` adds build settings such as GOFLAGS.
    A version never changes, so a cached binary serves even without Go; None if neither is there.
    """
    binary = cache_dir() / f"{name}-{version}" / name
    if binary.exists():
        return binary
    go = shutil.which("go")
    if go is None:
        return None
    with _staged(binary) as staging:
        _run([go, "install", f"{package}@{version}"], None, {**env, "GOBIN": str(staging)}, timeout)
    return binary


@contextlib.contextmanager
def _staged(binary: Path) -> Iterator[Path]:
    """A private directory beside ``binary``; its file of the same name is renamed into place on success."""
    binary.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=binary.parent, prefix=f".{binary.name}-") as staging:
        yield Path(staging)
        (Path(staging) / binary.name).replace(binary)


def _run(argv: list[str], cwd: Path | None, env: Mapping[str, str], timeout: float) -> None:
    done = run_go(argv, cwd, {**os.environ, **env}, timeout)
    if done.returncode != 0:
        raise BuildError(f"go {' '.join(argv[1:])} failed:\n{done.stderr[-_STDERR_TAIL:]}")


def run_go(
    argv: list[str], cwd: Path | None, env: Mapping[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """``argv`` (a go command) run to its end, its output captured; BuildError, not a traceback,
    when it runs past ``timeout`` seconds."""
    try:
        return subprocess.run(argv, cwd=cwd, env=env, timeout=timeout, capture_output=True, text=True, check=False)
    except subprocess.TimeoutExpired:
        raise BuildError(f"go {' '.join(argv[1:3])} ... did not finish in {timeout:.0f} s") from None
