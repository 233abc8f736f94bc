"""Every host lookup goes through a host root, like a chroot.

Inside a DaemonSet pod the node's ``/`` is mounted at, say, ``/host``; in tests it is a temp
dir holding a fake sysfs/devfs tree. Symlinks are resolved *inside* the root (an absolute
target such as ``/dev/ttyUSB0`` means ``<root>/dev/ttyUSB0``, and ``..`` stops at the root),
so a path we advertise is always a canonical host path that exists under the root and can
never point outside it.
"""

from __future__ import annotations

import glob as globlib
import os
from collections import deque
from pathlib import Path, PurePosixPath

from ..errors import KubedeviceError

_MAX_SYMLINK_HOPS = 40  # Linux MAXSYMLINKS


class HostRootError(KubedeviceError, ValueError):
    """A host root or host path that cannot be used (one line, for a clear start-up error)."""


class HostRoot:
    """The node's filesystem as seen from this process."""

    def __init__(self, root: Path | str) -> None:
        local = Path(root)
        if not local.is_dir():
            raise HostRootError(f"host root {str(local)!r} does not exist or is not a directory")
        self.root = local.resolve()

    def local(self, host_path: str) -> Path:
        """Where ``host_path`` (absolute on the node) lives in our filesystem, symlinks untouched."""
        return self.root.joinpath(*PurePosixPath(host_path).parts[1:])

    def host_path(self, local: Path | str) -> str:
        """The node path of a local path under the root."""
        relative = Path(local).relative_to(self.root)
        return "/" + relative.as_posix() if relative.parts else "/"

    def resolve(self, host_path: str) -> str:
        """Canonical host path of ``host_path``, following symlinks inside the root."""
        pending = deque(PurePosixPath(host_path).parts[1:])
        resolved: list[str] = []
        hops = 0
        while pending:
            part = pending.popleft()
            if part in ("", "."):
                continue
            if part == "..":
                if resolved:
                    resolved.pop()
                continue
            local = self.root.joinpath(*resolved, part)
            if not local.is_symlink():
                resolved.append(part)
                continue
            hops += 1
            if hops > _MAX_SYMLINK_HOPS:
                raise HostRootError(f"too many levels of symbolic links in {host_path!r}")
            target = PurePosixPath(os.readlink(local))
            if target.is_absolute():
                resolved = []
                pending.extendleft(reversed(target.parts[1:]))
            else:
                pending.extendleft(reversed(target.parts))
        return "/" + "/".join(resolved)

    def exists(self, host_path: str) -> bool:
        return self.local(self.resolve(host_path)).exists()

    def read(self, host_path: str) -> str:
        """A sysfs-style attribute, stripped; raises ``OSError`` when missing or unreadable."""
        return self.local(self.resolve(host_path)).read_text().strip()

    def link_name(self, host_path: str) -> str | None:
        """The last component of a symlink's target (an IOMMU group, a driver), or ``None``."""
        local = self.local(host_path)
        if not local.is_symlink():
            return None
        return PurePosixPath(os.readlink(local)).name

    def glob(self, pattern: str) -> list[tuple[str, str]]:
        """``(matched, canonical)`` host paths for ``pattern``, sorted by the match; dangling ones left out.

        The match is kept beside its target because a symlink's own name (``/dev/serial/by-id/…``)
        is the stable one a container should see, while the target is the node to grant.
        """
        # os.path.join, not "root + '/' + pattern": a root of "/" would give "//dev/...",
        # which relative_to("/") refuses.
        local = globlib.glob(os.path.join(globlib.escape(str(self.root)), pattern.lstrip("/")))
        matches = sorted(self.host_path(m) for m in local)
        pairs = [(m, self.resolve(m)) for m in matches]
        return [(m, node) for m, node in pairs if self.local(node).exists()]

    def listdir(self, host_dir: str) -> list[str]:
        """Entry names of a host directory; ``[]`` when it is absent (hardware simply not there)."""
        try:
            return sorted(os.listdir(self.local(host_dir)))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise HostRootError(f"cannot read {host_dir} under host root {self.root}: {exc.strerror}") from exc
