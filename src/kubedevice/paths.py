"""Why a path can never be the directory or the file a command is told to use.

Asked before anything starts, so that ``--plugin-dir file.txt`` or ``--features-file
live.yaml/x`` (``live.yaml`` a file) is one line at once instead of a daemon waiting forever for
a directory that cannot appear, or failing at its first write. A directory that is merely
missing is not a problem here: some commands create theirs, and a daemon may wait for the
kubelet's. Checked with ``os.path``, whose answers are False (never an exception) for a path it
cannot look at; the command then meets the real error and reports it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import os_reason


def _blocker(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` if it is not a directory: nothing can be created under it."""
    for ancestor in path.parents:
        if os.path.lexists(ancestor):
            return None if os.path.isdir(ancestor) else ancestor
    return None


def directory_problem(path: Path) -> str | None:
    """Why ``path`` is not, and can never become, a directory; None when it is or may be."""
    if os.path.isdir(path):
        return None
    if os.path.lexists(path):
        return f"{path} is not a directory"
    blocker = _blocker(path)
    return f"{path} can never be a directory: {blocker} is not one" if blocker is not None else None


def output_file_problem(path: Path) -> str | None:
    """Why a file can never be written at ``path``: it is a directory, or its directory is missing or not one."""
    if os.path.isdir(path):
        return f"{path} is a directory"
    if os.path.isdir(path.parent):
        return None
    blocker = path.parent if os.path.lexists(path.parent) else _blocker(path.parent)
    if blocker is not None:
        return f"{path} can never be written: {blocker} is not a directory"
    return f"{path} can never be written: directory {path.parent} does not exist"


def socket_problem(path: Path) -> str | None:
    """Why ``path`` cannot be a unix socket to connect to now, as ``PATH: reason``; None when it is one.

    For a socket that is read, not waited for (``discover --pod-resources``, the daemon's
    PodResources client): a missing one is said at once instead of after a connection timeout.
    A dangling link is left to the connection, which reports it.
    """
    try:
        mode = os.stat(path).st_mode  # followed: a symlink to the socket is connected through
    except FileNotFoundError:
        return None if os.path.islink(path) else f"{path}: no such file or directory"
    except NotADirectoryError:
        return f"{path}: can never be a socket: {_blocker(path) or path.parent} is not a directory"
    except OSError as err:
        return f"{path}: {os_reason(err)}"  # permission denied: the kubelet's directory is root's
    return None if stat.S_ISSOCK(mode) else f"{path}: not a unix socket"
