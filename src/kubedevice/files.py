"""Files that other programs read while we replace them: CDI specs, checkpoints.

A reader (a container runtime, the kubelet, our next start) must never see a half-written
file, and a full disk must leave the old one whole: write a temp file in the same directory,
fsync, set the mode, rename over the old one.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


def write_atomically(path: Path, data: bytes, mode: int, *, sync: bool = True) -> bool:
    """Replace ``path`` with ``data``; False when it already held exactly that.

    On any failure (ENOSPC at write, flush or fsync) the temp file is removed and the file at
    ``path`` is the old one, whole. ``sync=False`` leaves out the fsync, for a file that only
    has to survive our process (the page cache keeps it; after a reboot it is written anew).
    """
    if holds(path, data):
        return False
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            if sync:
                os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    return True


def holds(path: Path, data: bytes) -> bool:
    """Whether ``path`` is a regular file (never through a symlink) with exactly ``data``."""
    return read_regular(path, len(data) + 1) == data


def read_regular(path: Path, limit: int) -> bytes | None:
    """At most ``limit`` bytes of ``path`` if it is a regular file, opened without following a
    symlink (nor blocking on a FIFO); None for anything else. Used before we replace or remove a
    file, to decide whether it is ours: a link planted at our path must not lead us elsewhere."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        try:
            return handle.read(limit)
        except OSError:
            return None
