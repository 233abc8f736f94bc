"""The pods' cgroups: under ``kubedevice/<cluster id>`` (further nodes: ``<cluster id>-<number>``)
in every mounted hierarchy, removed at ``down`` once the kernel has freed them."""

from __future__ import annotations

import contextlib
from pathlib import Path

from ..waiting import wait_for
from .state import ClusterError


def cgroup_dirs(cluster_id: str) -> list[Path]:
    """The cluster's cgroup directories in every mounted hierarchy (v1 controllers and v2)."""
    root = Path("/sys/fs/cgroup")
    names = (cluster_id, f"{cluster_id}-*")  # the first node's and further nodes' (``-<number>``)
    found = [
        path
        for name in names
        for path in [*root.glob(f"kubedevice/{name}"), *root.glob(f"*/kubedevice/{name}")]
        if path.is_dir()
    ]
    return found


def remove_cgroups(cluster_id: str, timeout: float = 10.0) -> None:
    """rmdir the pods' cgroups bottom-up, again until none is left; the kernel frees a cgroup
    shortly after its last task."""
    try:
        wait_for(f"the cgroups of cluster {cluster_id} removed", lambda: not _remove(cluster_id), timeout, 0.2)
    except AssertionError:
        raise ClusterError(f"cgroups still busy after stop: {', '.join(map(str, _remove(cluster_id)))}") from None


def _remove(cluster_id: str) -> list[Path]:
    """One round of removals; the top directories still there."""
    left = []
    for top in cgroup_dirs(cluster_id):
        for path in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                path.rmdir()
        try:
            top.rmdir()
            with contextlib.suppress(OSError):
                top.parent.rmdir()  # kubedevice/, if no other cluster uses it
        except OSError:
            left.append(top)
    return left
