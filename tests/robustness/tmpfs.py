"""A small real tmpfs, and a way to fill it to the last byte (needs root to mount)."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str = "256k") -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)], check=False)
    if mounted.returncode != 0:
        pytest.skip("mounting a tmpfs needs root (CAP_SYS_ADMIN)")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(directory: Path) -> Path:
    """Write a filler file until ENOSPC; remove it to give the space back."""
    filler = directory / "zz-filler"
    with filler.open("wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError as err:
            assert err.errno == errno.ENOSPC
        with contextlib.suppress(OSError):  # the last partial page
            while True:
                handle.write(b"\0")
    return filler


def leftovers(directory: Path) -> list[str]:
    return sorted(p for p in os.listdir(directory) if p.endswith(".tmp"))
