"""``usb``: devices by vendor/product (and serial) from ``/sys/bus/usb/devices``.

A match grants the nodes of the kinds in ``nodes`` (default ``[bus]``): ``bus`` is its
``/dev/bus/usb/BBB/DDD`` (from ``busnum``/``devnum``); the class kinds are the nodes the kernel
hangs below the device's interfaces, each named by its ``uevent``'s ``DEVNAME``:

=========  ==========================================================================
``tty``    ``1-1:1.0/tty/ttyACM0`` (cdc_acm), ``1-1:1.0/ttyUSB0/tty/ttyUSB0`` (usb-serial)
``video``  ``1-1:1.0/video4linux/video0``
``hidraw`` ``1-1:1.0/0003:046D:C52B.0001/hidraw/hidraw0``
``input``  ``1-1:1.0/0003:046D:C52B.0001/input/input5/event3`` (event nodes only)
``sound``  ``1-1:1.0/sound/card1/controlC1``, ``pcmC1D0p``, … (every node of the card)
=========  ==========================================================================

Users know a device by vendor:product but their program opens its tty or video node; a modem
with three ttys grants all three. The ID is the sysfs port path (``usb-1-2``): stable across
restarts and re-plugs into the same port. A class node appears when its driver binds, often
after the device itself; sysfs sends no inotify events, but the node's ``/dev`` entry does, so
:func:`watched` names the ``/dev`` directories each kind appears in and the rescan picks it up.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import Field, field_validator

from .base import Found, int_attr, log, stable_key, string_attr
from .fields import HexId, Model, each_once
from .hostroot import HostRoot
from .source import Source
from .sysfs import attribute, dev_path, numa_nodes, scan_bus

#: The node kinds ``usb.nodes`` may ask for: the device's own bus node and its interfaces' class nodes.
UsbNode = Literal["bus", "tty", "video", "hidraw", "input", "sound"]


def _default_usb_nodes() -> list[UsbNode]:
    return ["bus"]


class UsbConfig(Model):
    """USB devices by vendor/product (and serial) from ``/sys/bus/usb/devices``; ``nodes`` says which
    of its device nodes a device grants (its ``/dev/bus/usb`` node, its interfaces' ttys, ...)."""

    vendor: HexId
    product: HexId | None = None
    serial: str | None = None
    nodes: list[UsbNode] = Field(default_factory=_default_usb_nodes, min_length=1)

    @field_validator("nodes")
    @classmethod
    def _each_once(cls, nodes: list[UsbNode]) -> list[UsbNode]:
        each_once(list(nodes))
        return nodes


DEVICES = "/sys/bus/usb/devices"
#: The class directory a node's own directory sits in (``tty/ttyACM0``) and the kind it is.
_PARENT_KIND = {"tty": "tty", "video4linux": "video", "hidraw": "hidraw"}
#: Kinds whose nodes sit one level deeper (``input/input5/event3``, ``sound/card1/pcmC1D0p``).
_GRANDPARENT_KIND = {"input": "input", "sound": "sound"}
_MAX_DEPTH = 6  # interface → HID device → input → inputN → eventN is 4; sysfs has no deeper class node
#: Where each kind's nodes appear under ``/dev`` (the directories watched for hotplug).
_DEV_PATTERNS = {
    "bus": "/dev/bus/usb/*/*",
    "tty": "/dev/tty*",
    "video": "/dev/video*",
    "hidraw": "/dev/hidraw*",
    "input": "/dev/input/event*",
    "sound": "/dev/snd/*",
}


def discover(config: UsbConfig, host: HostRoot, stem: str) -> list[Found]:
    found = scan_bus(host, DEVICES, lambda name: _read(config, host, name))
    if not found:
        log.warning("%s: no USB device %s:%s present", stem, config.vendor, config.product or "*")
    return found


def _read(config: UsbConfig, host: HostRoot, name: str) -> Found | None:
    if ":" in name:  # an interface (1-1:1.0), not a device
        return None
    sys_dir = f"{DEVICES}/{name}"
    vendor = (attribute(host, sys_dir, "idVendor") or "").lower()
    product = (attribute(host, sys_dir, "idProduct") or "").lower()
    if vendor != config.vendor or (config.product is not None and product != config.product):
        return None
    serial = attribute(host, sys_dir, "serial")
    if config.serial is not None and serial != config.serial:
        return None
    bus, dev = attribute(host, sys_dir, "busnum"), attribute(host, sys_dir, "devnum")
    if not (bus and dev and bus.isdigit() and dev.isdigit()):
        log.warning("USB device %s has no bus/device number; skipped", name)
        return None
    nodes = _nodes(config, host, name, f"/dev/bus/usb/{int(bus):03d}/{int(dev):03d}")
    if not nodes:
        return None
    attributes = {
        "vendor": string_attr(vendor),
        "product": string_attr(product),
        "bus": int_attr(int(bus)),
        "device": int_attr(int(dev)),
    }
    if serial:
        attributes["serial"] = string_attr(serial)
    numa = numa_nodes(host, sys_dir)
    if numa:
        attributes["numaNode"] = int_attr(numa[0])
    details = {"nodes": [{"kind": kind, "path": path} for kind, path in nodes]}
    return Found(stable_key(f"usb-{name}"), tuple(p for _, p in nodes), numa, sys_dir, attributes, details=details)


def _nodes(config: UsbConfig, host: HostRoot, name: str, bus_node: str) -> list[tuple[str, str]]:
    """``(kind, host path)`` of the nodes asked for, in the order of ``nodes``; empty means not usable yet.

    A missing bus node (udev has not created it yet) holds the device back; a class kind with no
    node yet (the driver binds later) does not, as long as the device grants something.
    """
    granted: list[tuple[str, str]] = []
    below = _class_nodes(host, name) if set(config.nodes) - {"bus"} else {}
    for kind in config.nodes:
        if kind == "bus":
            if not host.exists(bus_node):
                log.info("USB device %s: %s not created yet", name, bus_node)
                return []
            granted.append((kind, host.resolve(bus_node)))
        else:
            granted.extend((kind, path) for path in below.get(kind, []))
    if not granted:
        log.info("USB device %s: no %s node yet", name, ", ".join(config.nodes))
    return granted


def _class_nodes(host: HostRoot, name: str) -> dict[str, list[str]]:
    """Per kind, the ``/dev`` paths of the nodes below the device's interfaces (``<name>:<cfg>.<n>``).

    Only interfaces are walked, never a hub's child devices (``1-1.2`` beside ``1-1:1.0``), and
    symlinks (``device``, ``subsystem``) are not followed, so no node of another device is taken.
    """
    device_dir = host.local(host.resolve(f"{DEVICES}/{name}"))
    try:
        interfaces = sorted(e for e in os.listdir(device_dir) if e.startswith(f"{name}:"))
    except OSError:
        return {}
    found: dict[str, list[str]] = {}
    for interface in interfaces:
        top = device_dir / interface
        for directory, subdirs, files in os.walk(top):
            parts = PurePosixPath(Path(directory).relative_to(top).as_posix()).parts
            subdirs[:] = sorted(subdirs) if len(parts) < _MAX_DEPTH else []
            kind = _kind(parts)
            if kind is None or "uevent" not in files:
                continue
            node = _devnode(host, Path(directory) / "uevent")
            if node is not None:
                found.setdefault(kind, []).append(node)
    return found


def _kind(parts: tuple[str, ...]) -> str | None:
    """The kind of the node whose sysfs directory is ``parts`` below an interface, if it is one."""
    if len(parts) >= 2 and parts[-2] in _PARENT_KIND:
        return _PARENT_KIND[parts[-2]]
    if len(parts) >= 3 and parts[-3] in _GRANDPARENT_KIND:
        kind = _GRANDPARENT_KIND[parts[-3]]
        return kind if kind != "input" or parts[-1].startswith("event") else None
    return None


def _devnode(host: HostRoot, uevent: Path) -> str | None:
    """``/dev/<DEVNAME>`` of a class device, when it names one and the node exists under the root."""
    node = dev_path(uevent)
    if node is None:
        return None
    if not host.exists(node):
        log.info("%s: not created yet", node)
        return None
    return host.resolve(node)


def watched(config: UsbConfig) -> list[str]:
    """The ``/dev`` directories each asked-for kind appears in (sysfs itself sends no inotify events)."""
    return [_DEV_PATTERNS[kind] for kind in config.nodes] + [f"{DEVICES}/*"]


def _not_one_node(config: UsbConfig) -> str | None:
    if len(config.nodes) > 1 or "sound" in config.nodes:
        return (
            f"container_path applies to devices of one node; usb nodes [{', '.join(config.nodes)}] give "
            "each device several, which keep their own paths"
        )
    return None


def _several(config: UsbConfig) -> str | None:
    return "usb without a serial can match several devices" if config.serial is None else None


SOURCE = Source("usb", UsbConfig, discover, watched, _not_one_node, _several, sysfs=True)
