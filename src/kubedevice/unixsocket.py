"""Unix sockets in directories others share: one path check, one probe, one stale-socket removal.

The device plugin server, the DRA driver, the plugin manager, both kubelet simulators and the
conformance checker all meet sockets that another process may own (a kubelet, a second
``kubedevice serve``, a crashed predecessor's leftover). They must agree on what such a socket
is, so they ask here, and every one of them gets the same answer:

- a socket is what ``lstat`` says is one (a symlink to one is not: the kubelet's plugin watcher
  and ``CleanupPluginDirectory`` look at the entry itself);
- a socket is live unless the kernel says nobody listens (``ECONNREFUSED``) or it is gone
  (``ENOENT``). A connect refused with ``EAGAIN`` met a listener whose backlog is full, and one
  we may not make (``EACCES``: another user's socket) cannot tell: both count as live, since
  removing a socket someone serves cuts off its clients and we must never delete what we do
  not own.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
from pathlib import Path
from typing import Any

from .errors import DependencyError, os_reason

MAX_PATH_BYTES = 107
"""A unix socket's path: ``sun_path`` holds 108 bytes, the terminating NUL included."""
PROBE_TIMEOUT_S = 1.0
"""A bound on the connect: a local listener answers within microseconds (a full backlog at once,
with ``EAGAIN``), so only a stalled kernel meets it; that counts as live too."""


class CannotBind(DependencyError, OSError):
    """gRPC cannot listen on a unix socket path (exit 1); ``str()`` gives the kernel's reason."""


class SocketInUse(DependencyError):
    """Another live process serves on our endpoint path (exit 1: the machine, not the command, is wrong)."""


def check_path(path: Path) -> None:
    """Refuse a path the kernel cannot bind (gRPC would only say "failed to bind"): ``ValueError``."""
    size = len(os.fsencode(path))  # what the kernel counts
    if size > MAX_PATH_BYTES:
        raise ValueError(
            f"socket path {path} is {size} bytes, longer than {MAX_PATH_BYTES} (a unix socket limit): "
            "use a shorter directory"
        )


def is_socket(path: Path) -> bool:
    """Whether the entry itself is a socket (not followed if a symlink); unreadable or gone: no."""
    try:
        return stat.S_ISSOCK(path.lstat().st_mode)
    except OSError:
        return False


def is_live(path: Path) -> bool:
    """Whether someone may serve ``path``: false only when nobody listens there or nothing is there."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(PROBE_TIMEOUT_S)
        try:
            probe.connect(os.fsencode(path))
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except OSError:
            return True  # a full backlog is a listener; no permission cannot tell: assume an owner
    return True


def clear_stale(path: Path) -> None:
    """Remove a dead socket at our endpoint (a crashed predecessor's); refuse to touch anything else.

    :class:`SocketInUse` when ``path`` is not a socket or is live; nothing there is fine.
    """
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise SocketInUse(f"{path} exists and is not a socket: refusing to replace it")
    if is_live(path):
        raise SocketInUse(
            f"{path} is served by another live process (a second kubedevice serve?): refusing to replace it"
        )
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def listen(server: Any, path: Path) -> None:
    """``add_insecure_port`` for the unix socket ``path`` of a gRPC server, sync or asyncio.

    gRPC says only "Failed to bind" and logs the reason in its C core's format, so a socket is
    bound first beside ``path`` to learn the kernel's reason: :class:`CannotBind` naming the path
    and it (a directory gone or read-only, ``/proc``, no permission), before gRPC tries. The
    probe's name starts with a dot and is as long as ours: the kubelet's plugin watcher ignores
    dot files (``pluginwatcher``), so no registration is tried on it, and it fits where ours does.
    """
    probe_path = path.with_name("." + path.name[1:])
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(os.fsencode(probe_path))
        except OSError as err:
            if err.errno != errno.EADDRINUSE:  # else a file is there already: not ours, left alone
                raise CannotBind(f"{path}: cannot serve a unix socket there: {os_reason(err)}") from None
        else:
            os.unlink(probe_path)  # bound just now: ours
    try:
        server.add_insecure_port(f"unix:{path}")  # not unix://: grpc then binds only <= 105 bytes
    except RuntimeError:
        raise CannotBind(f"{path}: cannot serve a unix socket there (gRPC could not bind it)") from None
