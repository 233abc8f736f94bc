"""A cluster directory's files: what ``up`` made there, and what ``down`` may remove.

``down`` removes only in a directory that carries ``up``'s marker, owned by this user, only the
names ``up`` creates, and never below a mount point (rmtree would descend into a mounted file
system); the components' and the pods' logs stay for debugging.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from .state import ClusterError

MARKER = ".kubedevice-cluster"
"""Written by ``up`` into the cluster directory: ``down`` removes files only where it finds it (its own)."""
MAX_NODES = 5
"""``up --nodes`` at most: each node costs a containerd and a kubelet (~150 MB idle, docs/real-cluster.md)."""
NODE_DIRS = tuple(f"node{number}" for number in range(2, MAX_NODES + 1))
"""The further nodes' directories (the first node's is the cluster directory itself, as with one node)."""
MADE_BY_UP = (
    "etcd",
    "ns",
    "config",
    "pki",
    "cni",
    "relay",
    "ns.ready",
    "state.json",
    "state.tmp",
    "kubeconfig",
    "kubelet.kubeconfig",
    "scheduler.kubeconfig",
    "controller-manager.kubeconfig",
    *NODE_DIRS,
)
"""What ``up`` creates in the directory besides ``logs/`` and the marker: all that ``down`` may remove."""
KEPT = ("logs", "ns/var-log", *(f"{name}/ns/var-log" for name in NODE_DIRS))
"""Kept by ``down`` for debugging: the components' logs and the pods' (small next to etcd's and containerd's data)."""


def remove_made(directory: Path) -> tuple[int, int] | None:
    """Remove what ``up`` made in ``directory`` (etcd's data, containerd's images and snapshots, the
    kubelet's directory, certificates, kubeconfigs) but the logs; (bytes removed, bytes of logs
    kept), or None where ``up`` left no marker. ClusterError, removing nothing, where the marker is
    not this user's file, a cluster is still recorded or something is mounted below."""
    marker = directory / MARKER
    if not os.path.lexists(marker):
        return None
    if marker.is_symlink() or not marker.is_file() or marker.stat().st_uid != os.geteuid():
        raise ClusterError(f"removed nothing: {marker} is not a file of this user")
    if os.path.lexists(directory / "state.json"):
        raise ClusterError(f"{directory} still has a cluster (state.json): run `down` first")
    mounted = mounts_below(directory)
    if mounted:
        raise ClusterError(f"removed nothing: something is mounted below {directory}: {', '.join(mounted)}")
    kept = [directory / name for name in KEPT]
    removed = 0
    for name in MADE_BY_UP:
        removed += remove_except(directory / name, kept)
    return removed, sum(disk_usage(path) for path in kept)


def pod_log_dirs(directory: Path) -> list[Path]:
    """Where the pods' logs are kept: the first node's, and each further node's that has one."""
    further = (directory / name / "ns" / "var-log" / "pods" for name in NODE_DIRS)
    return [directory / "ns" / "var-log" / "pods", *(path for path in further if path.exists())]


def mounts_below(directory: Path) -> list[str]:
    """Mount points below ``directory`` in this mount namespace (the directory itself may be one)."""
    prefix = str(directory.resolve()) + "/"
    targets = (line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines())
    return [target for target in targets if target.startswith(prefix)]


def remove_except(path: Path, kept: list[Path]) -> int:
    """Remove ``path`` (a symlink as a link) but whatever of ``kept`` is below it; bytes freed."""
    if path in kept or not os.path.lexists(path):
        return 0
    if path.is_symlink() or not path.is_dir():  # files, sockets, links
        size = disk_usage(path)
        path.unlink()
        return size
    if not any(keep.is_relative_to(path) for keep in kept):
        size = disk_usage(path)
        shutil.rmtree(path)
        return size
    freed = sum(remove_except(child, kept) for child in path.iterdir())
    own = path.lstat().st_blocks * 512
    with contextlib.suppress(OSError):
        path.rmdir()  # empty when nothing kept was there (a node directory without pod logs)
        freed += own
    return freed


def disk_usage(path: Path) -> int:
    """Bytes ``path`` takes on disk, symlinks not followed (as ``du -s``)."""
    try:
        top = path.lstat()
    except OSError:
        return 0
    total = top.st_blocks * 512
    if path.is_dir() and not path.is_symlink():
        for root, dirs, files in os.walk(path):
            for name in dirs + files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total
