"""Reading kernel sysfs through the host root: attributes, NUMA node, NUMA distances."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePosixPath

from .base import Found, log
from .hostroot import HostRoot

NODE_DIR = "/sys/devices/system/node"


def attribute(host: HostRoot, sys_dir: str, name: str) -> str | None:
    """An attribute's value; ``None`` when absent. Unreadable files are logged, not fatal."""
    try:
        return host.read(f"{sys_dir}/{name}")
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cannot read %s/%s: %s; device skipped", sys_dir, name, exc.strerror)
        raise


def numa_nodes(host: HostRoot, sys_dir: str) -> tuple[int, ...]:
    """The device's NUMA node, inherited from the nearest ancestor that has one; -1 means none."""
    path = PurePosixPath(host.resolve(sys_dir))
    while str(path).startswith("/sys/devices/"):
        try:
            value = host.read(f"{path}/numa_node")
        except OSError:
            path = path.parent
            continue
        node = int(value) if value.lstrip("-").isdigit() else -1
        return (node,) if node >= 0 else ()
    return ()


def numa_distances(host: HostRoot) -> dict[int, tuple[int, ...]]:
    """The SLIT rows the kernel exposes per node; empty when unknown (then all nodes are equal)."""
    distances: dict[int, tuple[int, ...]] = {}
    for name in host.listdir(NODE_DIR):
        if not (name.startswith("node") and name[4:].isdigit()):
            continue
        try:
            row = host.read(f"{NODE_DIR}/{name}/distance").split()
        except OSError:
            continue
        if all(v.isdigit() for v in row):
            distances[int(name[4:])] = tuple(int(v) for v in row)
    return distances


def scan_bus(host: HostRoot, directory: str, read: Callable[[str], Found | None]) -> list[Found]:
    """``read`` every entry of a ``/sys/bus/*/devices`` directory; unreadable entries are skipped."""
    found = []
    for name in host.listdir(directory):
        try:
            device = read(name)
        except OSError:
            continue
        if device is not None:
            found.append(device)
    return found


def dev_path(uevent: Path) -> str | None:
    """``/dev/<DEVNAME>`` as a class device's ``uevent`` names it (devtmpfs makes the node there);
    ``None`` without a name, or with one that would leave ``/dev``."""
    try:
        lines = uevent.read_text().splitlines()
    except OSError:
        return None
    devname = next((line[len("DEVNAME=") :] for line in lines if line.startswith("DEVNAME=")), "")
    if not devname or ".." in devname.split("/"):
        return None
    return f"/dev/{devname}"
